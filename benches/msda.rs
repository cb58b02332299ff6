//! msda_tma (one [2][2][32] TMA box per sampling point, 192 descriptors in global memory)
//! vs msda_ldg (plain loads) on the seed workload of examples/03-deformable-attention:
//! N = 6, 8 heads, 4 levels, Q = 1000, P = 8, C = 32; grid N * Q blocks of 256 threads,
//! 64 KB of dynamic shared memory for the TMA kernel.
//!
//! Before timing, both outputs are checked against each other and once against the f64
//! reference (exit non-zero when wrong). Then each kernel runs `WARMUP` times and is timed
//! `REPS` times with CUDA events, one pair of events per launch; the median is reported
//! with the effective bandwidth and the TMA / LDG speed-up (goal: >= 1.5x).
//!
//! Without a GPU: prints SKIP and exits 0.
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo bench --bench msda`

#[path = "../examples/03-deformable-attention/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "../examples/03-deformable-attention/setup.rs"]
mod setup;

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaContext;
use reference::{msda_reference, Msda};
use setup::{Check, Device, Elem, Res, Rng};
use tma::runtime::Compiler;

const WARMUP: usize = 20;
const REPS: usize = 200;
const GOAL: f64 = 1.5;

/// Median and min of `REPS` event-timed launches, in microseconds.
fn time(ctx: &Arc<CudaContext>, dev: &mut Device, tma: bool) -> Res<(f64, f64)> {
    let launch = |dev: &mut Device| {
        if tma {
            dev.launch_tma()
        } else {
            dev.launch_ldg()
        }
    };
    for _ in 0..WARMUP {
        launch(dev)?;
    }
    dev.sync()?;
    let mut times = Vec::with_capacity(REPS);
    let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    for _ in 0..REPS {
        start.record(&dev.stream)?;
        launch(dev)?;
        end.record(&dev.stream)?;
        times.push(f64::from(start.elapsed_ms(&end)?) * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[0]))
}

/// Bytes one forward moves, counting every gathered corner: value N*Q*heads*L*P*4*32*2,
/// plus locations, weights and outputs.
fn bytes(m: &Msda) -> f64 {
    let points = m.attn_len() as f64;
    let gathered = points * 4.0 * m.channels as f64 * 2.0;
    gathered + points * 8.0 + points * 4.0 + m.out_len() as f64 * 2.0
}

fn main() -> Res<()> {
    let m = Msda::seed();
    setup::check_sizes(&m)?;
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP msda bench: NVRTC is not available ({e})");
            return Ok(());
        }
    };
    for elem in Elem::ALL {
        for debug in [true, false] {
            setup::compile(compiler, elem, debug)?;
        }
    }
    let gpu = match tma::runtime::gpu_available() {
        Ok(g) => g,
        Err(e) => {
            println!("SKIP msda bench: no GPU ({e}); both variants compiled with NVRTC");
            return Ok(());
        }
    };
    println!(
        "msda on {} (sm {:?}): N {} heads {} levels {:?} Q {} P {} C {}; {} blocks x {} threads, TMA: {} points per phase, smem {} B",
        gpu.name,
        gpu.compute_capability,
        m.batch,
        m.heads,
        m.levels,
        m.queries,
        m.points,
        m.channels,
        m.batch * m.queries,
        setup::BLOCK,
        setup::phase_points(),
        setup::tma_dynamic_smem()
    );
    let ctx = CudaContext::new(0)?;
    let mut rng = Rng::from_clock();
    let gb = bytes(&m) / 1e9;
    println!(
        "{:<5} {:>12} {:>12} {:>10} {:>12} {:>12} {:>10} {:>9}",
        "type",
        "tma med us",
        "tma min us",
        "tma GB/s",
        "ldg med us",
        "ldg min us",
        "ldg GB/s",
        "speed-up"
    );
    let mut failed = Vec::new();
    let mut below_goal = false;
    for elem in Elem::ALL {
        let inp = setup::inputs(&m, elem, &mut rng);
        // Check first, with debug waits (a hang becomes an error): TMA vs LDG, and both
        // vs the f64 reference. Then time the build without debug waits.
        let mut dev = Device::new(&ctx, compiler, &m, &inp, true)?;
        let (out_tma, out_ldg) = dev.run_both()?;
        dev.reload(&ctx, compiler, false)?;
        let (differ, max, bad) = setup::compare_outputs(elem, &out_tma, &out_ldg);
        let reference = msda_reference(&m, &inp.value, &inp.loc, &inp.attn);
        let ct = Check::new(elem, &out_tma, &reference);
        let cl = Check::new(elem, &out_ldg, &reference);
        println!(
            "{}: tma vs ldg: {differ} elements differ (max {max:.3e}), {bad} non-finite\n  tma vs ref: {}\n  ldg vs ref: {}",
            elem.name(),
            ct.line(elem, &reference),
            cl.line(elem, &reference)
        );
        if bad != 0 || max > elem.abs_tolerance() || !ct.ok(elem) || !cl.ok(elem) {
            failed.push(elem.name());
            continue;
        }
        let (tma_med, tma_min) = time(&ctx, &mut dev, true)?;
        let (ldg_med, ldg_min) = time(&ctx, &mut dev, false)?;
        let speedup = ldg_med / tma_med;
        below_goal |= speedup < GOAL;
        println!(
            "{:<5} {:>12.1} {:>12.1} {:>10.0} {:>12.1} {:>12.1} {:>10.0} {:>8.2}x",
            elem.name(),
            tma_med,
            tma_min,
            gb / (tma_med * 1e-6),
            ldg_med,
            ldg_min,
            gb / (ldg_med * 1e-6),
            speedup
        );
        // The timed (non-debug) launches wrote the same outputs: check they are unchanged.
        let again = dev.stream.clone_dtoh(&dev.out_tma)?;
        if again != out_tma {
            failed.push(elem.name());
            println!("{}: msda_tma output changed across launches", elem.name());
        }
    }
    println!(
        "effective bytes per forward: {:.1} MB (every gathered corner counted; most hit L2/L1)",
        gb * 1e3
    );
    println!(
        "goal: msda_tma >= {GOAL}x msda_ldg: {}",
        if below_goal { "NOT met" } else { "met" }
    );
    if !failed.is_empty() {
        return Err(format!("wrong results: {}", failed.join(", ")).into());
    }
    Ok(())
}
