//! What examples/02-tile-copy and benches/tile_copy share: the tiles, the kernel sources
//! (copy.cu), launch helpers, and CPU simulations of both kernels on the TMA model.
//! Included by both with `#[path]`; each uses part of it.
#![allow(dead_code)]

use std::error::Error;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use tma::model;
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::{CompileOptions, Source};
use tma::runtime::{Kernel, LaunchConfig, TensorMap};
use tma::smem::ElementOffsets;
use tma::{BoundSpec, Tile, ValidSpec};

pub type Res<T> = Result<T, Box<dyn Error>>;

/// The kernels: one file, a section per translation unit (see its header).
pub const COPY_CU: &str = include_str!("copy.cu");

/// Ring depths compiled into every copy module: `tile_copy_s2` .. `tile_copy_s6`.
pub const STAGES: std::ops::RangeInclusive<u32> = 2..=6;

/// Threads per copy block (thread 0 does the work) and per transpose block.
pub const COPY_THREADS: u32 = 32;
pub const TRANSPOSE_THREADS: u32 = 64;
/// Threads per block of the helper kernels (grid-stride loops: any block works).
pub const UTILS_THREADS: u32 = 256;
/// The helper kernels (copy.cu's utility section).
pub const UTILS_KERNELS: [&str; 3] = ["tile_fill_u16", "tile_random_u16", "tile_count_diff_u16"];

/// The poison written to outputs before a kernel runs: never produced by the random inputs
/// (bf16 bits masked with 0x7f7f; f32 bits masked with 0x7f7f_ffff).
pub const POISON_U16: u16 = 0xffff;
pub const POISON_U32: u32 = 0xffff_ffff;

// ---- the tiles -------------------------------------------------------------------------------
// bf16 matrices of any (run-time) shape. The load and the store of a copy use the same tile:
// the load swizzles into shared memory, the store un-swizzles.

tma::tma_2d! {
    /// 64 x 64 boxes (128 B rows: the whole 128B swizzle span), two per call: 64 x 128.
    pub CopySw128: bf16,
    global = [M = _, K = _],
    boxed = [64, 64],
    swizzle = 128,
    repeat = [1, 2],
}

tma::tma_2d! {
    /// CopySw128 with 256-byte L2 promotion of the loads.
    pub CopySw128L2: bf16,
    global = [M = _, K = _],
    boxed = [64, 64],
    swizzle = 128,
    repeat = [1, 2],
    l2_promotion = 256,
}

tma::tma_2d! {
    /// 128 x 64 boxes, no swizzle.
    pub CopyPlain: bf16,
    global = [M = _, K = _],
    boxed = [128, 64],
    swizzle = none,
}

tma::tma_2d! {
    /// 128 x 32 boxes (64 B rows: the 64B swizzle span), two per call: 128 x 64.
    pub CopySw64: bf16,
    global = [M = _, K = _],
    boxed = [128, 32],
    swizzle = 64,
    repeat = [1, 2],
}

tma::tma_2d! {
    /// 64 x 16 boxes (32 B rows: the 32B swizzle span), four per call: 64 x 64.
    pub CopySw32: bf16,
    global = [M = _, K = _],
    boxed = [64, 16],
    swizzle = 32,
    repeat = [1, 4],
}

tma::tma_2d! {
    /// 256 x 64 boxes, 128B swizzle: 32 KB per call.
    pub CopyTall: bf16,
    global = [M = _, K = _],
    boxed = [256, 64],
    swizzle = 128,
}

tma::tma_2d! {
    /// 32 x 256 boxes (512 B rows), no swizzle.
    pub CopyWide: bf16,
    global = [M = _, K = _],
    boxed = [32, 256],
    swizzle = none,
}

tma::tma_2d! {
    /// The transpose's tile: 32 x 32 f32 (128 B rows), 128B swizzle; both the input
    /// [rows][cols] and the output [cols][rows] use it.
    pub TrTile: f32,
    global = [R = _, C = _],
    boxed = [32, 32],
    swizzle = 128,
}

/// One copy configuration: a tile and what the kernel needs to know about it.
#[derive(Clone, Copy, Debug)]
pub struct CopyTile {
    pub label: &'static str,
    pub cuda_name: &'static str,
    pub tx_bytes: u64,
    pub smem_bytes: u64,
    pub smem_align: u64,
    valid: fn() -> &'static ValidSpec,
}

fn copy_tile<T: Tile>(label: &'static str) -> CopyTile {
    CopyTile {
        label,
        cuda_name: T::CUDA_NAME,
        tx_bytes: T::TX_BYTES,
        smem_bytes: T::SMEM_BYTES,
        smem_align: T::SMEM_ALIGN,
        valid: T::valid,
    }
}

