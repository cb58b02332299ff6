//! A GEMM written with tma: D = A * B^T (A M x K, B N x K, both K-major; D M x N row-major),
//! bf16 or f16 inputs, fp32 accumulation, bf16 / f16 / f32 output, any M, N, K that are
//! multiples of 8 (ragged edges: TMA fills out-of-bounds loads with zeros and clips stores).
//!
//! The kernel (kernel.cu) is the prototype of issue 14 re-expressed with tma's pieces only:
//! TMA loads with 128B swizzle through a pipeline (`tma_pipe_ring`: one expect per stage,
//! B's 256 rows multicast over a 2-CTA cluster as two back-to-back 128-row boxes), wgmma on
//! the operand tiles' descriptors (`TA::desc`, `TB::desc`, `tma_wgmma<TA, TB>`), warp roles
//! (`tma_roles_gemm`: a producer warpgroup at 40 registers, two consumers at 232, or, for
//! `ws3_` configurations of 192 rows, three at 160 after a producer at 32; a named barrier per
//! consumer for the epilogue; `pp_` configurations are ping-pong: each of the two consumers
//! owns whole tiles, alternate ones of the walk, the ring taken in turn and a `turn` barrier
//! per consumer alternating their mainloops), a persistent grouped-raster scheduler, and a TMA-store
//! epilogue through D's tile (`TD::offset` places stmatrix rows in its 128B swizzle,
//! `TD::store`). Each configuration (block tile, stages, cluster, persistence, epilogue,
//! types; kernel.rs) is a kernel plan (`KernelPlan`: the ring, the roles, D's staging), from
//! which both the kernel's shared-memory layout (`tma_plan_gemm`) and its launch come; it is
//! rendered and NVRTC-compiled at run time by tma's runtime (cached in TMA_CACHE_DIR), all
//! of them in parallel. (`examples/05-basic-gemm.rs` is one configuration in one file: read
//! it first.)
//!
//! Without a GPU: renders and compiles every configuration, checks each plan on the CPU
//! model (A and B loaded by the TMA model and read back through the kernel's descriptors by
//! the wgmma read model; the pipeline's numbers; D's staging offsets), and says why it stops.
//! With a GPU: every configuration's output is checked against cuBLAS (same buffers, inputs
//! random in [-1, 1], never 0, outputs poisoned) and against exact f64 samples, then timed
//! once (median of `--reps` launches; 0: not timed). The paired timing against cuBLAS and
//! the tables are the benchmark's (`cargo bench --bench gemm`).
//!
//! `--tune use|again` instead picks the fastest configuration per shape with tma's tuning
//! API (tune.rs; `tma::runtime::tune`): every configuration checked as above, then raced on
//! the GPU; the table gives each one's median and spread. The pick is kept per (shape, types,
//! group, device, driver, builds) in TMA_CACHE_DIR/tune: `use` takes a kept pick without
//! timing, `again` times anyway and replaces it.
//!
//! Warm-up: `--precompile` (or `TMA_PRECOMPILE=1`) renders and compiles every configuration
//! of every type into the disk cache (TMA_CACHE_DIR) and exits, GPU or not; a later run then
//! compiles nothing (its "compiled" lines say "from the cache", and "0 NVRTC compiles").
//!
//! `--timeline FILE.json`: then the first configuration on the first shape is compiled again
//! with tma's per-role timeline (`CompileOptions::timeline`), checked, timed beside the same
//! kernel without it, and its events written: Chrome trace JSON for Perfetto (FILE.json, the
//! first 8 blocks: a track per warp role, waits and held stages as spans) and an SVG picture
//! (FILE.svg, the first 2 blocks), with where the producer and the consumers waited.
//!
//! Run: `cargo run --release --example 05-gemm -- [--shapes 4096x4096x4096,...]
//! [--dtype bf16|f16] [--out bf16|f16|f32] [--configs all|ladder|NAME,...] [--reps N]
//! [--group G] [--precompile] [--tune use|again] [--timeline FILE.json]`

mod check;
mod compile;
mod cpu_check;
mod cublas;
mod eval;
mod gpu;
mod kernel;
mod rng;
mod tune;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use kernel::{Config, In, Out, Plan, Res};
use rng::Rng;
use tma::runtime::timeline::{SvgOptions, Timeline};
use tma::runtime::{Compiler, Module};

