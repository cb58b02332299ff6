//! A grouped GEMM for mixture-of-experts, written with tma (issue 26): G groups (experts), group
//! g multiplying its routed rows of A (`rows[g]` of them, a device array the host never reads
//! for the launch: zeros included) by its own weights B_g, D_g = A_g * B_g^T, bf16 in and out,
//! fp32 accumulation. The kernel is examples/05-gemm's (its tiles, pipeline, wgmma operands,
//! warp roles and kernel plan) with the grouped schedule (`GEMM_GROUPED`, `Plan::grouped`): a
//! persistent CTA walks tiles of every group, numbered group after group (each thread walks the
//! row counts once, forward: no shared memory); A's rows are contiguous (one map over all routed
//! rows), B is one [G * N][K] map, and D's stores go through each consumer's own copy of D's
//! map whose rows dim is moved to the current group's end on the device (tma's map update:
//! drain, replace, release, acquire; docs/MAP_UPDATE.md), so a tile that runs past its group
//! is clipped there. The consumers share each tile (`ws_`, BM = 128 or 256: 64 or 128 rows
//! each) or own whole tiles in turn (`pp_`, ping-pong: one consumer's epilogue under the
//! other's mainloop, for short K and small groups).
//!
//! Without a GPU: renders and NVRTC-compiles every configuration and says why it stops. With
//! one: every configuration on uniform and skewed routing (empty groups included) for 8, 128
//! and 256 groups, D poisoned (NaN) first, against a loop of cuBLAS GEMMs (every element) and
//! exact f64 samples (every group's first and last rows among them). Timing against the cuBLAS
//! loop and torch._grouped_mm: `cargo bench --bench grouped_gemm` and
//! benches/grouped_gemm_torch.py (BENCHMARKS.md).
//!
//! The weight gradient (issue 26's ragged K, `wgrad.rs`): for each group g of tokens[g] tokens
//! (device counts, zeros allowed), dW_g[N][K] = dY_g^T X_g, the same kernel with `GEMM_WGRAD`:
//! dY and X are wgmma's MN-major A and B over the tokens, through per-group maps of both that a
//! prologue kernel (`gemm_wgrad_maps`, one thread a group) builds on the device before each
//! launch and the producer only acquires (docs/MAP_UPDATE.md says why), so each group's
//! k-loop stops at its own last token (TMA zero-fills the rest of the last block); an empty
//! group loads nothing and stores zeros. The prologue also ranks the groups by tokens, and
//! each CTA's producer claims its next tile at run time (a global counter, longest groups
//! first) and hands it to its consumers through the plan's work queue
//! (`tma::pipeline::WorkQueue`), so a CTA of short tiles takes more of them (a cluster's CTAs,
//! which must take the same tiles, walk them in a fixed snake). Checked after the forward: dW
//! poisoned (NaN), every element against a loop of cuBLAS GEMMs (memset zeros for empty groups), empty groups exactly
//! zero, exact f64 samples (every group's corners among them) under example 05's proven bound,
//! and where an element disagrees with cuBLAS, its exact sum under that bound;
//! uniform and skewed routing, 8 and 128 groups, long groups (the ring goes round many times a
//! group), ragged N and K, an all-empty problem; bf16 and f32 out.
//!
//! Run: `cargo run --release --example 08-grouped-gemm` (`--wgrad`: the weight gradient only;
//! `GROUPED_QUICK=1`: the first problem of each only, for compute-sanitizer).

#[allow(dead_code)]
#[path = "../05-gemm/check.rs"]
mod check;
#[allow(dead_code)]
#[path = "../05-gemm/compile.rs"]
mod compile;
#[allow(dead_code)]
#[path = "../05-gemm/cublas.rs"]
mod cublas;
#[allow(dead_code)]
#[path = "../05-gemm/gpu.rs"]
mod gpu;
#[allow(dead_code)]
mod grouped;
#[allow(dead_code)]
#[path = "../05-gemm/kernel.rs"]
mod kernel;
#[allow(dead_code)]
#[path = "../05-gemm/rng.rs"]
mod rng;
#[allow(dead_code)]
mod wgrad;

use std::process::ExitCode;

use compile::Built;
use gpu::Gpu;
use grouped::{Launch, Loaded, Problem, Routing};
use kernel::{In, Out, Plan, Res};
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

