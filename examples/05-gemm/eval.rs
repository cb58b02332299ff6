//! Checking and timing one configuration on one problem, against cuBLAS on the same buffers.

use crate::check::{check_samples, compare, samples, Compare, Samples};
use crate::gpu::{cublas, paired, Gpu, Launch, Loaded, OutBuf, Problem};
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

/// Paired timing of a launch against cuBLAS: (ms, cuBLAS ms).
pub fn time_paired(
    gpu: &Gpu,
    launch: &Launch,
    p: &Problem,
    r: &Reference,
    group: i32,
    warmup: usize,
    reps: usize,
) -> Res<(f64, f64)> {
    paired(gpu, warmup, reps, 5, &mut || launch.run(group), &mut || {
        cublas(gpu, p, r.out, &r.buf)
    })
}

/// A configuration loaded and launched on a problem: check, then time.
pub struct Outcome {
    pub verdict: Verdict,
    pub ms: f64,
    pub cublas_ms: f64,
}

impl Outcome {
    pub fn tflops(&self, p: &Problem) -> f64 {
        p.flops() / self.ms / 1e9
    }
    pub fn cublas_tflops(&self, p: &Problem) -> f64 {
        p.flops() / self.cublas_ms / 1e9
    }
    pub fn ratio(&self) -> f64 {
        self.cublas_ms / self.ms
    }
}

#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    gpu: &Gpu,
    loaded: &Loaded,
    p: &Problem,
    r: &Reference,
    d: &mut OutBuf,
    group: i32,
    warmup: usize,
    reps: usize,
) -> Res<Outcome> {
    let launch = Launch::new(gpu, loaded, p, d, r.out)?;
    let verdict = check(gpu, &launch, d, r, p, group)?;
    let (ms, cublas_ms) = if reps > 0 {
        time_paired(gpu, &launch, p, r, group, warmup, reps)?
    } else {
        (f64::NAN, f64::NAN)
    };
    Ok(Outcome {
        verdict,
        ms,
        cublas_ms,
    })
}
