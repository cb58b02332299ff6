//! Attention forward written with tma (issue 21): O = softmax(Q K^T / sqrt(d)) V per (batch,
//! head), bf16 or f16 in and out, fp32 accumulation, head dims 64, 128 and 256, causal or not,
//! any sequence lengths (ragged ends: TMA fills loads past the end with zeros, the scores of
//! missing keys are masked, the stores are clipped), GQA (fewer key/value heads than query
//! heads), and the log-sum-exp of every row (f32, natural log).
//!
//! The kernel (attn.cu) is FlashAttention-3's design written with tma's pieces: Q, K and V are
//! 128B-swizzled wgmma operand tiles (V MN-major: P V reads it as B through the transpose bit),
//! Q is loaded once per work unit on its own pipeline, K and V on separate pipelines so QK^T
//! starts before V lands; a producer warpgroup and two consumer warpgroups (three at head dim
//! 64, as FlashAttention-3; setmaxnreg); the
//! online softmax on the accumulator fragment (tma's row max / exp2 / row sum / rescale helpers,
//! which know the fragment's layout); P V with P from registers (tma's accumulator -> A
//! fragment conversion and register-A wgmma); ping-pong of the consumers through named barriers
//! of the warp roles; QK^T of the next block issued with this block's P V, and the softmax run
//! under that P V (its wait kept after the softmax: `tma_wgmma_wait_group_after`); at head dim
//! 128 and 256 a lazy rescale (`tma_wgmma_row_max_lazy`), with P in two register buffers at
//! 256; O stored by TMA through its tile (at head dim 256 staged in the consumer's own rows of
//! Q's stage); persistent grids, a causal one walking a table the host balances by the units'
//! key blocks; at head dim 64 the grid's last units cut by key blocks between CTAs (a table the
//! host plans, pieces merged by a second kernel), so that no CTA runs a unit more than the
//! others. Each configuration (kernel.rs) is one kernel plan, from which both the source's
//! shared-memory layout and the launch come.
//!
//! Without a GPU: renders and compiles every configuration, checks each plan on the CPU model
//! (Q, K and V loaded by the TMA model and read back through the kernel's descriptors), and
//! says why it stops. With a GPU: every configuration on ragged, GQA and larger problems (and
//! keys that score higher along the sequence, so rows keep moving their max), launched twice,
//! O, LSE and the cut units' partials poisoned (NaN) before the second, checked against an f64
//! reference (every row of the small problems, sampled rows of the large), then timed once
//! (`--reps`). The comparison with cuDNN and
//! FlashAttention-2 is the benchmark's (`cargo bench --bench attention`, BENCHMARKS.md).
//!
//! Run: `cargo run --release --example 06-attention -- [--configs all|best|ladder|NAME,...]
//! [--d 64,128,256] [--reps N]` (`ATTN_DEBUG=1`: debug waits and device checks;
//! `ATTN_QUICK=1`: the first problem of each configuration only).

#[allow(dead_code)]
#[path = "../05-gemm/compile.rs"]
mod compile;
mod cpu_check;
#[allow(dead_code)]
mod gpu;
#[allow(dead_code)]
mod kernel;
mod reference;
#[allow(dead_code)]
#[path = "../05-gemm/rng.rs"]
mod rng;

use std::process::ExitCode;

use gpu::{Gpu, Launch, Loaded, Outputs, Problem, Shape};
use kernel::{Config, In, Plan, Res, HEADROOM_LOG2};
use rng::Rng;
use tma::runtime::Compiler;

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

struct Args {
    configs: String,
    dims: Vec<u32>,
    reps: usize,
}

fn args() -> Res<Args> {
    let mut a = Args {
        configs: "all".into(),
        dims: vec![64, 128, 256],
        reps: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--configs" => a.configs = v,
            "--d" => {
                a.dims = v
                    .split(',')
                    .map(|x| x.trim().parse().map_err(|_| format!("--d: {x}")))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => a.reps = v.parse().map_err(|_| format!("--reps: {v}"))?,
            _ => return Err(format!("unknown argument {k}").into()),
        }
    }
    Ok(a)
}