struct Args {
    shapes: Vec<(usize, usize, usize)>,
    input: In,
    out: Out,
    configs: String,
    reps: usize,
    group: i32,
    /// Compile every configuration into the disk cache and exit.
    precompile: bool,
    /// `--tune`: Some(retune).
    tune: Option<bool>,
    timeline: Option<std::path::PathBuf>,
}

pub fn parse_shape(s: &str) -> Option<(usize, usize, usize)> {
    let v: Vec<usize> = s
        .split('x')
        .map(|x| x.trim().parse().ok())
        .collect::<Option<_>>()?;
    match v[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 && m % 8 == 0 && n % 8 == 0 && k % 8 == 0 => {
            Some((m, n, k))
        }
        _ => None,
    }
}

fn args() -> Res<Args> {
    let mut a = Args {
        shapes: vec![
            (4096, 4096, 4096),
            (1000, 1032, 520),
            (8, 8, 8),
            (128, 8192, 8192),
        ],
        input: In::BF16,
        out: Out::BF16,
        configs: "all".into(),
        reps: 20,
        group: 8,
        precompile: std::env::var("TMA_PRECOMPILE").is_ok_and(|v| v == "1"),
        tune: None,
        timeline: None,
    };
    let mut out_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--precompile" {
            a.precompile = true;
            continue;
        }
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--shapes" => {
                a.shapes = v
                    .split(',')
                    .map(|s| parse_shape(s).ok_or(format!("shape {s}: MxNxK, multiples of 8")))
                    .collect::<Result<_, _>>()?
            }
            "--dtype" => a.input = In::parse(&v).ok_or("--dtype bf16|f16")?,
            "--out" => {
                out_given = true;
                a.out = match v.as_str() {
                    "bf16" => Out::BF16,
                    "f16" => Out::F16,
                    "f32" => Out::F32,
                    _ => return Err("--out bf16|f16|f32".into()),
                }
            }
            "--configs" => a.configs = v,
            "--reps" => a.reps = v.parse()?,
            "--group" => a.group = v.parse()?,
            "--tune" => {
                a.tune = Some(match v.as_str() {
                    "use" => false,
                    "again" => true,
                    _ => return Err("--tune use|again".into()),
                })
            }
            "--timeline" => a.timeline = Some(v.into()),
            _ => return Err(format!("unknown option {k}").into()),
        }
    }
    if !out_given {
        a.out = Out::of(a.input);
    }
    Ok(a)
}

/// The configurations of a run: the candidates and the ladder for the run's types, or named.
fn configs(a: &Args) -> Res<Vec<Config>> {
    let mut v: Vec<Config> = Vec::new();
    let mut add = |c: Config| {
        if !v.contains(&c) {
            v.push(c);
        }
    };
    match a.configs.as_str() {
        "all" => {
            Config::candidates(a.input, a.out)
                .into_iter()
                .for_each(&mut add);
            Config::ladder(a.input)
                .into_iter()
                .map(|(_, c)| Config { out: a.out, ..c })
                .for_each(&mut add);
        }
        "ladder" => Config::ladder(a.input)
            .into_iter()
            .map(|(_, c)| Config { out: a.out, ..c })
            .for_each(&mut add),
        list => {
            for n in list.split(',') {
                add(Config::parse(n).ok_or(format!("config {n}: e.g. {}", Config::L5))?);
            }
        }
    }
    Ok(v)
}