/// The plans that fit, each said; the ones that do not, with the reason.
fn valid(what: &str, plans: Vec<Res<Plan>>) -> Vec<Plan> {
    let mut v = Vec::new();
    for p in plans {
        match p {
            Ok(p) => {
                println!(
                    "{}: {what} plan, block {} threads, {} B of dynamic shared memory",
                    p.config,
                    p.kernel.launch().block[0],
                    p.kernel.launch().dynamic_smem_bytes
                );
                v.push(p);
            }
            Err(e) => println!("not built: {e}"),
        }
    }
    v
}

fn run() -> Res<bool> {
    let input = In::BF16;
    let only_wgrad = std::env::args().skip(1).any(|a| a == "--wgrad");
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("NVRTC is not available ({e}): nothing to compile or run");
            return Ok(true);
        }
    };
    let forward = if only_wgrad {
        Vec::new()
    } else {
        valid("grouped", grouped::plans(input))
    };
    let wgrad_plans = valid("weight-gradient", wgrad::plans(input));
    let nf = forward.len();
    let mut built: Vec<Built> =
        compile::compile_all(compiler, forward.into_iter().chain(wgrad_plans).collect())
            .into_iter()
            .collect::<Result<_, _>>()?;
    // ptxas's report too: a release build that spills or serializes its wgmmas is refused
    // here, with or without a GPU (compile::Built::registers).
    for b in &built {
        println!(
            "compiled {} ({:.2} s, {:?}): {}",
            b.plan.config,
            b.seconds,
            b.origin,
            b.registers("gemm", kernel::debug_build())?
        );
    }
    let built_wgrad = built.split_off(nf);
    let mut rng = Rng::from_clock();
    for b in &built_wgrad {
        let read = wgrad::cpu_check(&b.plan, &mut rng)?;
        println!(
            "{}: wgmma reads {read} elements of the MN-major A and B exactly (tma's CPU models of TMA and wgmma; tokens past a group's end zero)",
            b.plan.config
        );
    }
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => Gpu::new()?,
        Err(e) => {
            println!("\nno GPU here ({e}): every configuration is rendered and compiled; on an sm_90 GPU this example also runs and checks them.");
            return Ok(true);
        }
    };
    println!("\nGPU: {} ({} SMs)", gpu.name, gpu.sms);
    // GROUPED_QUICK=1: the first problem of each only (for compute-sanitizer).
    let quick = std::env::var("GROUPED_QUICK").is_ok_and(|v| v == "1");
    let mut ok = true;
    if !only_wgrad {
        ok &= run_forward(&gpu, &built, quick, &mut rng)?;
    }
    ok &= run_wgrad(&gpu, &built_wgrad, quick, &mut rng)?;
    println!(
        "{}",
        if ok {
            "OK: every configuration matches cuBLAS and the exact samples"
        } else {
            "FAILED"
        }
    );
    Ok(ok)
}

/// The forward (ragged M): every configuration on every problem.
fn run_forward(gpu: &Gpu, built: &[Built], quick: bool, rng: &mut Rng) -> Res<bool> {
    let input = In::BF16;
    let out = Out::of(input);
    let mut ok = true;
    let cases: [(usize, usize, usize, usize); 4] = [
        (8, 3000, 512, 384),
        (128, 9000, 768, 512),
        (256, 5000, 256, 256),
        (16, 0, 256, 128),
    ];
    for &(groups, rows, n, k) in cases.iter().take(if quick { 1 } else { cases.len() }) {
        for routing in [Routing::Uniform, Routing::Skewed] {
            let counts = routing.counts(groups, rows, rng);
            let empty = counts.iter().filter(|&&c| c == 0).count();
            let p = Problem::new(gpu, counts, n, k, input, rng)?;
            let mut reference = grouped::out_buf(gpu, &p, out)?;
            reference.poison(&gpu.stream)?;
            grouped::cublas_loop(gpu, &p, out, &reference)?;
            let r = reference.read(&gpu.stream, out)?;
            for b in built {
                let loaded = Loaded::new(gpu, b)?;
                let mut d = grouped::out_buf(gpu, &p, out)?;
                d.poison(&gpu.stream)?;
                let mut launch = Launch::new(gpu, &loaded, &p, &d)?;
                launch.run(gpu)?;
                gpu.stream.synchronize()?;
                let got = d.read(&gpu.stream, out)?;
                let c = grouped::check(&p, out, &got, &r, rng);
                let good = c.ok(out);
                ok &= good;
                println!(
                    "G {groups:>3} rows {rows:>5} ({} empty) N {n} K {k} {:<8} {:<34} vs cuBLAS max diff {:.1e}, {} outside the bound; {} f64 samples max {:.1e} {}",
                    empty,
                    routing.name(),
                    b.plan.config.name(),
                    c.elements.max_diff,
                    c.elements.bad,
                    c.samples,
                    c.sample_max_err,
                    if good { "OK" } else { "FAIL" }
                );
            }
        }
    }
    Ok(ok)
}