/// The configurations `--configs` names: `all` (the ladder in bf16 and every pick of
/// `Config::for_keys` in both types, causal and not, each head dim), `best` (those picks),
/// `ladder`, or names (`ov_d128_n128_s2_bf16_causal`).
fn configs(a: &Args) -> Res<Vec<Config>> {
    let mut v = Vec::new();
    for &d in &a.dims {
        for causal in [false, true] {
            match a.configs.as_str() {
                "all" | "ladder" => {
                    v.extend(
                        Config::ladder(In::BF16, d, causal)
                            .into_iter()
                            .map(|(_, c)| c),
                    );
                    if a.configs == "all" {
                        v.extend(Config::picks(In::BF16, d, causal).into_iter().skip(1));
                        v.extend(Config::picks(In::F16, d, causal));
                        // The first block through the loop (not picked: the faster cold
                        // compile's configuration, BENCHMARKS.md).
                        v.push(Config {
                            fold: true,
                            ..Config::best(In::BF16, d, causal)
                        });
                        // Pairs on 2-CTA clusters (not picked): the padded query block of an
                        // odd count is checked too.
                        if d == 128 && !causal {
                            v.push(Config {
                                cluster: true,
                                ..Config::best(In::BF16, d, causal)
                            });
                        }
                    }
                }
                "best" => {
                    v.extend(Config::picks(In::BF16, d, causal));
                    v.extend(Config::picks(In::F16, d, causal));
                }
                _ => {}
            }
        }
    }
    if v.is_empty() {
        for n in a.configs.split(',') {
            v.push(Config::parse(n.trim()).ok_or(format!("no configuration named {n}"))?);
        }
    }
    Ok(v)
}

/// The problems every configuration is checked on (head dim d) and their keys' growth
/// (`Problem::with_key_growth`): ragged lengths, GQA, a query length unlike the key length,
/// one key, one larger problem (sampled rows), and keys that score higher along the sequence
/// (rows keep moving their max: the lazy rescale's taken path).
fn problems(d: usize) -> Vec<(Shape, f32)> {
    let s = |b, h, hkv, sq, sk| Shape {
        b,
        h,
        hkv,
        sq,
        sk,
        d,
    };
    vec![
        (s(2, 4, 2, 200, 200), 0.0),
        (s(1, 2, 1, 333, 517), 0.0),
        (s(1, 3, 3, 130, 1), 0.0),
        (s(2, 8, 8, 2048, 2048), 0.0),
        (s(1, 2, 1, 1100, 1100), 8.0),
        // More units than the H100's 132 CTAs at every head dim, so that `split_tail` cuts
        // some: pieces whose last block is masked (2000 keys), GQA, and maxima that move.
        (s(2, 8, 4, 2048, 2000), 8.0),
    ]
}

