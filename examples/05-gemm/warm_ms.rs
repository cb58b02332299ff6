// Included by examples/05-gemm/gpu.rs and examples/06-attention/gpu.rs (two module trees the
// benches build separately), so the warm-up's rule stands once.

/// `BENCH_WARM_MS` (default 500): how long the benchmarks run a kernel back to back before
/// its samples. An H100 under its power cap settles to lower clocks than a short burst after
/// an idle gap sees: without it the same shape's samples moved by 10 % within one run
/// (BENCHMARKS.md, attention); `torch_timing.py` reads the same variable. A value that is
/// not a finite number of ms from 0 to an hour is ignored (500: `inf` would never end).
#[allow(dead_code)] // the benchmarks'
pub fn warm_ms() -> f64 {
    std::env::var("BENCH_WARM_MS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| (0.0..=3.6e6).contains(v))
        .unwrap_or(500.0)
}
