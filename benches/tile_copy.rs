//! Benchmark of the persistent multi-stage TMA copy (examples/02-tile-copy/copy.cu) against
//! `cuMemcpyDtoD` of the same bytes, on a bf16 matrix larger than L2 (16384 x 16384 = 512 MiB;
//! override with TILE_COPY_DIM=<rows>x<cols>).
//!
//! For each tile (box / swizzle / repeats), ring depth 2..6 and blocks per SM 1..4 (those
//! whose shared memory fits, by the driver's occupancy calculator): the median of many
//! CUDA-event-timed launches after warm-up, GB/s counting bytes read + written, and the
//! ratio to the memcpy measured in the same run (before and after the table). Every kernel's
//! output is checked once (poisoned first, compared on the GPU) before it is timed; the
//! benchmark exits non-zero on a wrong copy.
//!
//! Without a GPU: prints "no GPU: skipped" and exits 0.
//! Run: `eval "$(scripts/cuda-tools.sh)"; cargo bench --bench tile_copy`

#[path = "../examples/02-tile-copy/common.rs"]
mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{CopyArgs, CopyTile, Res};
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream};
use tma::runtime::Compiler;
use tma::runtime::{Kernel, LaunchConfig, Module, TensorMap};

const WARMUP: usize = 5;
const REPS: usize = 50;
const CTAS_PER_SM: std::ops::RangeInclusive<u32> = 1..=4;
/// Goal: the best configuration reaches this fraction of memcpy.
const GOAL: f64 = 0.97;

