//! Correctness of one output: every element against cuBLAS's on the same inputs, and sampled
//! entries against an exact f64 reference with a proven bound.
//!
//! Bounds (fp32 accumulation of exactly representable products, then one rounding to the
//! output type, u = 2^-8 bf16, 2^-11 f16, 2^-24 f32):
//! - vs cuBLAS, element-wise: |d - r| <= tol max(|d|, |r|) + abs, tol = 2u (both round the
//!   fp32 sums, which differ only by accumulation order), abs = 1e-3 (scaled with the
//!   contraction past 4096 by the weight gradient, `compare_within`); NaN fails. Plus the
//!   relative Frobenius error < 5e-3.
//! - vs f64: |d - ref| <= u |ref| + 2^-22 sum_k |s_k| + 2^-30, s_k the exact prefix sums
//!   (sequential fp32 accumulation errs by at most 2^-24 sum_k |s_k|; 4x margin for the
//!   tensor cores' order).

use crate::gpu::{from_bits, Problem};
use crate::kernel::Out;
use crate::rng::Rng;

pub fn unit_roundoff(out: Out) -> f64 {
    match out {
        Out::BF16 => 2f64.powi(-8),
        Out::F16 => 2f64.powi(-11),
        Out::F32 => 2f64.powi(-24),
    }
}

/// Element-wise comparison with the reference.
#[derive(Clone, Copy, Debug, Default)]
pub struct Compare {
    pub bad: usize,
    pub max_diff: f64,
    pub rel_frobenius: f64,
}

impl Compare {
    pub fn ok(&self) -> bool {
        self.bad == 0 && self.rel_frobenius < 5e-3
    }
}

pub fn compare(d: &[f32], r: &[f32], out: Out) -> Compare {
    compare_within(d, r, out, |_| 1e-3)
}

/// Whether an element `d` of the kernel and `r` of the reference are further apart than two
/// roundings of fp32 sums in different orders allow: |d - r| > 2u max(|d|, |r|) + `abs`
/// (NaN is apart).
pub fn apart(d: f32, r: f32, out: Out, abs: f64) -> bool {
    let (x, y) = (f64::from(d), f64::from(r));
    let diff = (x - y).abs();
    diff.is_nan() || diff > 2.0 * unit_roundoff(out) * x.abs().max(y.abs()) + abs
}

/// [`compare`] with element i's absolute term `abs(i)` in place of 1e-3: two fp32 sums in
/// different orders drift apart with the length of the contraction, so a GEMM whose
/// contraction varies by element (the weight gradient's ragged tokens) scales it.
pub fn compare_within(
    d: &[f32],
    r: &[f32],
    out: Out,
    abs: impl Fn(usize) -> f64 + Sync,
) -> Compare {
    let abs = &abs;
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(16);
    let chunk = d.len().div_ceil(threads).max(1);
    let parts: Vec<(usize, f64, f64, f64)> = std::thread::scope(|s| {
        let hs: Vec<_> = d
            .chunks(chunk)
            .zip(r.chunks(chunk))
            .enumerate()
            .map(|(ci, (dc, rc))| {
                s.spawn(move || {
                    let (mut bad, mut maxd, mut num, mut den) = (0usize, 0f64, 0f64, 0f64);
                    for (j, (&x, &y)) in dc.iter().zip(rc).enumerate() {
                        if apart(x, y, out, abs(ci * chunk + j)) {
                            bad += 1;
                        }
                        let (x, y) = (f64::from(x), f64::from(y));
                        let diff = (x - y).abs();
                        if diff.is_finite() {
                            maxd = maxd.max(diff);
                        }
                        num += if diff.is_finite() {
                            diff * diff
                        } else {
                            f64::INFINITY
                        };
                        den += y * y;
                    }
                    (bad, maxd, num, den)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or((usize::MAX, 0.0, f64::INFINITY, 1.0)))
            .collect()
    });
    let (mut c, mut num, mut den) = (Compare::default(), 0f64, 0f64);
    for (b, m, n, dd) in parts {
        c.bad = c.bad.saturating_add(b);
        c.max_diff = c.max_diff.max(m);
        num += n;
        den += dd;
    }
    c.rel_frobenius = (num / den.max(f64::MIN_POSITIVE)).sqrt();
    c
}

/// Sampled entries with their exact value and bound.
pub struct Samples {
    pub at: Vec<(usize, usize)>,
    pub exact: Vec<f64>,
    pub prefix_abs: Vec<f64>,
}

/// The four corners and `n - 4` random entries, each computed exactly in f64.
pub fn samples(p: &Problem, n: usize, rng: &mut Rng) -> Samples {
    let (m, nn, k) = (p.m, p.n, p.k);
    let mut at = vec![(0, 0), (0, nn - 1), (m - 1, 0), (m - 1, nn - 1)];
    while at.len() < n {
        at.push((rng.below(m as u64) as usize, rng.below(nn as u64) as usize));
    }
    let (mut exact, mut prefix_abs) = (Vec::new(), Vec::new());
    for &(i, j) in &at {
        let (mut s, mut sp) = (0f64, 0f64);
        for kk in 0..k {
            let a = f64::from(from_bits(p.a_host[i * k + kk], p.input));
            let b = f64::from(from_bits(p.b_host[j * k + kk], p.input));
            s += a * b; // products exact; the f64 sum errs by <= 2^-53 sum |s_k|: negligible
            sp += s.abs();
        }
        exact.push(s);
        prefix_abs.push(sp);
    }
    Samples {
        at,
        exact,
        prefix_abs,
    }
}

/// (bad samples, max error / bound) of output `d` (row-major M x N).
pub fn check_samples(d: &[f32], n: usize, s: &Samples, out: Out) -> (usize, f64) {
    let u = unit_roundoff(out);
    let (mut bad, mut worst) = (0, 0f64);
    for ((&(i, j), &x), &sp) in s.at.iter().zip(&s.exact).zip(&s.prefix_abs) {
        let bound = u * x.abs() + 2f64.powi(-22) * sp + 2f64.powi(-30);
        let err = (f64::from(d[i * n + j]) - x).abs();
        if err.is_nan() || err > bound {
            bad += 1;
        }
        if err.is_finite() {
            worst = worst.max(err / bound);
        }
    }
    (bad, worst)
}
