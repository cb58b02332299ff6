//! Checking one configuration on one problem, against cuBLAS on the same buffers and exact
//! f64 samples. (Timing it against cuBLAS, paired, is the benchmark's: benches/gemm.)

use crate::check::{check_samples, compare, samples, Compare, Samples};
use crate::gpu::{cublas, Gpu, Launch, OutBuf, Problem};
use crate::kernel::{Out, Res};
use crate::rng::Rng;

/// cuBLAS's output of a problem (checked itself against the f64 samples).
pub struct Reference {
    pub out: Out,
    pub buf: OutBuf,
    pub values: Vec<f32>,
    pub samples: Samples,
    /// (bad samples, worst error / bound) of cuBLAS.
    pub own: (usize, f64),
}

pub const SAMPLES: usize = 1024;

pub fn reference(gpu: &Gpu, p: &Problem, out: Out, rng: &mut Rng) -> Res<Reference> {
    let mut buf = OutBuf::new(gpu, p.m * p.n, out)?;
    buf.poison(&gpu.stream)?;
    cublas(gpu, p, out, &buf)?;
    gpu.stream.synchronize()?;
    let values = buf.read(&gpu.stream, out)?;
    let samples = samples(p, SAMPLES, rng);
    let own = check_samples(&values, p.n, &samples, out);
    Ok(Reference {
        out,
        buf,
        values,
        samples,
        own,
    })
}

/// The verdict on one output.
#[derive(Clone, Copy, Debug)]
pub struct Verdict {
    pub cmp: Compare,
    pub bad_samples: usize,
    pub worst: f64,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.cmp.ok() && self.bad_samples == 0
    }
    pub fn describe(&self, elements: usize) -> String {
        format!(
            "{} | vs cuBLAS: bad {}/{elements}, max |diff| {:.2e}, relF {:.1e} | f64: {}/{} bad, max err/bound {:.3}",
            if self.ok() { "ok  " } else { "FAIL" },
            self.cmp.bad,
            self.cmp.max_diff,
            self.cmp.rel_frobenius,
            self.bad_samples,
            SAMPLES,
            self.worst
        )
    }
}

/// Poisons `d`, runs once, checks every element and the samples.
pub fn check(
    gpu: &Gpu,
    launch: &Launch,
    d: &mut OutBuf,
    r: &Reference,
    p: &Problem,
    group: i32,
) -> Res<Verdict> {
    d.poison(&gpu.stream)?;
    launch.run(group)?;
    gpu.stream.synchronize()?;
    let got = d.read(&gpu.stream, r.out)?;
    let cmp = compare(&got, &r.values, r.out);
    let (bad_samples, worst) = check_samples(&got, p.n, &r.samples, r.out);
    Ok(Verdict {
        cmp,
        bad_samples,
        worst,
    })
}