fn main() -> Res<()> {
    let gpu = match tma::runtime::gpu_available() {
        Ok(g) => g,
        Err(e) => {
            // Still compile what would run, when NVRTC is here: a broken kernel shows now.
            if let Ok(compiler) = Compiler::global() {
                let options = common::compile_options(tma::Arch::Sm90a);
                let mut sources = vec![common::utils_source()?];
                for tile in common::copy_tiles() {
                    sources.push(tile.source()?);
                }
                let mut cubin = 0;
                for s in &sources {
                    cubin += compiler.compile_source(s, &options)?.cubin.len();
                }
                println!(
                    "compiled the benchmark's {} kernel sources with NVRTC for sm_90a ({cubin} B of CUBIN)",
                    sources.len()
                );
            }
            println!("no GPU: skipped ({})", first_line(&e.to_string()));
            if std::env::var("TMA_REQUIRE_GPU").as_deref() == Ok("1") {
                return Err("TMA_REQUIRE_GPU=1 and no GPU".into());
            }
            return Ok(());
        }
    };
    let Some(arch) = gpu.arch else {
        println!(
            "no GPU with TMA: skipped ({} is compute capability {:?})",
            gpu.name, gpu.compute_capability
        );
        return Ok(());
    };
    let (rows, cols) = dims()?;
    let total_start = Instant::now();
    let compiler = Compiler::global()?;
    let options = common::compile_options(arch);

    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let sms = u32::try_from(ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?)?;
    let optin =
        u32::try_from(ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?)?;
    let l2 = ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
    let n = usize::try_from(rows * cols)?;
    let bytes = (n * 2) as f64;
    println!(
        "{} ({sms} SMs, L2 {} MiB), TMA copy of {rows} x {cols} bf16 = {} MiB per copy; {REPS} timed reps after {WARMUP} warm-up, median",
        gpu.name,
        l2 >> 20,
        (n * 2) >> 20
    );

    // Inputs and the GPU-side checker.
    let utils = Module::compile_and_load(&ctx, compiler, &common::utils_source()?, &options)?;
    let u = Utils::new(&utils, &stream, sms)?;
    let mut d_in: CudaSlice<u16> = stream.alloc_zeros(n)?;
    let mut d_out: CudaSlice<u16> = stream.alloc_zeros(n)?;
    let seed = common::Rng::from_clock()?.seed();
    u.random(&mut d_in, seed)?;
    u.fill(&mut d_out, common::POISON_U16)?;
    // The checker must see the poison: every element differs before any copy.
    let before = u.count_diff(&d_in, &d_out)?;
    if before != n as u64 {
        return Err(
            format!("checker sees {before} differences of {n} on a poisoned output").into(),
        );
    }

    let mut timer = Timer::new(&ctx, REPS)?;
    let memcpy_ms = timer.median(&stream, || Ok(stream.memcpy_dtod(&d_in, &mut d_out)?))?;
    if u.count_diff(&d_in, &d_out)? != 0 {
        return Err("memcpy output differs from its input".into());
    }
    let gbps = |ms: f64| 2.0 * bytes / (ms * 1e-3) / 1e9;
    println!(
        "cuMemcpyDtoD: {:.1} us, {:.0} GB/s (read + write)\n",
        memcpy_ms * 1e3,
        gbps(memcpy_ms)
    );
    println!(
        "{:<22} {:>6} {:>7} {:>9} {:>10} {:>8} {:>9}",
        "tile", "stages", "CTAs/SM", "smem/CTA", "median us", "GB/s", "x memcpy"
    );

    let mut failures = Vec::new();
    let mut best: Option<(f64, String)> = None;
    for tile in common::copy_tiles() {
        let source = tile.source()?;
        let module = Module::compile_and_load(&ctx, compiler, &source, &options)?;
        let bound = tile.bind(rows, cols)?;
        // bf16 data kept as u16 bits (filled and compared bit for bit): raw bits, asked for.
        let map_in = TensorMap::new_raw_bits(&bound, &d_in)?;
        let map_out = TensorMap::new_raw_bits(&bound, &d_out)?;
        let args = CopyArgs::new(&tile, &map_in, &map_out, rows, cols)?;
        for stages in common::STAGES {
            let smem = tile.dynamic_smem(stages)?;
            let kernel = module.kernel(&CopyTile::kernel_name(stages))?;
            if smem > optin {
                println!(
                    "{:<22} {stages:>6} {:>7} {:>8}K  does not fit ({optin} B per block)",
                    tile.label,
                    "-",
                    smem / 1024
                );
                continue;
            }
            // Check once: poison, copy with one block per SM, compare on the GPU.
            u.fill(&mut d_out, common::POISON_U16)?;
            let cfg = common::plan_config(&stream, &kernel, sms)?;
            common::launch_copy(&kernel, &cfg, &args)?;
            module.synchronize(&stream)?;
            let diff = u.count_diff(&d_in, &d_out)?;
            if diff != 0 {
                println!(
                    "{:<22} {stages:>6} WRONG: {diff} of {n} elements differ; not timed",
                    tile.label
                );
                failures.push(format!(
                    "{} {stages} stages: {diff} elements differ",
                    tile.label
                ));
                continue;
            }
            // Blocks of this kernel that fit on one SM (the launch above opted it in to its
            // dynamic shared memory, so the calculator sees the real limit).
            let fit = kernel
                .function()
                .occupancy_max_active_blocks_per_multiprocessor(
                    common::COPY_THREADS,
                    smem as usize,
                    None,
                )?;
            for ctas in CTAS_PER_SM {
                let row = format!(
                    "{:<22} {stages:>6} {ctas:>7} {:>8}K",
                    tile.label,
                    smem.div_ceil(1024)
                );
                if ctas > fit {
                    println!("{row}  only {fit} fit per SM");
                    continue;
                }
                let cfg = common::plan_config(&stream, &kernel, sms * ctas)?;
                let ms = timer.median(&stream, || common::launch_copy(&kernel, &cfg, &args))?;
                let ratio = memcpy_ms / ms;
                println!("{row} {:>10.1} {:>8.0} {:>8.3}x", ms * 1e3, gbps(ms), ratio);
                if best.as_ref().is_none_or(|(r, _)| ratio > *r) {
                    best = Some((
                        ratio,
                        format!(
                            "{}, {stages} stages, {ctas} CTAs/SM: {:.0} GB/s",
                            tile.label,
                            gbps(ms)
                        ),
                    ));
                }
            }
        }
        // The last timed copy must still be right.
        let diff = u.count_diff(&d_in, &d_out)?;
        if diff != 0 {
            failures.push(format!(
                "{} after timing: {diff} elements differ",
                tile.label
            ));
        }
    }

    let memcpy_after = timer.median(&stream, || Ok(stream.memcpy_dtod(&d_in, &mut d_out)?))?;
    println!(
        "\ncuMemcpyDtoD again: {:.1} us, {:.0} GB/s (before the table: {:.0} GB/s; ratios use that)",
        memcpy_after * 1e3,
        gbps(memcpy_after),
        gbps(memcpy_ms)
    );
    if let Some((ratio, what)) = &best {
        println!(
            "best: {what} = {ratio:.3}x memcpy; goal >= {GOAL}x: {}",
            if *ratio >= GOAL { "met" } else { "NOT met" }
        );
    }
    println!("total {:.1} s", total_start.elapsed().as_secs_f64());
    if !failures.is_empty() {
        return Err(format!("wrong copies: {}", failures.join("; ")).into());
    }
    Ok(())
}

