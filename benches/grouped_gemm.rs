//! The grouped GEMM of examples/08-grouped-gemm against a loop of cuBLAS GEMMs (one a group),
//! in one process on the same buffers; torch._grouped_mm on the same row counts is timed by
//! benches/grouped_gemm_torch.py in the same device call (this bench writes the counts to
//! GROUPED_COUNTS, a JSON file, when that variable names one).
//!
//! Shapes (issue 26): 128 experts x (N 768, K 2048) and (N 2048, K 768) at 8192 and 65536
//! routed rows, 8 experts x (N 14336, K 4096) at 8192 and 65536; uniform and skewed routing
//! (grouped.rs). Every configuration is checked first (D poisoned; every element against the
//! cuBLAS loop, f64 samples), then timed: median of GROUPED_REPS (20) event-timed launches
//! after 5 warm-ups; TFLOP/s = 2 * rows * N * K / median. Exit code 1 when a configuration is
//! wrong. Without NVRTC or a GPU: says so, exits 0.

#[allow(dead_code)]
#[path = "../examples/05-gemm/check.rs"]
mod check;
#[allow(dead_code)]
#[path = "../examples/05-gemm/compile.rs"]
mod compile;
#[allow(dead_code)]
#[path = "../examples/05-gemm/cublas.rs"]
mod cublas;
#[allow(dead_code)]
#[path = "../examples/05-gemm/gpu.rs"]
mod gpu;
#[allow(dead_code)]
#[path = "../examples/08-grouped-gemm/grouped.rs"]
mod grouped;
#[allow(dead_code)]
#[path = "../examples/05-gemm/kernel.rs"]
mod kernel;
#[allow(dead_code)]
#[path = "../examples/05-gemm/rng.rs"]
mod rng;

use std::fmt::Write as _;
use std::process::ExitCode;

use grouped::{Launch, Loaded, Problem, Routing};
use kernel::{In, Out, Res};
use rng::Rng;
use tma::runtime::Compiler;

const SHAPES: [(usize, usize, usize, usize); 6] = [
    (128, 8192, 768, 2048),
    (128, 8192, 2048, 768),
    (128, 65536, 768, 2048),
    (128, 65536, 2048, 768),
    (8, 8192, 14336, 4096),
    (8, 65536, 14336, 4096),
];

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
            println!("SKIP grouped_gemm bench: NVRTC is not available ({e})");
            return Ok(true);
        }
    };
    let plans: Vec<_> = grouped::plans(input)
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    let built: Vec<_> = compile::compile_all(compiler, plans)
        .into_iter()
        .collect::<Result<_, _>>()?;
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => gpu::Gpu::new()?,
        Err(e) => {
            println!(
                "SKIP grouped_gemm bench: no GPU ({e}); {} configurations compiled",
                built.len()
            );
            return Ok(true);
        }
    };
    let reps: usize = std::env::var("GROUPED_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    println!(
        "GPU: {} ({} SMs); median of {reps} launches after 5 warm-ups",
        gpu.name, gpu.sms
    );
    let loaded: Vec<_> = built
        .iter()
        .map(|b| Loaded::new(&gpu, b))
        .collect::<Result<_, _>>()?;
    let mut rng = Rng::new(0x6d6f_6530_0026);
    let mut ok = true;
    let mut json = String::from("[");
    let mut table = String::from(
        "| groups | rows | N | K | routing | empty | cuBLAS loop | tma best | config | x cuBLAS loop |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for &(groups, rows, n, k) in &SHAPES {
        for routing in [Routing::Uniform, Routing::Skewed] {
            let counts = routing.counts(groups, rows, &mut rng);
            let empty = counts.iter().filter(|&&c| c == 0).count();
            let _ = write!(
                json,
                "{}{{\"groups\":{groups},\"n\":{n},\"k\":{k},\"routing\":\"{}\",\"counts\":{:?}}}",
                if json.len() > 1 { "," } else { "" },
                routing.name(),
                counts
            );
            let p = Problem::new(&gpu, counts, n, k, input, &mut rng)?;
            let tflops = |ms: f64| p.flops() / (ms * 1e-3) / 1e12;
            let mut reference = grouped::out_buf(&gpu, &p, out)?;
            reference.poison(&gpu.stream)?;
            grouped::cublas_loop(&gpu, &p, out, &reference)?;
            let r = reference.read(&gpu.stream, out)?;
            let mut t = gpu::time(&gpu, 5, &mut || {
                grouped::cublas_loop(&gpu, &p, out, &reference)
            })?;
            t = gpu::time(&gpu, reps, &mut || {
                grouped::cublas_loop(&gpu, &p, out, &reference)
            })
            .unwrap_or(t);
            let base = gpu::median(&mut t);
            println!(
                "G {groups} rows {rows} N {n} K {k} {} ({empty} empty): cuBLAS loop {base:.3} ms {:.0} TFLOP/s",
                routing.name(),
                tflops(base)
            );
            let mut best: Option<(f64, String)> = None;
            for l in &loaded {
                let mut d = grouped::out_buf(&gpu, &p, out)?;
                d.poison(&gpu.stream)?;
                let mut launch = Launch::new(&gpu, l, &p, &d)?;
                launch.run(&gpu)?;
                gpu.stream.synchronize()?;
                let c = grouped::check(&p, out, &d.read(&gpu.stream, out)?, &r, &mut rng);
                if !c.ok(out) {
                    ok = false;
                    println!(
                        "  {} WRONG: vs cuBLAS max diff {:.1e} ({} outside the bound), samples {:.1e}",
                        l.config, c.elements.max_diff, c.elements.bad, c.sample_max_err
                    );
                    continue;
                }
                gpu::time(&gpu, 5, &mut || launch.run(&gpu))?;
                let mut t = gpu::time(&gpu, reps, &mut || launch.run(&gpu))?;
                let ms = gpu::median(&mut t);
                println!(
                    "  {:<40} {ms:.3} ms {:>5.0} TFLOP/s {:.2}x",
                    l.config.name(),
                    tflops(ms),
                    base / ms
                );
                if best.as_ref().is_none_or(|(b, _)| ms < *b) {
                    best = Some((ms, l.config.name()));
                }
            }
            if let Some((ms, name)) = best {
                let _ = writeln!(
                    table,
                    "| {groups} | {rows} | {n} | {k} | {} | {empty} | {:.0} | {:.0} | {name} | {:.2}x |",
                    routing.name(),
                    tflops(base),
                    tflops(ms),
                    base / ms
                );
            }
        }
    }
    json.push(']');
    if let Ok(path) = std::env::var("GROUPED_COUNTS") {
        std::fs::write(&path, &json)?;
    }
    println!("\n{table}");
    Ok(ok)
}
