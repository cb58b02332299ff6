//! The convolution of examples/07-conv on ResNet-50's layers at N = 128 (bf16 in and out, fp32
//! accumulation; issue 22's table). Each layer: the problem (NHWC input, KRSC filter, random
//! values), then every configuration checked first (output poisoned with NaN, 4096 outputs
//! against the exact f64 sum, the first and last among them) and timed: median of CONV_REPS
//! (20) event-timed samples of 10 launches back to back (`CONV_LAYERS=2048,3x3 256`: the layers
//! whose names contain one of these) (the host's launch gaps are not GPU
//! time: a layer takes tens of microseconds), after 2 warm-up samples and BENCH_WARM_MS (500)
//! ms of samples (the clocks settle under the power cap; `gpu::warm_ms`); TFLOP/s = 2 * N * P * Q * K * R * S * C /
//! median (the real C: the stem's 3 channels, not the 8 it runs as). The best configuration per
//! layer goes to the table and to CONV_JSON (default target/conv.json), which
//! benches/conv_torch.py reads to time cuDNN (`torch.nn.functional.conv2d`, channels_last,
//! `cudnn.benchmark`) on the same shapes and print the ratios. Exit code 1 when a configuration
//! is wrong. Without NVRTC or a GPU: says so, exits 0.
//!
//! Run both in one call: `cargo bench --bench conv && python3 benches/conv_torch.py`.

#[allow(dead_code)]
#[path = "../examples/05-gemm/check.rs"]
mod check;
#[allow(dead_code)]
#[path = "../examples/05-gemm/compile.rs"]
mod compile;
#[allow(dead_code)]
#[path = "../examples/07-conv/conv.rs"]
mod conv;
#[allow(dead_code)]
#[path = "../examples/05-gemm/cublas.rs"]
mod cublas;
#[allow(dead_code)]
#[path = "../examples/05-gemm/gpu.rs"]
mod gpu;
#[allow(dead_code)]
#[path = "../examples/05-gemm/kernel.rs"]
mod kernel;
#[allow(dead_code)]
#[path = "../examples/05-gemm/rng.rs"]
mod rng;

use std::fmt::Write as _;
use std::process::ExitCode;

use conv::{Conv, Launch, Loaded, Problem};
use kernel::{In, Out, Res};
use rng::Rng;
use tma::runtime::Compiler;

/// Launches per timed sample (back to back between one pair of events).
const LAUNCHES: usize = 10;

/// ResNet-50's layers at N = 128: (name, input H = W, C, K, filter, padding, stride).
const LAYERS: [(&str, u64, u64, u64, u64, u64, u64); 10] = [
    ("conv1 7x7/2 3->64 @224", 224, 3, 64, 7, 3, 2),
    ("1x1 64->64 @56", 56, 64, 64, 1, 0, 1),
    ("3x3 64->64 @56", 56, 64, 64, 3, 1, 1),
    ("3x3/2 128->128 @56->28", 56, 128, 128, 3, 1, 2),
    ("3x3 128->128 @28", 28, 128, 128, 3, 1, 1),
    ("3x3 256->256 @14", 14, 256, 256, 3, 1, 1),
    ("1x1 1024->256 @14", 14, 1024, 256, 1, 0, 1),
    ("1x1 256->1024 @14", 14, 256, 1024, 1, 0, 1),
    ("3x3 512->512 @7", 7, 512, 512, 3, 1, 1),
    ("1x1 2048->512 @7", 7, 2048, 512, 1, 0, 1),
];