/// The weight gradient (ragged K): every configuration on every problem, dW poisoned first;
/// the cuBLAS reference once per problem and output type.
fn run_wgrad(gpu: &Gpu, built: &[Built], quick: bool, rng: &mut Rng) -> Res<bool> {
    let input = In::BF16;
    let mut ok = true;
    // (groups, tokens, N, K): short groups (one or two k-blocks), long ones (~2500 tokens: the
    // ring goes round many times a group), 128 groups, N past the tile (320: a consumer's rows
    // past N skipped, at 64 rows a consumer; 384: at 128 rows a consumer, the 256-row tiles'
    // second consumer) with K past the tile (200: not whole 128-, 192- or 256-column tiles),
    // N not whole 64-row chunks (328: the direct epilogue only), no token at all; 200 groups
    // (the prologue, which also ranks the groups for the claims, in two blocks; ties and empty
    // groups among them) and one group.
    let cases: [(usize, usize, usize, usize); 9] = [
        (8, 3000, 512, 384),
        (8, 20000, 512, 384),
        (128, 9000, 768, 512),
        (8, 2500, 320, 200),
        (8, 2500, 384, 200),
        (8, 2000, 328, 200),
        (16, 0, 256, 128),
        (200, 6000, 256, 384),
        (1, 700, 256, 384),
    ];
    for &(groups, tokens, n, k) in cases.iter().take(if quick { 1 } else { cases.len() }) {
        for routing in [Routing::Uniform, Routing::Skewed] {
            let counts = routing.counts(groups, tokens, rng);
            let empty = counts.iter().filter(|&&c| c == 0).count();
            let p = wgrad::Problem::new(gpu, counts, n, k, input, rng)?;
            let mut references: Vec<(Out, Vec<f32>)> = Vec::new();
            for b in built {
                let c = &b.plan.config;
                let label = format!(
                    "wgrad G {groups:>3} tokens {tokens:>5} ({empty} empty) N {n} K {k} {:<8} {:<34}",
                    routing.name(),
                    c.name()
                );
                if let Some(why) = wgrad::unsupported(c, n, k) {
                    println!("{label} skipped: {why}");
                    continue;
                }
                let out = c.out;
                if !references.iter().any(|(o, _)| *o == out) {
                    let mut reference = wgrad::out_buf(gpu, &p, out)?;
                    reference.poison(&gpu.stream)?;
                    wgrad::cublas_loop(gpu, &p, out, &reference)?;
                    references.push((out, reference.read(&gpu.stream, out)?));
                }
                let r = references
                    .iter()
                    .find(|(o, _)| *o == out)
                    .map(|(_, r)| r)
                    .ok_or("no reference")?;
                let loaded = wgrad::Loaded::new(gpu, b)?;
                let mut d = wgrad::out_buf(gpu, &p, out)?;
                d.poison(&gpu.stream)?;
                let mut launch = wgrad::Launch::new(gpu, &loaded, &p, &d)?;
                launch.run(gpu)?;
                gpu.stream.synchronize()?;
                let got = d.read(&gpu.stream, out)?;
                let (claims, claims_due) = launch.claims(gpu)?;
                let c = wgrad::check(&p.operands(), out, &got, r, rng);
                let good = c.ok() && claims == claims_due;
                ok &= good;
                println!(
                    "{label} vs cuBLAS max diff {:.1e}, {} outside the bound; empty groups {} nonzero; {} f64 samples, {} outside the bound (worst {:.2} of it); {claims} claims of {claims_due} {}",
                    c.elements.max_diff,
                    c.elements.bad,
                    c.empty_nonzero,
                    c.samples,
                    c.samples_bad,
                    c.sample_worst,
                    if good { "OK" } else { "FAIL" }
                );
                let disputes = &c.disputes;
                if disputes.disputed > 0 {
                    println!(
                        "    {} disagreements, {} computed exactly: the kernel outside an fp32 sum's bound at {}, cuBLAS at {}; groups (index, tokens) {:?}{}",
                        disputes.disputed,
                        disputes.checked,
                        disputes.kernel_bad,
                        disputes.reference_bad,
                        disputes.groups,
                        if c.disputes_cleared() {
                            ": the kernel is within the bound at every one"
                        } else {
                            ""
                        }
                    );
                }
            }
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::gpu;
    use super::grouped::{self, Routing};
    use super::kernel::{Config, Epi, In, Kind, Plan, WGRAD_MAPS_THREADS};
    use super::rng::Rng;
    use super::wgrad;

    /// Routing puts every row somewhere; skewed routing leaves every 7th group (from 3) empty
    /// and favours the first groups.
    #[test]
    fn routing_places_every_row() {
        let mut rng = Rng::new(7);
        for routing in [Routing::Uniform, Routing::Skewed] {
            for (groups, rows) in [(1, 0), (8, 3000), (128, 9000), (256, 5000)] {
                let c = routing.counts(groups, rows, &mut rng);
                assert_eq!(c.len(), groups);
                assert_eq!(c.iter().map(|&x| x as usize).sum::<usize>(), rows);
                assert!(c.iter().all(|&x| x >= 0));
                if routing == Routing::Skewed && groups >= 8 {
                    assert!(c.iter().skip(3).step_by(7).all(|&x| x == 0), "{c:?}");
                    assert!(c[0] > c[groups - 1]);
                }
            }
        }
    }

    /// Every configuration the example runs is a valid grouped plan whose source asks for the
    /// grouped schedule; kinds the schedule cannot serve are refused with the reason.
    #[test]
    fn grouped_plans_render_and_refuse_what_they_cannot_serve() {
        for p in grouped::plans(In::BF16) {
            let p = p.expect("every configuration of the example fits");
            assert!(p.grouped);
            let src = p.source().expect("renders");
            assert!(src.text().contains("#define GEMM_GROUPED 1"));
        }
        let base = grouped::configs(In::BF16)[0];
        let simple = Config {
            kind: Kind::Simple,
            epi: Epi::Direct,
            ..base
        };
        let along_n = Config { cn: 2, ..base };
        let not_persistent = Config {
            persistent: false,
            ..base
        };
        let three = Config {
            kind: Kind::WS3,
            bm: 192,
            ..base
        };
        for c in [simple, along_n, not_persistent, three] {
            let e = Plan::grouped(c).err().expect("refused").to_string();
            assert!(
                e.contains("(sharing a tile or ping-pong) and persistent"),
                "{e}"
            );
        }
        // A TMA-store epilogue whose chunks a store do not divide BN's 64-column chunks (192
        // columns are 3 of them: 2 a store leaves one over), named on the host rather than by
        // the kernel's static_assert at compile time.
        let uneven = Config {
            bn: 192,
            epi: Epi::Tma { nb: 2 },
            ..base
        };
        let e = Plan::grouped(uneven).err().expect("refused").to_string();
        assert!(e.contains("nb = 2") && e.contains("BN = 192"), "{e}");
        assert!(Plan::grouped(Config {
            epi: Epi::Tma { nb: 3 },
            ..uneven
        })
        .is_ok());
        // The dense GEMM's plans say no grouped schedule.
        let dense = Plan::new(Config::L5).expect("L5");
        assert!(!dense.grouped);
        assert!(dense
            .source()
            .expect("renders")
            .text()
            .contains("#define GEMM_GROUPED 0"));
    }

    /// The weight gradient's plans: MN-major A and B over the tokens (dims k, m / k, n), the
    /// wgrad schedule in the source; kinds it cannot serve refused with the reason; the dense
    /// and grouped plans say no wgrad.
    #[test]
    fn wgrad_plans_declare_mn_major_operands_over_the_tokens() {
        for p in wgrad::plans(In::BF16) {
            let p = p.expect("every weight-gradient configuration fits");
            assert!(p.wgrad && !p.grouped);
            for (t, dims, operand) in [
                (&p.a, ["k", "m"], "a_mn_major"),
                (&p.b, ["k", "n"], "b_mn_major"),
            ] {
                let spec = t.spec();
                assert_eq!(spec.dim_label(0), dims[0]);
                assert_eq!(spec.dim_label(1), dims[1]);
                assert_eq!(spec.boxed, vec![64, 64], "64 tokens x one 128-byte atom");
                assert_eq!(spec.wgmma.expect("an operand").to_string(), operand);
            }
            let src = p.source().expect("renders");
            assert!(src.text().contains("#define GEMM_WGRAD 1"));
            assert!(src.text().contains("#define GEMM_GROUPED 0"));
            // The prologue that builds the per-group maps: its own plan (one thread a group,
            // no shared memory) in the same source, its launch carried with the GEMM's.
            let maps = p.maps.as_ref().expect("the prologue's plan");
            assert_eq!(maps.launch().block, [WGRAD_MAPS_THREADS, 1, 1]);
            assert_eq!(maps.launch().dynamic_smem_bytes, 0);
            assert!(src
                .text()
                .contains("void TMA_PLAN_GEMM_WGRAD_MAPS_LAUNCH_BOUNDS gemm_wgrad_maps("));
        }
        let base = wgrad::configs(In::BF16)[0];
        for c in [
            Config {
                kind: Kind::Simple,
                epi: Epi::Direct,
                ..base
            },
            Config { cn: 2, ..base },
            Config {
                persistent: false,
                ..base
            },
            Config {
                kind: Kind::WS3,
                bm: 192,
                ..base
            },
        ] {
            let e = Plan::wgrad(c).err().expect("refused").to_string();
            assert!(
                e.contains("(sharing a tile or ping-pong) and persistent"),
                "{e}"
            );
        }
        for p in [
            Plan::new(Config::L5),
            Plan::grouped(grouped::configs(In::BF16)[0]),
        ] {
            let p = p.expect("plans");
            assert!(!p.wgrad && p.maps.is_none());
            assert!(p
                .source()
                .expect("renders")
                .text()
                .contains("#define GEMM_WGRAD 0"));
        }
    }

    /// Every weight-gradient plan's operands read back through its descriptors exactly on the
    /// CPU models (and a block past a group's end reads zeros).
    #[test]
    fn wgrad_operands_read_back_on_the_cpu_models() {
        let mut rng = Rng::new(26);
        for p in wgrad::plans(In::BF16) {
            let p = p.expect("fits");
            let read = wgrad::cpu_check(&p, &mut rng).expect("reads back");
            let c = &p.config;
            // A's BM and B's BN columns x 64 tokens, twice (a whole block, a ragged one).
            assert_eq!(read, 2 * 64 * u64::from(c.bm + c.bn), "{c}");
        }
    }

    /// A problem the TMA-store epilogue cannot store (N not whole 64-row chunks) or TMA
    /// cannot load (rows not 16-byte multiples) is refused before a launch, with the reason.
    #[test]
    fn wgrad_refuses_what_its_maps_cannot_cover() {
        let c = wgrad::configs(In::BF16);
        let (tma, direct) = (c[0], c[3]);
        assert_eq!(direct.epi, Epi::Direct);
        assert!(wgrad::unsupported(&tma, 768, 2048).is_none());
        assert!(wgrad::unsupported(&tma, 320, 200).is_none());
        assert!(wgrad::unsupported(&direct, 328, 200).is_none());
        let e = wgrad::unsupported(&tma, 328, 200).expect("refused");
        assert!(
            e.contains("N = 328") && e.contains("direct epilogue"),
            "{e}"
        );
        for (n, k) in [(100, 64), (64, 100), (0, 64)] {
            let e = wgrad::unsupported(&direct, n, k).expect("refused");
            assert!(e.contains("multiples of 8"), "{e}");
        }
        // A ping-pong consumer stores whole 128-row tiles: N = 320 (whole 64-row chunks, which
        // the two-consumer 128-row tile takes) would cross into the next group's rows.
        let pp = c
            .iter()
            .find(|c| c.kind == Kind::PingPong && c.bm == 128)
            .expect("a 128-row ping-pong configuration");
        assert!(wgrad::unsupported(pp, 384, 200).is_none());
        let e = wgrad::unsupported(pp, 320, 200).expect("refused");
        assert!(e.contains("N = 320") && e.contains("128 rows"), "{e}");
    }

    /// The weight gradient's check settles a disagreement with the reference by exact sums:
    /// a reference that misses one token of a group (as cuBLAS did once on the H100) leaves
    /// the kernel cleared, every disputed element computed; a kernel that misses it fails
    /// whatever the reference says; so does one that disagrees where no exact sum was computed.
    #[test]
    fn wgrad_check_settles_disputes_by_exact_sums() {
        use super::kernel::Out;
        let (n, k, input) = (16usize, 24usize, In::BF16);
        let tokens = vec![300, 0, 5000, 40];
        let total: usize = tokens.iter().map(|&t| t as usize).sum();
        let mut rng = Rng::new(23);
        let (dy, x) = (
            gpu::random_bits(total * n, input, rng.next()),
            gpu::random_bits(total * k, input, rng.next()),
        );
        let ops = wgrad::Operands {
            n,
            k,
            input,
            tokens: &tokens,
            dy: &dy,
            x: &x,
        };
        let starts = ops.starts();
        let v = |b: u16| f64::from(super::gpu::from_bits(b, input));
        // dW exactly (rounded once to f32, as a right kernel's f32 output), and without the
        // first token of group 2.
        let mut right = vec![0f32; tokens.len() * n * k];
        let mut short = right.clone();
        for (g, &t) in tokens.iter().enumerate() {
            for (row, col) in (0..n).flat_map(|r| (0..k).map(move |c| (r, c))) {
                let term = |tt: usize| v(dy[tt * n + row]) * v(x[tt * k + col]);
                let all: f64 = (starts[g]..starts[g] + t as usize).map(term).sum();
                let i = (g * n + row) * k + col;
                right[i] = all as f32;
                short[i] = if g == 2 {
                    (all - term(starts[g])) as f32
                } else {
                    all as f32
                };
            }
        }
        let out = Out::F32;
        let c = wgrad::check(&ops, out, &right, &short, &mut rng);
        assert!(
            !c.elements.ok() && c.disputes.disputed > 0,
            "the reference is off"
        );
        assert_eq!(c.disputes.checked, c.disputes.disputed);
        assert_eq!(c.disputes.groups, vec![(2, 5000)]);
        assert!(c.disputes.reference_bad > 0);
        assert!(c.disputes_cleared() && c.ok(), "{:?}", c.disputes);
        let c = wgrad::check(&ops, out, &short, &right, &mut rng);
        assert!(c.disputes.kernel_bad > 0, "{:?}", c.disputes);
        assert!(!c.disputes_cleared() && !c.ok(), "{:?}", c.disputes);
        let c = wgrad::check(&ops, out, &short, &short, &mut rng);
        assert!(c.elements.ok() && c.disputes.disputed == 0);
        assert!(
            !c.ok(),
            "the samples catch the missing token without a dispute"
        );
    }

    /// Every weight-gradient configuration compiles to an sm_90a CUBIN with NVRTC (skipped,
    /// said, without it), its GEMM and its prologue without spilling registers (release
    /// builds; `GEMM_DEBUG=1` builds are compiled and their spills printed).
    #[test]
    fn wgrad_plans_compile_without_spills() {
        let compiler = match tma::runtime::Compiler::global() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("SKIP: NVRTC is not available ({e})");
                return;
            }
        };
        let plans: Vec<_> = wgrad::plans(In::BF16)
            .into_iter()
            .map(|p| p.expect("fits"))
            .collect();
        for b in super::compile::compile_all(compiler, plans) {
            let b = b.expect("compiles");
            assert!(b.compiled.has_cubin(), "{}", b.plan.config);
            for kernel in ["gemm", "gemm_wgrad_maps"] {
                let r = b.compiled.resources(kernel).expect("ptxas's report");
                if super::kernel::debug_build() {
                    // Debug builds keep their records in local memory (Built::registers).
                    eprintln!("{} {kernel} (GEMM_DEBUG=1): {r:?}", b.plan.config);
                    continue;
                }
                assert_eq!(
                    r.spill_stores + r.spill_loads,
                    0,
                    "{} {kernel}: {r:?}",
                    b.plan.config
                );
            }
        }
    }
}