/// Every copy configuration, in table order.
pub fn copy_tiles() -> Vec<CopyTile> {
    vec![
        copy_tile::<CopySw128>("64x64 sw128 x(1,2)"),
        copy_tile::<CopySw128L2>("64x64 sw128 x(1,2) L2"),
        copy_tile::<CopyPlain>("128x64 none"),
        copy_tile::<CopySw64>("128x32 sw64 x(1,2)"),
        copy_tile::<CopySw32>("64x16 sw32 x(1,4)"),
        copy_tile::<CopyTall>("256x64 sw128"),
        copy_tile::<CopyWide>("32x256 none"),
    ]
}

impl CopyTile {
    pub fn valid(&self) -> &'static ValidSpec {
        (self.valid)()
    }

    /// Elements one call moves (rows, cols): the box times its repeats.
    pub fn call_shape(&self) -> Res<(u64, u64)> {
        let spec = self.valid().spec();
        let dim = |d: usize| -> Res<u64> {
            let b = spec.boxed.get(d).ok_or("rank-2 tile expected")?;
            let r = spec.repeat.get(d).ok_or("rank-2 tile expected")?;
            let e = spec.element_strides.get(d).ok_or("rank-2 tile expected")?;
            if *e != 1 {
                return Err("the copy expects element strides of 1".into());
            }
            Ok(u64::from(*b) * u64::from(*r))
        };
        Ok((dim(0)?, dim(1)?))
    }

    /// The plan of `tile_copy_s<stages>`: the tile (named `CopyTile` for the kernel), a
    /// staging region of `stages` ring slots of it, 32 threads. Its layout and launch are
    /// computed once, here; copy.cu and the launch read them from it.
    pub fn plan(&self, stages: u32) -> Res<ValidKernelPlan> {
        Ok(KernelPlan::new(CopyTile::kernel_name(stages))
            .tile("CopyTile", self.valid())
            .staging("slots", self.valid(), stages)
            .block_threads(COPY_THREADS)
            .validate()?)
    }

    /// A ring slot: bytes from one slot to the next (the plan's).
    pub fn slot_bytes(&self) -> Res<u64> {
        let plan = self.plan(2)?;
        Ok(plan.region("slots").ok_or("the plan has slots")?.stride)
    }

    /// Dynamic shared memory of `tile_copy_s<stages>` (the plan's).
    pub fn dynamic_smem(&self, stages: u32) -> Res<u32> {
        Ok(self.plan(stages)?.launch().dynamic_smem_bytes)
    }

    /// The tile bound to a `rows x cols` matrix.
    pub fn bind(&self, rows: u64, cols: u64) -> Res<BoundSpec> {
        Ok(self.valid().bind(&[rows, cols], None)?)
    }

    /// Calls along each dim (the last ones may reach past the matrix).
    pub fn tiles(&self, rows: u64, cols: u64) -> Res<(i32, i32)> {
        let (cr, cc) = self.call_shape()?;
        let outer = i32::try_from(rows.div_ceil(cr))?;
        let inner = i32::try_from(cols.div_ceil(cc))?;
        if i64::from(outer) * i64::from(inner) > i64::from(i32::MAX) {
            return Err("too many tiles for the kernel's int arithmetic".into());
        }
        Ok((outer, inner))
    }

    /// The translation unit: prelude, this tile (named `CopyTile` for the kernel), the plans
    /// of `tile_copy_s2` .. `s6`, and copy.cu's ring section; it carries the plans' launches.
    pub fn source(&self) -> Res<Source> {
        let mut source = KernelSource::new();
        for stages in STAGES {
            source = source.plan(&self.plan(stages)?);
        }
        let source = source.body("#define COPY_SECTION_RING\n").body(COPY_CU);
        Ok(Source::kernel(&source)?)
    }

    pub fn kernel_name(stages: u32) -> String {
        format!("tile_copy_s{stages}")
    }
}

/// The transpose's plan: its tile (named `TransposeTile` for the kernel), two staging
/// copies of it (the input as loaded, the output for the store), 64 threads.
pub fn transpose_plan() -> Res<ValidKernelPlan> {
    Ok(KernelPlan::new("tile_transpose")
        .tile("TransposeTile", TrTile::valid())
        .staging("tiles", TrTile::valid(), 2)
        .block_threads(TRANSPOSE_THREADS)
        .validate()?)
}