const BATCH: u64 = 128;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Res<bool> {
    let input = In::BF16;
    let out = Out::of(input);
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP conv bench: NVRTC is not available ({e})");
            return Ok(true);
        }
    };
    let plans: Vec<_> = conv::plans(input).into_iter().collect::<Result<_, _>>()?;
    let built: Vec<_> = compile::compile_all(compiler, plans)
        .into_iter()
        .collect::<Result<_, _>>()?;
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => gpu::Gpu::new()?,
        Err(e) => {
            println!(
                "SKIP conv bench: no GPU ({e}); {} configurations compiled",
                built.len()
            );
            return Ok(true);
        }
    };
    let reps: usize = std::env::var("CONV_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    println!(
        "GPU: {} ({} SMs); median of {reps} samples of {LAUNCHES} launches back to back",
        gpu.name, gpu.sms
    );
    let loaded: Vec<_> = built
        .iter()
        .map(|b| Loaded::new(&gpu, b))
        .collect::<Result<_, _>>()?;
    let mut rng = Rng::new(0x636f_6e76_0022);
    let mut ok = true;
    let mut json = String::from("[");
    let mut table = String::from(
        "| layer | N | H=W | C | K | RxS | pad | stride | P=Q | tma TFLOP/s | ms | config |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    // CONV_LAYERS=2048,3x3 256: only the layers whose names contain one of these (to profile).
    let only: Vec<String> = std::env::var("CONV_LAYERS")
        .map(|v| v.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    for &(name, hw, c, k, r, pad, stride) in &LAYERS {
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        let cv = Conv::square(BATCH, hw, c, k, r, pad, stride, 1);
        let p = Problem::new(&gpu, cv, input, &mut rng)?;
        let tflops = |ms: f64| cv.flops() / (ms * 1e-3) / 1e12;
        println!("{name}: {cv}, {:.1} GFLOP", cv.flops() / 1e9);
        let mut best: Option<(f64, String)> = None;
        for l in &loaded {
            let mut d = conv::out_buf(&gpu, &p, out)?;
            d.poison(&gpu.stream)?;
            let launch = Launch::new(&gpu, l, &p, &d)?;
            launch.run(8)?;
            gpu.stream.synchronize()?;
            let got = d.read(&gpu.stream, out)?;
            let chk = conv::check(&p, out, &got, 0, 4096, &mut rng);
            if !chk.ok() {
                ok = false;
                println!(
                    "  {} WRONG: {} of {} outputs outside the bound (max err {:.2} of it)",
                    l.config, chk.bad, chk.samples, chk.max_err
                );
                continue;
            }
            // Each sample: LAUNCHES launches back to back between one pair of events, so a layer of
            // tens of microseconds is timed on the GPU, not the host's launch gaps.
            let mut t = gpu::time_batched(&gpu, reps, LAUNCHES, &mut || launch.run(8))?;
            let ms = gpu::median(&mut t);
            println!(
                "  {:<40} {ms:.3} ms {:>5.0} TFLOP/s",
                l.config.name(),
                tflops(ms)
            );
            if best.as_ref().is_none_or(|(b, _)| ms < *b) {
                best = Some((ms, l.config.name()));
            }
        }
        let [po, _] = cv.out();
        if let Some((ms, config)) = best {
            let _ = writeln!(
                table,
                "| {name} | {BATCH} | {hw} | {c} | {k} | {r}x{r} | {pad} | {stride} | {po} | {:.0} | {ms:.3} | {config} |",
                tflops(ms)
            );
            let _ = write!(
                json,
                "{}{{\"layer\":\"{name}\",\"n\":{BATCH},\"hw\":{hw},\"c\":{c},\"k\":{k},\"r\":{r},\"pad\":{pad},\"stride\":{stride},\"tma_ms\":{ms:.5},\"tma_tflops\":{:.1},\"config\":\"{config}\"}}",
                if json.len() > 1 { "," } else { "" },
                tflops(ms)
            );
        }
    }
    json.push(']');
    let path = std::env::var("CONV_JSON").unwrap_or_else(|_| "target/conv.json".to_string());
    std::fs::write(&path, &json)?;
    println!("\n{table}\n(wrote {path}: run benches/conv_torch.py for cuDNN on the same shapes)");
    Ok(ok)
}
