//! The attention forward of examples/06-attention on the FlashAttention-3 paper's family of
//! shapes (B S = 16k tokens, H D = 2048; sequence 512 to 16k; head dim 64, 128, 256; causal and
//! not), bf16, and the ladder of features at head dim 128. cuDNN SDPA and FlashAttention-2 are
//! timed on the same shapes by benches/attention_torch.py in the same device call (this bench
//! writes its rows to ATTN_RESULTS, a JSON file, when that variable names one; the script prints
//! the table with the ratios).
//!
//! Every configuration is checked first on each problem (O and LSE poisoned; 16 sampled rows
//! against the f64 reference), then timed: median of ATTN_REPS (20) event-timed samples of 5
//! launches back to back after 5 warm-ups and BENCH_WARM_MS (500) ms of launches back to back:
//! the H100's clocks settle under its power cap (without it, one shape's samples moved by 10 %
//! within a run, BENCHMARKS.md; the script warms cuDNN and FA2 the same); TFLOP/s = 4 B H S^2 D / median, halved for causal. Also: one configuration's
//! cold compile (no cache) on this machine. Exit code 1 when a configuration is wrong. Without
//! NVRTC or a GPU: says so, exits 0. `ATTN_SEQS=512,4096`: those sequence lengths only;
//! `ATTN_DIMS=128`: that head dim only; `ATTN_EXTRA=ov_d64_n192_s3_p_bf16,...`: those
//! configurations too (at every sequence length of ATTN_SEQS), to try a tile or schedule
//! against the best. `ATTN_TIMELINE=NAME` (and `ATTN_TIMELINE_OUT=file.csv` or `.json`): NAME's
//! per-role timeline at the first ATTN_SEQS length instead of the table (where its warps wait,
//! what a unit boundary costs).

#[allow(dead_code)]
#[path = "../examples/05-gemm/compile.rs"]
mod compile;
#[allow(dead_code)]
#[path = "../examples/06-attention/gpu.rs"]
mod gpu;
#[allow(dead_code)]
#[path = "../examples/06-attention/kernel.rs"]
mod kernel;
#[allow(dead_code)]
#[path = "../examples/06-attention/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "../examples/05-gemm/rng.rs"]
mod rng;

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use gpu::{Gpu, Launch, Loaded, Outputs, Problem, Shape};
use kernel::{Config, In, Plan, Res};
use rng::Rng;
use tma::runtime::{Compiler, JitConfig};

/// Launches per timed sample (back to back between one pair of events).
const LAUNCHES: usize = 5;

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

