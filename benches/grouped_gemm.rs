//! The grouped GEMM of examples/08-grouped-gemm against a loop of cuBLAS GEMMs (one a group),
//! in one process on the same buffers; torch._grouped_mm on the same row counts is timed by
//! benches/grouped_gemm_torch.py in the same device call (this bench writes the counts to
//! GROUPED_COUNTS, a JSON file, when that variable names one).
//!
//! Shapes (issue 26): 128 experts x (N 768, K 2048) and (N 2048, K 768) at 8192 and 65536
//! routed rows, 8 experts x (N 14336, K 4096) at 8192 and 65536; uniform and skewed routing
//! (grouped.rs). Every configuration is checked first (D poisoned; every element against the
//! cuBLAS loop, f64 samples), then timed: median of GROUPED_REPS (20) event-timed samples of
//! LAUNCHES (5) launches back to back (gpu::time_batched; the torch script times samples of 5
//! calls the same way) after one untimed sample and BENCH_WARM_MS (500) ms of samples (the
//! clocks settle under the power cap); TFLOP/s = 2 * rows * N * K / median. Exit code 1 when a
//! configuration is wrong. Without NVRTC or a GPU: says so, exits 0. Both modes with the
//! warm-up take over 7 minutes on an H100: run GROUPED_MODE=forward and =wgrad in separate
//! device calls.
//!
//! The weight gradient (wgrad.rs, issue 26's ragged K) on the same shapes and the same token
//! counts: dW_g[N][K] = dY_g^T X_g per group, against a loop of cuBLAS GEMMs (one a non-empty
//! group, a memset an empty one), each configuration checked first (dW poisoned; every element,
//! empty groups exactly zero, f64 samples), then timed as above; TFLOP/s = 2 * tokens * N * K /
//! median. The f32-out configuration is timed against the loop's bf16 out (named as such).
//! GROUPED_MODE=forward or wgrad runs one of the two (default: both); GROUPED_RASTER sets the
//! raster's tile-rows of both (default grouped::RASTER_ROWS, 8); GROUPED_EXPERTS=8 or 128 only
//! the shapes of that many groups; GROUPED_CONFIGS=ws_128x256_s4_c1x1,pp_64x256 only the
//! configurations whose names contain one of those pieces (a short A/B in one device call).
//! GROUPED_TIMELINE=1 (with GROUPED_MODE=wgrad): instead of the table, each weight-gradient
//! configuration's per-role timeline on each problem (`timeline_wgrad`), and with
//! GROUPED_TIMELINE_OUT=<prefix> every event as CSV, one file a configuration and problem.

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
#[allow(dead_code)]
#[path = "../examples/08-grouped-gemm/wgrad.rs"]
mod wgrad;

use std::fmt::Write as _;
use std::process::ExitCode;

use compile::Built;
use gpu::Gpu;
use grouped::{Launch, Loaded, Problem, Routing};
use kernel::{In, Out, Res};
use rng::Rng;
use tma::runtime::Compiler;

