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
//! is clipped there.
//!
//! Without a GPU: renders and NVRTC-compiles every configuration and says why it stops. With
//! one: every configuration on uniform and skewed routing (empty groups included) for 8, 128
//! and 256 groups, D poisoned (NaN) first, against a loop of cuBLAS GEMMs (every element) and
//! exact f64 samples (every group's first and last rows among them). Timing against the cuBLAS
//! loop and torch._grouped_mm: `cargo bench --bench grouped_gemm` and
//! benches/grouped_gemm_torch.py (BENCHMARKS.md).
//!
//! Run: `cargo run --release --example 08-grouped-gemm` (`GROUPED_QUICK=1`: the first problem
//! only, for compute-sanitizer).

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

use std::process::ExitCode;

use grouped::{Launch, Loaded, Problem, Routing};
use kernel::{In, Out, Res};
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

fn run() -> Res<bool> {
    let input = In::BF16;
    let out = Out::of(input);
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("NVRTC is not available ({e}): nothing to compile or run");
            return Ok(true);
        }
    };
    let mut plans = Vec::new();
    for p in grouped::plans(input) {
        match p {
            Ok(p) => {
                println!(
                    "{}: grouped plan, block {} threads, {} B of dynamic shared memory",
                    p.config,
                    p.kernel.launch().block[0],
                    p.kernel.launch().dynamic_smem_bytes
                );
                plans.push(p);
            }
            Err(e) => println!("not built: {e}"),
        }
    }
    let built: Vec<_> = compile::compile_all(compiler, plans)
        .into_iter()
        .collect::<Result<_, _>>()?;
    for b in &built {
        println!(
            "compiled {} ({:.2} s, {:?})",
            b.plan.config, b.seconds, b.origin
        );
    }
    let gpu = match tma::runtime::gpu_available() {
        Ok(_) => gpu::Gpu::new()?,
        Err(e) => {
            println!("\nno GPU here ({e}): every configuration is rendered and compiled; on an sm_90 GPU this example also runs and checks them.");
            return Ok(true);
        }
    };
    println!("\nGPU: {} ({} SMs)", gpu.name, gpu.sms);
    let mut rng = Rng::from_clock();
    let mut ok = true;
    let cases: [(usize, usize, usize, usize); 4] = [
        (8, 3000, 512, 384),
        (128, 9000, 768, 512),
        (256, 5000, 256, 256),
        (16, 0, 256, 128),
    ];
    // GROUPED_QUICK=1: the first problem only (for compute-sanitizer).
    let quick = std::env::var("GROUPED_QUICK").is_ok_and(|v| v == "1");
    for &(groups, rows, n, k) in cases.iter().take(if quick { 1 } else { cases.len() }) {
        for routing in [Routing::Uniform, Routing::Skewed] {
            let counts = routing.counts(groups, rows, &mut rng);
            let empty = counts.iter().filter(|&&c| c == 0).count();
            let p = Problem::new(&gpu, counts, n, k, input, &mut rng)?;
            let mut reference = grouped::out_buf(&gpu, &p, out)?;
            reference.poison(&gpu.stream)?;
            grouped::cublas_loop(&gpu, &p, out, &reference)?;
            let r = reference.read(&gpu.stream, out)?;
            for b in &built {
                let loaded = Loaded::new(&gpu, b)?;
                let mut d = grouped::out_buf(&gpu, &p, out)?;
                d.poison(&gpu.stream)?;
                let mut launch = Launch::new(&gpu, &loaded, &p, &d)?;
                launch.run(&gpu)?;
                gpu.stream.synchronize()?;
                let got = d.read(&gpu.stream, out)?;
                let c = grouped::check(&p, out, &got, &r, &mut rng);
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

#[cfg(test)]
mod tests {
    use super::grouped::{self, Routing};
    use super::kernel::{Config, Epi, In, Kind, Plan};
    use super::rng::Rng;

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
        for c in [simple, along_n, not_persistent] {
            let e = Plan::grouped(c).err().expect("refused").to_string();
            assert!(e.contains("warp-specialized and persistent"), "{e}");
        }
        // The dense GEMM's plans say no grouped schedule.
        let dense = Plan::new(Config::L5).expect("L5");
        assert!(!dense.grouped);
        assert!(dense
            .source()
            .expect("renders")
            .text()
            .contains("#define GEMM_GROUPED 0"));
    }
}