fn run() -> Res<bool> {
    let a = args()?;
    let configs = configs(&a)?;
    let plans = configs
        .iter()
        .map(|&c| Plan::new(c))
        .collect::<Res<Vec<Plan>>>()?;
    // The CPU proofs first: every operand read back through the kernel's descriptors.
    let mut rng = Rng::from_clock();
    let mut elements = 0;
    for p in &plans {
        elements += cpu_check::check_plan(p, &mut rng)?;
    }
    println!(
        "CPU model: Q, K and V of {} configurations read back through their descriptors ({elements} elements)",
        plans.len()
    );
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!(
                "no NVRTC ({e}): every plan checked on the CPU model; stopping before compiling"
            );
            return Ok(true);
        }
    };
    let built = compile::compile_all(compiler, plans);
    let mut ok = true;
    let mut ready = Vec::new();
    for (c, b) in configs.iter().zip(built) {
        match b {
            Ok(b) => {
                // ptxas's resources: a spilling configuration is slow, and says so here; a
                // pick that spills fails the run (its registers are what the pick was measured
                // with), unless built with the device checks (ATTN_DEBUG=1), whose registers
                // are not the measured build's.
                let res = match b.compiled.resources("attn") {
                    Ok(r) => {
                        let spilled = r.spill_stores + r.spill_loads;
                        let pick = Config::picks(c.input, c.d, c.causal).contains(c);
                        if spilled > 0 && pick && !b.compiled.debug_waits {
                            println!("{c}: a pick spills {spilled} B");
                            ok = false;
                        }
                        format!("{} registers, {spilled} B spilled", r.registers)
                    }
                    Err(_) => "no ptxas report".into(),
                };
                println!("compiled {c} in {:.2} s ({:?}): {res}", b.seconds, b.origin);
                // ptxas's performance advisories (C7520: wgmma serialized) would cost half the
                // speed.
                for w in b.compiled.performance_losses() {
                    println!("  ptxas: {w}");
                }
                ready.push(b);
            }
            Err(e) => {
                println!("{c}: FAILED to build: {e}");
                ok = false;
            }
        }
    }
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => Gpu::new()?,
        Err(why) => {
            println!("no GPU run: {why}");
            return Ok(ok);
        }
    };
    println!("GPU: {}", gpu.name);
    let quick = std::env::var("ATTN_QUICK").is_ok_and(|v| v == "1");
    for b in &ready {
        let c = b.plan.config;
        let loaded = Loaded::new(&gpu, b)?;
        let shapes = problems(c.d as usize);
        let shapes = if quick { &shapes[..1] } else { &shapes[..] };
        for &(shape, growth) in shapes {
            let p = Problem::with_key_growth(&gpu, shape, c.input, &mut rng, growth)?;
            let mut out = Outputs::new(&gpu, &shape)?;
            let launch = Launch::new(&gpu, &loaded, &p, &out)?;
            // Two launches, the second checked, the split tail's partials poisoned before it: a
            // merge that reads a slot its launch did not write is wrong here, not quietly right
            // from the launch before.
            launch.run()?;
            out.poison(&gpu.stream)?;
            launch.poison_work(&gpu.stream)?;
            launch.run()?;
            gpu.stream.synchronize()?;
            let o = gpu.stream.clone_dtoh(&out.o)?;
            let lse = gpu.stream.clone_dtoh(&out.lse)?;
            let heads = shape.b * shape.h;
            let all_rows = heads * shape.sq <= 4096;
            let rows: Vec<(usize, usize)> = if all_rows {
                (0..heads)
                    .flat_map(|bh| (0..shape.sq).map(move |r| (bh, r)))
                    .collect()
            } else {
                // The first and last rows of every head, and 256 random ones.
                let mut v: Vec<(usize, usize)> = (0..heads)
                    .flat_map(|bh| [(bh, 0), (bh, shape.sq - 1)])
                    .collect();
                for _ in 0..256 {
                    v.push((
                        rng.below(heads as u64) as usize,
                        rng.below(shape.sq as u64) as usize,
                    ));
                }
                v
            };
            let mut bad = Vec::new();
            for &(bh, r) in &rows {
                let want = reference::reference_row(&p, &c, bh, r);
                let at = (bh * shape.sq + r) * shape.d;
                reference::check_row(
                    &want,
                    &o[at..at + shape.d],
                    lse[bh * shape.sq + r],
                    c.input,
                    bh,
                    r,
                    &mut bad,
                );
                if bad.len() > 8 {
                    break;
                }
            }
            let mut line = format!(
                "{c} {shape}: {} rows {}",
                rows.len(),
                if bad.is_empty() { "OK" } else { "WRONG" }
            );
            // Growing keys must take the lazy rescale's path, or the check proves nothing there.
            if growth > 0.0 {
                let head = HEADROOM_LOG2 as f64;
                let moving = rows
                    .iter()
                    .filter(|&&(bh, r)| reference::moves_past_first_block(&p, &c, bh, r, head))
                    .count();
                line += &format!(" ({moving} move their max past 2^{head} after block 0)");
                if moving == 0 {
                    bad.push(format!("{shape}: no row moves its max past the headroom"));
                }
            }
            if bad.is_empty() && a.reps > 0 && !all_rows {
                let mut t = gpu::time(&gpu, a.reps, &mut || launch.run())?;
                let ms = gpu::median(&mut t);
                line += &format!(
                    ", {:.3} ms, {:.0} TFLOP/s",
                    ms,
                    shape.flops(c.causal) / ms / 1e9
                );
            }
            println!("{line}");
            for m in &bad {
                println!("    {m}");
            }
            ok &= bad.is_empty();
        }
    }
    Ok(ok)
}