/// The transpose's translation unit: its plan and copy.cu's transpose section.
pub fn transpose_source() -> Res<Source> {
    let source = KernelSource::new()
        .plan(&transpose_plan()?)
        .body("#define COPY_SECTION_TRANSPOSE\n")
        .body(COPY_CU);
    Ok(Source::kernel(&source)?)
}

/// The plan of helper kernel `kernel`: no shared memory, `UTILS_THREADS` threads.
pub fn utils_plan(kernel: &str) -> Res<ValidKernelPlan> {
    Ok(KernelPlan::new(kernel)
        .block_threads(UTILS_THREADS)
        .validate()?)
}

/// The benchmark's helpers (fill, random fill, compare): no tile; their plans' launches.
pub fn utils_source() -> Res<Source> {
    let mut source = KernelSource::new();
    for kernel in UTILS_KERNELS {
        source = source.plan(&utils_plan(kernel)?);
    }
    let source = source.body("#define COPY_SECTION_UTILS\n").body(COPY_CU);
    Ok(Source::kernel(&source)?)
}

/// Compile options for `arch`.
pub fn compile_options(arch: tma::Arch) -> CompileOptions {
    // TMA_BOUNDED_WAITS=1: bounded release waits (what the bound costs: BENCHMARKS.md).
    CompileOptions::new(arch)
        .bounded_waits(std::env::var("TMA_BOUNDED_WAITS").is_ok_and(|v| v == "1"))
}

/// The arguments of one `tile_copy_s<N>` launch.
pub struct CopyArgs<'a> {
    pub src: &'a TensorMap,
    pub dst: &'a TensorMap,
    pub tiles_outer: i32,
    pub tiles_inner: i32,
    pub call_rows: i32,
    pub call_cols: i32,
}

impl<'a> CopyArgs<'a> {
    pub fn new(
        tile: &CopyTile,
        src: &'a TensorMap,
        dst: &'a TensorMap,
        rows: u64,
        cols: u64,
    ) -> Res<Self> {
        let (tiles_outer, tiles_inner) = tile.tiles(rows, cols)?;
        let (cr, cc) = tile.call_shape()?;
        Ok(CopyArgs {
            src,
            dst,
            tiles_outer,
            tiles_inner,
            call_rows: i32::try_from(cr)?,
            call_cols: i32::try_from(cc)?,
        })
    }
}

/// The launch of `kernel` (a plan's: `tile_copy_s<N>`, `tile_transpose`) over `grid` blocks:
/// block and dynamic shared memory from its plan.
pub fn plan_config(stream: &Arc<CudaStream>, kernel: &Kernel, grid: u32) -> Res<LaunchConfig> {
    Ok(kernel.plan_config(stream, (grid, 1, 1))?)
}

/// Launches one copy (asynchronously).
pub fn launch_copy(kernel: &Kernel, cfg: &LaunchConfig, a: &CopyArgs<'_>) -> Res<()> {
    // SAFETY: tile_copy_s<N>(const __grid_constant__ CUtensorMap src, const __grid_constant__
    // CUtensorMap dst, int tiles_outer, int tiles_inner, int call_rows, int call_cols); the
    // maps were encoded over live buffers of the tile's shape, and the dynamic shared memory
    // is the kernel's plan's (checked against it on the host).
    unsafe {
        kernel
            .launch_builder(cfg)
            .arg(a.src)
            .arg(a.dst)
            .arg(&a.tiles_outer)
            .arg(&a.tiles_inner)
            .arg(&a.call_rows)
            .arg(&a.call_cols)
            .launch()
    }?;
    Ok(())
}

/// Tiles of the transpose's input (32 x 32 each).
pub fn transpose_tiles(rows: u64, cols: u64) -> Res<(i32, i32)> {
    Ok((
        i32::try_from(rows.div_ceil(32))?,
        i32::try_from(cols.div_ceil(32))?,
    ))
}

/// Launches one transpose of a `rows x cols` f32 matrix (asynchronously).
pub fn launch_transpose(
    kernel: &Kernel,
    cfg: &LaunchConfig,
    src: &TensorMap,
    dst: &TensorMap,
    rows: u64,
    cols: u64,
) -> Res<()> {
    let (outer, inner) = transpose_tiles(rows, cols)?;
    // SAFETY: tile_transpose(const __grid_constant__ CUtensorMap src, const __grid_constant__
    // CUtensorMap dst, int tiles_outer, int tiles_inner); src is [rows][cols], dst
    // [cols][rows], both TrTile maps over live buffers; 64 threads; shared memory as above.
    unsafe {
        kernel
            .launch_builder(cfg)
            .arg(src)
            .arg(dst)
            .arg(&outer)
            .arg(&inner)
            .launch()
    }?;
    Ok(())
}