fn env_list(var: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(var)
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn run() -> Res<bool> {
    let reps: usize = std::env::var("ATTN_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seqs = env_list("ATTN_SEQS", &[512, 1024, 2048, 4096, 8192, 16384]);
    // The family's batch is 16384 / S: a length outside 1..=16384 has no problem of it.
    if let Some(&bad) = seqs.iter().find(|&&s| s == 0 || s > 16384) {
        return Err(
            format!("ATTN_SEQS: {bad} (the family takes 1 to 16384 tokens a sequence)").into(),
        );
    }
    let dims = env_list("ATTN_DIMS", &[64, 128, 256]);
    // ATTN_TIMELINE: that configuration's timeline instead of the table (named before any
    // compile, so a misspelt name fails at once).
    let timeline_of = match std::env::var("ATTN_TIMELINE") {
        Ok(name) => Some(
            Config::parse(name.trim())
                .ok_or(format!("ATTN_TIMELINE: no configuration named {name}"))?,
        ),
        Err(_) => None,
    };
    // (label, config, sequence lengths): per (d, causal) the configuration `for_keys` picks
    // for each sequence length; the ladder at d = 128, not causal, at 4k and 16k.
    let mut runs: Vec<(String, Config, Vec<usize>)> = Vec::new();
    for &d in &dims {
        for causal in [false, true] {
            for c in Config::picks(In::BF16, d as u32, causal) {
                let s: Vec<usize> = seqs
                    .iter()
                    .copied()
                    .filter(|&s| Config::for_keys(In::BF16, d as u32, causal, s) == c)
                    .collect();
                if !s.is_empty() {
                    runs.push(("best".into(), c, s));
                }
            }
        }
    }
    if dims.contains(&128) {
        for (label, c) in Config::ladder(In::BF16, 128, false) {
            if c != Config::best(In::BF16, 128, false) {
                let s: Vec<usize> = seqs
                    .iter()
                    .copied()
                    .filter(|s| [4096, 16384].contains(s))
                    .collect();
                runs.push((label.into(), c, s));
            }
        }
    }
    if let Ok(extra) = std::env::var("ATTN_EXTRA") {
        for n in extra.split(',').filter(|n| !n.trim().is_empty()) {
            let c =
                Config::parse(n.trim()).ok_or(format!("ATTN_EXTRA: no configuration named {n}"))?;
            runs.push(("extra".into(), c, seqs.clone()));
        }
    }
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("no NVRTC ({e}): nothing to time");
            return Ok(true);
        }
    };
    // One configuration's cold compile: render + NVRTC, no cache; three of them, as the GPU
    // machine's CPU time varies by tens of percent from one compile to the next. The pick,
    // and the pick with its first block through the loop (`_fo`: one softmax in the kernel,
    // not two), in turns, each going first in turn (the process's first compile also starts
    // NVRTC).
    let best = Config::best(In::BF16, 128, false);
    let colds = [best, Config { fold: true, ..best }]
        .into_iter()
        .map(Plan::new)
        .collect::<Res<Vec<_>>>()?;
    let nocache = Compiler::with_config(JitConfig {
        cache: false,
        cache_dir: None,
        ..JitConfig::from_env()
    })?;
    let mut cold_s = vec![Vec::new(); colds.len()];
    let mut render_s = vec![Vec::new(); colds.len()];
    for round in 0..3 {
        let mut order: Vec<usize> = (0..colds.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let cold = &colds[i];
            let t0 = Instant::now();
            let src = cold.source()?;
            render_s[i].push(t0.elapsed().as_secs_f64());
            nocache.compile_source(&src, &kernel::options())?;
            cold_s[i].push(t0.elapsed().as_secs_f64());
        }
    }
    for ((cold, cold_s), render_s) in colds.iter().zip(&mut cold_s).zip(&mut render_s) {
        render_s.sort_by(f64::total_cmp);
        let first_s = cold_s[0];
        cold_s.sort_by(f64::total_cmp);
        println!(
            "one configuration ({}) compiles cold in {:.2} s on this machine (median of 3, \
             {:.2}-{:.2} s, the first {first_s:.2} s; render + NVRTC, no cache; the render {:.3} s)",
            cold.config, cold_s[1], cold_s[0], cold_s[2], render_s[1]
        );
    }
    if timeline_of.is_some() {
        runs.clear();
    }
    let plans = runs
        .iter()
        .map(|(_, c, _)| Plan::new(*c))
        .collect::<Res<Vec<_>>>()?;
    let built = compile::compile_all(compiler, plans);
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => Gpu::new()?,
        Err(why) => {
            println!("no GPU ({why}): compiled every configuration; nothing to time");
            return Ok(true);
        }
    };
    println!("{}", gpu.name);
    let mut rng = Rng::from_clock();
    if let Some(c) = timeline_of {
        let s = seqs.first().copied().unwrap_or(4096);
        return timeline(&gpu, compiler, c, s, &mut rng).map(|()| true);
    }
    println!("| ladder step | config | B | H | S | D | causal | ms | TFLOP/s |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut ok = true;
    let mut json = String::from("[");
    for ((label, c, seqs), b) in runs.iter().zip(built) {
        let b = b?;
        let loaded = Loaded::new(&gpu, &b)?;
        for &s in seqs {
            let d = c.d as usize;
            let shape = family_shape(s, d);
            let p = Problem::new(&gpu, shape, c.input, &mut rng)?;
            let mut out = Outputs::new(&gpu, &shape)?;
            out.poison(&gpu.stream)?;
            let launch = Launch::new(&gpu, &loaded, &p, &out)?;
            launch.run()?;
            gpu.stream.synchronize()?;
            let o = gpu.stream.clone_dtoh(&out.o)?;
            let lse = gpu.stream.clone_dtoh(&out.lse)?;
            let mut bad = Vec::new();
            let heads = shape.b * shape.h;
            for i in 0..16 {
                let (bh, r) = if i == 0 {
                    (heads - 1, s - 1)
                } else {
                    (
                        rng.below(heads as u64) as usize,
                        rng.below(s as u64) as usize,
                    )
                };
                let want = reference::reference_row(&p, c, bh, r);
                let at = (bh * s + r) * d;
                reference::check_row(
                    &want,
                    &o[at..at + d],
                    lse[bh * s + r],
                    c.input,
                    bh,
                    r,
                    &mut bad,
                );
            }
            if !bad.is_empty() {
                println!(
                    "| {label} | {c} | {} | {} | {s} | {d} | {} | WRONG: {} |",
                    shape.b, shape.h, c.causal, bad[0]
                );
                ok = false;
                continue;
            }
            for _ in 0..5 {
                launch.run()?;
            }
            gpu::warm(&gpu, &mut || {
                for _ in 0..LAUNCHES {
                    launch.run()?;
                }
                Ok(())
            })?;
            // Each sample: LAUNCHES launches back to back between one pair of events (the
            // host's launch gaps are not GPU time; the Python script times cuDNN the same way).
            let mut t = gpu::time(&gpu, reps, &mut || {
                for _ in 0..LAUNCHES {
                    launch.run()?;
                }
                Ok(())
            })?;
            let ms = gpu::median(&mut t) / LAUNCHES as f64;
            let tf = shape.flops(c.causal) / ms / 1e9;
            println!(
                "| {label} | {c} | {} | {} | {s} | {d} | {} | {ms:.3} | {tf:.0} |",
                shape.b, shape.h, c.causal
            );
            if json.len() > 1 {
                json.push(',');
            }
            let _ = write!(
                json,
                r#"{{"config":"{c}","b":{},"h":{},"s":{s},"d":{d},"causal":{},"dtype":"{}","tflops":{tf}}}"#,
                shape.b,
                shape.h,
                if c.causal { "true" } else { "false" },
                c.input.name()
            );
        }
    }
    json.push(']');
    if let Ok(path) = std::env::var("ATTN_RESULTS") {
        std::fs::write(&path, json)?;
    }
    Ok(ok)
}