/// The configuration names round-trip, the picks are the measured ones, and a plan refuses
/// what the kernel cannot run (`cargo test --example 06-attention`, no GPU).
#[cfg(test)]
mod tests {
    use super::kernel::{Config, In, Kind, OStore, Plan};
    use tma::runtime::Compiler;

    /// cuobjdump's SASS of the configuration, compiled as the example does; None without NVRTC
    /// or cuobjdump (a failure under CI=true).
    fn sass_of(test: &str, c: Config) -> Option<String> {
        tma_test_support::skip::require_nvrtc_or_skip(test)?;
        let cuobjdump = tma_test_support::skip::require_tool_or_skip(test, "cuobjdump")?;
        let src = Plan::new(c).expect("plans").source().expect("renders");
        let built = Compiler::global()
            .expect("NVRTC is there")
            .compile_source(&src, &super::kernel::options())
            .expect("compiles");
        Some(tma_test_support::skip::sass(
            &cuobjdump,
            &built.cubin,
            &format!("06-{c}"),
        ))
    }

    /// MUFU.EX2s of each overlapped block between the wait for its QK^T (`WARPGROUP.DEPBAR.LE
    /// gsb0, 0x1`) and the wait for the P V before it (`..., 0x0`), from the configuration's
    /// SASS ([`sass_of`]).
    fn exps_under_p_v(c: Config) -> Option<Vec<usize>> {
        let sass = sass_of("the_late_wait_keeps_the_softmax_under_p_v", c)?;
        let mut blocks = Vec::new();
        let mut open: Option<usize> = None;
        for line in sass.lines() {
            if line.contains("DEPBAR.LE gsb0, 0x1") {
                open = Some(0);
            } else if line.contains("DEPBAR.LE gsb0, 0x0") {
                blocks.extend(open.take());
            } else if line.contains("MUFU.EX2") {
                if let Some(n) = open.as_mut() {
                    *n += 1;
                }
            }
        }
        Some(blocks)
    }

    /// The late wait keeps a block's exponentials (BN / 2 a thread) under the P V before it;
    /// with a plain wait ptxas hoists it above them (the reason `wait_late` exists: if a
    /// ptxas stops doing so, this says so).
    #[test]
    fn the_late_wait_keeps_the_softmax_under_p_v() {
        for c in [
            Config::best(In::BF16, 128, false),
            Config::best(In::BF16, 256, true),
        ] {
            assert!(c.wait_late, "{c}");
            let Some(late) = exps_under_p_v(c) else {
                return;
            };
            let half = c.bn as usize / 2;
            assert!(
                !late.is_empty() && late.iter().all(|&n| n >= half),
                "{c}: {late:?}"
            );
            let plain = Config {
                wait_late: false,
                ..c
            };
            let early = exps_under_p_v(plain).expect("compiled above");
            assert!(early.iter().all(|&n| n < half), "{plain}: {early:?}");
        }
    }

    /// Uniform-datapath instructions other than UMOV between the wgmmas of each QK^T
    /// (`HGMMA.64x<BN>x16` from the one that starts with `RZ` to the one that closes the group,
    /// `gsb0`), from the configuration's SASS ([`sass_of`]).
    fn uniform_ops_in_qk(c: Config) -> Option<Vec<usize>> {
        let sass = sass_of(
            "the_first_block_through_the_loop_keeps_qs_descriptors_out_of_it",
            c,
        )?;
        let qk = format!("HGMMA.64x{}x16", c.bn);
        let mut runs = Vec::new();
        let mut open: Option<usize> = None;
        for line in sass.lines() {
            let Some(code) = line.split("*/").nth(1).map(str::trim) else {
                continue;
            };
            let op = code
                .split_whitespace()
                .find(|w| !w.starts_with('@'))
                .unwrap_or("");
            if code.contains(&qk) && code.contains("RZ, !UPT") {
                open = Some(0);
            } else if code.contains(&qk) && code.contains("gsb0") {
                runs.extend(open.take());
            } else if op.starts_with('U') && !op.starts_with("UMOV") {
                if let Some(n) = open.as_mut() {
                    *n += 1;
                }
            }
        }
        Some(runs)
    }

