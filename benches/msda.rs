//! Multi-scale deformable attention forward on the seed workload of
//! examples/03-deformable-attention (N = 6, 8 heads, 4 levels 92x160 / 46x80 / 23x40 / 12x20,
//! Q = 1000, P = 8, D = 32): every kernel x type (f16, bf16, f32) x location distribution
//! (uniform, local).
//!
//! Kernels: the baselines `msda_ldg` (plain loads, one lane per channel) and `msda_tma` (one
//! [2][2][32] TMA box per point), 16-bit only; `msda_vec` (16-byte plain loads, fp32
//! accumulation) and `msda_stage` (small levels staged whole in shared memory by TMA), each
//! with attention weights and with the fused softmax of logits, and `msda_stage` with a
//! cluster of two blocks sharing the staging (multicast).
//!
//! Each kernel is first checked (debug waits, output poisoned) against the f64 reference at
//! the rounding floor of its type (exit non-zero when wrong), then timed: `WARMUP` launches,
//! then the median of `REPS` launches timed each with a pair of CUDA events, once back to back
//! (L2 warm) and once with L2 flushed before each launch (a 256 MB memset outside the events).
//! Ratios are to `msda_ldg` of the same type and distribution in the same run (f32: to the
//! f16 one).
//!
//! `MSDA_SWEEP=1` also times variants of the knobs (queries per block, block mapping,
//! unroll, register cap, staging budget; 50 launches each), each checked first. `MSDA_TYPES=f16,f32` and
//! `MSDA_DISTS=uniform` restrict the runs.
//!
//! The backward (examples/03-deformable-attention/bwd.rs): the standard op's design
//! (`msda_bwd_atomic`) and the TMA design (`msda_bwd`), each checked against the f64
//! reference first, then timed as the whole operator (grad_value zeroed, the kernel, the f32 ->
//! 16-bit cast where there is one), 50 launches, rows beside the forward's; ratios to
//! `msda_bwd_atomic` of the same type and distribution. `MSDA_TABLE=bwd`: only the backward
//! and the forward's msda_vec; `MSDA_BWD_FILTER=<text>[|<text>]`: only the backward configs whose
//! label contains one of them (to profile one with `ncu -k regex:'^msda_bwd$' -c 1`).
//!
//! Without a GPU: compiles every kernel, prints SKIP and exits 0.
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo bench --bench msda`

#[path = "../examples/03-deformable-attention/bwd.rs"]
#[allow(dead_code)]
mod bwd;
#[path = "../examples/03-deformable-attention/dist.rs"]
#[allow(dead_code)]
mod dist;
#[allow(dead_code)]
#[path = "../examples/03-deformable-attention/fast.rs"]
mod fast;
#[path = "../examples/03-deformable-attention/reference.rs"]
#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
#[path = "../examples/03-deformable-attention/setup.rs"]
mod setup;

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use dist::{Dist, Ty};
use fast::{Config, Design, FastDevice};
use reference::{msda_backward, msda_reference, Attn, Msda};
use setup::{Elem, Res, Rng};
use tma::runtime::Compiler;

const WARMUP: usize = 20;
const REPS: usize = 200;
const FLUSH_BYTES: usize = 256 << 20;

/// Median (us) of `reps` event-timed runs of `launch`; with `flush`, `flush` runs before
/// each one, outside the events.
fn time(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    reps: usize,
    mut flush: Option<&mut CudaSlice<u8>>,
    launch: &mut dyn FnMut() -> Res<()>,
) -> Res<f64> {
    for _ in 0..WARMUP {
        launch()?;
    }
    stream.synchronize()?;
    let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        if let Some(f) = flush.as_deref_mut() {
            stream.memset_zeros(f)?;
        }
        start.record(stream)?;
        launch()?;
        end.record(stream)?;
        times.push(f64::from(start.elapsed_ms(&end)?) * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The kernels of the table: each design with weights and with the fused softmax, the TMA
/// design with a cluster of two sharing the staging by multicast, and the hybrid.
fn table_configs() -> Vec<Config> {
    if std::env::var("MSDA_TABLE").is_ok_and(|v| v == "bwd") {
        return vec![Config::VEC, Config::VEC.with_softmax()];
    }
    vec![
        Config::VEC,
        Config::VEC.with_softmax(),
        Config::STAGE,
        Config::STAGE.with_softmax(),
        Config::STAGE.with_cluster(2),
        Config::HYBRID,
        Config::HYBRID.with_softmax(),
    ]
}

/// The knob variants of MSDA_SWEEP (f16 and f32; bf16 runs like f16).
fn sweep_configs(ty: Ty) -> Vec<Config> {
    let vec = |qpb, all_heads, unroll| Config {
        design: Design::Vec { qpb, all_heads },
        softmax: false,
        unroll,
        minb: 1,
    };
    let stage = |qpb, budget, unroll, minb| Config {
        design: Design::Stage {
            qpb,
            rounds: 1,
            budget,
            cluster: 1,
        },
        softmax: false,
        unroll,
        minb,
    };
    match ty {
        Ty::Bf16 => vec![],
        Ty::F16 => vec![
            vec(8, false, 2),
            vec(8, false, 8),
            vec(16, false, 2),
            vec(32, false, 1),
            vec(32, false, 4),
            vec(64, false, 2),
            vec(1, true, 2),
            vec(1, true, 4),
            vec(4, true, 2),
            stage(128, 76 << 10, 2, 2),
            stage(128, 76 << 10, 4, 1),
            stage(256, 76 << 10, 2, 1),
            stage(32, 20 << 10, 2, 1),
            stage(64, 20 << 10, 2, 1),
            stage(128, 20 << 10, 2, 1),
        ],
        Ty::F32 => vec![
            vec(8, false, 2),
            vec(16, false, 2),
            vec(64, false, 2),
            vec(1, true, 2),
            stage(64, 76 << 10, 2, 1),
            stage(128, 150 << 10, 2, 1),
        ],
    }
}

struct Row {
    name: String,
    ty: Ty,
    dist: Dist,
    warm: f64,
    flushed: f64,
}

#[allow(clippy::too_many_arguments)]
fn run_fast(
    ctx: &Arc<CudaContext>,
    compiler: &Compiler,
    m: &Msda,
    dev: &mut FastDevice,
    reference: &[f64],
    config: Config,
    reps: usize,
    flush: &mut CudaSlice<u8>,
    failed: &mut Vec<String>,
) -> Res<Option<(f64, f64)>> {
    let (ty, what) = (dev.ty, config.label());
    let built = match fast::build(compiler, m, ty, config, true) {
        Ok(b) => b,
        Err(e) => {
            println!("  {what} {}: not built ({e})", ty.name());
            return Ok(None);
        }
    };
    let checked = dev.load(ctx, compiler, built)?;
    dev.poison()?;
    dev.launch(&checked)?;
    dev.sync()?;
    let c = dist::Check::new(ty, &dev.output()?, reference);
    if !c.ok(ty) {
        println!("  {what} {}: {}", ty.name(), c.line(ty));
        failed.push(format!("{what} {}", ty.name()));
        return Ok(None);
    }
    let k = dev.load(ctx, compiler, fast::build(compiler, m, ty, config, false)?)?;
    let stream = dev.stream.clone();
    let warm = time(ctx, &stream, reps, None, &mut || dev.launch(&k))?;
    let flushed = time(ctx, &stream, reps, Some(flush), &mut || dev.launch(&k))?;
    // The timed launches wrote the same output again.
    let again = dist::Check::new(ty, &dev.output()?, reference);
    if !again.ok(ty) {
        failed.push(format!("{what} {} (timed build)", ty.name()));
    }
    Ok(Some((warm, flushed)))
}

/// Every backward config of the example on one input set: checked (debug build, poisoned),
/// then timed (the whole operator) into `rows`.
#[allow(clippy::too_many_arguments)]
fn run_backward(
    ctx: &Arc<CudaContext>,
    compiler: &Compiler,
    m: &Msda,
    fwd: &FastDevice,
    inp: &dist::Inputs,
    rng: &mut Rng,
    flush: &mut CudaSlice<u8>,
    rows: &mut Vec<Row>,
    failed: &mut Vec<String>,
) -> Res<()> {
    let ty = fwd.ty;
    let mut dev = bwd::BwdDevice::new(fwd, rng)?;
    let g = dev.grad_out_host.clone();
    let ref_w = msda_backward(m, &inp.value, &inp.loc, Attn::Weights(&inp.attn), &g);
    let ref_l = msda_backward(m, &inp.value, &inp.loc, Attn::Logits(&inp.logits), &g);
    for config in bwd::bwd_configs(ty) {
        let what = config.label();
        let k = dev.load(
            ctx,
            compiler,
            fwd,
            bwd::build_bwd(compiler, m, ty, config, true)?,
        )?;
        dev.poison(fwd)?;
        dev.launch(fwd, &k)?;
        fwd.sync()?;
        let reference = if config.softmax { &ref_l } else { &ref_w };
        let c = bwd::BwdCheck::new(
            m,
            ty,
            config.grad16(),
            &dev.grads(fwd)?,
            reference,
            &inp.loc,
        );
        if !c.ok(ty) && !config.grad16() {
            println!("  {what} {}: {}", ty.name(), c.line(ty));
            failed.push(format!("{what} {} {}", ty.name(), inp.dist.name()));
            continue;
        }
        let k = dev.load(
            ctx,
            compiler,
            fwd,
            bwd::build_bwd(compiler, m, ty, config, false)?,
        )?;
        let stream = fwd.stream.clone();
        let warm = time(ctx, &stream, 50, None, &mut || dev.launch(fwd, &k))?;
        let flushed = time(ctx, &stream, 50, Some(flush), &mut || dev.launch(fwd, &k))?;
        println!(
            "  {what:<36} {warm:>8.1} us {flushed:>8.1} us flushed  ({})",
            c.line(ty)
        );
        rows.push(Row {
            name: what,
            ty,
            dist: inp.dist,
            warm,
            flushed,
        });
    }
    Ok(())
}

fn main() -> Res<()> {
    let m = Msda::seed();
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIP msda bench: NVRTC is not available ({e})");
            return Ok(());
        }
    };
    let sweep = std::env::var("MSDA_SWEEP").is_ok_and(|v| v == "1");
    let types = dist::wanted("MSDA_TYPES", &Ty::ALL, |t| t.name());
    let dists = dist::wanted("MSDA_DISTS", &Dist::ALL, |d| d.name());
    for &ty in &types {
        for config in table_configs() {
            fast::build(compiler, &m, ty, config, false)?;
        }
    }
    let gpu = match tma::runtime::gpu_available() {
        Ok(g) => g,
        Err(e) => {
            println!("SKIP msda bench: no GPU ({e}); every kernel compiled with NVRTC");
            return Ok(());
        }
    };
    println!(
        "msda on {} (sm {:?}): N {} heads {} levels {:?} Q {} P {} D {}; median of {REPS} event-timed launches after {WARMUP} warm-ups; flushed: a {} MB memset before each launch",
        gpu.name,
        gpu.compute_capability,
        m.batch,
        m.heads,
        m.levels,
        m.queries,
        m.points,
        m.channels,
        FLUSH_BYTES >> 20
    );
    let ctx = CudaContext::new(0)?;
    let mut flush = ctx.default_stream().alloc_zeros::<u8>(FLUSH_BYTES)?;
    let mut rng = Rng::from_clock();
    let mut failed = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    for &d in &dists {
        for &ty in &types {
            let inp = dist::inputs(&m, ty, d, &mut rng);
            let reference = msda_reference(&m, &inp.value, &inp.loc, &inp.attn);
            println!(
                "\n{} {}: {:.1}% of the points outside [0, 1]",
                ty.name(),
                d.name(),
                100.0 * inp.outside as f64 / m.attn_len() as f64
            );
            // Baselines (16-bit only).
            let bwd_table = std::env::var("MSDA_TABLE").is_ok_and(|v| v == "bwd");
            if ty != Ty::F32 && !bwd_table {
                let elem = if ty == Ty::F16 { Elem::F16 } else { Elem::Bf16 };
                let old = setup::Inputs {
                    elem,
                    value_bits: inp.bits16.clone(),
                    value: inp.value.clone(),
                    loc: inp.loc.clone(),
                    attn: inp.attn.clone(),
                    classes: [0; 4],
                };
                let mut dev = setup::Device::new(&ctx, compiler, &m, &old, true)?;
                let (out_tma, out_ldg) = dev.run_both()?;
                for (name, out) in [("msda_ldg", &out_ldg), ("msda_tma", &out_tma)] {
                    let c = setup::Check::new(elem, out, &reference);
                    if !c.ok(elem) {
                        println!("  {name}: {}", c.line(elem, &reference));
                        failed.push(format!("{name} {}", ty.name()));
                    }
                }
                dev.reload(&ctx, compiler, false)?;
                let stream = dev.stream.clone();
                for tma in [false, true] {
                    let name = if tma { "msda_tma" } else { "msda_ldg" };
                    let mut launch = || {
                        if tma {
                            dev.launch_tma()
                        } else {
                            dev.launch_ldg()
                        }
                    };
                    let warm = time(&ctx, &stream, REPS, None, &mut launch)?;
                    let flushed = time(&ctx, &stream, REPS, Some(&mut flush), &mut launch)?;
                    println!("  {name:<36} {warm:>8.1} us {flushed:>8.1} us flushed");
                    rows.push(Row {
                        name: name.into(),
                        ty,
                        dist: d,
                        warm,
                        flushed,
                    });
                }
            }
            let mut dev = FastDevice::new(&ctx, &m, &inp)?;
            let mut configs = table_configs();
            if sweep {
                configs.extend(sweep_configs(ty));
            }
            for (i, config) in configs.into_iter().enumerate() {
                let in_table = i < table_configs().len();
                let reps = if in_table { REPS } else { 50 };
                let r = run_fast(
                    &ctx,
                    compiler,
                    &m,
                    &mut dev,
                    &reference,
                    config,
                    reps,
                    &mut flush,
                    &mut failed,
                )?;
                let Some((warm, flushed)) = r else { continue };
                println!(
                    "  {:<36} {warm:>8.1} us {flushed:>8.1} us flushed{}",
                    config.label(),
                    if in_table { "" } else { "  (sweep)" }
                );
                if in_table {
                    rows.push(Row {
                        name: config.label(),
                        ty,
                        dist: d,
                        warm,
                        flushed,
                    });
                }
            }
            run_backward(
                &ctx,
                compiler,
                &m,
                &dev,
                &inp,
                &mut rng,
                &mut flush,
                &mut rows,
                &mut failed,
            )?;
        }
    }
    // The table, ratios to msda_ldg of the same distribution (and type; f32: f16); the
    // backward's to msda_bwd_atomic.
    println!("\n| kernel | type | locations | median | x base | L2 flushed | x base |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        let base_ty = if r.ty == Ty::F32 { Ty::F16 } else { r.ty };
        let base = if r.name.starts_with("msda_bwd") {
            rows.iter()
                .find(|b| b.name == "msda_bwd_atomic" && b.ty == r.ty && b.dist == r.dist)
        } else {
            rows.iter()
                .find(|b| b.name == "msda_ldg" && b.ty == base_ty && b.dist == r.dist)
        };
        let ratio = |x: f64, b: Option<f64>| b.map_or("-".into(), |b| format!("{:.2}x", b / x));
        println!(
            "| {} | {} | {} | {:.1} us | {} | {:.1} us | {} |",
            r.name,
            r.ty.name(),
            r.dist.name(),
            r.warm,
            ratio(r.warm, base.map(|b| b.warm)),
            r.flushed,
            ratio(r.flushed, base.map(|b| b.flushed)),
        );
    }
    if !failed.is_empty() {
        return Err(format!("wrong results: {}", failed.join(", ")).into());
    }
    Ok(())
}