/// Linear tile index of tile `k` of `block` in a grid of `grid` blocks, and how many tiles
/// the block gets: the kernels' schedule.
pub fn tiles_of_block(block: i64, grid: i64, total: i64) -> impl Iterator<Item = i64> {
    (0..)
        .map(move |k| block + k * grid)
        .take_while(move |&t| t < total)
}

// ---- random data ------------------------------------------------------------------------------

/// xorshift64, seeded from the clock: fresh data every run.
pub struct Rng(u64);

impl Rng {
    pub fn from_clock() -> Res<Rng> {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
        Ok(Rng(t.as_nanos() as u64 | 1))
    }
    pub fn seed(&self) -> u64 {
        self.0
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Finite bf16 bits, never POISON_U16.
    pub fn bf16_bits(&mut self) -> u16 {
        (self.next_u64() >> 16) as u16 & 0x7f7f
    }
    /// Finite f32 bits, never POISON_U32.
    pub fn f32_bits(&mut self) -> u32 {
        (self.next_u64() >> 16) as u32 & 0x7f7f_ffff
    }
}

// ---- comparisons --------------------------------------------------------------------------------

/// Mismatches between `want` and `got` (a row-major matrix of `cols` columns): their count
/// and the first few as "(row, col): want .. got ..".
pub fn compare<T: PartialEq + std::fmt::LowerHex + Copy>(
    want: &[T],
    got: &[T],
    cols: usize,
) -> (usize, Vec<String>) {
    let mut count = want.len().abs_diff(got.len());
    let mut first = Vec::new();
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w != g {
            count += 1;
            if first.len() < 5 {
                first.push(format!(
                    "({}, {}): want {w:#x} got {g:#x}",
                    i / cols.max(1),
                    i % cols.max(1)
                ));
            }
        }
    }
    (count, first)
}

// ---- CPU simulations on the TMA model ------------------------------------------------------------

/// Runs tile_copy's schedule on the CPU model of TMA: every block of a `grid`-block launch,
/// every tile it takes, the coordinates it passes (checked against the hardware rules for
/// loads and stores), a model load and a model store. The output must equal the input, every
/// tile must be taken once, and a call must fit its ring slot.
pub fn simulate_copy(tile: &CopyTile, rows: u64, cols: u64, grid: i64, rng: &mut Rng) -> Res<()> {
    let bound = tile.bind(rows, cols)?;
    let valid = tile.valid();
    let n = (rows * cols) as usize;
    let input: Vec<u8> = (0..n).flat_map(|_| rng.bf16_bits().to_le_bytes()).collect();
    let mut output = vec![0xffu8; input.len()];
    let (outer, inner) = tile.tiles(rows, cols)?;
    let (cr, cc) = tile.call_shape()?;
    let total = i64::from(outer) * i64::from(inner);
    let mut taken = vec![0u32; total as usize];
    for block in 0..grid {
        for t in tiles_of_block(block, grid, total) {
            taken[t as usize] += 1;
            let coords = [
                (t / i64::from(inner)) * cr as i64,
                (t % i64::from(inner)) * cc as i64,
            ];
            valid.check_coords(&coords)?;
            valid.check_store_coords(&coords)?;
            let smem = model::load(&bound, &input, &coords)?;
            let slot = tile.slot_bytes()?;
            if smem.len() as u64 > slot {
                return Err(format!(
                    "{}: a call spans {} B, the slot {slot} B",
                    tile.label,
                    smem.len(),
                )
                .into());
            }
            model::store(&bound, &smem, &coords, &mut output)?;
        }
    }
    if let Some(t) = taken.iter().position(|&c| c != 1) {
        return Err(format!("{}: tile {t} taken {} times", tile.label, taken[t]).into());
    }
    if output != input {
        let diff = output.iter().zip(&input).filter(|(a, b)| a != b).count();
        return Err(format!("{}: model copy differs in {diff} bytes", tile.label).into());
    }
    Ok(())
}

/// Byte offset of element (row, col) of a transpose tile as TMA swizzled it: what copy.cu's
/// `TransposeTile::at` computes (its arithmetic is `ElementOffsets::offset`).
pub fn tr_offset(row: usize, col: usize) -> Res<usize> {
    let valid = TrTile::valid();
    let offsets = ElementOffsets::new(valid).ok_or("no element offsets")?;
    let o = offsets
        .offset(&[row as u64, col as u64], 0)
        .ok_or("outside the tile")?;
    Ok(usize::try_from(o)?)
}