/// TILE_COPY_DIM=<rows>x<cols>, default 16384 x 16384.
fn dims() -> Res<(u64, u64)> {
    let Ok(v) = std::env::var("TILE_COPY_DIM") else {
        return Ok((16384, 16384));
    };
    let (r, c) = v
        .split_once('x')
        .ok_or("TILE_COPY_DIM is <rows>x<cols>, e.g. 16384x16384")?;
    Ok((r.trim().parse()?, c.trim().parse()?))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// Timing events, reused across measurements.
struct Timer {
    events: Vec<(CudaEvent, CudaEvent)>,
}

impl Timer {
    fn new(ctx: &Arc<CudaContext>, reps: usize) -> Res<Timer> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let events = (0..reps)
            .map(|_| Ok((ctx.new_event(flags)?, ctx.new_event(flags)?)))
            .collect::<Res<Vec<_>>>()?;
        Ok(Timer { events })
    }

    /// Median milliseconds of `f` over the reps, each between two events, after WARMUP
    /// untimed calls; the calls are queued back to back and read after one synchronisation.
    fn median(&mut self, stream: &Arc<CudaStream>, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
        for _ in 0..WARMUP {
            f()?;
        }
        for (start, end) in &self.events {
            start.record(stream)?;
            f()?;
            end.record(stream)?;
        }
        stream.synchronize()?;
        let mut ms = self
            .events
            .iter()
            .map(|(s, e)| Ok(f64::from(s.elapsed_ms(e)?)))
            .collect::<Res<Vec<f64>>>()?;
        ms.sort_by(f64::total_cmp);
        ms.get(ms.len() / 2)
            .copied()
            .ok_or_else(|| "no reps".into())
    }
}

/// The fill / random / compare kernels of copy.cu's utility section.
struct Utils {
    fill: Kernel,
    random: Kernel,
    count: Kernel,
    diff: std::cell::RefCell<CudaSlice<u64>>,
    stream: Arc<CudaStream>,
    grid: u32,
}

impl Utils {
    fn new(module: &Arc<Module>, stream: &Arc<CudaStream>, sms: u32) -> Res<Utils> {
        Ok(Utils {
            fill: module.kernel("tile_fill_u16")?,
            random: module.kernel("tile_random_u16")?,
            count: module.kernel("tile_count_diff_u16")?,
            diff: std::cell::RefCell::new(stream.alloc_zeros(1)?),
            stream: stream.clone(),
            grid: sms * 8,
        })
    }

    /// `kernel`'s launch over the helpers' grid: its plan's block.
    fn cfg(&self, kernel: &Kernel) -> Res<LaunchConfig> {
        Ok(kernel.plan_config(&self.stream, (self.grid, 1, 1))?)
    }

    fn fill(&self, p: &mut CudaSlice<u16>, v: u16) -> Res<()> {
        let n = p.len() as u64;
        let cfg = self.cfg(&self.fill)?;
        // SAFETY: tile_fill_u16(unsigned short* p, unsigned long long n, unsigned short v)
        // writes p[0..n), and p holds n elements.
        unsafe {
            self.fill
                .launch_builder(&cfg)
                .arg(p)
                .arg(&n)
                .arg(&v)
                .launch()
        }?;
        Ok(())
    }

    fn random(&self, p: &mut CudaSlice<u16>, seed: u64) -> Res<()> {
        let n = p.len() as u64;
        let cfg = self.cfg(&self.random)?;
        // SAFETY: tile_random_u16(unsigned short* p, unsigned long long n, unsigned long long
        // seed) writes p[0..n), and p holds n elements.
        unsafe {
            self.random
                .launch_builder(&cfg)
                .arg(p)
                .arg(&n)
                .arg(&seed)
                .launch()
        }?;
        Ok(())
    }

    /// Elements where `a` and `b` differ (synchronises).
    fn count_diff(&self, a: &CudaSlice<u16>, b: &CudaSlice<u16>) -> Res<u64> {
        let n = a.len().min(b.len()) as u64;
        let mut diff = self.diff.borrow_mut();
        self.stream.memset_zeros(&mut *diff)?;
        let cfg = self.cfg(&self.count)?;
        // SAFETY: tile_count_diff_u16(const unsigned short* a, const unsigned short* b,
        // unsigned long long n, unsigned long long* diff) reads a[0..n), b[0..n) and adds to
        // *diff; both hold at least n elements, diff one.
        unsafe {
            self.count
                .launch_builder(&cfg)
                .arg(a)
                .arg(b)
                .arg(&n)
                .arg(&mut *diff)
                .launch()
        }?;
        let host = self.stream.clone_dtoh(&*diff)?;
        Ok(host.first().copied().unwrap_or(u64::MAX) + u64::from(a.len() != b.len()))
    }
}