/// Every configuration the example knows, all types: what a run without a GPU compiles.
fn every_config() -> Vec<Config> {
    let mut v: Vec<Config> = Vec::new();
    for (i, o) in [
        (In::BF16, Out::BF16),
        (In::F16, Out::F16),
        (In::BF16, Out::F32),
    ] {
        for c in Config::candidates(i, o).into_iter().chain(
            Config::ladder(i)
                .into_iter()
                .map(|(_, c)| Config { out: o, ..c }),
        ) {
            if !v.contains(&c) {
                v.push(c);
            }
        }
    }
    v
}

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
    let mut a = args()?;
    if a.precompile {
        return precompile();
    }
    let gpu_err = tma::runtime::gpu_available().err();
    let chosen = if gpu_err.is_some() {
        every_config()
    } else {
        configs(&a)?
    };
    // Named configurations carry their types: the run takes them (one pair per run).
    if let Some(c) = chosen.first().filter(|_| gpu_err.is_none()) {
        if chosen.iter().any(|o| (o.input, o.out) != (c.input, c.out)) {
            return Err("the configurations of one run share their input and output types".into());
        }
        (a.input, a.out) = (c.input, c.out);
    }
    let mut rng = Rng::from_clock();

    // Plans: tma's checked declarations, and their CPU-model checks.
    let mut plans = Vec::new();
    for c in &chosen {
        let plan = Plan::new(*c)?;
        let summary = cpu_check::check(&plan, &mut rng).map_err(|e| format!("{c}: {e}"))?;
        println!("plan {c}: {summary}");
        plans.push(plan);
    }

    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!(
                "no NVRTC ({e}): every plan checked on the CPU model; stopping before compiling"
            );
            return Ok(true);
        }
    };
    // Compile all, in parallel.
    let t0 = Instant::now();
    let built = compile::compile_all(compiler, plans.clone());
    let mut ok = Vec::new();
    for b in built {
        let b = b?;
        println!(
            "compiled {} in {:.2} s ({} B CUBIN{}): {}",
            b.plan.config,
            b.seconds,
            b.compiled.cubin.len(),
            from_cache(b.origin),
            b.registers("gemm", kernel::debug_build())?
        );
        ok.push(b);
    }
    let compile_s = t0.elapsed().as_secs_f64();
    let stats = compiler.stats();
    println!(
        "{} configurations rendered and compiled in {:.2} s on {} threads ({} NVRTC compiles, {} disk-cache hits)",
        ok.len(),
        compile_s,
        std::thread::available_parallelism().map_or(1, |t| t.get()),
        stats.nvrtc_compiles,
        stats.disk_hits
    );
    if let Some(e) = gpu_err {
        match cublas::Cublas::available() {
            Ok(()) => println!("cuBLAS (the baseline): found"),
            Err(e) => println!("cuBLAS (the baseline) cannot run here: {e}"),
        }
        println!("no GPU ({e}): every configuration rendered, compiled and checked on the CPU model; stopping before the GPU runs");
        return Ok(true);
    }

    let t_ctx = Instant::now();
    let gpu = gpu::Gpu::new()?;
    let ctx_s = t_ctx.elapsed().as_secs_f64();
    println!(
        "device {} ({} SMs); inputs {} uniform in [-1, 1] (never 0), output {}, fp32 accumulation",
        gpu.name,
        gpu.sms,
        a.input.name(),
        a.out.name()
    );
    println!(
        "correct = every element within {:.1e} max(|d|, |ref|) + 1e-3 of cuBLAS (two roundings to {} of fp32 sums) and relative Frobenius < 5e-3, \
         and {} sampled entries within u |x| + 2^-22 sum_k |s_k| + 2^-30 of the exact f64 value (u = {:.1e})",
        2.0 * check::unit_roundoff(a.out),
        a.out.name(),
        eval::SAMPLES,
        check::unit_roundoff(a.out)
    );
    if let Some(retune) = a.tune {
        return tune_shapes(&gpu, &a, &plans, retune, &mut rng);
    }
    let t_load = Instant::now();
    let loaded: Vec<Arc<gpu::Loaded>> = ok
        .iter()
        .map(|b| gpu::Loaded::new(&gpu, b))
        .collect::<Res<_>>()?;
    println!(
        "set-up: render + compile {:.1} ms ({} NVRTC compiles), CUDA context and cuBLAS {:.1} ms, {} modules loaded in {:.1} ms",
        compile_s * 1e3,
        stats.nvrtc_compiles,
        ctx_s * 1e3,
        loaded.len(),
        t_load.elapsed().as_secs_f64() * 1e3
    );
    let mut all_ok = true;
    for &shape in &a.shapes {
        let p = gpu::Problem::new(&gpu, shape, a.input, rng.next())?;
        let r = eval::reference(&gpu, &p, a.out, &mut rng)?;
        let tflops = |ms: f64| p.flops() / ms / 1e9;
        let cublas_ms = timed(&gpu, a.reps, &mut || gpu::cublas(&gpu, &p, a.out, &r.buf))?;
        println!(
            "\n== {}x{}x{} (M x N x K): cuBLAS vs f64: {}/{} bad, max err/bound {:.3}; cuBLAS {:.1} TFLOP/s",
            p.m,
            p.n,
            p.k,
            r.own.0,
            eval::SAMPLES,
            r.own.1,
            tflops(cublas_ms)
        );
        let mut d = gpu::OutBuf::new(&gpu, p.m * p.n, a.out)?;
        for l in &loaded {
            let launch = gpu::Launch::new(&gpu, l, &p, &d, a.out)?;
            let verdict = eval::check(&gpu, &launch, &mut d, &r, &p, a.group)?;
            all_ok &= verdict.ok();
            let ms = timed(&gpu, a.reps, &mut || launch.run(a.group))?;
            println!(
                "  {:<40} {:>8.1} TFLOP/s {:.3}x cuBLAS | {}",
                l.config.to_string(),
                tflops(ms),
                cublas_ms / ms,
                verdict.describe(p.m * p.n)
            );
        }
    }
    if let (Some(path), Some(off), Some(&shape)) = (&a.timeline, loaded.first(), a.shapes.first()) {
        all_ok &= timeline(&gpu, compiler, off, shape, &a, path, &mut rng)?;
    }
    println!(
        "\n{}",
        if all_ok {
            "every configuration correct"
        } else {
            "FAILURES above"
        }
    );
    Ok(all_ok)
}