/// The FlashAttention-3 paper's family at sequence length `s` and head dim `d`: B S = 16k
/// tokens, H D = 2048 (`run` checks 1 <= s <= 16384).
fn family_shape(s: usize, d: usize) -> Shape {
    Shape {
        b: 16384 / s,
        h: 2048 / d,
        hkv: 2048 / d,
        sq: s,
        sk: s,
        d,
    }
}

/// `ATTN_TIMELINE=NAME`: where NAME's warps wait. NAME compiled with the per-role timeline
/// (`CompileOptions::timeline`), launched at sequence length `s` (the family's shape) after
/// the warm-up, once more into a cleared buffer; prints the trace's sums and what a unit
/// boundary costs (`boundary`), and writes ATTN_TIMELINE_OUT when that variable names a file:
/// `*.json` the first 8 CTAs as a Chrome trace (Perfetto), else every event as CSV (block,
/// warp, pipeline, stage, pass, kind, start and duration in ns).
fn timeline(gpu: &Gpu, compiler: &Compiler, c: Config, s: usize, rng: &mut Rng) -> Res<()> {
    use tma::runtime::timeline::Timeline;
    let plan = Plan::new(c)?;
    let compiled = compiler.compile_source(&plan.source()?, &kernel::options().timeline(true))?;
    let loaded = Loaded::from_compiled(gpu, &plan, compiled)?;
    let shape = family_shape(s, c.d as usize);
    let p = Problem::new(gpu, shape, c.input, rng)?;
    let out = Outputs::new(gpu, &shape)?;
    let launch = Launch::new(gpu, &loaded, &p, &out)?;
    // A pass a key block (K, V) or unit (Q) of a CTA: the most of any CTA, with room.
    let bn = c.bn as usize;
    let units = shape.b * shape.h * c.query_blocks(s);
    let ctas = launch.config().grid.0 as usize;
    let passes = (units.div_ceil(ctas.max(1)) + 1) * s.div_ceil(bn) + 8;
    let passes = u32::try_from(passes).map_err(|_| format!("{passes} timeline passes"))?;
    let mut timeline = Timeline::attach(loaded.kernel.module(), launch.config(), passes)?;
    gpu::warm(gpu, &mut || launch.run())?;
    gpu.stream.synchronize()?;
    timeline.clear()?;
    launch.run()?;
    // read() waits for the launch.
    let trace = timeline.read()?;
    println!("timeline {c} at {shape}: {}", trace.stats());
    if trace.dropped > 0 {
        return Err(format!("timeline {c}: {} events found no slot", trace.dropped).into());
    }
    if let Some(b) = boundary(&trace, s.div_ceil(bn)).filter(|_| !c.causal && !c.split_tail) {
        println!(
            "  K released (a QK^T done), median over every consumer warp: a key block every {} ns \
             in a unit's loop; a unit's last block to the next unit's first {} ns, to its second \
             {} ns: a unit boundary costs {} ns ({:.2} blocks)",
            b.block,
            b.last_to_first,
            b.first_to_second,
            b.cost(),
            b.cost() as f64 / b.block as f64
        );
    }
    if let Ok(path) = std::env::var("ATTN_TIMELINE_OUT") {
        if path.ends_with(".json") {
            // Chrome trace / Perfetto: the first 8 CTAs (every CTA is too much for a viewer).
            std::fs::write(&path, trace.filter_blocks(|b| b < 8).chrome_json())?;
            return Ok(());
        }
        std::fs::write(&path, trace.csv())?;
    }
    Ok(())
}