    /// With the first block through the loop, NVVM computed Q's descriptors inside the loop
    /// and ptxas put their arithmetic between the QK^T wgmmas (3 % slower, BENCHMARKS.md);
    /// made once (`tma_wgmma_a_descs`), the loop's QK^T has no more of it than the peeled
    /// pick's loop (11 against 14 here; 25 without them).
    #[test]
    fn the_first_block_through_the_loop_keeps_qs_descriptors_out_of_it() {
        let pick = Config::best(In::BF16, 128, false);
        let Some(peeled) = uniform_ops_in_qk(pick) else {
            return;
        };
        let fold = Config { fold: true, ..pick };
        let folded = uniform_ops_in_qk(fold).expect("compiled above");
        let least = peeled.iter().min().copied().expect("the pick has a QK^T");
        assert!(
            !folded.is_empty() && folded.iter().all(|&n| n <= least + 2),
            "{fold}: {folded:?} uniform instructions in its QK^T, the pick's loop {least}"
        );
    }

    /// The split tail's plan covers every key block of every unit exactly once, lists each
    /// piece of a cut unit once with the slot its CTA writes, and leaves no CTA more than one
    /// range's blocks over the whole units' rounds.
    #[test]
    fn split_plans_cover_every_block_once_and_balance_the_tail() {
        use super::kernel::{WorkPlan, MAX_PIECES, TAIL_CTAS_PER_UNIT};
        for (units, grid, nb) in [
            (2048, 132, 29),
            (2048, 132, 114),
            (256, 132, 15),
            (176, 132, 16),
            (136, 132, 3),
            (264, 132, 7),
            (2100, 132, 1),
            (1400, 132, 33),
        ] {
            let split = if units > grid { units % grid } else { 0 };
            let plan = WorkPlan::split_tail(units, grid, nb, split).expect("a plan");
            let mut seen = vec![0u32; units * nb];
            let mut load = vec![0usize; grid];
            let mut listed = Vec::new();
            for g in 0..grid {
                let mut slots = Vec::new();
                for r in 0..plan.nitems[g] as usize {
                    let [unit, jb, je, piece] = plan.items[g * plan.stride + r];
                    let je = if je < 0 { nb as i32 } else { je };
                    for j in jb..je {
                        seen[unit as usize * nb + j as usize] += 1;
                    }
                    load[g] += (je - jb) as usize;
                    if piece >= 0 {
                        assert_eq!(
                            piece as usize / 2,
                            unit as usize - (units - split),
                            "{units}/{grid}/{nb}"
                        );
                        slots.push(piece & 1);
                        listed.push((piece as usize / 2, g * 2 + (piece & 1) as usize));
                    }
                }
                let n = slots.len();
                slots.sort();
                slots.dedup();
                assert!(
                    n <= 2 && slots.len() == n,
                    "CTA {g}: slots {slots:?} of {n} pieces"
                );
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{units}/{grid}/{nb}: a block run {:?} times",
                seen.iter().find(|&&n| n != 1)
            );
            for t in 0..split {
                let row = &plan.pieces[t * (MAX_PIECES + 1)..(t + 1) * (MAX_PIECES + 1)];
                let mut want: Vec<usize> = listed
                    .iter()
                    .filter(|(u, _)| *u == t)
                    .map(|&(_, gs)| gs)
                    .collect();
                let mut got: Vec<usize> = row[1..=row[0] as usize]
                    .iter()
                    .map(|&v| v as usize)
                    .collect();
                want.sort();
                got.sort();
                assert_eq!(got, want, "{units}/{grid}/{nb}: unit {t}'s pieces");
            }
            let (lo, hi) = (
                load.iter().min().copied().unwrap_or(0),
                load.iter().max().copied().unwrap_or(0),
            );
            let whole = (units - split) / grid * nb;
            let tail_ctas = grid.min(split * TAIL_CTAS_PER_UNIT).max(1);
            assert!(
                hi <= whole + (split * nb).div_ceil(tail_ctas),
                "{units}/{grid}/{nb}: {lo}..{hi}"
            );
        }
        // A plan with no split is the round-robin walk; a split of as many units as CTAs is refused.
        let plain = WorkPlan::split_tail(100, 132, 8, 0).expect("a plan");
        assert_eq!(plain.nitems.iter().sum::<i32>(), 100);
        assert!(WorkPlan::split_tail(300, 132, 8, 132).is_err());
    }