/// ", from the cache" unless NVRTC compiled it now.
fn from_cache(origin: tma::runtime::compile::Origin) -> &'static str {
    match origin {
        tma::runtime::compile::Origin::Nvrtc => "",
        _ => ", from the cache",
    }
}

/// `--precompile`: every configuration of every type rendered and compiled into the disk
/// cache (no CPU-model checks, no GPU), one line each; a later run compiles none of them.
fn precompile() -> Res<bool> {
    let compiler = Compiler::global()?;
    let dir = compiler
        .disk_cache()
        .ok_or("no disk cache (TMA_JIT_NO_CACHE is set, or no cache directory): nothing to warm")?
        .dir()
        .display()
        .to_string();
    let plans: Vec<Plan> = every_config()
        .into_iter()
        .map(Plan::new)
        .collect::<Res<_>>()?;
    let t0 = Instant::now();
    let mut ok = true;
    for b in compile::compile_all(compiler, plans) {
        match b {
            Ok(b) => println!(
                "{} {} in {:.2} s",
                if from_cache(b.origin).is_empty() {
                    "compiled"
                } else {
                    "cached  "
                },
                b.plan.config,
                b.seconds
            ),
            Err(e) => {
                ok = false;
                println!("failed: {e}");
            }
        }
    }
    let stats = compiler.stats();
    println!(
        "precompiled every configuration in {:.2} s: {} NVRTC compiles, {} already in the cache {dir}",
        t0.elapsed().as_secs_f64(),
        stats.nvrtc_compiles,
        stats.disk_hits
    );
    Ok(ok)
}