/// Launches per timed sample (back to back between one pair of events).
const LAUNCHES: usize = 5;

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
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP grouped_gemm bench: NVRTC is not available ({e})");
            return Ok(true);
        }
    };
    let mode = std::env::var("GROUPED_MODE").unwrap_or_default();
    let (do_forward, do_wgrad) = (mode != "wgrad", mode != "forward");
    // GROUPED_CONFIGS: the configurations whose names contain one of its comma-separated pieces.
    let wanted: Vec<String> = std::env::var("GROUPED_CONFIGS")
        .map(|v| {
            v.split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let ok_plans = |v: Vec<Res<kernel::Plan>>| {
        v.into_iter().filter_map(Result::ok).filter(|p| {
            let name = p.config.name();
            wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str()))
        })
    };
    let forward: Vec<_> = if do_forward {
        ok_plans(grouped::plans(input)).collect()
    } else {
        Vec::new()
    };
    let nf = forward.len();
    let wgrad_plans: Vec<_> = if do_wgrad {
        ok_plans(wgrad::plans(input)).collect()
    } else {
        Vec::new()
    };
    if !wanted.is_empty() && forward.is_empty() && wgrad_plans.is_empty() {
        return Err(
            format!("GROUPED_CONFIGS = {wanted:?}: no configuration's name contains one").into(),
        );
    }
    let mut built: Vec<_> =
        compile::compile_all(compiler, forward.into_iter().chain(wgrad_plans).collect())
            .into_iter()
            .collect::<Result<_, _>>()?;
    let built_wgrad = built.split_off(nf);
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => Gpu::new()?,
        Err(e) => {
            println!(
                "SKIP grouped_gemm bench: no GPU ({e}); {} configurations compiled",
                built.len() + built_wgrad.len()
            );
            return Ok(true);
        }
    };
    let reps: usize = std::env::var("GROUPED_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    println!(
        "GPU: {} ({} SMs); median of {reps} samples of {LAUNCHES} launches back to back",
        gpu.name, gpu.sms
    );
    // The token counts of every problem first (one generator), so the forward and the weight
    // gradient run the same counts whichever of them runs.
    let mut rng = Rng::new(0x6d6f_6530_0026);
    let mut problems = Vec::new();
    for &(groups, rows, n, k) in &SHAPES {
        for routing in [Routing::Uniform, Routing::Skewed] {
            problems.push((
                groups,
                rows,
                n,
                k,
                routing,
                routing.counts(groups, rows, &mut rng),
            ));
        }
    }
    // GROUPED_EXPERTS=8 (or 128): only the shapes of that many groups (the counts as above).
    if let Ok(v) = std::env::var("GROUPED_EXPERTS") {
        let g: usize = v
            .parse()
            .map_err(|_| format!("GROUPED_EXPERTS = {v:?}: a number of groups"))?;
        problems.retain(|p| p.0 == g);
        if problems.is_empty() {
            let counts: Vec<usize> = SHAPES.iter().map(|s| s.0).collect();
            return Err(format!(
                "GROUPED_EXPERTS = {g}: no shape has that many groups ({counts:?} do)"
            )
            .into());
        }
    }
    let raster = match std::env::var("GROUPED_RASTER") {
        Ok(v) => v
            .parse::<i32>()
            .ok()
            .filter(|&r| r > 0)
            .ok_or_else(|| format!("GROUPED_RASTER = {v:?}: a positive number of tile-rows"))?,
        Err(_) => grouped::RASTER_ROWS,
    };
    let mut ok = true;
    let mut json = String::from("[");
    for (groups, _, n, k, routing, counts) in &problems {
        let _ = write!(
            json,
            "{}{{\"groups\":{groups},\"n\":{n},\"k\":{k},\"routing\":\"{}\",\"counts\":{:?}}}",
            if json.len() > 1 { "," } else { "" },
            routing.name(),
            counts
        );
    }
    json.push(']');
    if let Ok(path) = std::env::var("GROUPED_COUNTS") {
        std::fs::write(&path, &json)?;
    }
    if do_forward {
        ok &= bench_forward(&gpu, &built, &problems, reps, raster, &mut rng)?;
    }
    if std::env::var("GROUPED_TIMELINE").is_ok_and(|v| v == "1") {
        let plans: Vec<kernel::Plan> = built_wgrad.iter().map(|b| b.plan.clone()).collect();
        return timeline_wgrad(&gpu, compiler, &plans, &problems, &mut rng).map(|()| true);
    }
    if do_wgrad {
        ok &= bench_wgrad(&gpu, &built_wgrad, &problems, reps, raster, &mut rng)?;
    }
    Ok(ok)
}

/// GROUPED_TIMELINE=1: where each weight-gradient configuration's warps wait on each problem
/// (why the skewed problems are slower than the uniform ones: BENCHMARKS.md). Each
/// configuration is compiled with the per-role timeline (`CompileOptions::timeline`) and
/// launched once after a warm-up into a cleared buffer; prints the trace's sums (the consumers'
/// waits for full stages, the producer's for empty ones) and, when GROUPED_TIMELINE_OUT names a
/// prefix, writes every event as CSV to `<prefix>_<config>_<groups>x<tokens>_<N>x<K>_<routing>.csv`
/// (`Trace::csv`).
fn timeline_wgrad(
    gpu: &Gpu,
    compiler: &Compiler,
    plans: &[kernel::Plan],
    problems: &[Case],
    rng: &mut Rng,
) -> Res<()> {
    use tma::runtime::timeline::Timeline;
    let out = std::env::var("GROUPED_TIMELINE_OUT").ok();
    for plan in plans {
        let compiled =
            compiler.compile_source(&plan.source()?, &kernel::options().timeline(true))?;
        let built = Built {
            plan: plan.clone(),
            compiled,
            seconds: 0.0,
            origin: tma::runtime::compile::Origin::Nvrtc,
        };
        let loaded = wgrad::Loaded::new(gpu, &built)?;
        for (groups, rows, n, k, routing, counts) in problems {
            let c = &plan.config;
            if wgrad::unsupported(c, *n, *k).is_some() {
                continue;
            }
            let p = wgrad::Problem::new(gpu, counts.clone(), *n, *k, In::BF16, rng)?;
            let d = wgrad::out_buf(gpu, &p, c.out)?;
            let mut launch = wgrad::Launch::new(gpu, &loaded, &p, &d)?;
            // A pass a stage a warp: the k-blocks of every tile of a CTA, with room for the
            // busiest CTA (twice the mean) and its tiles' ends.
            let tiles = n.div_ceil(c.bm as usize) * k.div_ceil(c.bn as usize);
            let kblocks: usize = counts
                .iter()
                .map(|&t| (t.max(0) as usize).div_ceil(64))
                .sum();
            let grid = launch.config().grid.0 as usize;
            let passes = 2 * (tiles * kblocks).div_ceil(grid.max(1)) + 64;
            let passes = u32::try_from(passes).map_err(|_| format!("{passes} timeline passes"))?;
            let mut timeline = Timeline::attach(loaded.kernel.module(), launch.config(), passes)?;
            for _ in 0..20 {
                launch.run(gpu)?;
            }
            gpu.stream.synchronize()?;
            timeline.clear()?;
            launch.run(gpu)?;
            // read() waits for the launch.
            let trace = timeline.read()?;
            let what = format!(
                "{c} on {groups} groups x {rows} tokens, {n} x {k}, {}",
                routing.name()
            );
            println!("timeline {what}: {}", trace.stats());
            if trace.dropped > 0 {
                return Err(
                    format!("timeline {what}: {} events found no slot", trace.dropped).into(),
                );
            }
            if let Some(prefix) = &out {
                let path = format!(
                    "{prefix}_{}_{groups}x{rows}_{n}x{k}_{}.csv",
                    c.name(),
                    routing.name()
                );
                std::fs::write(&path, trace.csv())?;
            }
        }
    }
    Ok(())
}