/// Thread t's 4 x 4 block in tile_transpose: (R, C) = (i, (i + q) % 8), t = 8 q + i.
pub fn transpose_block_of(thread: usize) -> (usize, usize) {
    let (i, q) = (thread & 7, thread >> 3);
    (i, (i + q) & 7)
}

/// Checks tile_transpose's thread mapping: the 64 threads cover the 64 4 x 4 blocks once, and
/// each quarter-warp touches 8 distinct 16-byte bank groups in every load and every store.
pub fn check_transpose_mapping() -> Res<()> {
    let mut seen = [false; 64];
    for t in 0..64 {
        let (r, c) = transpose_block_of(t);
        if std::mem::replace(&mut seen[r * 8 + c], true) {
            return Err(format!("block ({r}, {c}) has two threads").into());
        }
    }
    for quarter in 0..8 {
        for j in 0..4 {
            let mut loads = [false; 8];
            let mut stores = [false; 8];
            for t in quarter * 8..quarter * 8 + 8 {
                let (r, c) = transpose_block_of(t);
                let ld = (tr_offset(4 * r + j, 4 * c)? >> 4) & 7;
                let st = (tr_offset(4 * c + j, 4 * r)? >> 4) & 7;
                if std::mem::replace(&mut loads[ld], true)
                    || std::mem::replace(&mut stores[st], true)
                {
                    return Err(format!(
                        "quarter-warp {quarter}, row {j}: a shared-memory bank conflict"
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// Runs tile_transpose on the CPU model: model load of each input tile, the kernel's
/// thread mapping on the swizzled bytes, model store at the transposed coordinates; the
/// output must equal the CPU transpose.
pub fn simulate_transpose(rows: u64, cols: u64, grid: i64, rng: &mut Rng) -> Res<()> {
    let src = TrTile::bind(&[rows, cols])?;
    let dst = TrTile::bind(&[cols, rows])?;
    let (r, c) = (rows as usize, cols as usize);
    let input: Vec<u32> = (0..r * c).map(|_| rng.f32_bits()).collect();
    let in_bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out_bytes = vec![0xffu8; in_bytes.len()];
    let (outer, inner) = transpose_tiles(rows, cols)?;
    let total = i64::from(outer) * i64::from(inner);
    for block in 0..grid {
        for t in tiles_of_block(block, grid, total) {
            let (r0, c0) = ((t / i64::from(inner)) * 32, (t % i64::from(inner)) * 32);
            TrTile::valid().check_coords(&[r0, c0])?;
            TrTile::valid().check_store_coords(&[c0, r0])?;
            let smem_in = model::load(&src, &in_bytes, &[r0, c0])?;
            let mut smem_out = vec![0u8; 4096];
            for thread in 0..TRANSPOSE_THREADS as usize {
                let (br, bc) = transpose_block_of(thread);
                for j in 0..4 {
                    for m in 0..4 {
                        // v[j].m = input (4R + j, 4C + m) -> w[m].j = output (4C + m, 4R + j)
                        let from = tr_offset(4 * br + j, 4 * bc)? + 4 * m;
                        let to = tr_offset(4 * bc + m, 4 * br)? + 4 * j;
                        let v = smem_in.get(from..from + 4).ok_or("load smem too short")?;
                        smem_out
                            .get_mut(to..to + 4)
                            .ok_or("store smem too short")?
                            .copy_from_slice(v);
                    }
                }
            }
            model::store(&dst, &smem_out, &[c0, r0], &mut out_bytes)?;
        }
    }
    let got: Vec<u32> = out_bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let want = cpu_transpose(&input, r, c);
    let (diff, first) = compare(&want, &got, r);
    if diff != 0 {
        return Err(format!("model transpose differs in {diff} elements: {first:?}").into());
    }
    Ok(())
}

/// `rows x cols` -> `cols x rows`.
pub fn cpu_transpose<T: Copy>(input: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(input.len());
    for c in 0..cols {
        for r in 0..rows {
            out.push(input[r * cols + c]);
        }
    }
    out
}

/// A device buffer of `n` elements plus `guard` more, all set to `poison` (the guard shows
/// stores that write past the tensor).
pub fn poisoned<T: cudarc::driver::DeviceRepr + Copy>(
    stream: &Arc<CudaStream>,
    n: usize,
    guard: usize,
    poison: T,
) -> Res<CudaSlice<T>> {
    Ok(stream.clone_htod(&vec![poison; n + guard])?)
}
