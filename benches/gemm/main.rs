//! The GEMM of examples/05-gemm against cuBLAS, in one process on the same buffers: the
//! example's configurations, kernel plans, checks and tuning bench (its files, by path), with
//! the paired timing that lives only here (timing.rs: paired medians).
//!
//! 1. Cold compile times (a compiler with no caches): one configuration; then 16 distinct
//!    configurations in parallel on the machine's cores (goals: <= 1 s, <= 3 s on 16 cores).
//! 2. Per shape (M x N x K, bf16 in and out, fp32 accumulation): tma's tuner
//!    (`tma::runtime::tune`, the example's tune.rs) checks every autotune candidate (every
//!    element vs cuBLAS, 1024 exact f64 samples; output poisoned) and races them on the GPU,
//!    printing each one's median and spread; the pick is kept in TMA_CACHE_DIR/tune and timed
//!    again at length paired with cuBLAS: TFLOP/s = 2MNK / median of event-timed launches
//!    after warm-up, in 5 blocks alternating with cuBLAS (the card throttles under sustained
//!    load), and the ratio to the paired cuBLAS median. With GEMM_BENCH_TUNED=1 a shape whose
//!    pick is in the tune cache (same candidates' builds, device, driver) skips the race (its
//!    pick is still checked and timed at length).
//! 3. The ladder of features, each a configuration of the same kernel, on every shape.
//! 4. Other types: f16 in/out and bf16 in / f32 out with the large-tile configuration.
//! 5. The per-role timeline's cost (timeline.rs): L5 compiled with `CompileOptions::timeline`
//!    (recording every launch) against L5 without, paired, at 4096^3 and 8192^3; with
//!    GEMM_BENCH_TIMELINE=1 this section alone (no compile times, sweeps or ladder).
//!
//! Exit code 1 when any configuration is wrong. Without NVRTC or a GPU: says so, exits 0.
//! Run: `cargo bench --bench gemm` (GEMM_BENCH_REPS=N sets the long timing's launches).

#[allow(dead_code)]
#[path = "../../examples/05-gemm/check.rs"]
mod check;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/compile.rs"]
mod compile;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/cublas.rs"]
mod cublas;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/eval.rs"]
mod eval;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/gpu.rs"]
mod gpu;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/kernel.rs"]
mod kernel;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/rng.rs"]
mod rng;
mod timeline;
mod timing;
#[allow(dead_code)]
#[path = "../../examples/05-gemm/tune.rs"]
mod tune;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use kernel::{Config, In, Out, Plan, Res};
use rng::Rng;
use tma::runtime::tune::Tuner;
use tma::runtime::{Compiler, JitConfig};

const SHAPES: [(usize, usize, usize); 5] = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 8192, 1024),
    (4096, 14336, 4096),
    (128, 8192, 8192),
];

fn uncached() -> Res<Compiler> {
    Ok(Compiler::with_config(JitConfig {
        cache: false,
        ..JitConfig::from_env()
    })?)
}