/// Where a unit boundary's time goes, from the K pipeline's releases (each the end of a QK^T)
/// of every consumer warp that records: the medians of the intervals between consecutive
/// releases inside a unit's loop (blocks 2 on), from a unit's last block to the next unit's
/// first, and from that to its second (ns). Every unit has `blocks` key blocks (not causal, no
/// split tail).
struct Boundary {
    block: u64,
    last_to_first: u64,
    first_to_second: u64,
}

impl Boundary {
    /// What a boundary adds to the two intervals it spans, over two loop blocks.
    fn cost(&self) -> i64 {
        self.last_to_first as i64 + self.first_to_second as i64 - 2 * self.block as i64
    }
}

fn boundary(trace: &tma::runtime::timeline::Trace, blocks: usize) -> Option<Boundary> {
    use std::collections::BTreeMap;
    use tma::runtime::timeline::TimelineKind;
    let mut releases: BTreeMap<(u32, u32), Vec<(u32, u64)>> = BTreeMap::new();
    for e in trace
        .events
        .iter()
        .filter(|e| e.kind == TimelineKind::Release && trace.pipeline_name(e.pipeline) == "k")
    {
        releases
            .entry((e.block, e.warp))
            .or_default()
            .push((e.pass, e.start_ns));
    }
    let (mut inside, mut across, mut second) = (Vec::new(), Vec::new(), Vec::new());
    for mut r in releases.into_values() {
        r.sort_unstable();
        for w in r.windows(2) {
            let (next, dt) = (w[1].0 as usize % blocks, w[1].1.saturating_sub(w[0].1));
            match next {
                0 => across.push(dt),
                1 => second.push(dt),
                _ => inside.push(dt),
            }
        }
    }
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    Some(Boundary {
        block: median(inside)?,
        last_to_first: median(across)?,
        first_to_second: median(second)?,
    })
}
