//! Multi-scale deformable attention (forward), the standard operator's contract: value
//! `[N][S][M][D]` (f16, bf16 or f32), level shapes and first rows, sampling locations
//! `[N][Q][M][L][P][2]` in [0, 1], attention weights `[N][Q][M][L][P]` (or logits, with the
//! fused softmax), output `[N][Q][M * D]`. Seed size: N = 6, 8 heads, 4 levels (92x160, 46x80,
//! 23x40, 12x20), Q = 1000, 8 points per level, 32 channels per head.
//!
//! The fast kernels (`msda_fast.cu`, `fast.rs`): `msda_vec`, plain 16-byte loads of each
//! bilinear corner, each thread 16 bytes of channels of one (query, head); and `msda_stage`,
//! which copies the small levels' planes of its (batch, head) into shared memory with one
//! TMA box per level (a 5-D tile `[N][H][W][M][C]`, box `[1][H][W][1][D]`, rendered for the
//! problem at run time) while it gathers the large levels with plain loads, then gathers
//! the staged levels from shared memory through the tile's accessor. Both run on two
//! location distributions (`uniform`, `local`: `dist.rs`) and four sizes, each output
//! checked against an f64 reference at the rounding floor of its type.
//!
//! The two baselines (seed size, f16 / bf16, one `[2][2][32]` TMA box per sampling point):
//! The value tile is declared once (`setup.rs`, `tma_3d!` with run-time H, W and strides):
//! each (batch, head, level) is a `[H][W][32]` view whose rows skip the other heads, bound
//! with `bind_strided` and encoded over the sub-view of the value buffer where it starts:
//! 192 tensor maps, uploaded to global memory. `msda_tma` loads each point's bilinear
//! neighbourhood as one TMA box (out-of-bounds corners arrive as zeros: the operator's
//! padding); `msda_ldg` does the same with plain loads. Both are checked against the f64
//! CPU reference on the same fresh random inputs as the fast kernels (both distributions);
//! the example exits non-zero on a NaN or an error above the limits.
//!
//! The backward (`msda_bwd.cu`, `bwd.rs`): grad_value, grad_loc and grad_attn (or the logits'
//! gradient) for every size, type and distribution (`clustered` too), against an f64 reference
//! (`reference.rs`, itself checked by finite differences), the deterministic builds (the tile
//! design's fixed-point sums, the plane design) run three times and compared bit for bit;
//! `MSDA_BWD_ONLY=1` runs only it, `MSDA_SIZES` / `MSDA_TYPES` / `MSDA_DISTS`
//! (comma-separated names) a part of it, `MSDA_BWD_FILTER=a|b` the configs whose label
//! contains a or b.
//!
//! Without a GPU it validates the tiles, renders every kernel for every size and type and
//! compiles it with NVRTC, then says so and exits 0.
//!
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo run --release --example 03-deformable-attention`

#[allow(dead_code)]
mod bwd;
#[allow(dead_code)] // shared with benches/msda.rs, which uses other parts
mod dist;
#[allow(dead_code)]
mod fast;
#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod setup;

use std::time::Instant;

use dist::{Dist, Ty};
use fast::Config;
use reference::{msda_backward, msda_reference, Attn, Msda};
use setup::{Check, Device, Elem, Res, Rng};
use tma::runtime::Compiler;
use tma::EncodeArgs;

fn main() -> Res<()> {
    let m = Msda::seed();
    setup::check_sizes(&m)?;
    println!(
        "multi-scale deformable attention: N {}, heads {}, levels {:?}, Q {}, P {}, C {} (S = {} rows per batch)",
        m.batch,
        m.heads,
        m.levels,
        m.queries,
        m.points,
        m.channels,
        m.spatial()
    );

    // 1. The tiles, validated at compile time; one view bound here as an example.
    for elem in Elem::ALL {
        let valid = elem.valid();
        let plan = valid.plan();
        println!(
            "tile {} ({}): TX_BYTES {} per box, {} B of shared memory per box, aligned to {} B",
            elem.cuda_name(),
            elem.name(),
            elem.tx_bytes(),
            plan.footprint_bytes,
            plan.align_bytes
        );
        if elem.tx_bytes() != u64::from(setup::BOX_BYTES) {
            return Err(format!("TX_BYTES {} != 256", elem.tx_bytes()).into());
        }
    }
    let (h, w) = m.levels[0];
    let bound = Elem::F16.bind_view(h, w, m.heads)?;
    println!(
        "level 0 view of one (batch, head): {} B extent\n{}",
        bound.extent_bytes(),
        EncodeArgs::new(&bound)
    );
    let mut views = 0;
    for elem in Elem::ALL {
        for &(h, w) in &m.levels {
            elem.bind_view(h, w, m.heads)?;
            views += m.batch * m.heads;
        }
    }
    println!(
        "bound all {views} views ({} per type)",
        views / Elem::ALL.len()
    );

    // 2. Render and compile both variants (and the debug-wait builds the GPU run uses).
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!(
                "NVRTC is not available:\n  {e}\nget it with: eval \"$(scripts/cuda-tools.sh)\""
            );
            return Err(e.into());
        }
    };
    for elem in Elem::ALL {
        let t = Instant::now();
        let (source, _, compiled) = setup::compile(compiler, elem, false)?;
        println!(
            "compiled {} ({} lines) with NVRTC: {} B of CUBIN for sm_90a, {} TMA loads in the PTX ({:.2} s)",
            elem.name(),
            source.text().lines().count(),
            compiled.cubin.len(),
            compiled.ptx.matches("cp.async.bulk.tensor.3d").count(),
            t.elapsed().as_secs_f64()
        );
        if compiled.cubin.is_empty() {
            return Err(format!("no CUBIN for {}", elem.name()).into());
        }
        setup::compile(compiler, elem, true)?;
    }

    // 2b. The fast kernels, rendered for every size and type and compiled (debug waits on:
    // the checked runs below use these builds). MSDA_BWD_ONLY=1: the backward alone.
    let bwd_only = std::env::var("MSDA_BWD_ONLY").is_ok_and(|v| v == "1");
    let t = Instant::now();
    let mut built = 0;
    for (name, m) in dist::sizes().into_iter().filter(|_| !bwd_only) {
        for ty in Ty::ALL {
            for config in fast_configs() {
                match fast::build(compiler, &m, ty, config, true) {
                    Ok(b) => {
                        built += 1;
                        dump(name, ty, &b)?;
                        if name == "seed" && !config.softmax {
                            let staged: Vec<usize> = b.staged.iter().map(|(l, _)| *l).collect();
                            println!(
                                "{} {}: grid {} x {} threads, {} B of dynamic shared memory, staged levels {staged:?}",
                                config.label(),
                                ty.name(),
                                b.grid,
                                b.plan.launch().block[0],
                                b.plan.launch().dynamic_smem_bytes
                            );
                        }
                    }
                    Err(e) => {
                        return Err(format!("{name} {} {}: {e}", ty.name(), config.label()).into())
                    }
                }
            }
        }
    }
    println!(
        "compiled {built} fast kernels (4 sizes x 3 types x {} configs) with NVRTC ({:.2} s)",
        fast_configs().len(),
        t.elapsed().as_secs_f64()
    );

    // 2c. The backward kernels, every size, type and config (MSDA_SIZES, MSDA_TYPES: a part
    // of them, as the checks below).
    let t = Instant::now();
    let mut built = 0;
    for (name, m) in dist::wanted("MSDA_SIZES", &dist::sizes(), |s| s.0) {
        for ty in dist::wanted("MSDA_TYPES", &Ty::ALL, |t| t.name()) {
            for config in bwd::bwd_configs(ty) {
                let b = bwd::build_bwd(compiler, &m, ty, config, true)
                    .map_err(|e| format!("{name} {} {}: {e}", ty.name(), config.label()))?;
                built += 1;
                if name == "seed" && !config.softmax {
                    let staged: Vec<usize> = b.staged.iter().map(|(l, _)| *l).collect();
                    // What ptxas gave the kernel and, in the tile design, the second one.
                    let res = |k: &str| {
                        b.compiled
                            .kernel_resources
                            .iter()
                            .find(|r| r.kernel == k)
                            .map_or(String::new(), |r| {
                                format!(
                                    "{} registers, {} B spilled, {} B local",
                                    r.registers, r.spill_stores, r.local_bytes
                                )
                            })
                    };
                    let tiles = match &b.tiles {
                        Some((plan, grid)) => format!(
                            "; {}; msda_bwd_tiles grid {grid} x {} threads, {}",
                            res(config.kernel_name()),
                            plan.launch().block[0],
                            res("msda_bwd_tiles")
                        ),
                        None => String::new(),
                    };
                    if let Some(bb) = &b.bands {
                        println!(
                            "{} {}: bands of {:?} rows by level, {} a (batch, head); msda_bwd_bands grid {} x {} threads, {} B of dynamic shared memory, {}; msda_band_count {}; {} TMA loads and {} stores in the PTX",
                            config.label(),
                            ty.name(),
                            bb.outs.iter().map(|o| o.spec().boxed[1]).collect::<Vec<_>>(),
                            bb.per_head,
                            bb.grid,
                            bb.plan.launch().block[0],
                            bb.plan.launch().dynamic_smem_bytes,
                            res("msda_bwd_bands"),
                            res("msda_band_count"),
                            b.compiled.ptx.matches("cp.async.bulk.tensor.5d.shared::cluster.global").count(),
                            b.compiled.ptx.matches("cp.async.bulk.tensor.5d.global.shared").count()
                        );
                        continue;
                    }
                    if let Some((plan, grid)) = &b.planes {
                        println!(
                            "{} {}: point pass grid {} x {} threads, {}; msda_bwd_planes grid {grid} x {} threads, {} B of dynamic shared memory, {}, {} TMA stores in the PTX (a box a level)",
                            config.label(),
                            ty.name(),
                            b.grid,
                            b.plan.launch().block[0],
                            res(config.kernel_name()),
                            plan.launch().block[0],
                            plan.launch().dynamic_smem_bytes,
                            res("msda_bwd_planes"),
                            b.compiled.ptx.matches("cp.async.bulk.tensor.5d.global.shared").count()
                        );
                        continue;
                    }
                    println!(
                        "{} {}: grid {} x {} threads, {} B of dynamic shared memory, staged levels {staged:?} ({} bulk reduce-adds in the PTX){tiles}",
                        config.label(),
                        ty.name(),
                        b.grid,
                        b.plan.launch().block[0],
                        b.plan.launch().dynamic_smem_bytes,
                        b.compiled.ptx.matches("cp.reduce.async.bulk.tensor").count()
                    );
                }
            }
        }
    }
    println!(
        "compiled {built} backward kernels with NVRTC ({:.2} s)",
        t.elapsed().as_secs_f64()
    );

    // 3. On a GPU: run and check.
    let gpu = match tma::runtime::gpu_available() {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("\nno GPU here ({e});\neverything up to the compiled CUBINs is done. On an sm_90 GPU this example also runs both kernels against the f64 reference.");
            return Ok(());
        }
    };
    println!(
        "\nGPU: {} (compute capability {:?})",
        gpu.name, gpu.compute_capability
    );
    let ctx = cudarc::driver::CudaContext::new(0)?;
    let mut rng = Rng::from_clock();
    let mut failed = Vec::new();
    // The backward: every size, type, distribution and config against the f64 reference
    // (MSDA_SIZES, MSDA_TYPES, MSDA_DISTS: a part of them).
    let sizes = dist::wanted("MSDA_SIZES", &dist::sizes(), |s| s.0);
    let types = dist::wanted("MSDA_TYPES", &Ty::ALL, |t| t.name());
    let dists = dist::wanted("MSDA_DISTS", &Dist::ALL, |d| d.name());
    for (name, size) in sizes {
        for &ty in &types {
            for &d in &dists {
                backward(&ctx, compiler, name, &size, ty, d, &mut rng, &mut failed)?;
            }
        }
    }
    // The baselines, at the seed size, on every distribution.
    for elem in Elem::ALL.into_iter().filter(|_| !bwd_only) {
        for d in Dist::ALL {
            baselines(&ctx, compiler, &m, elem, d, &mut rng, &mut failed)?;
        }
    }
    // The fast kernels, every size, type and distribution.
    for (name, size) in dist::sizes().into_iter().filter(|_| !bwd_only) {
        for ty in Ty::ALL {
            for d in Dist::ALL {
                let t = Instant::now();
                let inp = dist::inputs(&size, ty, d, &mut rng);
                let reference = msda_reference(&size, &inp.value, &inp.loc, &inp.attn);
                let mut dev = fast::FastDevice::new(&ctx, &size, &inp)?;
                let mut lines = Vec::new();
                for config in fast_configs() {
                    let b = fast::build(compiler, &size, ty, config, true)?;
                    let k = dev.load(&ctx, compiler, b)?;
                    dev.poison()?;
                    dev.launch(&k)?;
                    dev.sync()?;
                    let c = dist::Check::new(ty, &dev.output()?, &reference);
                    if !c.ok(ty) {
                        failed.push(format!(
                            "{name} {} {} {}",
                            ty.name(),
                            d.name(),
                            config.label()
                        ));
                    }
                    lines.push(format!("    {:<34} {}", config.label(), c.line(ty)));
                }
                println!(
                    "{name} ({} points, {:.1}% outside [0, 1]) {} {} ({:.2} s):\n{}",
                    size.attn_len(),
                    100.0 * inp.outside as f64 / size.attn_len() as f64,
                    ty.name(),
                    d.name(),
                    t.elapsed().as_secs_f64(),
                    lines.join("\n")
                );
            }
        }
    }
    if !failed.is_empty() {
        return Err(format!("wrong results: {}", failed.join(", ")).into());
    }
    println!("\nOK: every kernel matches the f64 reference at the rounding floor, every size, type and distribution");
    Ok(())
}

/// With MSDA_DUMP=<dir>: writes each seed-size kernel's source and CUBIN there (for
/// cuobjdump, nvcc or a standalone harness).
fn dump(size: &str, ty: Ty, b: &fast::Built) -> Res<()> {
    let Some(dir) = std::env::var_os("MSDA_DUMP") else {
        return Ok(());
    };
    if size != "seed" {
        return Ok(());
    }
    let stem = format!("{}-{}", b.config.label().replace(' ', "_"), ty.name());
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(format!("{stem}.cu")), b.source.text())?;
    std::fs::write(dir.join(format!("{stem}.cubin")), &b.compiled.cubin)?;
    Ok(())
}

/// The fast kernels the example checks: each design with weights and with the fused softmax,
/// msda_vec with all heads in a block, msda_stage with a cluster of two sharing the staging
/// by multicast, and the hybrid (only the smallest level staged).
fn fast_configs() -> Vec<Config> {
    let all_heads = Config {
        design: fast::Design::Vec {
            qpb: 1,
            all_heads: true,
        },
        ..Config::VEC
    };
    vec![
        Config::VEC,
        Config::VEC.with_softmax(),
        all_heads,
        Config::STAGE,
        Config::STAGE.with_softmax(),
        Config::STAGE.with_cluster(2),
        Config::HYBRID,
    ]
}

/// Every backward config on one size, type and distribution, each gradient against the f64
/// reference (weights or logits), outputs poisoned first.
#[allow(clippy::too_many_arguments)]
fn backward(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    compiler: &Compiler,
    name: &str,
    size: &Msda,
    ty: Ty,
    d: Dist,
    rng: &mut Rng,
    failed: &mut Vec<String>,
) -> Res<()> {
    let t = Instant::now();
    let inp = dist::inputs(size, ty, d, rng);
    let fwd = fast::FastDevice::new(ctx, size, &inp)?;
    let mut dev = bwd::BwdDevice::new(&fwd, rng)?;
    let g = &dev.grad_out_host;
    let ref_w = msda_backward(size, &inp.value, &inp.loc, Attn::Weights(&inp.attn), g);
    let ref_l = msda_backward(size, &inp.value, &inp.loc, Attn::Logits(&inp.logits), g);
    let mut lines = Vec::new();
    for config in bwd::bwd_configs(ty) {
        let b = bwd::build_bwd(compiler, size, ty, config, true)?;
        let k = dev.load(ctx, compiler, &fwd, b)?;
        dev.poison(&fwd)?;
        dev.launch(&fwd, &k)?;
        fwd.sync()?;
        let reference = if config.softmax { &ref_l } else { &ref_w };
        let c = bwd::BwdCheck::new(
            size,
            ty,
            config.grad16(),
            &dev.grads(&fwd)?,
            reference,
            &inp.loc,
        );
        let mut ok = c.ok(ty) || config.grad16();
        let mut extra = String::new();
        if config.deterministic() {
            // The same bits on every run (poisoned in between).
            let first = dev.grads(&fwd)?;
            let mut same = true;
            for _ in 0..2 {
                dev.poison(&fwd)?;
                dev.launch(&fwd, &k)?;
                fwd.sync()?;
                same &= bwd::same_bits(&first, &dev.grads(&fwd)?);
            }
            extra += if same {
                "; bit-identical over 3 runs"
            } else {
                "; NOT bit-identical over 3 runs"
            };
            ok &= same;
        }
        if !ok {
            failed.push(format!(
                "backward {name} {} {} {}",
                ty.name(),
                d.name(),
                config.label()
            ));
        }
        lines.push(format!("    {:<36} {}{extra}", config.label(), c.line(ty)));
    }
    println!(
        "backward {name} {} {} ({:.2} s):\n{}",
        ty.name(),
        d.name(),
        t.elapsed().as_secs_f64(),
        lines.join("\n")
    );
    Ok(())
}

/// msda_tma and msda_ldg on the seed size, one type and distribution, against the reference.
fn baselines(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    compiler: &Compiler,
    m: &Msda,
    elem: Elem,
    d: Dist,
    rng: &mut Rng,
    failed: &mut Vec<String>,
) -> Res<()> {
    let ty = if elem == Elem::F16 { Ty::F16 } else { Ty::Bf16 };
    let t = Instant::now();
    let di = dist::inputs(m, ty, d, rng);
    let inp = setup::Inputs {
        elem,
        value_bits: di.bits16,
        value: di.value,
        loc: di.loc,
        attn: di.attn,
        classes: [0; 4],
    };
    // Debug waits: a hung mbarrier becomes an error naming block and thread.
    let mut dev = Device::new(ctx, compiler, m, &inp, true)?;
    let (out_tma, out_ldg) = dev.run_both()?;
    let reference = msda_reference(m, &inp.value, &inp.loc, &inp.attn);
    println!(
        "\nbaselines, seed size, {} {} ({:.2} s):",
        elem.name(),
        d.name(),
        t.elapsed().as_secs_f64()
    );
    for (name, out) in [("msda_tma", &out_tma), ("msda_ldg", &out_ldg)] {
        let c = Check::new(elem, out, &reference);
        let ok = c.ok(elem);
        println!(
            "  {name}: {} {}",
            c.line(elem, &reference),
            if ok { "OK" } else { "FAIL" }
        );
        if !ok {
            failed.push(format!("{name} {} {}", elem.name(), d.name()));
        }
    }
    let (differ, max, bad) = setup::compare_outputs(elem, &out_tma, &out_ldg);
    println!(
        "  msda_tma vs msda_ldg: {differ} of {} elements differ in bits (max {max:.3e}), {bad} non-finite",
        out_tma.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::reference::{msda_reference, Msda};
    use super::setup::{self, Elem, Rng};

    fn tiny() -> Msda {
        Msda {
            batch: 1,
            queries: 1,
            heads: 1,
            channels: 2,
            points: 1,
            levels: vec![(2, 2), (1, 1)],
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * (1.0 + b.abs())
    }

    /// value[row][c]: level 0 is 2x2 (rows 0..4), level 1 is 1x1 (row 4).
    fn tiny_value() -> Vec<f32> {
        vec![
            1.0, 10.0, // (0, 0)
            2.0, 20.0, // (0, 1)
            3.0, 30.0, // (1, 0)
            4.0, 40.0, // (1, 1)
            5.0, 50.0, // level 1 (0, 0)
        ]
    }

    fn run(locs: [[f32; 2]; 2], attn: [f32; 2]) -> Vec<f64> {
        let m = tiny();
        let loc: Vec<f32> = locs.iter().flatten().copied().collect();
        msda_reference(&m, &tiny_value(), &loc, &attn)
    }

    #[test]
    fn centre_of_a_2x2_level_averages_the_four_pixels() {
        // x = y = 0.5 -> h_im = w_im = 0.5: each pixel weighs 1/4. Level 1 sampled at its
        // pixel centre (0.5, 0.5) -> exactly 5 / 50.
        let out = run([[0.5, 0.5], [0.5, 0.5]], [0.25, 0.75]);
        assert!(close(out[0], 0.25 * 2.5 + 0.75 * 5.0), "{out:?}");
        assert!(close(out[1], 0.25 * 25.0 + 0.75 * 50.0), "{out:?}");
    }

    #[test]
    fn pixel_centres_and_bilinear_fractions() {
        // x = 0.75 (w_im = 1.0), y = 0.25 (h_im = 0.0): exactly pixel (0, 1) = 2.
        let out = run([[0.75, 0.25], [2.0, 0.5]], [1.0, 1.0]);
        assert!(close(out[0], 2.0), "{out:?}");
        // x = 0.625 (w_im = 0.75), y = 0.375 (h_im = 0.25):
        // 0.75 * (0.25 * 1 + 0.75 * 2) + 0.25 * (0.25 * 3 + 0.75 * 4) = 2.25.
        let out = run([[0.625, 0.375], [2.0, 0.5]], [1.0, 0.0]);
        assert!(close(out[0], 2.25), "{out:?}");
        assert!(close(out[1], 22.5), "{out:?}");
    }

    #[test]
    fn zero_padding_at_and_beyond_the_borders() {
        // x = y = 0 -> h_im = w_im = -0.5: only pixel (0, 0), with weight 0.25.
        let out = run([[0.0, 0.0], [5.0, 5.0]], [1.0, 1.0]);
        assert!(close(out[0], 0.25), "{out:?}");
        // x = y = 1 -> h_im = w_im = 1.5: only pixel (1, 1), weight 0.25. Level 1 at
        // (1, 0.5): w_im = 0.5 -> half of its pixel.
        let out = run([[1.0, 1.0], [1.0, 0.5]], [1.0, 1.0]);
        assert!(close(out[0], 0.25 * 4.0 + 0.5 * 5.0), "{out:?}");
        // h_im <= -1 (y = -0.25 -> -1.0) or far away: nothing.
        let out = run([[0.5, -0.25], [-3.0, 0.5]], [1.0, 1.0]);
        assert!(close(out[0], 0.0) && close(out[1], 0.0), "{out:?}");
        // Just inside the -1 border: tiny but non-zero.
        let out = run([[0.5, -0.2], [-3.0, 0.5]], [1.0, 1.0]);
        // h_im = -0.9 -> row 0 weight 0.1; w_im = 0.5 -> (1 + 2) / 2.
        assert!((out[0] - 0.1 * 1.5).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn batches_run_in_parallel_like_one_thread() {
        let m = Msda {
            batch: 3,
            queries: 5,
            heads: 2,
            channels: 4,
            points: 2,
            levels: vec![(3, 4), (2, 2)],
        };
        let mut rng = Rng::new(7);
        let value: Vec<f32> = (0..m.value_len())
            .map(|_| rng.range(-1.0, 1.0) as f32)
            .collect();
        let loc: Vec<f32> = (0..2 * m.attn_len())
            .map(|_| rng.range(-0.2, 1.2) as f32)
            .collect();
        let attn: Vec<f32> = (0..m.attn_len()).map(|_| rng.unit() as f32).collect();
        let all = msda_reference(&m, &value, &loc, &attn);
        // Batch 1 alone, by shifting it to batch 0 of a one-batch problem.
        let one = Msda {
            batch: 1,
            ..m.clone()
        };
        let (vs, as_) = (
            m.spatial() * m.heads * m.channels,
            m.queries * m.heads * m.points_per_head(),
        );
        let b1 = msda_reference(
            &one,
            &value[vs..2 * vs],
            &loc[2 * as_..4 * as_],
            &attn[as_..2 * as_],
        );
        let os = m.queries * m.heads * m.channels;
        assert_eq!(&all[os..2 * os], &b1[..]);
    }

    #[test]
    fn inputs_cover_every_location_class_and_normalise_weights() {
        let m = Msda {
            batch: 1,
            queries: 40,
            ..Msda::seed()
        };
        let inp = setup::inputs(&m, Elem::Bf16, &mut Rng::new(1));
        assert!(inp.classes.iter().all(|&c| c > 0), "{:?}", inp.classes);
        assert!(inp.loc.contains(&0.0) && inp.loc.contains(&1.0));
        for group in inp.attn.chunks(m.points_per_head()) {
            let s: f32 = group.iter().sum();
            assert!((s - 1.0).abs() < 1e-5, "{s}");
        }
        assert_eq!(inp.value_bits.len(), m.value_len());
    }

    #[test]
    fn views_and_checks() -> Result<(), Box<dyn std::error::Error>> {
        let m = Msda::seed();
        setup::check_sizes(&m)?;
        // The last view ends exactly at the end of the value tensor.
        let (h, w) = m.levels[3];
        let bound = Elem::F16.bind_view(h, w, m.heads)?;
        let offset = (((m.batch - 1) * m.spatial() + m.level_start()[3]) * m.heads + m.heads - 1)
            * m.channels;
        assert_eq!(offset + (bound.extent_bytes() / 2) as usize, m.value_len());
        // Exact output passes, poison fails.
        let reference = vec![0.5f64, -0.25, 0.125];
        let good: Vec<u16> = reference
            .iter()
            .map(|&r| Elem::F16.to_bits(r as f32))
            .collect();
        assert!(setup::Check::new(Elem::F16, &good, &reference).ok(Elem::F16));
        let bad = vec![setup::POISON; 3];
        let c = setup::Check::new(Elem::F16, &bad, &reference);
        assert!(!c.ok(Elem::F16) && c.non_finite == 3);
        Ok(())
    }

    /// msda_stage's level tile, loaded by the CPU model of TMA at (n, 0, 0, head, 0) over the
    /// value from the level's first row, is the level's plane of (n, head): pixel (h, w),
    /// channel c at element (h * W + w) * D + c, for every level, batch and head.
    #[test]
    fn level_tiles_stage_the_plane_of_one_batch_and_head() -> Result<(), Box<dyn std::error::Error>>
    {
        use super::dist::Ty;
        use super::fast;
        let m = Msda {
            batch: 2,
            queries: 1,
            heads: 3,
            channels: 8,
            points: 1,
            levels: vec![(3, 5), (2, 2), (1, 7)],
        };
        let mut rng = Rng::new(3);
        let value: Vec<u16> = (0..m.value_len()).map(|_| rng.next_u64() as u16).collect();
        let bytes: Vec<u8> = value.iter().flat_map(|v| v.to_le_bytes()).collect();
        let (s, starts, row) = (m.spatial(), m.level_start(), m.heads * m.channels);
        for (l, &(h, w)) in m.levels.iter().enumerate() {
            let bound = fast::level_tile(&m, Ty::F16, l)?.bound().ok_or("static")?;
            let global = &bytes[starts[l] * row * 2..];
            for n in 0..m.batch {
                for head in 0..m.heads {
                    let smem = tma::model::load(&bound, global, &[n as i64, 0, 0, head as i64, 0])?;
                    assert_eq!(smem.len(), h * w * m.channels * 2);
                    for p in 0..h * w {
                        for c in 0..m.channels {
                            let i = (p * m.channels + c) * 2;
                            let got = u16::from_le_bytes([smem[i], smem[i + 1]]);
                            let want =
                                value[((n * s + starts[l] + p) * m.heads + head) * m.channels + c];
                            assert_eq!(got, want, "level {l} n {n} head {head} pixel {p} c {c}");
                        }
                    }
                }
            }
        }
        // The smallest levels first while they fit; the smallest alone when none fits.
        assert_eq!(
            fast::staged_levels(&m, Ty::F16, 2 * 16 * 4 + 7 * 16),
            vec![1, 2]
        );
        assert_eq!(fast::staged_levels(&m, Ty::F32, 1), vec![1]);
        let sh = fast::shapes(&m);
        assert_eq!(&sh.hws[..9], &[3, 2, 1, 5, 2, 7, 0, 15, 19]);
        Ok(())
    }

    /// The backward's reduce-add staging on the CPU model of TMA: each staged level's plane
    /// of (n, head), reduced through its tile at (n, 0, 0, head, 0) into a gradient buffer
    /// (f32, and f16 for grad16) from the level's first row, adds to exactly that (batch,
    /// head)'s plane of the level and to nothing else; twice adds twice.
    #[test]
    fn backward_reduce_adds_the_plane_of_one_batch_and_head(
    ) -> Result<(), Box<dyn std::error::Error>> {
        use super::bwd;
        use super::dist::Ty;
        use super::fast;
        use tma::model::ReduceOp;
        let m = Msda {
            batch: 2,
            queries: 1,
            heads: 3,
            channels: 8,
            points: 1,
            levels: vec![(3, 5), (2, 2), (1, 7)],
        };
        let (s, starts, row) = (m.spatial(), m.level_start(), m.heads * m.channels);
        for ty in [Ty::F32, Ty::F16] {
            for (l, &(h, w)) in m.levels.iter().enumerate() {
                let tile = if ty == Ty::F32 {
                    bwd::grad_tile(&m, l)?
                } else {
                    fast::level_tile(&m, ty, l)?
                };
                let bound = tile.bound().ok_or("static")?;
                let plane = h * w * m.channels;
                assert_eq!(tile.tx_bytes() as usize, plane * ty.bytes());
                for n in 0..m.batch {
                    for head in 0..m.heads {
                        // The buffer starts at 1.0 everywhere; the plane adds 0.25 * (p + 1).
                        let one: Vec<u8> =
                            (0..m.value_len()).flat_map(|_| to_bytes(ty, 1.0)).collect();
                        let src: Vec<u8> = (0..plane)
                            .flat_map(|p| to_bytes(ty, 0.25 * (p % 16 + 1) as f32))
                            .collect();
                        let mut global = one.clone();
                        let off = starts[l] * row * ty.bytes();
                        let coords = [n as i64, 0, 0, head as i64, 0];
                        for _ in 0..2 {
                            tma::model::reduce(
                                &bound,
                                ReduceOp::Add,
                                &src,
                                &coords,
                                &mut global[off..],
                            )?;
                        }
                        for i in 0..m.value_len() {
                            let (nn, rest) = (i / (s * row), i % (s * row));
                            let (r, hd, c) =
                                (rest / row, (rest % row) / m.channels, i % m.channels);
                            let mine = nn == n
                                && hd == head
                                && (starts[l]..starts[l] + h * w).contains(&r);
                            let want = if mine {
                                let p = (r - starts[l]) * m.channels + c;
                                1.0 + 2.0 * 0.25 * (p % 16 + 1) as f32
                            } else {
                                1.0
                            };
                            let got = from_bytes(ty, &global[i * ty.bytes()..]);
                            assert_eq!(got, want, "{ty:?} level {l} n {n} head {head} element {i}");
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The tile design's level-shaped tiles (msda_bwd_tiles' `split`): at the seed, 1, 4, 16
    /// and 32 threads a pixel (53 tiles a head, 21 without); on every size, block and split
    /// choice a pixel's threads are whole lanes of one warp, a tile's pixel fits the entry's
    /// 10 bits, the source renders each level's split, and the tiles a head and the grid are
    /// the levels' pixels in whole tiles.
    #[test]
    fn level_shaped_tiles_fit_a_warp_and_the_grid() {
        use super::bwd::TileShape;
        use super::dist;
        let seed = Msda::seed();
        let s = TileShape::new(&seed, false, true, 1024);
        assert_eq!(
            (s.threads, s.tpp, &s.split[..]),
            (1024, 1, &[1, 4, 16, 32][..])
        );
        assert_eq!(
            (
                s.per_head(&seed),
                TileShape::new(&seed, false, false, 1024).per_head(&seed)
            ),
            (53, 21)
        );
        assert!(s
            .prelude()
            .contains("return l == 0 ? 1 : l == 1 ? 4 : l == 2 ? 16 : l == 3 ? 32 : 1;"));
        // Three threads a pixel's channels (D = 96): no split (the butterfly needs a power of
        // two; build_bwd refuses the block, 1024 threads are not whole pixels).
        let d96 = Msda {
            channels: 96,
            ..seed.clone()
        };
        let s = TileShape::new(&d96, false, true, 1024);
        assert_eq!((s.tpp, &s.split[..]), (3, &[1, 1, 1, 1][..]));
        for (name, m) in dist::sizes() {
            for (det, threads) in [
                (false, 1024),
                (false, 512),
                (false, 256),
                (true, 512),
                (true, 256),
            ] {
                for split in [false, true] {
                    let s = TileShape::new(&m, det, split, threads);
                    assert_eq!(s.split.len(), m.levels.len());
                    let mut first = 0;
                    for (l, &(h, w)) in m.levels.iter().enumerate() {
                        let tpx = s.tpp * s.split[l];
                        assert!(s.split[l].is_power_of_two() && tpx <= 32, "{name} {l}");
                        assert!(split || s.split[l] == 1);
                        assert_eq!(s.threads % tpx, 0);
                        let pixels = s.pixels(l);
                        assert!(pixels <= 1024 && pixels * tpx as usize == s.threads as usize);
                        // The device's msda_tile_split(l) is this split (the tile of pixel
                        // p is msda_tile_first(l) + p / pixels, as per_head counts them).
                        let rendered = format!("l == {l} ? {} :", s.split[l]);
                        assert!(
                            s.prelude().contains(&rendered),
                            "{name} {l}: {}",
                            s.prelude()
                        );
                        first += (h * w).div_ceil(pixels);
                    }
                    assert_eq!(first, s.per_head(&m));
                    assert_eq!(s.grid(&m) as usize, m.batch * m.heads * first);
                }
            }
        }
    }

    /// Run 5's conflict-free builds are new configs beside run 4's keepers: the keepers'
    /// labels are what BENCHMARKS.md's rows name, every label is distinct (the bench and the
    /// checks pick configs by substring), the new ones carry "onestep" (one filter times old
    /// and new in one call) and the knobs leave the other designs alone.
    #[test]
    fn conflict_free_configs_sit_beside_the_keepers() {
        use super::bwd::{self, BwdConfig, BwdDesign};
        use super::dist::Ty;
        for ty in Ty::ALL {
            let labels: Vec<String> = bwd::bwd_configs(ty).iter().map(|c| c.label()).collect();
            let unique: std::collections::HashSet<&String> = labels.iter().collect();
            assert_eq!(unique.len(), labels.len(), "{labels:?}");
            let b = if ty == Ty::F32 { 3 } else { 5 };
            for kept in [
                "msda_bwd tiles q32 split onestep t512 u2".to_string(),
                format!("msda_bwd tiles q32 split onestep lvl t256 u2 b{b}"),
            ] {
                assert!(labels.contains(&kept), "{kept}: {labels:?}");
            }
            let new: Vec<&String> = labels
                .iter()
                .filter(|l| l.contains(" packed") || l.contains(" agg"))
                .collect();
            assert_eq!(new.len(), 5, "{labels:?}");
            assert!(new.iter().all(|l| l.contains("onestep")), "{new:?}");
            assert!(
                labels.contains(&"msda_bwd tiles q32 split onestep packed agg t512 u2".to_string())
            );
        }
        for c in [BwdConfig::ATOMIC, BwdConfig::TMA] {
            assert_eq!(c.conflict_free(true, true), c);
        }
        let c = BwdConfig::tiles(false)
            .one_step(512)
            .conflict_free(true, false);
        assert!(matches!(
            c.design,
            BwdDesign::Tiles {
                packed: true,
                agg: false,
                one_step: true,
                threads: 512,
                ..
            }
        ));
    }

    /// The plane design's stores on the CPU model of TMA: every block's plane (a box of its
    /// level's view at (n, ty0, tx0, head, 0), clipped at the level's end), stored for every
    /// tile of every level, (batch, head) and storage type, writes each element of grad_value
    /// exactly once, from the right place of the right plane; and the grid counts the tiles.
    /// Small planes (a budget of 8 KB: 1 x 16-pixel boxes here) so that levels take several
    /// boxes a row and the last one is clipped.
    #[test]
    fn plane_boxes_store_each_gradient_element_once() -> Result<(), Box<dyn std::error::Error>> {
        use super::bwd::{self, BwdConfig};
        use super::dist::Ty;
        let m = Msda {
            batch: 2,
            queries: 1,
            heads: 3,
            channels: 32,
            points: 1,
            levels: vec![(3, 37), (5, 6), (1, 2)],
        };
        let (s, starts, row) = (m.spatial(), m.level_start(), m.heads * m.channels);
        for ty in [Ty::F32, Ty::F16] {
            let config = BwdConfig::planes(64, 8);
            let bwd::PlanesBuild { grid, tiles, .. } = bwd::planes_plan(&m, ty, &config, 64, 8)?;
            let boxes: Vec<(usize, usize)> = tiles
                .iter()
                .map(|(_, t)| (t.spec().boxed[1] as usize, t.spec().boxed[2] as usize))
                .collect();
            assert_eq!(boxes[0], (1, 16), "{ty:?}: level 0's box");
            // Each element: which (level, n, head, tile, pixel of the box) wrote it.
            let mut writer = vec![None; m.value_len()];
            let mut blocks = 0;
            for (l, (_, tile)) in tiles.iter().enumerate() {
                let (h, w) = m.levels[l];
                let (th, tw) = boxes[l];
                let bound = tile.bound().ok_or("static")?;
                for n in 0..m.batch {
                    for head in 0..m.heads {
                        for (ty0, tx0) in (0..h.div_ceil(th))
                            .flat_map(|r| (0..w.div_ceil(tw)).map(move |c| (r * th, c * tw)))
                        {
                            blocks += 1;
                            // The plane: element (pixel p of the box, channel c) holds p * D + c
                            // (exact in f16 below 2048: the boxes here are 16 x 32).
                            let src: Vec<u8> = (0..th * tw * m.channels)
                                .flat_map(|e| to_bytes(ty, e as f32))
                                .collect();
                            let mut global = vec![0xffu8; m.value_len() * ty.bytes()];
                            let off = starts[l] * row * ty.bytes();
                            let coords = [n as i64, ty0 as i64, tx0 as i64, head as i64, 0];
                            tma::model::store(&bound, &src, &coords, &mut global[off..])?;
                            for i in 0..m.value_len() {
                                if global[i * ty.bytes()..(i + 1) * ty.bytes()]
                                    .iter()
                                    .all(|&b| b == 0xff)
                                {
                                    continue;
                                }
                                let (nn, rest) = (i / (s * row), i % (s * row));
                                let (r, hd, c) =
                                    (rest / row, (rest % row) / m.channels, i % m.channels);
                                let (y, x) = ((r - starts[l]) / w, (r - starts[l]) % w);
                                assert!(
                                    nn == n && hd == head && (starts[l]..starts[l] + h * w).contains(&r),
                                    "{ty:?} level {l} box ({ty0}, {tx0}) of (n {n}, head {head}) wrote element {i}"
                                );
                                let p = (y - ty0) * tw + (x - tx0);
                                assert_eq!(
                                    from_bytes(ty, &global[i * ty.bytes()..]),
                                    (p * m.channels + c) as f32
                                );
                                assert!(writer[i].is_none(), "{ty:?}: element {i} written twice");
                                writer[i] = Some((l, n, head, ty0, tx0));
                            }
                        }
                    }
                }
            }
            assert_eq!(blocks, grid as usize, "{ty:?}: the grid is a block a tile");
            assert!(
                writer.iter().all(Option::is_some),
                "{ty:?}: every element written"
            );
        }
        Ok(())
    }

    /// The band design's arithmetic on the CPU (`bwd::bands_model`: its filing, scales, fma
    /// rounding and integer sums) against the f64 reference: at the storage type's rounding
    /// floor with the planes `band_planes` picks, on two levels of several bands and on one
    /// crowded band (2^15 entries); and on the crowded band one plane misses f32's floor and
    /// loses to two in f16, which is why the rule takes two there.
    #[test]
    fn band_model_is_at_the_floor_with_the_planes_the_rule_picks() {
        use super::bwd;
        use super::dist::{self, Dist, Ty};
        use super::reference::{msda_backward, Attn};
        let spread = Msda {
            batch: 1,
            queries: 64,
            heads: 2,
            channels: 32,
            points: 4,
            levels: vec![(9, 13), (3, 5)],
        };
        let crowded = Msda {
            batch: 1,
            queries: 4096,
            heads: 1,
            channels: 32,
            points: 8,
            levels: vec![(2, 3)],
        };
        let mut rng = Rng::new(23);
        // rel L2 of grad_value and the limit BwdCheck::ok sets (1.1x the rounding floor + 1e-5).
        let run = |m: &Msda, ty: Ty, planes: u64, rng: &mut Rng| {
            let inp = dist::inputs(m, ty, Dist::Uniform, rng);
            let g: Vec<f32> = (0..m.out_len())
                .map(|_| ty.round(rng.range(-1.0, 1.0)) as f32)
                .collect();
            let reference = msda_backward(m, &inp.value, &inp.loc, Attn::Weights(&inp.attn), &g);
            // 2 KB of sums a band: bands of a row or two, so that lower entries are filed.
            let out = bwd::bands_model(m, ty, 2, planes, &inp.loc, &inp.attn, &g);
            let c = setup::Check::of(&out, &reference.value, |r| ty.round(r));
            assert_eq!(c.non_finite, 0);
            (c.rel_l2, 1.1 * c.rounding_rel_l2 + 1e-5)
        };
        for ty in [Ty::F16, Ty::Bf16, Ty::F32] {
            for m in [&spread, &crowded] {
                let planes = bwd::band_planes(m, ty);
                let (e, limit) = run(m, ty, planes, &mut rng);
                assert!(
                    e <= limit,
                    "{ty:?} {m:?}, {planes} plane(s): rel L2 {e:.2e} above {limit:.2e}"
                );
            }
        }
        assert_eq!(bwd::band_planes(&spread, Ty::F16), 1);
        assert_eq!(bwd::band_planes(&crowded, Ty::F16), 2);
        let (e, limit) = run(&crowded, Ty::F32, 1, &mut rng);
        assert!(
            e > limit,
            "f32 with one plane: rel L2 {e:.2e}, limit {limit:.2e}"
        );
        let (narrow, _) = run(&crowded, Ty::F16, 1, &mut rng);
        let (wide, _) = run(&crowded, Ty::F16, 2, &mut rng);
        assert!(
            narrow > 1.05 * wide,
            "the crowded band: one plane {narrow:.2e}, two {wide:.2e}"
        );
    }

    /// The band design refuses a level wider than one TMA box (a band is whole rows), naming the
    /// level, the band and the box's rule.
    #[test]
    fn band_design_refuses_a_level_wider_than_a_box() {
        use super::bwd::{self, BwdConfig};
        use super::dist::Ty;
        let m = Msda {
            batch: 1,
            queries: 10,
            heads: 2,
            channels: 32,
            points: 2,
            levels: vec![(4, 256), (3, 300)],
        };
        let config = BwdConfig::bands(512, 48);
        let ok = Msda {
            levels: vec![(4, 256)],
            ..m.clone()
        };
        assert!(bwd::bands_plan(&ok, Ty::F16, &config, 512, 48).is_ok());
        let e = bwd::bands_plan(&m, Ty::F16, &config, 512, 48)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("level 1 (3 x 300)") && e.contains("256"), "{e}");
    }

    /// The plane design refuses what it cannot count or encode, naming the rule: channels
    /// not a multiple of 32, a level side past 14 bits, a level's points past 31 bits.
    #[test]
    fn plane_design_refuses_what_it_cannot_hold() {
        use super::bwd::{self, BwdConfig};
        use super::dist::Ty;
        let ok = Msda {
            batch: 1,
            queries: 10,
            heads: 2,
            channels: 32,
            points: 2,
            levels: vec![(4, 5)],
        };
        let config = BwdConfig::planes(512, 108);
        assert!(bwd::planes_plan(&ok, Ty::F16, &config, 512, 108).is_ok());
        let cases = [
            (
                Msda {
                    channels: 48,
                    ..ok.clone()
                },
                "multiple of 32",
            ),
            (
                Msda {
                    levels: vec![(4, 16383)],
                    ..ok.clone()
                },
                "14 bits",
            ),
            (
                Msda {
                    queries: 1 << 29,
                    points: 4,
                    ..ok.clone()
                },
                "31 bits",
            ),
        ];
        for (m, rule) in cases {
            match bwd::planes_plan(&m, Ty::F16, &config, 512, 108) {
                Err(e) => assert!(e.to_string().contains(rule), "{e}"),
                Ok(_) => panic!("accepted {m:?} ({rule})"),
            }
        }
    }

    fn to_bytes(ty: super::dist::Ty, x: f32) -> Vec<u8> {
        match ty {
            super::dist::Ty::F32 => x.to_le_bytes().to_vec(),
            _ => ty.to_bits16(x).to_le_bytes().to_vec(),
        }
    }

    fn from_bytes(ty: super::dist::Ty, b: &[u8]) -> f32 {
        match ty {
            super::dist::Ty::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            _ => ty.bits16_to_f32(u16::from_le_bytes([b[0], b[1]])),
        }
    }

    /// The full seed size: how long the reference takes, and that an output which is the
    /// reference rounded to f16 / bf16 passes the checks with room to spare.
    /// `cargo test --release --example 03-deformable-attention -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn seed_reference_and_rounding_floor() {
        let m = Msda::seed();
        let mut rng = Rng::new(11);
        for elem in Elem::ALL {
            let inp = setup::inputs(&m, elem, &mut rng);
            let t = std::time::Instant::now();
            let reference = msda_reference(&m, &inp.value, &inp.loc, &inp.attn);
            let secs = t.elapsed().as_secs_f64();
            let rounded: Vec<u16> = reference.iter().map(|&r| elem.to_bits(r as f32)).collect();
            let c = setup::Check::new(elem, &rounded, &reference);
            println!(
                "{}: reference {secs:.2} s; {}",
                elem.name(),
                c.line(elem, &reference)
            );
            assert!(c.ok(elem));
            assert!(c.rel_l2 * 2.5 < elem.rel_l2_tolerance(), "{c:?}");
        }
    }
}