/// `--timeline`: `off`'s configuration compiled with the per-role timeline, checked, timed
/// beside `off`, and its events of one launch on `shape` written to `path` (JSON) and beside
/// it (SVG). Whether its output was correct.
fn timeline(
    gpu: &gpu::Gpu,
    compiler: &Compiler,
    off: &Arc<gpu::Loaded>,
    shape: (usize, usize, usize),
    a: &Args,
    path: &std::path::Path,
    rng: &mut Rng,
) -> Res<bool> {
    let plan = Plan::new(off.config)?;
    let compiled = compiler.compile_source(&plan.source()?, &kernel::options().timeline(true))?;
    let on = gpu::Loaded::from_module(gpu, &plan, &Module::load(&gpu.ctx, compiled)?)?;
    let p = gpu::Problem::new(gpu, shape, a.input, rng.next())?;
    let r = eval::reference(gpu, &p, a.out, rng)?;
    let mut d = gpu::OutBuf::new(gpu, p.m * p.n, a.out)?;
    let launch_on = gpu::Launch::new(gpu, &on, &p, &d, a.out)?;
    let launch_off = gpu::Launch::new(gpu, off, &p, &d, a.out)?;
    // Slots for every block, warp and pass of this launch; one launch's events.
    let mut tl = Timeline::attach(on.kernel.module(), launch_on.config(), on.passes(&p))?;
    let verdict = eval::check(gpu, &launch_on, &mut d, &r, &p, a.group)?;
    tl.clear()?;
    launch_on.run(a.group)?;
    let trace = tl.read()?;
    let svg = path.with_extension("svg");
    std::fs::write(path, trace.filter_blocks(|b| b < 8).chrome_json())?;
    std::fs::write(&svg, trace.svg(&SvgOptions::default()))?;
    let tflops = |ms: f64| p.flops() / ms / 1e9;
    let ms_off = timed(gpu, a.reps, &mut || launch_off.run(a.group))?;
    let ms_on = timed(gpu, a.reps, &mut || launch_on.run(a.group))?;
    println!(
        "\n== timeline of {} on {}x{}x{}: {} | {}\n  {:.1} TFLOP/s with the timeline, {:.1} without ({:+.1}%; the paired measure: cargo bench --bench gemm, GEMM_BENCH_TIMELINE=1)\n  wrote {} (Chrome trace / Perfetto: the first 8 blocks) and {} (the first 2 blocks)",
        off.config,
        p.m,
        p.n,
        p.k,
        verdict.describe(p.m * p.n),
        trace.stats(),
        tflops(ms_on),
        tflops(ms_off),
        100.0 * (ms_on / ms_off - 1.0),
        path.display(),
        svg.display()
    );
    Ok(verdict.ok() && trace.dropped == 0)
}

/// Median ms of `reps` event-timed launches of `f` after 3 warm-ups (NaN for 0 reps).
fn timed(gpu: &gpu::Gpu, reps: usize, f: &mut dyn FnMut() -> Res<()>) -> Res<f64> {
    if reps == 0 {
        return Ok(f64::NAN);
    }
    for _ in 0..3 {
        f()?;
    }
    Ok(gpu::median(&mut gpu::time(gpu, reps, f)?))
}

/// `--tune`: per shape, the fastest configuration by tma's tuner (each one checked first),
/// with every configuration's median and spread. True when none was wrong.
fn tune_shapes(gpu: &gpu::Gpu, a: &Args, plans: &[Plan], retune: bool, rng: &mut Rng) -> Res<bool> {
    let tuner = tma::runtime::tune::Tuner::new(&gpu.stream)?.retune(retune);
    if let Some(dir) = tuner.tune_dir() {
        println!("picks kept in {}", dir.display());
    }
    let mut all_ok = true;
    for &shape in &a.shapes {
        let p = gpu::Problem::new(gpu, shape, a.input, rng.next())?;
        let r = eval::reference(gpu, &p, a.out, rng)?;
        let mut d = gpu::OutBuf::new(gpu, p.m * p.n, a.out)?;
        let key = tune::key(&p, a.out, a.group)?;
        let mut bench = tune::GemmBench {
            gpu,
            p: &p,
            r: &r,
            d: &mut d,
            group: a.group,
        };
        let tuned = tuner.best_or_tune(&key, plans, &mut bench)?;
        let report = &tuned.report;
        println!("\n{report}");
        for (name, stage, why) in report.failures() {
            println!("  {name}: {stage}: {why}");
        }
        all_ok &= report.failures().is_empty();
        if let Some(t) = report.pick_timing() {
            println!(
                "PICK {}x{}x{}: {} {:.1} TFLOP/s (median of {} blocks, spread {:.2}%{})",
                p.m,
                p.n,
                p.k,
                report.pick_name(),
                p.flops() / t.median_us / 1e6,
                t.blocks,
                t.spread_pct(),
                if report.separated {
                    String::new()
                } else {
                    format!("; within the spread: {}", report.ties().join(", "))
                }
            );
        }
    }
    Ok(all_ok)
}