/// One checked configuration timed (median ms per launch of samples of LAUNCHES), printed
/// with its TFLOP/s (`tflops_at_1ms` / ms) and its speed-up over the baseline's `base` ms.
fn timed_row(
    gpu: &Gpu,
    reps: usize,
    name: &str,
    tflops_at_1ms: f64,
    base: f64,
    run: &mut dyn FnMut() -> Res<()>,
) -> Res<f64> {
    let mut t = gpu::time_batched(gpu, reps, LAUNCHES, run)?;
    let ms = gpu::median(&mut t);
    println!(
        "  {name:<40} {ms:.3} ms {:>5.0} TFLOP/s {:.2}x",
        tflops_at_1ms / ms,
        base / ms
    );
    Ok(ms)
}

/// (groups, rows, N, K, routing, rows per group).
type Case = (usize, usize, usize, usize, Routing, Vec<i32>);

/// The forward (ragged M): every configuration checked, then timed against the cuBLAS loop.
fn bench_forward(
    gpu: &Gpu,
    built: &[Built],
    problems: &[Case],
    reps: usize,
    raster: i32,
    rng: &mut Rng,
) -> Res<bool> {
    let input = In::BF16;
    let out = Out::of(input);
    let loaded: Vec<_> = built
        .iter()
        .map(|b| Loaded::new(gpu, b))
        .collect::<Result<_, _>>()?;
    let mut ok = true;
    let mut table = String::from(
        "| groups | rows | N | K | routing | empty | cuBLAS loop | tma best | config | x cuBLAS loop |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (groups, rows, n, k, routing, counts) in problems {
        let (groups, rows, n, k, routing) = (*groups, *rows, *n, *k, *routing);
        {
            let empty = counts.iter().filter(|&&c| c == 0).count();
            let p = Problem::new(gpu, counts.clone(), n, k, input, rng)?;
            let tflops = |ms: f64| p.flops() / (ms * 1e-3) / 1e12;
            let mut reference = grouped::out_buf(gpu, &p, out)?;
            reference.poison(&gpu.stream)?;
            grouped::cublas_loop(gpu, &p, out, &reference)?;
            let r = reference.read(&gpu.stream, out)?;
            let mut t = gpu::time_batched(gpu, reps, LAUNCHES, &mut || {
                grouped::cublas_loop(gpu, &p, out, &reference)
            })?;
            let base = gpu::median(&mut t);
            println!(
                "G {groups} rows {rows} N {n} K {k} {} ({empty} empty): cuBLAS loop {base:.3} ms {:.0} TFLOP/s",
                routing.name(),
                tflops(base)
            );
            let mut best: Option<(f64, String)> = None;
            for l in &loaded {
                let mut d = grouped::out_buf(gpu, &p, out)?;
                d.poison(&gpu.stream)?;
                let mut launch = Launch::new(gpu, l, &p, &d)?;
                launch.set_raster(raster);
                launch.run(gpu)?;
                gpu.stream.synchronize()?;
                let c = grouped::check(&p, out, &d.read(&gpu.stream, out)?, &r, rng);
                if !c.ok(out) {
                    ok = false;
                    println!(
                        "  {} WRONG: vs cuBLAS max diff {:.1e} ({} outside the bound), samples {:.1e}",
                        l.config, c.elements.max_diff, c.elements.bad, c.sample_max_err
                    );
                    continue;
                }
                let ms = timed_row(gpu, reps, &l.config.name(), tflops(1.0), base, &mut || {
                    launch.run(gpu)
                })?;
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
    println!("\n{table}");
    Ok(ok)
}

/// The weight gradient (ragged K) on the same token counts: every configuration checked, then
/// timed against the cuBLAS loop (bf16 out; the f32-out configuration against it too, named).
fn bench_wgrad(
    gpu: &Gpu,
    built: &[Built],
    problems: &[Case],
    reps: usize,
    raster: i32,
    rng: &mut Rng,
) -> Res<bool> {
    let input = In::BF16;
    let base_out = Out::of(input);
    let loaded: Vec<_> = built
        .iter()
        .map(|b| wgrad::Loaded::new(gpu, b))
        .collect::<Result<_, _>>()?;
    let mut ok = true;
    let mut table = String::from(
        "| groups | tokens | N | K | routing | empty | cuBLAS loop | tma best (bf16 out) | config | x cuBLAS loop | tma f32 out |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (groups, rows, n, k, routing, counts) in problems {
        let (groups, rows, n, k, routing) = (*groups, *rows, *n, *k, *routing);
        let empty = counts.iter().filter(|&&c| c == 0).count();
        let p = wgrad::Problem::new(gpu, counts.clone(), n, k, input, rng)?;
        let tflops = |ms: f64| p.flops() / (ms * 1e-3) / 1e12;
        // The references (one per output type) and the baseline's time (bf16 out).
        let mut references: Vec<(Out, Vec<f32>)> = Vec::new();
        let mut base = f64::NAN;
        for out in [base_out, Out::F32] {
            if !loaded.iter().any(|l| l.config.out == out) && out != base_out {
                continue;
            }
            let mut reference = wgrad::out_buf(gpu, &p, out)?;
            reference.poison(&gpu.stream)?;
            wgrad::cublas_loop(gpu, &p, out, &reference)?;
            references.push((out, reference.read(&gpu.stream, out)?));
            if out == base_out {
                let mut t = gpu::time_batched(gpu, reps, LAUNCHES, &mut || {
                    wgrad::cublas_loop(gpu, &p, out, &reference)
                })?;
                base = gpu::median(&mut t);
            }
        }
        println!(
            "wgrad G {groups} tokens {rows} N {n} K {k} {} ({empty} empty): cuBLAS loop {base:.3} ms {:.0} TFLOP/s",
            routing.name(),
            tflops(base)
        );
        let mut best: Option<(f64, String)> = None;
        let mut f32_best: Option<f64> = None;
        for l in &loaded {
            let out = l.config.out;
            if let Some(why) = wgrad::unsupported(&l.config, n, k) {
                println!("  {:<40} skipped: {why}", l.config.name());
                continue;
            }
            let r = &references
                .iter()
                .find(|(o, _)| *o == out)
                .ok_or("no reference for this output type")?
                .1;
            let mut d = wgrad::out_buf(gpu, &p, out)?;
            d.poison(&gpu.stream)?;
            let mut launch = wgrad::Launch::new(gpu, l, &p, &d)?;
            launch.set_raster(raster);
            launch.run(gpu)?;
            gpu.stream.synchronize()?;
            let c = wgrad::check(&p.operands(), out, &d.read(&gpu.stream, out)?, r, rng);
            if !c.ok() {
                ok = false;
                println!(
                    "  {} WRONG: vs cuBLAS max diff {:.1e} ({} outside the bound), empty groups {} nonzero, samples {} outside the bound",
                    l.config, c.elements.max_diff, c.elements.bad, c.empty_nonzero, c.samples_bad
                );
                continue;
            }
            if c.disputes_cleared() {
                println!(
                    "  {}: disagrees with cuBLAS at {} elements (groups {:?}), each computed exactly: the kernel within an fp32 sum's bound at all, cuBLAS outside it at {}",
                    l.config, c.disputes.disputed, c.disputes.groups, c.disputes.reference_bad
                );
            }
            let ms = timed_row(gpu, reps, &l.config.name(), tflops(1.0), base, &mut || {
                launch.run(gpu)
            })?;
            if out == base_out {
                if best.as_ref().is_none_or(|(b, _)| ms < *b) {
                    best = Some((ms, l.config.name()));
                }
            } else if f32_best.is_none_or(|b| ms < b) {
                f32_best = Some(ms);
            }
        }
        if let Some((ms, name)) = best {
            let _ = writeln!(
                table,
                "| {groups} | {rows} | {n} | {k} | {} | {empty} | {:.0} | {:.0} | {name} | {:.2}x | {} |",
                routing.name(),
                tflops(base),
                tflops(ms),
                base / ms,
                f32_best.map_or_else(|| "-".to_string(), |m| format!("{:.0}", tflops(m)))
            );
        }
    }
    println!("\nweight gradient (ragged K):\n{table}");
    Ok(ok)
}
