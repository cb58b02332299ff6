//! A persistent, multi-stage TMA copy over a large bf16 matrix, for several boxes and
//! swizzles, and a transpose through swizzled shared memory.
//!
//! The tiles are declared once with `tma_2d!` (common.rs, shared with
//! benches/tile_copy.rs); the kernels are copy.cu:
//! - `tile_copy_s<N>`: one thread per block keeps a ring of N shared-memory slots full of
//!   TMA loads (one mbarrier each) and stores each tile as it lands, refilling a slot once
//!   `cp.async.bulk.wait_group.read` says its store has read it. Blocks stride over tiles.
//! - `tile_transpose`: a 32 x 32 f32 tile loaded with the 128B swizzle, transposed in
//!   shared memory by 64 threads without bank conflicts, stored by TMA at the transposed
//!   coordinates.
//!
//! Without a GPU it validates the tiles, runs both kernels' schedules on the CPU model of
//! TMA, renders and compiles every kernel with NVRTC (printing CUBIN sizes), says "no GPU"
//! and exits 0. On a GPU it copies an 8192 x 8192 bf16 matrix with every tile, ring depth
//! 2..6 and 1 or 2 blocks per SM, then ragged shapes (edge tiles partly or wholly outside
//! the matrix, a guard zone after the output), and transposes f32 matrices; each output is
//! poisoned first and compared bit for bit with fresh random input. It exits non-zero on
//! any wrong result.
//!
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo run --release --example 02-tile-copy`

#[path = "common.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{CopyArgs, CopyTile, Res, Rng, TrTile};
use cudarc::driver::{CudaContext, CudaStream};
use tma::runtime::{CompileOptions, Compiler, Source};
use tma::runtime::{Module, TensorMap};
use tma::{Arch, EncodeArgs, Tile};

/// The big matrix of the copy.
const ROWS: u64 = 8192;
const COLS: u64 = 8192;
/// Ragged copies: rows not a multiple of any box, columns a multiple of 8 (16 B) only, so
/// edge calls reach past the matrix (some repeated boxes lie wholly outside it).
const RAGGED: (u64, u64) = (4099, 4104);
/// Transposes: an even one and a ragged one (both inner dims multiples of 16 B).
const TRANSPOSES: [(u64, u64); 2] = [(2048, 3072), (2000, 3000)];
/// Elements after each output that must stay poisoned.
const GUARD: usize = 4096;

fn main() -> Res<()> {
    let tiles = common::copy_tiles();

    // 1. The tiles: validated at compile time by the macro; here is what each became.
    println!("copy tiles (bf16, run-time global dims; the load and the store share the tile):");
    for t in &tiles {
        let (cr, cc) = t.call_shape()?;
        let plan = t.valid().plan();
        println!(
            "  {:<22} {:<18} {cr:>3} x {cc:<3} per call, {} box(es), TX_BYTES {:>5}, smem {:>5} B aligned to {:>4} B; ring of 6: {:>6} B",
            t.label,
            t.cuda_name,
            plan.boxes,
            t.tx_bytes,
            t.smem_bytes,
            t.smem_align,
            t.dynamic_smem(6)?
        );
        if t.tx_bytes != cr * cc * 2 {
            return Err(format!("{}: TX_BYTES {} != {cr} x {cc} x 2", t.label, t.tx_bytes).into());
        }
    }
    println!(
        "transpose tile: {} f32 32 x 32, 128B swizzle, TX_BYTES {}, smem {} B aligned to {} B",
        TrTile::CUDA_NAME,
        TrTile::TX_BYTES,
        TrTile::SMEM_BYTES,
        TrTile::SMEM_ALIGN
    );
    println!(
        "\n{} over {ROWS} x {COLS}:\n{}",
        tiles[0].label,
        EncodeArgs::new(&tiles[0].bind(ROWS, COLS)?)
    );

    // 2. The kernels' schedules on the CPU model of TMA (every coordinate checked against
    //    the hardware rules; ragged shapes, odd grids).
    let mut rng = Rng::from_clock()?;
    let start = Instant::now();
    for t in &tiles {
        common::simulate_copy(t, 300, 392, 7, &mut rng)?;
    }
    common::check_transpose_mapping()?;
    common::simulate_transpose(100, 132, 5, &mut rng)?;
    common::simulate_transpose(64, 96, 64, &mut rng)?;
    println!(
        "\nCPU model of TMA: every copy schedule (300 x 392, 7 blocks) and the transpose (100 x 132, 64 x 96) give exact results; the transpose mapping is free of bank conflicts ({:.1} s)",
        start.elapsed().as_secs_f64()
    );

    // 3. Render and compile every kernel with NVRTC for sm_90a.
    let compiler = match Compiler::global() {
        Ok(c) => c,
        Err(e) => {
            println!("\nNVRTC is not available, so the kernels were not compiled:\n  {e}");
            println!("get it with: eval \"$(scripts/cuda-tools.sh)\"");
            return Err(e.into());
        }
    };
    let gpu = tma::runtime::gpu_available();
    let arch = match &gpu {
        Ok(g) => g.arch.ok_or_else(|| {
            format!(
                "{} (compute capability {:?}) has no TMA",
                g.name, g.compute_capability
            )
        })?,
        Err(_) => Arch::Sm90a,
    };
    // Debug waits: a wait that never completes becomes an error naming the tile, not a hang.
    let options = common::compile_options(arch).debug_waits(true);
    let mut copy_sources = Vec::new();
    println!();
    for t in &tiles {
        let source = t.source()?;
        compile(compiler, &source, &options, t.label, 10)?;
        copy_sources.push((*t, source));
    }
    let tr_source = common::transpose_source()?;
    compile(compiler, &tr_source, &options, "transpose", 2)?;

    // 4. On a GPU: run everything and check every element.
    match gpu {
        Ok(gpu) => {
            println!(
                "\nGPU: {} (compute capability {:?})",
                gpu.name, gpu.compute_capability
            );
            let failures = run_on_gpu(compiler, &options, &copy_sources, &tr_source, &mut rng)?;
            if failures > 0 {
                return Err(format!("{failures} run(s) gave wrong results").into());
            }
            println!("\nOK: every copy and transpose is bit for bit right");
            Ok(())
        }
        Err(e) => {
            println!("\nno GPU here ({e});\neverything up to the compiled CUBINs is done. On an sm_90 GPU this example also runs the kernels.");
            if std::env::var("TMA_REQUIRE_GPU").as_deref() == Ok("1") {
                return Err("TMA_REQUIRE_GPU=1 and no GPU".into());
            }
            Ok(())
        }
    }
}

/// Compiles one translation unit and checks it holds at least `min_tma` TMA instructions.
fn compile(
    compiler: &Compiler,
    source: &Source,
    options: &CompileOptions,
    label: &str,
    min_tma: usize,
) -> Res<()> {
    let start = Instant::now();
    let compiled = compiler.compile_source(source, options)?;
    let tma_ops = compiled.ptx.matches("cp.async.bulk.tensor").count();
    let kernels = compiled.ptx.matches(".entry").count();
    println!(
        "compiled {label:<22} with NVRTC: {:>6} B of CUBIN, {kernels} kernel(s), {tma_ops:>3} TMA instructions in the PTX ({:.2} s)",
        compiled.cubin.len(),
        start.elapsed().as_secs_f64()
    );
    if compiled.cubin.is_empty() || tma_ops < min_tma {
        return Err(format!("{label}: no CUBIN or too few TMA instructions").into());
    }
    Ok(())
}

fn run_on_gpu(
    compiler: &Compiler,
    options: &CompileOptions,
    copy_sources: &[(CopyTile, Source)],
    tr_source: &Source,
    rng: &mut Rng,
) -> Res<usize> {
    use cudarc::driver::sys::CUdevice_attribute as Attr;

    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let sms = u32::try_from(ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?)?;
    let optin =
        u32::try_from(ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?)?;
    println!("{sms} SMs, up to {optin} B of shared memory per block");
    let mut failures = 0;

    // The copies of the big matrix: fresh random input, poisoned output before every run.
    let n = (ROWS * COLS) as usize;
    let input: Vec<u16> = (0..n).map(|_| rng.bf16_bits()).collect();
    let d_in = stream.clone_htod(&input)?;
    let mut d_out = common::poisoned(&stream, n, GUARD, common::POISON_U16)?;
    let poison = vec![common::POISON_U16; n + GUARD];
    println!(
        "\ncopy {ROWS} x {COLS} bf16 ({} MiB), random input (seed {:#x}):",
        (n * 2) >> 20,
        rng.seed()
    );
    let mut modules = Vec::new();
    for (tile, source) in copy_sources {
        let module = Module::compile_and_load(&ctx, compiler, source, options)?;
        let bound = tile.bind(ROWS, COLS)?;
        // bf16 data kept as u16 bits (filled and compared bit for bit): raw bits, asked for.
        let map_in = TensorMap::new_raw_bits(&bound, &d_in)?;
        let map_out = TensorMap::new_raw_bits(&bound, &d_out)?;
        let args = CopyArgs::new(tile, &map_in, &map_out, ROWS, COLS)?;
        for stages in common::STAGES {
            let smem = tile.dynamic_smem(stages)?;
            if smem > optin {
                println!(
                    "  {:<22} {stages} stages: {smem} B of shared memory > {optin}: skipped",
                    tile.label
                );
                continue;
            }
            let ctas = 1 + stages % 2; // 1 or 2 blocks per SM
            stream.memcpy_htod(&poison, &mut d_out)?;
            let grid = sms * ctas;
            let kernel = module.kernel(&CopyTile::kernel_name(stages))?;
            let cfg = common::plan_config(&stream, &kernel, grid)?;
            let start = Instant::now();
            common::launch_copy(&kernel, &cfg, &args)?;
            module.synchronize(&stream)?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let out = stream.clone_dtoh(&d_out)?;
            let ok = check(
                &format!(
                    "{:<22} {stages} stages, {grid:>3} blocks ({ms:.2} ms)",
                    tile.label
                ),
                &input,
                &out,
                COLS as usize,
                common::POISON_U16,
            );
            failures += usize::from(!ok);
        }
        modules.push(module);
    }
    drop(d_out);

    // The transposes.
    let tr_module = Module::compile_and_load(&ctx, compiler, tr_source, options)?;
    let tr_kernel = tr_module.kernel("tile_transpose")?;
    println!("\ntranspose f32 through swizzled shared memory:");
    for (rows, cols) in TRANSPOSES {
        failures += usize::from(!transpose(
            &stream, &tr_module, &tr_kernel, sms, rows, cols, rng,
        )?);
    }

    // Ragged copies: partial and wholly-outside edge boxes; the guard must stay poisoned.
    let (rows, cols) = RAGGED;
    let n = (rows * cols) as usize;
    let input: Vec<u16> = (0..n).map(|_| rng.bf16_bits()).collect();
    let d_in = stream.clone_htod(&input)?;
    let mut d_out = common::poisoned(&stream, n, GUARD, common::POISON_U16)?;
    let poison = vec![common::POISON_U16; n + GUARD];
    println!("\nragged copy {rows} x {cols} bf16, 4 stages, 1 block per SM:");
    for ((tile, _), module) in copy_sources.iter().zip(&modules) {
        let bound = tile.bind(rows, cols)?;
        let map_in = TensorMap::new_raw_bits(&bound, &d_in)?;
        let map_out = TensorMap::new_raw_bits(&bound, &d_out)?;
        let args = CopyArgs::new(tile, &map_in, &map_out, rows, cols)?;
        stream.memcpy_htod(&poison, &mut d_out)?;
        let kernel = module.kernel(&CopyTile::kernel_name(4))?;
        let cfg = common::plan_config(&stream, &kernel, sms)?;
        common::launch_copy(&kernel, &cfg, &args)?;
        module.synchronize(&stream)?;
        let out = stream.clone_dtoh(&d_out)?;
        let label = format!(
            "{:<22} {} x {} calls",
            tile.label, args.tiles_outer, args.tiles_inner
        );
        failures += usize::from(!check(
            &label,
            &input,
            &out,
            cols as usize,
            common::POISON_U16,
        ));
    }
    Ok(failures)
}

/// One transpose of a fresh random `rows x cols` f32 matrix, checked against the CPU.
fn transpose(
    stream: &Arc<CudaStream>,
    module: &Arc<Module>,
    kernel: &tma::runtime::Kernel,
    sms: u32,
    rows: u64,
    cols: u64,
    rng: &mut Rng,
) -> Res<bool> {
    let n = (rows * cols) as usize;
    let input: Vec<u32> = (0..n).map(|_| rng.f32_bits()).collect();
    let d_in = stream.clone_htod(&input)?;
    let d_out = common::poisoned(stream, n, GUARD, common::POISON_U32)?;
    // f32 data kept as u32 bits: raw bits, asked for.
    let map_in = TensorMap::new_raw_bits(&TrTile::bind(&[rows, cols])?, &d_in)?;
    let map_out = TensorMap::new_raw_bits(&TrTile::bind(&[cols, rows])?, &d_out)?;
    let grid = sms * 8;
    let cfg = common::plan_config(stream, kernel, grid)?;
    let start = Instant::now();
    common::launch_transpose(kernel, &cfg, &map_in, &map_out, rows, cols)?;
    module.synchronize(stream)?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let out = stream.clone_dtoh(&d_out)?;
    let want = common::cpu_transpose(&input, rows as usize, cols as usize);
    let (outer, inner) = common::transpose_tiles(rows, cols)?;
    Ok(check(
        &format!("{rows} x {cols} -> {cols} x {rows}, {outer} x {inner} tiles, {grid} blocks ({ms:.2} ms)"),
        &want,
        &out,
        rows as usize,
        common::POISON_U32,
    ))
}

/// Prints one result line: `got` (the output and its guard) against `want`.
fn check<T: PartialEq + std::fmt::LowerHex + Copy>(
    label: &str,
    want: &[T],
    got: &[T],
    cols: usize,
    poison: T,
) -> bool {
    let (body, guard) = got.split_at(want.len().min(got.len()));
    let (diff, first) = common::compare(want, body, cols);
    let guard_hit = guard.iter().filter(|&&g| g != poison).count();
    let ok = diff == 0 && guard_hit == 0 && body.len() == want.len();
    println!(
        "  {label}: {}",
        if ok {
            "bit for bit".to_string()
        } else {
            format!(
                "WRONG: {diff} of {} elements differ, {guard_hit} guard elements written; first: {}",
                want.len(),
                first.join("; ")
            )
        }
    );
    ok
}
