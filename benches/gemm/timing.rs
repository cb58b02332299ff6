//! Timing one configuration against cuBLAS, paired: the card throttles under sustained load,
//! so the candidate and cuBLAS are timed in alternating blocks, each in the same thermal
//! state, and compared by their medians. (The example checks and times once; this is the
//! benchmark's.)

use std::sync::Arc;

use crate::eval::{check, Reference, Verdict};
use crate::gpu::{cublas, median, time, Gpu, Launch, Loaded, OutBuf, Problem};
use crate::kernel::Res;

/// Paired timing: `blocks` blocks alternating cuBLAS and the candidate, `reps` launches each
/// in all after `warmup`. (median candidate ms, median cuBLAS ms).
pub fn paired(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    blocks: usize,
    candidate: &mut dyn FnMut() -> Res<()>,
    baseline: &mut dyn FnMut() -> Res<()>,
) -> Res<(f64, f64)> {
    for _ in 0..warmup {
        baseline()?;
        candidate()?;
    }
    gpu.stream.synchronize()?;
    let per = reps.div_ceil(blocks).max(1);
    let (mut c, mut b) = (Vec::new(), Vec::new());
    for _ in 0..blocks {
        b.extend(time(gpu, per, baseline)?);
        c.extend(time(gpu, per, candidate)?);
    }
    Ok((median(&mut c), median(&mut b)))
}

/// A configuration checked, then timed paired with cuBLAS on the same problem.
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

/// Checks `loaded` on `p` (output poisoned, every element vs cuBLAS, the f64 samples), then
/// times it paired with cuBLAS in 5 blocks (`reps` launches each after `warmup`; 0: untimed).
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    gpu: &Gpu,
    loaded: &Arc<Loaded>,
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
        paired(gpu, warmup, reps, 5, &mut || launch.run(group), &mut || {
            cublas(gpu, p, r.out, &r.buf)
        })?
    } else {
        (f64::NAN, f64::NAN)
    };
    Ok(Outcome {
        verdict,
        ms,
        cublas_ms,
    })
}