    /// A causal persistent grid's balanced walk runs every unit once, each CTA's units in
    /// order (the CTAs running at once share a few heads), and leaves no CTA more than one
    /// unit's work past the mean; the round-robin walk it replaces gave a quarter of the CTAs
    /// the last query block of every head.
    #[test]
    fn balanced_walks_run_every_unit_once_and_end_together() {
        use super::kernel::{WorkPlan, UNIT_BOUNDARY_BLOCKS};
        let grid = 132;
        for (name, sq, sk) in [
            ("ov_d64_n128_s3_p_bf16_causal", 512, 512),
            ("ov_d64_n128_s3_p_bf16_causal", 1024, 1024),
            ("ov_d64_n128_s2_p_c3_bf16_causal", 2048, 2048),
            ("ov_d64_n128_s2_p_c3_bf16_causal", 2048, 2000),
            ("ov_d128_n128_s2_p_wl_bf16_causal", 16384, 16384),
            ("ov_d256_n80_s2_p_oq_lz_db_wl_bf16_causal", 4096, 4096),
            ("ov_d128_n128_s2_p_wl_bf16_causal", 200, 200),
            ("ov_d128_n128_s2_p_wl_bf16_causal", 333, 517),
        ] {
            let c = Config::parse(name).expect("a name");
            let heads = (16384 / sq).max(1) * 16;
            let qb = c.query_blocks(sq);
            let blocks: Vec<usize> = (0..qb * heads).map(|u| c.unit_blocks(u, qb, sk)).collect();
            let cost = |b: usize| b + UNIT_BOUNDARY_BLOCKS;
            let grid = grid.min(blocks.len());
            let plan = WorkPlan::balanced(&blocks, grid).expect("a plan");
            let mut seen = vec![0u32; blocks.len()];
            let mut load = vec![0usize; grid];
            for (g, l) in load.iter_mut().enumerate() {
                let row = &plan.items[g * plan.stride..g * plan.stride + plan.nitems[g] as usize];
                assert!(
                    row.windows(2).all(|w| w[0][0] < w[1][0]),
                    "{name} {sq}: CTA {g} out of order"
                );
                for &[u, jb, je, piece] in row {
                    assert_eq!((jb, je, piece), (0, -1, -1), "{name} {sq}: a whole unit");
                    seen[u as usize] += 1;
                    *l += cost(blocks[u as usize]);
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{name} {sq}: a unit run twice or never"
            );
            let total: usize = load.iter().sum();
            let most = blocks.iter().map(|&b| cost(b)).max().unwrap_or(0);
            let hi = load.iter().max().copied().unwrap_or(0);
            assert!(
                hi <= total.div_ceil(grid) + most,
                "{name} {sq}: {hi} against a mean of {}",
                total / grid
            );
            // The round-robin walk's busiest CTA, for the record of what this replaces.
            let rr = (0..grid)
                .map(|g| {
                    (g..blocks.len())
                        .step_by(grid)
                        .map(|u| cost(blocks[u]))
                        .sum::<usize>()
                })
                .max()
                .unwrap_or(0);
            assert!(hi <= rr, "{name} {sq}: {hi} against round-robin's {rr}");
        }
        // 4 query blocks a head on 132 CTAs: round-robin gives CTA 0 31 units of 4 blocks.
        let c = Config::parse("ov_d64_n128_s3_p_bf16_causal").expect("a name");
        let blocks: Vec<usize> = (0..4096).map(|u| c.unit_blocks(u, 4, 512)).collect();
        assert_eq!(&blocks[..5], &[4, 3, 2, 1, 4]);
        // Keys short of a block's last row, and more keys than query rows (attn_unit's count:
        // the keys up to the block's last row, at most Sk, in whole key blocks).
        let c3 = Config::parse("ov_d64_n128_s2_p_c3_bf16_causal").expect("a name");
        assert_eq!(
            (0..11)
                .map(|u| c3.unit_blocks(u, 11, 2000))
                .collect::<Vec<_>>(),
            [16, 15, 14, 12, 11, 9, 8, 6, 5, 3, 2]
        );
        let c2 = Config::parse("ov_d128_n128_s2_p_wl_bf16_causal").expect("a name");
        assert_eq!(
            (0..3)
                .map(|u| c2.unit_blocks(u, 3, 517))
                .collect::<Vec<_>>(),
            [3, 2, 1]
        );
        let plan = WorkPlan::balanced(&blocks, grid).expect("a plan");
        let most = (0..grid)
            .map(|g| {
                plan.items[g * plan.stride..g * plan.stride + plan.nitems[g] as usize]
                    .iter()
                    .map(|it| blocks[it[0] as usize])
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        assert!(
            most <= 82,
            "busiest CTA: {most} key blocks (mean 77.6, a unit <= 4; round-robin 124)"
        );
        assert!(WorkPlan::balanced(&blocks, 0).is_err());
    }

    #[test]
    fn names_round_trip_and_head_dim_64_takes_three_consumers() {
        let mut all = Vec::new();
        for d in [64, 128, 256] {
            for causal in [false, true] {
                all.extend(
                    Config::ladder(In::BF16, d, causal)
                        .into_iter()
                        .map(|(_, c)| c),
                );
                all.extend(Config::picks(In::F16, d, causal));
            }
        }
        let best = Config::best(In::BF16, 64, false);
        all.push(Config { poly: 2, ..best });
        all.push(Config { lazy: true, ..best });
        // Every flag at once.
        all.push(Config {
            persistent: true,
            o: OStore::Direct,
            release_one: true,
            poly: 2,
            lazy: true,
            p2: true,
            wait_late: true,
            split_tail: true,
            fold: true,
            ..best
        });
        all.push(Config { fold: true, ..best });
        all.push(Config {
            lazy: true,
            p2: true,
            ..best
        });
        all.push(Config {
            split_tail: false,
            cluster: true,
            ..Config::best(In::BF16, 128, false)
        });
        all.push(Config {
            poly: 2,
            lazy: true,
            nc: 2,
            ..best
        });
        all.push(Config {
            poly: 3,
            nc: 2,
            ..best
        });
        all.push(Config {
            o: OStore::InQ,
            ..Config::best(In::BF16, 128, true)
        });
        for c in all {
            assert_eq!(Config::parse(&c.name()), Some(c), "{}", c.name());
        }
        assert_eq!(Config::parse("ov_d64_n128_s3_p_e9_bf16"), None);
        // Head dim 256 stages O in Q's rows; O staged in Q takes the overlap kind and no split
        // tail (a piece of a split unit runs no epilogue, so Q would never go back).
        assert_eq!(Config::best(In::BF16, 256, false).o, OStore::InQ);
        let oq = Config {
            o: OStore::InQ,
            ..best
        };
        let refused = |c: Config| match Plan::new(c) {
            Ok(_) => panic!("{c}: planned"),
            Err(e) => assert!(e.to_string().contains("(_oq)"), "{c}: {e}"),
        };
        assert!(oq.split_tail);
        refused(oq);
        for kind in [Kind::Wg1, Kind::Ws, Kind::PingPong] {
            refused(Config {
                kind,
                split_tail: false,
                p2: false,
                wait_late: false,
                ..oq
            });
        }
        assert!(Plan::new(Config {
            split_tail: false,
            ..oq
        })
        .is_ok());
        // The picks' sources say how O leaves and how a CTA walks its units.
        let defines = |c: Config| {
            let src = Plan::new(c).expect("plans").source().expect("renders");
            let text = src.text().to_string();
            ["ATTN_O_TMA", "ATTN_O_IN_Q", "ATTN_TABLE", "ATTN_SPLIT"]
                .map(|m| text.contains(&format!("#define {m} 1\n")))
        };
        assert_eq!(
            defines(Config::best(In::BF16, 256, false)),
            [false, true, false, false]
        );
        assert_eq!(
            defines(Config::best(In::BF16, 128, true)),
            [true, false, true, false]
        );
        assert_eq!(defines(best), [true, false, true, true]);
        assert_eq!(
            defines(Config::best(In::BF16, 128, false)),
            [true, false, false, false]
        );
        for causal in [false, true] {
            let c = Config::for_keys(In::BF16, 64, causal, 4096);
            assert_eq!((c.nc, c.bm(), c.bn), (3, 192, 128), "{c}");
            assert!(c.name().contains("_c3"), "{c}");
        }
        // Short causal heads keep two consumers; the ladder's first step has one.
        assert_eq!(Config::for_keys(In::BF16, 64, true, 1024).consumers(), 2);
        assert_eq!(Config::for_keys(In::BF16, 64, true, 2048).consumers(), 3);
        assert_eq!(Config::for_keys(In::BF16, 128, false, 4096).consumers(), 2);
        let wg1 = Config {
            kind: Kind::Wg1,
            ..best
        };
        assert_eq!(wg1.consumers(), 1);
    }

    #[test]
    fn cluster_pairs_take_even_heads_and_refuse_what_they_cannot_pair() {
        let x2 = Config {
            cluster: true,
            ..Config::best(In::BF16, 128, false)
        };
        // 2000 rows are 16 query blocks of 128; 2100 are 17, rounded up to 18 for the pairs.
        assert_eq!(x2.query_blocks(2000), 16);
        assert_eq!(x2.query_blocks(2100), 18);
        assert_eq!(
            Config {
                cluster: false,
                ..x2
            }
            .query_blocks(2100),
            17
        );
        let src = Plan::new(x2).expect("plans").source().expect("renders");
        assert!(src.text().contains("#define ATTN_CLUSTER 1"), "{x2}");
        for bad in [
            Config { causal: true, ..x2 },
            Config {
                split_tail: true,
                ..x2
            },
            Config {
                kind: Kind::Wg1,
                wait_late: false,
                ..x2
            },
        ] {
            let e = Plan::new(bad).err().expect("refused").to_string();
            assert!(e.contains("2-CTA clusters (_x2)"), "{bad}: {e}");
        }
        // Head dim 64's K tile is one box a call: nothing to share between two CTAs.
        let e = Plan::new(Config {
            cluster: true,
            split_tail: false,
            ..Config::best(In::BF16, 64, false)
        })
        .err()
        .expect("refused")
        .to_string();
        assert!(e.contains("head dim 128 or 256"), "{e}");
    }

    #[test]
    fn three_consumer_plans_render_and_four_are_refused() {
        for c in Config::picks(In::BF16, 64, true) {
            let src = Plan::new(c).expect("plans").source().expect("renders");
            let nc = if c.nc == 3 {
                "#define ATTN_NC 3"
            } else {
                "#define ATTN_NC 2"
            };
            assert!(src.text().contains(nc), "{c}");
        }
        let four = Config {
            nc: 4,
            ..Config::best(In::BF16, 64, false)
        };
        let e = Plan::new(four)
            .err()
            .expect("4 consumers refused")
            .to_string();
        assert!(e.contains("4 consumer warpgroups (2 or 3)"), "{e}");
        let pp_db = Config {
            kind: Kind::PingPong,
            p2: true,
            ..Config::best(In::BF16, 128, false)
        };
        let e = Plan::new(pp_db)
            .err()
            .expect("two P buffers refused outside ov_")
            .to_string();
        assert!(
            e.contains("the late wait (_wl) are the overlap kind's"),
            "{e}"
        );
    }
}