fn compile_times() -> Res<()> {
    // Cold: a fresh compiler without caches; NVRTC itself is loaded by the first one.
    let warm_lib = uncached()?;
    let t = Instant::now();
    let one = compile::compile_all(&warm_lib, vec![Plan::new(Config::L5)?]);
    let first = t.elapsed().as_secs_f64();
    one.into_iter().next().ok_or("nothing compiled")??;
    let t = Instant::now();
    let again = compile::compile_all(
        &uncached()?,
        vec![Plan::new(Config {
            stages: 3,
            epi: kernel::Epi::Tma { nb: 4 },
            ..Config::L5
        })?],
    );
    let second = t.elapsed().as_secs_f64();
    again.into_iter().next().ok_or("nothing compiled")??;
    let mut sixteen: Vec<Config> = Config::candidates(In::BF16, Out::BF16);
    for c in Config::candidates(In::F16, Out::F16) {
        if sixteen.len() < 16 {
            sixteen.push(c);
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |t| t.get());
    let plans: Vec<Plan> = sixteen.iter().map(|&c| Plan::new(c)).collect::<Res<_>>()?;
    let t = Instant::now();
    let built = compile::compile_all(&uncached()?, plans);
    let all = t.elapsed().as_secs_f64();
    let n = built.len();
    for b in built {
        b?;
    }
    println!("## cold compile (render + NVRTC to SASS, no cache)\n");
    println!("| what | seconds | goal |\n| --- | --- | --- |");
    println!("| one configuration (L5), first compile of the process | {first:.2} | <= 1 s |");
    println!("| one configuration (L5, 3 stages), second | {second:.2} | <= 1 s |");
    println!(
        "| {n} configurations in parallel on {cores} cores | {all:.2} | <= 3 s on 16 cores |\n"
    );
    Ok(())
}

struct Row {
    shape: (usize, usize, usize),
    config: Config,
    tflops: f64,
    cublas: f64,
    ratio: f64,
    /// The tuner's median (us) and spread (%) of the pick, and whether it was separated.
    tuned: String,
}

fn main() -> Res<()> {
    let reps: usize = std::env::var("GEMM_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP gemm bench: NVRTC is not available ({e})");
            return Ok(());
        }
    };
    let timeline_only = std::env::var("GEMM_BENCH_TIMELINE").is_ok_and(|v| v == "1");
    if !timeline_only {
        compile_times()?;
    }
    let mut configs: Vec<Config> = Config::candidates(In::BF16, Out::BF16);
    let ladder = Config::ladder(In::BF16);
    let others = [
        Config {
            input: In::F16,
            out: Out::F16,
            ..Config::L5
        },
        Config {
            out: Out::F32,
            ..Config::L5
        },
    ];
    for c in ladder.iter().map(|(_, c)| *c).chain(others) {
        if !configs.contains(&c) {
            configs.push(c);
        }
    }
    if timeline_only {
        configs = vec![Config::L5];
    }
    let plans: Vec<Plan> = configs.iter().map(|&c| Plan::new(c)).collect::<Res<_>>()?;
    let built: Vec<compile::Built> = compile::compile_all(compiler, plans)
        .into_iter()
        .collect::<Res<_>>()?;
    if let Err(e) = tma::runtime::gpu_available() {
        println!(
            "SKIP gemm bench: no GPU ({e}); {} configurations compiled",
            built.len()
        );
        return Ok(());
    }
    let gpu = gpu::Gpu::new()?;
    let loaded: Vec<Arc<gpu::Loaded>> = built
        .iter()
        .map(|b| gpu::Loaded::new(&gpu, b))
        .collect::<Res<_>>()?;
    let by: HashMap<Config, &Arc<gpu::Loaded>> = loaded.iter().map(|l| (l.config, l)).collect();
    let reuse = std::env::var("GEMM_BENCH_TUNED").is_ok_and(|v| v == "1");
    let tuner = Tuner::new(&gpu.stream)?.retune(!reuse);
    let candidates: Vec<Plan> = Config::candidates(In::BF16, Out::BF16)
        .into_iter()
        .map(Plan::new)
        .collect::<Res<_>>()?;
    let mut rng = Rng::from_clock();
    if timeline_only {
        println!("device {} ({} SMs)", gpu.name, gpu.sms);
        let rows = timeline::cost(
            &gpu,
            compiler,
            by[&Config::L5],
            &SHAPES[..2],
            reps,
            &mut rng,
        )?;
        timeline::print(&rows);
        if rows.iter().any(|r| !r.ok) {
            println!("\nFAILED checks (an output wrong, or events dropped)");
            std::process::exit(1);
        }
        return Ok(());
    }
    let mut failures = 0;
    let mut best_rows = Vec::new();
    let mut ladder_rows: Vec<Vec<f64>> = vec![Vec::new(); ladder.len()];
    let group = 8;
    println!(
        "device {} ({} SMs); bf16 inputs uniform in [-1, 1] (never 0); paired medians, {reps} launches per timing after 5 warm-ups\n",
        gpu.name, gpu.sms
    );
    for &shape in &SHAPES {
        let p = gpu::Problem::new(&gpu, shape, In::BF16, rng.next())?;
        let r = eval::reference(&gpu, &p, Out::BF16, &mut rng)?;
        let mut d = gpu::OutBuf::new(&gpu, p.m * p.n, Out::BF16)?;
        println!(
            "== {}x{}x{}: cuBLAS vs f64 {}/{} bad (max err/bound {:.3})",
            p.m,
            p.n,
            p.k,
            r.own.0,
            eval::SAMPLES,
            r.own.1
        );
        // Tune: every candidate checked, then raced (or the tune cache's pick).
        let key = tune::key(&p, Out::BF16, group)?;
        let mut bench = tune::GemmBench {
            gpu: &gpu,
            p: &p,
            r: &r,
            d: &mut d,
            group,
        };
        let tuned = match tuner.best_or_tune(&key, &candidates, &mut bench) {
            Ok(t) => t,
            Err(e) => {
                println!("  tune FAILED: {e}");
                failures += 1;
                continue;
            }
        };
        for line in tuned.report.to_string().lines() {
            println!("  {line}");
        }
        for (name, stage, why) in tuned.report.failures() {
            println!("  FAILED {name}: {stage}: {why}");
            failures += 1;
        }
        let bc = candidates[tuned.index].config;
        let o = timing::evaluate(&gpu, by[&bc], &p, &r, &mut d, group, 5, reps)?;
        if !o.verdict.ok() {
            failures += 1;
        }
        println!(
            "  BEST {:<40} {:>6.1} TFLOP/s, cuBLAS {:>6.1}, {:.3}x | {}",
            bc.to_string(),
            o.tflops(&p),
            o.cublas_tflops(&p),
            o.ratio(),
            o.verdict.describe(p.m * p.n)
        );
        best_rows.push(Row {
            shape,
            config: bc,
            tflops: o.tflops(&p),
            cublas: o.cublas_tflops(&p),
            ratio: o.ratio(),
            tuned: tuned.report.pick_timing().map_or("-".into(), |t| {
                format!(
                    "{:.1} us +- {:.2}%{}",
                    t.median_us,
                    t.spread_pct() / 2.0,
                    if tuned.report.separated { "" } else { " (tie)" }
                )
            }),
        });
        for (i, (name, c)) in ladder.iter().enumerate() {
            let o = timing::evaluate(&gpu, by[c], &p, &r, &mut d, group, 3, reps / 2)?;
            if !o.verdict.ok() {
                failures += 1;
            }
            println!(
                "  ladder {:<55} {:>6.1} TFLOP/s {:.3}x | {}",
                name,
                o.tflops(&p),
                o.ratio(),
                o.verdict.describe(p.m * p.n)
            );
            ladder_rows[i].push(o.ratio());
        }
    }
    // Other types at two shapes.
    let mut type_rows = Vec::new();
    for &shape in &SHAPES[..2] {
        for c in others {
            let p = gpu::Problem::new(&gpu, shape, c.input, rng.next())?;
            let r = eval::reference(&gpu, &p, c.out, &mut rng)?;
            let mut d = gpu::OutBuf::new(&gpu, p.m * p.n, c.out)?;
            let o = timing::evaluate(&gpu, by[&c], &p, &r, &mut d, group, 5, reps / 2)?;
            if !o.verdict.ok() {
                failures += 1;
            }
            println!(
                "  types {:<40} {}x{}x{} {:>6.1} TFLOP/s {:.3}x | {}",
                c.to_string(),
                p.m,
                p.n,
                p.k,
                o.tflops(&p),
                o.ratio(),
                o.verdict.describe(p.m * p.n)
            );
            type_rows.push((shape, c, o.tflops(&p), o.cublas_tflops(&p), o.ratio()));
        }
    }

    println!("\n## best configuration per shape (bf16, paired with cuBLAS)\n");
    println!("| shape (M x N x K) | configuration | tuner: median +- half IQR | TFLOP/s | cuBLAS TFLOP/s | ratio |\n| --- | --- | --- | --- | --- | --- |");
    for r in &best_rows {
        println!(
            "| {}x{}x{} | {} | {} | {:.1} | {:.1} | {:.3} |",
            r.shape.0, r.shape.1, r.shape.2, r.config, r.tuned, r.tflops, r.cublas, r.ratio
        );
    }
    println!("\n## ladder (ratio to paired cuBLAS)\n");
    let head: Vec<String> = SHAPES
        .iter()
        .map(|s| format!("{}x{}x{}", s.0, s.1, s.2))
        .collect();
    println!(
        "| step | {} |\n| --- |{}",
        head.join(" | "),
        " --- |".repeat(SHAPES.len())
    );
    for (i, (name, c)) in ladder.iter().enumerate() {
        let v: Vec<String> = ladder_rows[i].iter().map(|x| format!("{x:.3}")).collect();
        println!("| {name} (`{c}`) | {} |", v.join(" | "));
    }
    println!("\n## other types (L5 configuration)\n");
    println!("| shape | configuration | TFLOP/s | cuBLAS TFLOP/s | ratio |\n| --- | --- | --- | --- | --- |");
    for (s, c, t, cb, ratio) in &type_rows {
        println!(
            "| {}x{}x{} | {c} | {t:.1} | {cb:.1} | {ratio:.3} |",
            s.0, s.1, s.2
        );
    }
    let rows = timeline::cost(
        &gpu,
        compiler,
        by[&Config::L5],
        &SHAPES[..2],
        reps,
        &mut rng,
    )?;
    failures += rows.iter().filter(|r| !r.ok).count();
    timeline::print(&rows);
    if failures > 0 {
        println!("\n{failures} FAILED checks");
        std::process::exit(1);
    }
    println!("\nevery configuration correct on every shape");
    Ok(())
}
