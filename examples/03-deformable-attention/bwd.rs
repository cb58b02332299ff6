//! The backward kernels of msda_bwd.cu and msda_bwd_bands.cu for any sizes: their
//! configuration, kernel plans (the staged levels' f32 gradient planes as a tile set, reduced
//! into grad_value by TMA; the plane design's boxes of a level, stored by TMA; the band design's
//! value and gradient boxes of a band), the rendered source, the gradient buffers, the launches,
//! the band design's arithmetic on the CPU ([`bands_model`]) and the checks against the f64
//! reference. Shared by the example and the benchmark.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice};
use tma::plan::{KernelPlan, ValidKernelPlan};
use tma::render::KernelSource;
use tma::runtime::TensorMap;
use tma::runtime::{ByValue, CompileOptions, Compiled, Compiler, Kernel, Launch, Module, Source};
use tma::{Arch, ValidSpec};

use crate::dist::Ty;
use crate::fast::{self, Buf, FastDevice};
use crate::reference::{Grads, Msda};
use crate::setup::{self, Res, Rng};

pub const MSDA_BWD_CU: &str = include_str!("msda_bwd.cu");
pub const MSDA_BWD_BANDS_CU: &str = include_str!("msda_bwd_bands.cu");
/// (query, head) warps per block of the baseline.
const ATOMIC_WARPS: u32 = 8;
const CAST_THREADS: u32 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwdDesign {
    /// msda_bwd_atomic: the standard op's design (a lane per channel, scalar f32 atomics).
    Atomic,
    /// msda_bwd: `qpb` queries of one (batch, head) per block; the smallest levels whose f32
    /// planes (plus their 16-bit copies with `grad16`) fit `budget` bytes accumulate in shared
    /// memory and are reduced into grad_value by TMA (none with budget 0); the others by
    /// vectorised global reductions. `grad16`: grad_value in the storage type directly (no
    /// f32 buffer, no cast).
    Tma { qpb: u32, budget: u32, grad16: bool },
    /// No floating-point atomics on global memory: msda_bwd (at `qpb` queries a block)
    /// writes grad_loc and grad_attn and files each corner under its tile of
    /// [`tile_threads`] pixels of a level; msda_bwd_tiles, a block a tile, sorts the tile's
    /// entries by pixel in shared memory chunk by chunk, sums each pixel's, and writes
    /// grad_value in the storage type (no f32 buffer, no zeroing, no cast).
    /// `deterministic`: the sums in 64-bit fixed point (the same bits on every run).
    /// `split`: level-shaped tiles ([`TileShape`]): the denser a level, the fewer pixels a
    /// tile and the more threads share a pixel's entries, so that every tile holds about as
    /// many entries (without it, a thread a pixel everywhere: the seed's level 2 and 3 tiles
    /// are one block each with 35 and 133 entries a pixel, the kernel's tail).
    /// `one_step`: the point pass files a point's 4 corners in one step of the warp (thread
    /// `sub` of the (query, head) files corner `sub`: a `__match_any_sync` and a shared
    /// atomic a point instead of one a corner, each with 1/TPQ of the lanes working).
    /// `threads`: msda_bwd_tiles' block ([`tile_threads`] by default; 1024 / threads blocks
    /// an SM at 64 registers a thread, 512 / threads at 128 in the deterministic mode: smaller
    /// blocks let one block's sorting and barriers overlap another's loads).
    /// `by_level`: the point pass writes its records out after each level (their tiles are
    /// that level's) and reuses the shared memory: a quarter of it at L = 4 (12 KB instead of
    /// 49 KB at q32), so registers, not shared memory, bound its blocks an SM.
    /// `packed`: the point pass's records slotted (point, query, corner), so that one-step
    /// filing's stores hit 32 banks (not 4-way conflicts) and the flush writes runs of a tile's
    /// consecutive entries; grad_attn / grad_loc written a level at a time by consecutive
    /// threads (msda_bwd.cu's MSDA_PACKED). `agg`: msda_bwd_tiles' ranks from one shared
    /// atomic a distinct pixel of a warp, its pixel arrays padded a word a 32 and its heavy
    /// pixels' rows D + 1 long (MSDA_AGG). Both leave every gradient's value as it was (the
    /// fast mode's f32 sums may add a pixel's terms in another order).
    Tiles {
        qpb: u32,
        deterministic: bool,
        split: bool,
        one_step: bool,
        threads: u32,
        by_level: bool,
        packed: bool,
        agg: bool,
    },
    /// No atomics and no sort: msda_bwd writes grad_loc and grad_attn only; msda_bwd_planes,
    /// a block of `threads` a tile of one (batch, head, level) (a box of whole rows, at most
    /// what `smem_kb` KB of shared memory leaves for f32 sums: [`plane_box`]), reads the level's points, keeps those with a
    /// corner in its tile, and adds each one's weight * grad_out into the plane, a warp the
    /// owner of each pixel (or, when a round's corners crowd into a few pixels, a private
    /// copy a warp summed in warp order); one TMA store writes the plane in the storage type.
    /// Every sum is in a fixed order: the same bits on every run. `rows`: msda_bwd_rows
    /// first sorts each level's points by row (stably, so the order stays fixed), and a box
    /// reads the points of its rows only instead of every point of its level.
    Planes {
        threads: u32,
        smem_kb: u32,
        rows: bool,
    },
    /// No floating-point atomics and no f32 buffer (msda_bwd_bands.cu): each level of each
    /// (batch, head) in bands of whole rows ([`band_rows`]: as many as `plane_kb` KB of 32-bit
    /// sums hold); msda_band_count and msda_band_fill file each point under its band (and the
    /// next, for its lower corners, when they start it), and msda_bwd_bands, a block of
    /// `threads` a band, brings the band's value rows in by one TMA box, evaluates its points
    /// from them (grad_loc, grad_attn) and adds their terms into the band's plane of
    /// fixed-point sums by shared-memory integer atomics: exact, so the same bits on every run.
    /// One TMA store writes the band in the storage type.
    Bands { threads: u32, plane_kb: u32 },
}

/// The rows of each band of level `l` in the band design: as many as `plane_bytes` of 32-bit
/// sums hold (a pixel's D channels D + 1 words apart; f32 storage keeps two planes, the sums'
/// high and low parts: [`band_planes`]), at least 1, at most the level's rows and 255 (its
/// value box takes one row more, and a box dimension is at most 256).
pub fn band_rows(m: &Msda, ty: Ty, l: usize, plane_bytes: u64) -> u32 {
    let (h, w) = m.levels[l];
    let row = w as u64 * (m.channels as u64 + 1) * 4 * band_planes(m, ty);
    (plane_bytes / row).clamp(1, (h as u64).min(255)) as u32
}

/// The band design's grad_value on the CPU, step for step in the kernels' f32 and integer
/// arithmetic (weights given, not logits): each point filed under its band (and the next, for
/// its lower corners), each band's scale from its count and largest term bound, each term
/// rounded to the band's fixed point by the fma trick (and, with `planes` 2, its remainder to
/// the second plane's), the sums in wrapping 32-bit integers, the result rounded to `ty`. It
/// proves the precision rule of [`band_planes`] without a GPU (the kernel's sums are these,
/// in another order: integers, so the same).
pub fn bands_model(
    m: &Msda,
    ty: Ty,
    plane_kb: u32,
    planes: u64,
    loc: &[f32],
    attn: &[f32],
    grad_out: &[f32],
) -> Vec<f64> {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    const MAGIC_BITS: i32 = 0x4B40_0000;
    let fix = |x: f32| (x.to_bits() as i32).wrapping_sub(MAGIC_BITS);
    let (heads, d, lp) = (m.heads, m.channels, m.points_per_head());
    let (starts, s) = (m.level_start(), m.spatial());
    // msda_fast.cu's msda_coord (f32 storage: MSDA_EXACT) -> (pixel coordinate, floor, fraction).
    let coord = |x: f32, n: usize| {
        let nf = n as f32;
        let p = x * nf;
        let im = p - 0.5;
        let (mut fl, mut frac) = (im.floor(), im - im.floor());
        if ty == Ty::F32 {
            frac = (im - fl) + x.mul_add(nf, -p);
            if frac < 0.0 {
                (fl, frac) = (fl - 1.0, frac + 1.0);
            } else if frac >= 1.0 {
                (fl, frac) = (fl + 1.0, frac - 1.0);
            }
        }
        (im, fl, frac)
    };
    let mut out = vec![0.0; m.value_len()];
    for (n, h, (l, &(lh, lw))) in (0..m.batch)
        .flat_map(|n| (0..heads).map(move |h| (n, h)))
        .flat_map(|(n, h)| m.levels.iter().enumerate().map(move |lv| (n, h, lv)))
    {
        let rows = band_rows(m, ty, l, plane_kb as u64 * 1024) as usize;
        // Each band's entries and largest term bound.
        let mut bands: Vec<Vec<ModelEntry>> = vec![Vec::new(); lh.div_ceil(rows)];
        let mut tmax = vec![0f32; bands.len()];
        for q in 0..m.queries {
            let nqh = (n * m.queries + q) * heads + h;
            let g = &grad_out[nqh * d..(nqh + 1) * d];
            let gmax = g.iter().fold(0f32, |a, &x| a.max(x.abs()));
            for p in 0..m.points {
                let i = nqh * lp + l * m.points + p;
                let (hi, hf, fh) = coord(loc[2 * i + 1], lh);
                let (wi, wf, fw) = coord(loc[2 * i], lw);
                if !(hi > -1.0 && wi > -1.0 && hi < lh as f32 && wi < lw as f32) {
                    continue;
                }
                let (h0, w0) = (hf as i64, wf as i64);
                let wt = |k: usize| {
                    (if k & 2 != 0 { fh } else { 1.0 - fh })
                        * (if k & 1 != 0 { fw } else { 1.0 - fw })
                };
                let a = attn[i];
                let band = h0.max(0) as usize / rows;
                let bound = a.abs() * gmax;
                let wts = [wt(0), wt(1), wt(2), wt(3)];
                let entry = ModelEntry {
                    nqh,
                    h0,
                    w0,
                    aw: wts.map(|w| a * w),
                    lower: false,
                };
                bands[band].push(entry);
                tmax[band] = tmax[band].max(bound);
                if h0 >= 0 && ((h0 + 1) as usize) < lh && (h0 + 1) as usize % rows == 0 {
                    bands[band + 1].push(ModelEntry {
                        lower: true,
                        ..entry
                    });
                    tmax[band + 1] = tmax[band + 1].max(bound);
                }
            }
        }
        for (k, entries) in bands.iter().enumerate() {
            let r0 = (k * rows) as i64;
            let count = entries.len() as u32;
            let ec = 32 - count.leading_zeros() as i32;
            let et = if tmax[k] > 0.0 {
                libm_frexp_exp(tmax[k])
            } else {
                0
            };
            let scale_exp = if tmax[k] > 0.0 {
                (22 - et).min(30 - et - ec).clamp(-100, 100)
            } else {
                0
            };
            let kk = 16.min(31 - ec);
            let scale = 2f32.powi(scale_exp);
            let mut hi_sums = vec![0i32; rows * lw * d];
            let mut lo_sums = vec![0i32; rows * lw * d];
            for &ModelEntry {
                nqh,
                h0,
                w0,
                aw,
                lower,
            } in entries
            {
                for (c, awc) in aw.into_iter().enumerate() {
                    let (row, col) = (h0 + (c >> 1) as i64, w0 + (c & 1) as i64);
                    let inside = row >= 0 && row < lh as i64 && col >= 0 && col < lw as i64;
                    let mine = inside
                        && if lower {
                            c >> 1 == 1
                        } else {
                            row < r0 + rows as i64
                        };
                    if !mine {
                        continue;
                    }
                    let term_scale = awc * scale;
                    let at = (((row - r0) as usize) * lw + col as usize) * d;
                    for (ch, &gv) in grad_out[nqh * d..(nqh + 1) * d].iter().enumerate() {
                        let hi = term_scale.mul_add(gv, MAGIC);
                        hi_sums[at + ch] = hi_sums[at + ch].wrapping_add(fix(hi));
                        if planes == 2 {
                            let rem = term_scale.mul_add(gv, MAGIC - hi);
                            let lo = rem.mul_add(2f32.powi(kk), MAGIC);
                            lo_sums[at + ch] = lo_sums[at + ch].wrapping_add(fix(lo));
                        }
                    }
                }
            }
            for y in 0..rows.min(lh - k * rows) {
                for x in 0..lw {
                    for ch in 0..d {
                        let e = (y * lw + x) * d + ch;
                        let v = if planes == 2 {
                            (((hi_sums[e] as i64) << kk) + lo_sums[e] as i64) as f32
                                * 2f32.powi(-scale_exp - kk)
                        } else {
                            hi_sums[e] as f32 * 2f32.powi(-scale_exp)
                        };
                        let pixel = starts[l] + (k * rows + y) * lw + x;
                        out[((n * s + pixel) * heads + h) * d + ch] = ty.round(f64::from(v));
                    }
                }
            }
        }
    }
    out
}

/// A band's entry in [`bands_model`]: the point's (batch, query, head), its upper left corner,
/// its corners' weights times its attention weight, and whether it is the next band's lower
/// entry.
#[derive(Clone, Copy)]
struct ModelEntry {
    nqh: usize,
    h0: i64,
    w0: i64,
    aw: [f32; 4],
    lower: bool,
}

/// The exponent e of frexp (x = m 2^e, m in [0.5, 1)) of a positive normal f32.
fn libm_frexp_exp(x: f32) -> i32 {
    ((x.to_bits() >> 23) & 0xff) as i32 - 126
}

/// msda_band_count's block (and msda_band_fill's): 8 warps of [`BAND_QUERIES_A_WARP`] (query,
/// head)s each.
const BAND_COUNT_THREADS: u32 = 256;
/// (query, head)s a warp of msda_band_count and msda_band_fill (rendered as MSDA_QPW).
const BAND_QUERIES_A_WARP: u32 = 4;
/// msda_band_count's and msda_band_fill's words a band (rendered as MSDA_ACC; msda_bwd_bands.cu
/// lays them out); one a (batch, head) follows them.
const BAND_ACC: usize = 9;
/// msda_bwd_bands runs the bands of this many entries or more first (rendered as MSDA_BAND_HEAVY):
/// clustered points put a level's every point in one band, which must not start last.
const BAND_HEAVY: u32 = 2048;
/// msda_band_fill's work for msda_bwd_bands (msda_bwd_bands.cu's MsdaWork; rendered as
/// MSDA_WORK): a record of BAND_WORK words a band, then the list of heavy bands that go first
/// ([`BandsBuild::room`]) and its count.
const BAND_WORK: usize = 8;
/// msda_band_logits' block: a warp a (batch, query, head).
const BAND_LOGITS_THREADS: u32 = 256;

/// The band design's planes of 32-bit sums (msda_bwd_bands.cu's MSDA_FIX_WIDE): two, each
/// term's integer part and its next bits, for f32 storage and wherever a band may hold more than
/// [`BAND_NARROW_ENTRIES`] entries; else one. A band's scale keeps its count times the largest
/// term below 2^30, so each doubling of the count takes a bit off every term: one plane loses
/// at most 6 bits of 22 at that count (a 16-bit gradient needs 11; checked on the clustered
/// locations, which put a level's points in one band).
pub fn band_planes(m: &Msda, ty: Ty) -> u64 {
    // A band's entries: at most every point of its level, twice (its own and the lower ones).
    let most = 2 * m.queries * m.points;
    if ty == Ty::F32 || most > BAND_NARROW_ENTRIES {
        2
    } else {
        1
    }
}

/// The most entries a band of one plane may hold (see [`band_planes`]).
const BAND_NARROW_ENTRIES: usize = 1 << 14;

/// msda_bwd_planes' box of level `l`: rows of at most 256 columns (a box dimension's limit),
/// as many rows (at most 256) as fit `plane_bytes` of f32 sums.
pub fn plane_box(m: &Msda, l: usize, plane_bytes: u64) -> (u32, u32) {
    let (h, w) = m.levels[l];
    let row = m.channels as u64 * 4;
    let tw = (w as u64).min(256).min(plane_bytes / row).max(1);
    let th = (h as u64).min(256).min(plane_bytes / (tw * row)).max(1);
    (th as u32, tw as u32)
}

/// Queries a point-pass block of the plane design (no records: the forward's 64).
const PLANES_QPB: u32 = 64;
/// Pixels of a warp's private copy in msda_bwd_planes (clustered rounds).
const PRIVATE_PIXELS: u64 = 16;
/// Points a thread of msda_bwd_planes reads a round (msda_bwd.cu's MSDA_ROUND).
const PLANES_ROUND: u64 = 2;
/// msda_bwd_rows' block (32 warps, each sorting a 32nd of a level's points).
const ROWS_THREADS: u32 = 1024;
/// A level's rows in at most this many bins (msda_bwd_rows; rendered as MSDA_ROW_BINS).
const ROW_BINS: usize = 256;
/// Hits whose loads a warp of msda_bwd_planes issues before it adds them (MSDA_AHEAD). Measured
/// (H100, f16 seed, BENCHMARKS.md run 7): by row, 4 against 2 took `t512 108K` from 498 to
/// 445 us uniform and 449 to 406 clustered (8 spills and lost); without the sort a box's
/// rounds hold few hits a warp and 4 lost (477 -> 506 uniform).
const PLANES_AHEAD: u32 = 2;
const PLANES_AHEAD_BY_ROW: u32 = 4;

/// msda_bwd_tiles' block: a thread per pixel and 32 channels; 512 with 64-bit sums (32 of
/// them take 64 registers). 1024 f32 threads spill a little but ran 1.12x faster than 512
/// (H200, f16 uniform: 468 vs 524 us).
pub fn tile_threads(deterministic: bool) -> u32 {
    if deterministic {
        512
    } else {
        1024
    }
}

/// Entries a thread of msda_bwd_tiles sums a tile, for uniform locations, that the split
/// tiles aim at: the seed's level 0 at a thread a pixel (2.2 corners a pixel).
const SPLIT_TARGET: usize = 2;

/// msda_bwd_tiles' shape for one problem: its block and blocks an SM, the threads a pixel's 32 channels take
/// (`tpp`: D / 32, or one below 32 channels), and for each level the threads that split a
/// pixel's entries (`split[l]`, a power of two, `tpp * split[l] <= 32`: one warp sums them
/// by shuffles). A tile of level l is `threads / (tpp * split[l])` pixels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileShape {
    pub threads: u32,
    pub blocks_per_sm: u32,
    pub tpp: u32,
    pub split: Vec<u32>,
}

impl TileShape {
    /// `split`: each level's split from its corners a pixel for uniform locations (4 Q P / HW:
    /// at the seed 2.2, 8.7, 35, 133), [`SPLIT_TARGET`] entries a thread (seed: 1, 4, 16,
    /// 32; tiles of 1024, 256, 64 and 32 pixels, 53 a head instead of 21). Any split is
    /// correct; this only balances the blocks.
    pub fn new(m: &Msda, deterministic: bool, split: bool, threads: u32) -> TileShape {
        let tpp = (m.channels / m.channels.min(32)) as u32;
        // 64 registers a thread (1024 threads an SM), 128 with 64-bit sums (512).
        let blocks_per_sm = (if deterministic { 512 } else { 1024 } / threads).max(1);
        let cap = (32 / tpp).max(1);
        let split = m
            .levels
            .iter()
            .map(|&(h, w)| {
                let per_thread = 4 * m.queries * m.points / (h * w).max(1) / SPLIT_TARGET;
                let mut s = 1u32;
                // (The butterfly flips the split bits of the lane: TPP a power of two.)
                while split
                    && tpp.is_power_of_two()
                    && s * 2 <= cap
                    && (s as usize) * 2 <= per_thread
                {
                    s *= 2;
                }
                s
            })
            .collect();
        TileShape {
            threads,
            blocks_per_sm,
            tpp,
            split,
        }
    }
    /// Pixels a tile of level `l`.
    pub fn pixels(&self, l: usize) -> usize {
        (self.threads / (self.tpp * self.split[l])) as usize
    }
    /// Tiles of one (batch, head): each level's pixels in tiles of [`TileShape::pixels`].
    pub fn per_head(&self, m: &Msda) -> usize {
        m.levels
            .iter()
            .enumerate()
            .map(|(l, &(h, w))| (h * w).div_ceil(self.pixels(l)))
            .sum()
    }
    /// msda_bwd_tiles' grid: a block per tile of each level, for each (batch, head).
    pub fn grid(&self, m: &Msda) -> u32 {
        (m.batch * m.heads * self.per_head(m)) as u32
    }
    /// msda_tile_split(l) for msda_bwd.cu (rendered before it).
    pub fn prelude(&self) -> String {
        let mut f = String::from("1");
        for (l, s) in self.split.iter().enumerate().rev() {
            f = format!("l == {l} ? {s} : {f}");
        }
        format!(
            "\n// msda_bwd_tiles' threads a pixel's entries by level (rendered by bwd.rs)\n__device__ __forceinline__ int msda_tile_split(int l) {{ return {f}; }}\n"
        )
    }
}

/// Shared memory for the sums of the pixels a warp sums (msda_bwd.cu's MSDA_HEAVY_BYTES).
const HEAVY_BYTES: u64 = 16384;
/// stats[] of the tile design (msda_bwd.cu's MSDA_STATS).
const STATS: usize = 4;

/// Queries a point block of the tile design: 32 (its filing records: 12 bytes a corner).
const TILES_QPB: u32 = 32;

/// msda_bwd_tiles' plan: its block and its shared-memory arrays as scratch regions, sized by
/// the same numbers the kernel derives (it checks them with static_asserts).
fn tiles_plan(m: &Msda, shape: &TileShape, agg: bool) -> Res<ValidKernelPlan> {
    let threads = shape.threads as u64;
    // The most pixels a tile (a thread a pixel): the arrays serve every level (`agg`: a word
    // of padding a 32 pixels, and heavy rows of D + 1).
    let pixels = threads / shape.tpp as u64;
    let (pixels, hrow) = if agg {
        (pixels + pixels / 32, m.channels as u64 + 1)
    } else {
        (pixels, m.channels as u64)
    };
    let chunk_entries = 4 * threads;
    let heavy_cap = HEAVY_BYTES / (m.channels as u64 * 8);
    if heavy_cap == 0 {
        return Err(format!(
            "msda_bwd_tiles: D = {} is more than 2048 channels",
            m.channels
        )
        .into());
    }
    let point_blocks = m.queries.div_ceil(TILES_QPB as usize) as u64;
    KernelPlan::new("msda_bwd_tiles")
        .block_threads(threads as u32)
        .blocks_per_sm(shape.blocks_per_sm)
        .scratch("hist", pixels * 4, 16)
        .scratch("off", pixels * 4, 16)
        .scratch("slot", pixels * 4, 16)
        .scratch("list", chunk_entries * 8, 16)
        .scratch("heavy", (heavy_cap + 1) * 4, 16)
        .scratch("hsum", heavy_cap * hrow * 8, 16)
        .scratch("segs", point_blocks * 8, 16)
        .scratch("seg_first", point_blocks * 4, 16)
        .validate()
        .map_err(|e| format!("msda_bwd_tiles: {e}").into())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BwdConfig {
    pub design: BwdDesign,
    /// `attn` holds logits (fused softmax): the gradient is the logits'.
    pub softmax: bool,
    pub unroll: u32,
    /// The point pass's blocks an SM its registers must allow, at 32 channels (build_bwd keeps
    /// its threads an SM for other channel counts).
    pub minb: u32,
}

impl BwdConfig {
    pub const ATOMIC: BwdConfig = BwdConfig {
        design: BwdDesign::Atomic,
        softmax: false,
        unroll: 1,
        minb: 1,
    };
    /// Levels 2 and 3 of the seed size staged (148 KB of f32 planes: one block per SM).
    pub const TMA: BwdConfig = BwdConfig {
        design: BwdDesign::Tma {
            qpb: 128,
            budget: 160 * 1024,
            grad16: false,
        },
        softmax: false,
        unroll: 2,
        minb: 1,
    };
    pub fn with_softmax(self) -> BwdConfig {
        BwdConfig {
            softmax: true,
            ..self
        }
    }
    /// The TMA design with other knobs.
    pub fn tma(qpb: u32, budget: u32, grad16: bool) -> BwdConfig {
        BwdConfig {
            design: BwdDesign::Tma {
                qpb,
                budget,
                grad16,
            },
            ..BwdConfig::TMA
        }
    }
    /// The tile design, fast or deterministic (a thread a pixel, msda_bwd_tiles at its default
    /// block).
    pub fn tiles(deterministic: bool) -> BwdConfig {
        BwdConfig {
            design: BwdDesign::Tiles {
                qpb: TILES_QPB,
                deterministic,
                split: false,
                one_step: false,
                threads: tile_threads(deterministic),
                by_level: false,
                packed: false,
                agg: false,
            },
            ..BwdConfig::TMA
        }
    }
    /// The plane design: msda_bwd_planes at `threads` a block and `smem_kb` KB of shared memory.
    pub fn planes(threads: u32, smem_kb: u32) -> BwdConfig {
        BwdConfig {
            design: BwdDesign::Planes {
                threads,
                smem_kb,
                rows: false,
            },
            ..BwdConfig::TMA
        }
    }
    /// The plane design with the points sorted by row first (msda_bwd_rows): a box reads its
    /// rows' points only.
    pub fn planes_by_row(threads: u32, smem_kb: u32) -> BwdConfig {
        BwdConfig {
            design: BwdDesign::Planes {
                threads,
                smem_kb,
                rows: true,
            },
            ..BwdConfig::TMA
        }
    }
    /// The tile design with level-shaped tiles and one-step filing, msda_bwd_tiles at
    /// `block` threads (other designs unchanged).
    pub fn one_step(self, block: u32) -> BwdConfig {
        let mut c = self;
        if let BwdDesign::Tiles {
            split,
            one_step,
            threads,
            ..
        } = &mut c.design
        {
            (*split, *one_step, *threads) = (true, true, block);
        }
        c
    }
    /// The tile design's records written out level by level, and the point pass at `minb`
    /// blocks an SM (its registers capped to fit them; other designs unchanged).
    pub fn by_level(self, minb: u32) -> BwdConfig {
        let mut c = self;
        if let BwdDesign::Tiles { by_level, .. } = &mut c.design {
            *by_level = true;
            c.minb = minb;
        }
        c
    }
    /// The tile design's point pass with its records packed (point, query, corner) and its
    /// grad_attn / grad_loc written a level at a time (`packed`), and msda_bwd_tiles without
    /// its avoidable bank conflicts (`agg`); other designs unchanged.
    pub fn conflict_free(self, packed_records: bool, aggregated_ranks: bool) -> BwdConfig {
        let mut c = self;
        if let BwdDesign::Tiles { packed, agg, .. } = &mut c.design {
            (*packed, *agg) = (packed_records, aggregated_ranks);
        }
        c
    }
    /// The band design: msda_bwd_bands at `threads` a block, `plane_kb` KB of sums a band.
    pub fn bands(threads: u32, plane_kb: u32) -> BwdConfig {
        BwdConfig {
            design: BwdDesign::Bands { threads, plane_kb },
            ..BwdConfig::TMA
        }
    }
    pub fn deterministic(&self) -> bool {
        matches!(
            self.design,
            BwdDesign::Tiles {
                deterministic: true,
                ..
            } | BwdDesign::Planes { .. }
                | BwdDesign::Bands { .. }
        )
    }
    /// grad_value is written in the storage type (no f32 buffer).
    pub fn writes_storage_type(&self) -> bool {
        self.grad16()
            || matches!(
                self.design,
                BwdDesign::Tiles { .. } | BwdDesign::Planes { .. } | BwdDesign::Bands { .. }
            )
    }
    pub fn grad16(&self) -> bool {
        matches!(self.design, BwdDesign::Tma { grad16: true, .. })
    }
    pub fn kernel_name(&self) -> &'static str {
        match self.design {
            BwdDesign::Atomic => "msda_bwd_atomic",
            BwdDesign::Tma { .. } | BwdDesign::Tiles { .. } | BwdDesign::Planes { .. } => {
                "msda_bwd"
            }
            BwdDesign::Bands { .. } => "msda_bwd_bands",
        }
    }
    pub fn label(&self) -> String {
        let knobs = match self.design {
            BwdDesign::Atomic => String::new(),
            BwdDesign::Tma {
                qpb,
                budget,
                grad16,
            } => format!(
                " q{qpb} {}K{} u{}",
                budget / 1024,
                if grad16 { " grad16" } else { "" },
                self.unroll
            ),
            BwdDesign::Tiles {
                qpb,
                deterministic,
                split,
                one_step,
                threads,
                by_level,
                packed,
                agg,
            } => format!(
                " tiles q{qpb}{}{}{}{}{}{}{} u{}{}",
                if split { " split" } else { "" },
                if one_step { " onestep" } else { "" },
                if by_level { " lvl" } else { "" },
                if packed { " packed" } else { "" },
                if agg { " agg" } else { "" },
                if deterministic { " deterministic" } else { "" },
                // Only when not the default (the earlier runs' labels stay).
                if threads == tile_threads(deterministic) {
                    String::new()
                } else {
                    format!(" t{threads}")
                },
                self.unroll,
                if self.minb == 1 {
                    String::new()
                } else {
                    format!(" b{}", self.minb)
                }
            ),
            BwdDesign::Planes {
                threads,
                smem_kb,
                rows,
            } => format!(
                " planes t{threads} {smem_kb}K{} u{}",
                if rows { " rows" } else { "" },
                self.unroll
            ),
            BwdDesign::Bands { threads, plane_kb } => format!(" t{threads} {plane_kb}K"),
        };
        format!(
            "{}{knobs}{}",
            self.kernel_name(),
            if self.softmax { " softmax" } else { "" }
        )
    }
}

/// The backward configs the example checks (and the benchmark times): the standard op's
/// design, the TMA design (levels 2-3 staged at the seed size; the smallest only; none), the
/// tile design (fast and deterministic, and run 4's level-shaped tiles with one-step filing,
/// `t512`, and by-level filing, `lvl t256`), each with weights and some with logits, and for
/// 16-bit types grad_value reduced in the type directly.
pub fn bwd_configs(ty: Ty) -> Vec<BwdConfig> {
    // The by-level point pass's blocks an SM once shared memory no longer bounds them: 16-bit
    // blocks are 128 threads (5 of them: <= 102 registers), f32 ones 256 (3: <= 85).
    let lvl_minb = if ty == Ty::F32 { 3 } else { 5 };
    let mut v = vec![
        BwdConfig::ATOMIC,
        BwdConfig::ATOMIC.with_softmax(),
        BwdConfig::TMA,
        BwdConfig::TMA.with_softmax(),
        BwdConfig::tma(128, 40 * 1024, false),
        BwdConfig::tma(64, 0, false),
        BwdConfig::tiles(false),
        BwdConfig::tiles(false).with_softmax(),
        BwdConfig::tiles(true),
        // Run 4's two keepers (H100, f16 seed): level-shaped tiles with one-step filing at 512
        // threads, the fastest on uniform locations (448 us, the tile design's 480); by-level
        // filing at 256 threads, the fastest on clustered ones (474 us). The other run-4
        // variants (split alone, 1024 threads, their deterministic builds: 501-937 us) were
        // slower than one of these or than the deterministic tiles (609 us) and are not timed
        // for a pick; the deterministic level-shaped build stays, so the 64-bit sums'
        // butterfly over a pixel's split threads is checked.
        BwdConfig::tiles(false).one_step(512),
        BwdConfig::tiles(false).one_step(512).with_softmax(),
        BwdConfig::tiles(false).one_step(256).by_level(lvl_minb),
        BwdConfig::tiles(true).one_step(512),
        // Run 5's candidates (ncu on run 4's keepers: 4.2-way bank conflicts on the point
        // pass's record stores, 32 % excess global sectors from its scattered 8-byte entries
        // and per-point grad_attn / grad_loc stores; 57 % excess shared wavefronts in
        // msda_bwd_tiles; NOTES.md, run 5): `packed` alone, then with `agg`, on both keepers;
        // the softmax and deterministic builds so the held gradients and the aggregated ranks
        // are checked in every mode. Measured (H100, f16 seed, BENCHMARKS.md run 5): `packed
        // t512` is now the fastest on uniform locations (415 us, the keeper 464 in the same
        // call) and `lvl packed agg t256 b5` on clustered ones (461 us).
        BwdConfig::tiles(false)
            .one_step(512)
            .conflict_free(true, false),
        BwdConfig::tiles(false)
            .one_step(512)
            .conflict_free(true, true),
        BwdConfig::tiles(false)
            .one_step(512)
            .conflict_free(true, true)
            .with_softmax(),
        BwdConfig::tiles(false)
            .one_step(256)
            .by_level(lvl_minb)
            .conflict_free(true, true),
        BwdConfig::tiles(true)
            .one_step(512)
            .conflict_free(true, true),
    ];
    // The plane design (no floating-point atomics, deterministic; NOTES.md, runs 6 and 7):
    // 512 threads and two blocks an SM, or 1024 and one with twice the plane; the points
    // sorted by row first (msda_bwd_rows), or (run 6's build, kept to compare) every box
    // reading every point of its level. Measured (H100, f16 seed, BENCHMARKS.md run 7, one
    // call): by row `t512` 445 us uniform, 406 clustered, `t1024` 538 / 369; run 6's `t512`
    // 477 / 515 (the tile design's fastest, `packed t512`, 424 / 485).
    v.push(BwdConfig::planes(512, 108));
    v.push(BwdConfig::planes_by_row(512, 108));
    v.push(BwdConfig::planes_by_row(512, 108).with_softmax());
    v.push(BwdConfig::planes_by_row(1024, 216));
    // The band design (deterministic, no f32 buffer; msda_bwd_bands.cu): two blocks an SM with
    // bands of 2 rows of the seed's level 0, or one block of 1024 threads with bands of 4.
    v.push(BwdConfig::bands(512, 48));
    v.push(BwdConfig::bands(512, 48).with_softmax());
    v.push(BwdConfig::bands(1024, 96));
    if ty != Ty::F32 {
        v.push(BwdConfig::tma(128, 60 * 1024, true));
    }
    // MSDA_BWD_FILTER=<text>[|<text>...]: only the configs whose label contains one of them.
    if let Ok(f) = std::env::var("MSDA_BWD_FILTER") {
        v.retain(|c| f.split('|').any(|w| c.label().contains(w)));
    }
    v
}

/// A backward kernel rendered and compiled (no GPU needed).
pub struct BuiltBwd {
    pub config: BwdConfig,
    pub source: Source,
    pub options: CompileOptions,
    pub compiled: Arc<Compiled>,
    /// The staged levels and the tile each one's reduce-add goes through (f32, or the
    /// forward's level tile in the storage type with `grad16`); in the plane design, every
    /// level and its output box's tile (the maps are made from these).
    pub staged: Vec<(usize, ValidSpec)>,
    pub plan: ValidKernelPlan,
    /// The f32 -> 16-bit cast's plan (16-bit storage through the f32 buffer).
    pub cast: Option<ValidKernelPlan>,
    /// msda_bwd_tiles' plan and grid (the tile design).
    pub tiles: Option<(ValidKernelPlan, u32)>,
    /// msda_bwd_planes' plan and grid (the plane design; `staged` holds its output tiles).
    pub planes: Option<(ValidKernelPlan, u32)>,
    /// msda_bwd_rows' plan (the plane design by rows: a block per (batch, head, level)).
    pub rows: Option<ValidKernelPlan>,
    /// The band design's kernels (`plan` and `grid` above are msda_band_count's).
    pub bands: Option<BandsBuild>,
    pub grid: u32,
}

/// The band design for one problem (see [`bands_plan`]).
pub struct BandsBuild {
    /// msda_bwd_bands: its block and shared memory (a band's value rows, its plane of sums).
    pub plan: ValidKernelPlan,
    /// A block a band of each level of each (batch, head).
    pub grid: u32,
    /// msda_band_fill's and msda_band_logits' plans.
    pub fill: ValidKernelPlan,
    pub logits: ValidKernelPlan,
    /// Bands a (batch, head).
    pub per_head: u32,
    /// msda_bwd_bands' first blocks, for the heavy bands (the grid's first; two a (batch, head)
    /// and level, as many as a clustered level's points fill).
    pub room: u32,
    /// Each level's value box (rows + 1 rows) and grad_value box (rows), by level.
    pub ins: Vec<ValidSpec>,
    pub outs: Vec<ValidSpec>,
    /// The source's prelude: the bands' rows, first bands, boxes and map parameters.
    pub prelude: String,
}

/// The band design for one problem at `threads` a block and `plane_kb` KB of sums a band, or
/// the rule the problem breaks.
pub fn bands_plan(
    m: &Msda,
    ty: Ty,
    config: &BwdConfig,
    threads: u32,
    plane_kb: u32,
) -> Res<BandsBuild> {
    let label = config.label();
    check_block(&label, "msda_bwd_bands", threads)?;
    // An entry is a point's index with a flag in bit 31.
    if m.attn_len() >= 1 << 31 {
        return Err(format!(
            "{label}: N Q M L P = {} points: msda_bwd_bands' entries index them in 31 bits",
            m.attn_len()
        )
        .into());
    }
    let (d, bytes) = (m.channels as u64, ty.bytes() as u64);
    let mut text = String::from("\n// The band design's bands and boxes (rendered by bwd.rs)\n");
    let (mut rows, mut firsts, mut ins, mut outs) =
        (Vec::new(), vec![0u32], Vec::new(), Vec::new());
    let (mut vband, mut plane) = (0u64, 0u64);
    for l in 0..m.levels.len() {
        let (h, w) = m.levels[l];
        let r = band_rows(m, ty, l, plane_kb as u64 * 1024);
        rows.push(r);
        firsts.push(firsts[l] + h.div_ceil(r as usize) as u32);
        vband = vband.max((r as u64 + 1) * w as u64 * d * bytes);
        plane = plane.max(r as u64 * w as u64 * (d + 1) * 4 * band_planes(m, ty));
        // A band is whole rows: one box spans the level's width (the validator holds it to a
        // box's 256).
        let boxed = |prefix: &str, rows: u32| {
            fast::level_box_tile(m, ty, prefix, l, (rows, w as u32)).map_err(|e| {
                format!("{label}: level {l} ({h} x {w}), a band of {rows} whole rows: {e}")
            })
        };
        ins.push(boxed("msda_bin", r + 1)?);
        outs.push(boxed("msda_bout", r)?);
    }
    let per_head = firsts[m.levels.len()];
    // msda_band_count keeps seven words a band of a (batch, head) in static shared memory (at
    // most 48 KB).
    if per_head > 1024 {
        return Err(format!(
            "{label}: {per_head} bands a (batch, head): msda_band_count's histograms hold 1024"
        )
        .into());
    }
    let select = |v: &[u32]| {
        v.iter()
            .enumerate()
            .rev()
            .fold(String::from("0"), |f, (l, x)| {
                format!("l == {l} ? {x} : {f}")
            })
    };
    text += &format!(
        "constexpr int msda_band_rows(int l) {{ return {}; }}\n",
        select(&rows)
    );
    text += &format!(
        "constexpr int msda_band_first(int l) {{ return {}; }}\n",
        select(&firsts)
    );
    text += "template <int L> struct msda_band_in;\ntemplate <int L> struct msda_band_out;\n";
    for l in 0..m.levels.len() {
        text += &format!(
            "template <> struct msda_band_in<{l}> {{ typedef MsdaBandIn{l} type; }};\ntemplate <> struct msda_band_out<{l}> {{ typedef MsdaBandOut{l} type; }};\n"
        );
    }
    let maps = |side: &str| -> Vec<String> {
        (0..m.levels.len())
            .map(|l| format!("{side}{l}_map"))
            .collect()
    };
    let params: Vec<String> = maps("in")
        .into_iter()
        .chain(maps("out"))
        .map(|n| format!("const __grid_constant__ CUtensorMap {n}"))
        .collect();
    let ptrs = |side: &str| -> String {
        maps(side)
            .iter()
            .map(|n| format!("&{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    text += &format!("#define MSDA_BAND_MAP_PARAMS {}\n", params.join(", "));
    text += &format!("#define MSDA_BAND_IN_PTRS {}\n", ptrs("in"));
    text += &format!("#define MSDA_BAND_OUT_PTRS {}\n", ptrs("out"));
    // msda_band_fill stages a block's entries and their places (two words an entry): its
    // points, twice at most.
    let block_points =
        (BAND_COUNT_THREADS / 32 * BAND_QUERIES_A_WARP) as u64 * m.points_per_head() as u64;
    let stage = 4 * 2 * (2 * block_points);
    let smem = vband + plane + 1024;
    let blocks_per_sm = ((1024 / threads) as u64).min(227 * 1024 / smem).max(1) as u32;
    let plan = KernelPlan::new("msda_bwd_bands")
        .block_threads(threads)
        .blocks_per_sm(blocks_per_sm)
        .scratch("vband", vband, 128)
        .scratch("plane", plane, 16)
        .validate()
        .map_err(|e| format!("msda_bwd_bands: {e}"))?;
    let small = |name: &str, threads: u32| -> Res<ValidKernelPlan> {
        Ok(KernelPlan::new(name)
            .block_threads(threads)
            .validate()
            .map_err(|e| format!("{name}: {e}"))?)
    };
    let bands = (m.batch * m.heads) as u32 * per_head;
    let room = (2 * m.batch * m.heads * m.levels.len()).min(bands as usize) as u32;
    Ok(BandsBuild {
        plan,
        grid: room + bands,
        room,
        fill: KernelPlan::new("msda_band_fill")
            .block_threads(BAND_COUNT_THREADS)
            .scratch("stage", stage, 16)
            .validate()
            .map_err(|e| format!("msda_band_fill: {e}"))?,
        logits: small("msda_band_logits", BAND_LOGITS_THREADS)?,
        per_head,
        ins,
        outs,
        prelude: text,
    })
}

/// The f32 gradient plane of level `l`: the forward's level tile over an f32 buffer.
pub fn grad_tile(m: &Msda, l: usize) -> Res<ValidSpec> {
    fast::level_tile_named(m, Ty::F32, "msda_grad", l)
}

pub fn build_bwd(
    compiler: &Compiler,
    m: &Msda,
    ty: Ty,
    config: BwdConfig,
    debug: bool,
) -> Res<BuiltBwd> {
    fast::check_problem(m, ty)?;
    let tpq = (m.channels * ty.bytes() / 16) as u32;
    let (nb, nh) = (m.batch as u32, m.heads as u32);
    let grad16 = config.grad16();
    if grad16 && ty == Ty::F32 {
        return Err(format!("{}: grad16 needs 16-bit storage", config.label()).into());
    }
    let cast = ty != Ty::F32 && !config.writes_storage_type();
    let mut options = CompileOptions::new(Arch::Sm90a)
        .debug_waits(debug)
        .line_info(true)
        .define("MSDA_BACKWARD", "1")
        .define("MSDA_DTYPE", ty.code().to_string())
        .define("MSDA_M", m.heads.to_string())
        .define("MSDA_D", m.channels.to_string())
        .define("MSDA_L", m.levels.len().to_string())
        .define("MSDA_P", m.points.to_string())
        .define("MSDA_SOFTMAX", u32::from(config.softmax).to_string())
        .define("MSDA_UNROLL", config.unroll.to_string())
        .define("MSDA_GRAD16", u32::from(grad16).to_string())
        .define("MSDA_CAST", u32::from(cast).to_string());
    let mut staged = Vec::new();
    let mut prelude = String::new();
    let mut tile_shape = None;
    let mut planes = None;
    let mut rows = None;
    let mut bands = None;
    let mut out_tiles = Vec::new();
    let (grid, plan, qpb) = match config.design {
        BwdDesign::Atomic => {
            options = options.define("MSDA_BWD", "0").define("MSDA_STAGED", "0");
            let pairs = m.batch * m.queries * m.heads;
            (
                pairs.div_ceil(ATOMIC_WARPS as usize) as u32,
                KernelPlan::new("msda_bwd_atomic").block_threads(ATOMIC_WARPS * 32),
                ATOMIC_WARPS,
            )
        }
        BwdDesign::Tma { qpb, budget, .. } => {
            let qpb = qpb.min(1024 / tpq).max(1);
            let per_elem = 4 + if grad16 { ty.bytes() } else { 0 };
            // The forward's choice, but none when even the smallest does not fit the budget
            // (the global path takes every level then).
            let plane = |l: usize| m.levels[l].0 * m.levels[l].1 * m.channels * per_elem;
            let mut levels = fast::staged_levels_by(m, per_elem, budget);
            if levels.iter().map(|&l| plane(l)).sum::<usize>() > budget as usize {
                levels.clear();
            }
            let mut acc = Vec::new();
            let mut out = Vec::new();
            for &l in &levels {
                acc.push((format!("a{}", acc.len()), grad_tile(m, l)?));
                out.push((format!("o{}", out.len()), fast::level_tile(m, ty, l)?));
                let reduce = if grad16 { &out } else { &acc };
                staged.push((l, reduce[reduce.len() - 1].1.clone()));
            }
            let acc_refs: Vec<(&str, &ValidSpec)> =
                acc.iter().map(|(n, v)| (n.as_str(), v)).collect();
            let out_refs: Vec<(&str, &ValidSpec)> =
                out.iter().map(|(n, v)| (n.as_str(), v)).collect();
            let mut plan = KernelPlan::new("msda_bwd").block_threads(qpb * tpq);
            if !levels.is_empty() {
                plan = plan.tile_set("msda_acc", &acc_refs);
                if grad16 {
                    plan = plan.tile_set("msda_out", &out_refs);
                }
                prelude = bwd_prelude(&levels, grad16);
            }
            options = options
                .define("MSDA_BWD", "1")
                .define("MSDA_STAGED", levels.len().to_string());
            (nb * nh * m.queries.div_ceil(qpb as usize) as u32, plan, qpb)
        }
        BwdDesign::Tiles {
            qpb,
            deterministic,
            split,
            one_step,
            threads,
            by_level,
            packed,
            agg,
        } => {
            check_block(&config.label(), "msda_bwd_tiles", threads)?;
            let shape = TileShape::new(m, deterministic, split, threads);
            if let Some(l) =
                (0..m.levels.len()).find(|&l| threads % (shape.tpp * shape.split[l]) != 0)
            {
                return Err(format!(
                    "{}: level {l}'s {} threads a pixel do not divide msda_bwd_tiles' {threads} (D = {}: a pixel's threads must be a power of two)",
                    config.label(),
                    shape.tpp * shape.split[l],
                    m.channels
                )
                .into());
            }
            let tiles = shape.per_head(m);
            if m.queries >= 1 << 22 || tiles >= 1 << 16 {
                return Err(format!(
                    "{}: Q = {} (below 2^22) and {tiles} tiles a head (below 2^16): the filing records' fields",
                    config.label(),
                    m.queries
                )
                .into());
            }
            options = options
                .define("MSDA_BWD", "2")
                .define("MSDA_STAGED", "0")
                .define("MSDA_HEAVY_BYTES", HEAVY_BYTES.to_string())
                .define("MSDA_DETERMINISTIC", u32::from(deterministic).to_string())
                .define("MSDA_FILE_ONE_STEP", u32::from(one_step).to_string())
                .define("MSDA_FILE_BY_LEVEL", u32::from(by_level).to_string())
                .define("MSDA_PACKED", u32::from(packed).to_string())
                .define("MSDA_AGG", u32::from(agg).to_string());
            prelude = shape.prelude();
            tile_shape = Some(shape);
            let levels_held = if by_level { 1 } else { m.levels.len() as u64 };
            let records = qpb as u64 * levels_held * m.points as u64 * 4 * 12;
            (
                nb * nh * m.queries.div_ceil(qpb as usize) as u32,
                KernelPlan::new("msda_bwd")
                    .block_threads(qpb * tpq)
                    .scratch("rec", records, 16)
                    .scratch("tcount", tiles as u64 * 4, 16),
                qpb,
            )
        }
        BwdDesign::Planes {
            threads,
            smem_kb,
            rows: by_row,
        } => {
            let build = planes_plan(m, ty, &config, threads, smem_kb)?;
            planes = Some((build.plan, build.grid));
            if by_row {
                rows = Some(
                    KernelPlan::new("msda_bwd_rows")
                        .block_threads(ROWS_THREADS)
                        .validate()
                        .map_err(|e| format!("msda_bwd_rows: {e}"))?,
                );
            }
            out_tiles = build.tiles;
            prelude = build.prelude;
            options = options
                .define("MSDA_BWD", "3")
                .define("MSDA_STAGED", "0")
                .define("MSDA_PACKED", "1")
                .define("MSDA_ROUND", PLANES_ROUND.to_string())
                .define("MSDA_PLANE_ROWS", u32::from(by_row).to_string())
                .define("MSDA_ROW_BINS", ROW_BINS.to_string())
                .define(
                    "MSDA_AHEAD",
                    // (a hit holds 5 + D / 8 registers a lane: four of them fit the 64 of two
                    // blocks an SM at 32 channels, not at 64)
                    if by_row && m.channels <= 32 {
                        PLANES_AHEAD_BY_ROW
                    } else {
                        PLANES_AHEAD
                    }
                    .to_string(),
                );
            let qpb = PLANES_QPB.min(1024 / tpq).max(1);
            (
                nb * nh * m.queries.div_ceil(qpb as usize) as u32,
                KernelPlan::new("msda_bwd").block_threads(qpb * tpq),
                qpb,
            )
        }
        BwdDesign::Bands { threads, plane_kb } => {
            let build = bands_plan(m, ty, &config, threads, plane_kb)?;
            prelude = build.prelude.clone();
            bands = Some(build);
            options = options
                .define("MSDA_BWD", "4")
                .define("MSDA_STAGED", "0")
                .define("MSDA_FIX_WIDE", (band_planes(m, ty) - 1).to_string())
                .define("MSDA_QPW", BAND_QUERIES_A_WARP.to_string())
                .define("MSDA_ACC", BAND_ACC.to_string())
                .define("MSDA_BAND_HEAVY", format!("{BAND_HEAVY}u"))
                .define("MSDA_WORK", BAND_WORK.to_string());
            let qpb = BAND_COUNT_THREADS / 32 * BAND_QUERIES_A_WARP;
            (
                nb * nh * m.queries.div_ceil(qpb as usize) as u32,
                KernelPlan::new("msda_band_count").block_threads(BAND_COUNT_THREADS),
                qpb,
            )
        }
    };
    // `minb` is the point pass's blocks an SM at 32 channels (the seed's); a block of more
    // channels keeps its threads an SM, and so its registers a thread, in fewer blocks.
    let minb = if config.minb > 1 {
        let block32 = qpb * (32 * ty.bytes() as u32 / 16);
        (config.minb * block32 / (qpb * tpq)).max(1)
    } else {
        config.minb
    };
    options = options
        .define("MSDA_QPB", qpb.to_string())
        .define("MSDA_MINB", minb.to_string());
    let agg = matches!(config.design, BwdDesign::Tiles { agg: true, .. });
    let tiles = match &tile_shape {
        Some(shape) => Some((tiles_plan(m, shape, agg)?, shape.grid(m))),
        None => None,
    };
    let plan = plan
        .blocks_per_sm(minb)
        .validate()
        .map_err(|e| format!("{}: {e}", config.label()))?;
    let cast = if cast {
        Some(
            KernelPlan::new("msda_bwd_cast")
                .block_threads(CAST_THREADS)
                .validate()
                .map_err(|e| format!("msda_bwd_cast: {e}"))?,
        )
    } else {
        None
    };
    let mut source = KernelSource::new().plan(&plan);
    if let Some(c) = &cast {
        source = source.plan(c);
    }
    if let Some((p, _)) = &tiles {
        source = source.plan(p);
    }
    if let Some(p) = &rows {
        source = source.plan(p);
    }
    if let Some((p, _)) = &planes {
        source = source.plan(p);
        for (l, spec) in &out_tiles {
            source = source.tile_as(spec, &format!("MsdaPlaneOut{l}"));
        }
        staged = out_tiles;
    }
    if let Some(bb) = &bands {
        source = source.plan(&bb.plan).plan(&bb.fill).plan(&bb.logits);
        for (l, (i, o)) in bb.ins.iter().zip(&bb.outs).enumerate() {
            source = source
                .tile_as(i, &format!("MsdaBandIn{l}"))
                .tile_as(o, &format!("MsdaBandOut{l}"));
        }
    }
    let source = source
        .body(&prelude)
        .body_at(
            "examples/03-deformable-attention/msda_fast.cu",
            1,
            fast::MSDA_FAST_CU,
        )
        .body_at(
            "examples/03-deformable-attention/msda_bwd.cu",
            1,
            MSDA_BWD_CU,
        )
        .body_at(
            "examples/03-deformable-attention/msda_bwd_bands.cu",
            1,
            MSDA_BWD_BANDS_CU,
        );
    let (source, compiled) =
        fast::compile_kernel(compiler, &source, &options, config.kernel_name())?;
    Ok(BuiltBwd {
        config,
        source,
        options,
        compiled,
        staged,
        plan,
        cast,
        tiles,
        planes,
        rows,
        bands,
        grid,
    })
}

/// A second kernel's block of `threads`: whole warps (its arrays are sized by warps), at most
/// 1024.
fn check_block(label: &str, kernel: &str, threads: u32) -> Res<()> {
    if threads % 32 != 0 || !(32..=1024).contains(&threads) {
        return Err(format!(
            "{label}: {kernel}'s block is {threads} threads: whole warps, at most 1024"
        )
        .into());
    }
    Ok(())
}

/// The point pass's first arguments, the same in every design: value, loc, the weights (attn,
/// or the logits with the fused softmax) and grad_out.
fn point_inputs<'a>(
    l: &mut Launch<'a>,
    fwd: &'a FastDevice,
    grad_out: &'a Buf,
    softmax: bool,
) -> Res<()> {
    let attn = if softmax { &fwd.logits } else { &fwd.attn };
    match (&fwd.value, grad_out) {
        (Buf::U16(v), Buf::U16(g)) => l.arg(v).arg(&fwd.loc).arg(attn).arg(g),
        (Buf::F32(v), Buf::F32(g)) => l.arg(v).arg(&fwd.loc).arg(attn).arg(g),
        _ => return Err("value and grad_out differ in type".into()),
    };
    Ok(())
}

/// msda_bwd_planes for one problem (see [`planes_plan`]).
pub struct PlanesBuild {
    /// The block and its shared memory: the plane, the warps' private copies, a round's hit
    /// records.
    pub plan: ValidKernelPlan,
    /// A block a box of each level of each (batch, head).
    pub grid: u32,
    /// Each level's output tile (a box of [`plane_box`] of the level's view), by level.
    pub tiles: Vec<(usize, ValidSpec)>,
    /// The source's prelude: msda_plane_out<l> and the maps' parameters.
    pub prelude: String,
}

/// msda_bwd_planes for one problem at `threads` a block and `smem_kb` KB of shared memory, or
/// the rule the problem breaks.
pub fn planes_plan(
    m: &Msda,
    ty: Ty,
    config: &BwdConfig,
    threads: u32,
    smem_kb: u32,
) -> Res<PlanesBuild> {
    let label = config.label();
    check_block(&label, "msda_bwd_planes", threads)?;
    if m.channels % 32 != 0 {
        return Err(format!(
            "{label}: D = {} channels: msda_bwd_planes needs a multiple of 32 (8 lanes a corner's row, whole float4s each)",
            m.channels
        )
        .into());
    }
    if let Some((h, w)) = m.levels.iter().find(|&&(h, w)| h.max(w) >= (1 << 14) - 1) {
        return Err(format!(
            "{label}: level of {h} x {w} pixels: a hit keeps its corner in 14 bits a coordinate (below 16383)"
        )
        .into());
    }
    // msda_bwd_planes counts a level's points (Q P, and the round past the last) and a query's
    // grad_out row offset (Q M D) in 32-bit ints; msda_bwd_rows up to a block's steps past them.
    let points = m.queries * m.points
        + (threads as usize * PLANES_ROUND as usize).max(2 * ROWS_THREADS as usize);
    let rows = m.queries * m.heads * m.channels;
    if points >= 1 << 31 || rows >= 1 << 31 {
        return Err(format!(
            "{label}: Q P = {} points a level and Q M D = {rows} grad_out elements a batch: msda_bwd_planes counts both in 31 bits",
            m.queries * m.points
        )
        .into());
    }
    let row = m.channels as u64 * 4;
    // The warps' private copies and a round's records first; the plane takes the rest.
    let privs = (threads / 32) as u64 * PRIVATE_PIXELS * row;
    let records = threads as u64 * PLANES_ROUND;
    let budget = (smem_kb as u64 * 1024).saturating_sub(privs + records * 16);
    let mut tiles = Vec::new();
    let (mut plane, mut grid) = (0u64, 0u64);
    let mut text = String::from(
        "\n// msda_bwd_planes' output tile a level (rendered by bwd.rs)\ntemplate <int L> struct msda_plane_out;\n",
    );
    for l in 0..m.levels.len() {
        let (th, tw) = plane_box(m, l, budget);
        let bytes = th as u64 * tw as u64 * row;
        if bytes > budget {
            return Err(format!(
                "{label}: a pixel's {row} bytes of f32 sums do not fit the {budget} bytes {smem_kb} KB leave beside {privs} of private copies and {} of records",
                records * 16
            )
            .into());
        }
        plane = plane.max(bytes);
        let (h, w) = m.levels[l];
        grid += (m.batch * m.heads * h.div_ceil(th as usize) * w.div_ceil(tw as usize)) as u64;
        tiles.push((l, fast::level_box_tile(m, ty, "msda_pout", l, (th, tw))?));
        text += &format!(
            "template <> struct msda_plane_out<{l}> {{ typedef MsdaPlaneOut{l} type; }};\n"
        );
    }
    let params: Vec<String> = (0..m.levels.len())
        .map(|l| format!("const __grid_constant__ CUtensorMap p{l}_map"))
        .collect();
    let ptrs: Vec<String> = (0..m.levels.len()).map(|l| format!("&p{l}_map")).collect();
    text += &format!("#define MSDA_PLANE_MAP_PARAMS {}\n", params.join(", "));
    text += &format!("#define MSDA_PLANE_MAP_PTRS {}\n", ptrs.join(", "));
    // (16-bit storage writes its plane over the f32 plane's first half)
    let smem = plane + privs + records * 16 + 3 * 1024;
    let blocks_per_sm = ((1024 / threads) as u64).min(227 * 1024 / smem).max(1) as u32;
    let plan = KernelPlan::new("msda_bwd_planes")
        .block_threads(threads)
        .blocks_per_sm(blocks_per_sm)
        .scratch("plane", plane, 1024)
        .scratch("priv", privs, 16)
        .scratch("hrec", records * 16, 16)
        .validate()
        .map_err(|e| format!("msda_bwd_planes: {e}"))?;
    Ok(PlanesBuild {
        plan,
        grid: grid as u32,
        tiles,
        prelude: text,
    })
}

/// msda_slot<l> for each level (its accumulation tile a<k> and, with grad16, its 16-bit copy
/// o<k>), the reduce's map parameters and pointers (see msda_bwd.cu).
fn bwd_prelude(levels: &[usize], grad16: bool) -> String {
    let mut s = String::from(
        "\n// msda_bwd's staged levels (rendered by bwd.rs)\ntemplate <int L> struct msda_slot { static constexpr bool staged = false; };\n",
    );
    for (k, l) in levels.iter().enumerate() {
        let out = if grad16 {
            format!(" typedef tma_msda_out::o{k} out_tile; static constexpr unsigned out_offset = tma_msda_out::OFFSET_o{k};")
        } else {
            String::new()
        };
        s += &format!(
            "template <> struct msda_slot<{l}> {{ static constexpr bool staged = true; static constexpr int index = {k}; typedef tma_msda_acc::a{k} acc_tile; static constexpr unsigned acc_offset = tma_msda_acc::OFFSET_a{k};{out} }};\n"
        );
    }
    let (set, member) = if grad16 { ("OUT", "o") } else { ("ACC", "a") };
    let ptrs: Vec<String> = (0..levels.len())
        .map(|k| format!("&{member}{k}_map"))
        .collect();
    s += &format!("#define MSDA_BWD_MAP_PARAMS TMA_MSDA_{set}_PARAMS\n");
    s += &format!("#define MSDA_BWD_MAP_PTRS {}\n", ptrs.join(", "));
    s
}

/// The backward's buffers for one input set (the inputs stay in the [`FastDevice`]).
pub struct BwdDevice {
    pub grad_out: Buf,
    /// The host's copy of grad_out, exact.
    pub grad_out_host: Vec<f32>,
    pub gv32: CudaSlice<f32>,
    /// grad_value in the 16-bit storage type (16-bit types only).
    pub gv16: Option<CudaSlice<u16>>,
    pub gloc: CudaSlice<f32>,
    pub gattn: CudaSlice<f32>,
    /// The tile design's buffers, made at its first launch.
    pub scratch: Option<TilesScratch>,
    /// The plane design's point keys and corner weights, made at its first launch.
    pub points: Option<PlanesScratch>,
    /// The band design's buffers, made at its first launch (again for more bands).
    pub bands: Option<BandsScratch>,
}

/// The band design's buffers:
/// - `acc`: each band's entry count, largest term bound, own entries, box of corners and the
///   fill's two cursors (own entries, lower ones), [`BAND_ACC`] words a band, then each (batch,
///   head)'s entries; msda_bwd_bands leaves them zero for the next launch (`acc_zero`: they are);
/// - `work`: msda_bwd_bands' record of each band (its entries, bound and box) and its list of
///   heavy bands (msda_bwd_bands.cu's MsdaWork);
/// - each point's band code (`pband`), the entries (at most two a point) and, with the fused
///   softmax, the weights.
pub struct BandsScratch {
    pub acc: CudaSlice<u32>,
    pub acc_zero: bool,
    pub work: CudaSlice<u32>,
    pub pband: CudaSlice<i32>,
    pub entries: CudaSlice<u32>,
    pub wts: CudaSlice<f32>,
}

/// The plane design's buffers: a key a point (its corner (h0 + 1, w0 + 1) in 14 bits each, or
/// -1 outside its level) and its 4 corners' weights, (batch, head, level) by (batch, head, level).
pub struct PlanesScratch {
    pub keys: CudaSlice<i32>,
    pub weights: CudaSlice<f32>,
    /// (by rows) msda_bwd_rows' (key, point) pairs a point, sorted by row, and each
    /// (batch, head, level)'s ROW_BINS + 1 bin starts.
    pub sorted: Option<(CudaSlice<i32>, CudaSlice<i32>)>,
}

/// The tile design's buffers: the filed entries (query << 10 | pixel, weight bits), each
/// tile's segment descriptors (start, count) a point block, and the stats (msda_bwd.cu's
/// MSDA_STAT_*).
pub struct TilesScratch {
    pub entries: CudaSlice<u32>,
    pub desc: CudaSlice<u32>,
    pub stats: CudaSlice<u32>,
}

/// A backward kernel loaded (and its cast), with its maps over the gradient buffer.
pub struct LoadedBwd {
    pub built: BuiltBwd,
    pub kernel: Kernel,
    pub cast: Option<Kernel>,
    /// msda_bwd_tiles (the tile design).
    pub tiles: Option<Kernel>,
    /// msda_bwd_planes (the plane design).
    pub planes: Option<Kernel>,
    /// msda_bwd_rows (the plane design by rows).
    pub rows: Option<Kernel>,
    /// The band design's other kernels (`kernel` is msda_bwd_bands).
    pub bands: Option<BandKernels>,
    pub maps: Vec<TensorMap>,
}

/// msda_band_count, msda_band_fill and (fused softmax) msda_band_logits.
pub struct BandKernels {
    pub count: Kernel,
    pub fill: Kernel,
    pub logits: Option<Kernel>,
}

impl BwdDevice {
    /// Buffers for `fwd`'s problem and a random grad_out in [-1, 1] of its type.
    pub fn new(fwd: &FastDevice, rng: &mut Rng) -> Res<BwdDevice> {
        let (m, ty, stream) = (&fwd.m, fwd.ty, &fwd.stream);
        let mut bits = Vec::new();
        let grad_out_host: Vec<f32> = (0..m.out_len())
            .map(|_| {
                let x = rng.range(-1.0, 1.0) as f32;
                if ty == Ty::F32 {
                    x
                } else {
                    let b = ty.to_bits16(x);
                    bits.push(b);
                    ty.bits16_to_f32(b)
                }
            })
            .collect();
        let grad_out = if ty == Ty::F32 {
            Buf::F32(stream.clone_htod(&grad_out_host)?)
        } else {
            Buf::U16(stream.clone_htod(&bits)?)
        };
        Ok(BwdDevice {
            grad_out,
            grad_out_host,
            gv32: stream.alloc_zeros::<f32>(m.value_len())?,
            gv16: if ty == Ty::F32 {
                None
            } else {
                Some(stream.alloc_zeros::<u16>(m.value_len())?)
            },
            gloc: stream.alloc_zeros::<f32>(2 * m.attn_len())?,
            gattn: stream.alloc_zeros::<f32>(m.attn_len())?,
            scratch: None,
            points: None,
            bands: None,
        })
    }

    /// Loads `built` and encodes its maps: level l's view from the level's first row of the
    /// buffer its reduce goes into.
    pub fn load(
        &self,
        ctx: &Arc<CudaContext>,
        compiler: &Compiler,
        fwd: &FastDevice,
        built: BuiltBwd,
    ) -> Res<LoadedBwd> {
        let module = Module::compile_and_load(ctx, compiler, &built.source, &built.options)?;
        let kernel = module.kernel(built.config.kernel_name())?;
        let cast = match built.cast {
            Some(_) => Some(module.kernel("msda_bwd_cast")?),
            None => None,
        };
        let tiles = match built.tiles {
            Some(_) => Some(module.kernel("msda_bwd_tiles")?),
            None => None,
        };
        let planes = match built.planes {
            Some(_) => Some(module.kernel("msda_bwd_planes")?),
            None => None,
        };
        let rows = match built.rows {
            Some(_) => Some(module.kernel("msda_bwd_rows")?),
            None => None,
        };
        let bands = match built.bands {
            Some(_) => Some(BandKernels {
                count: module.kernel("msda_band_count")?,
                fill: module.kernel("msda_band_fill")?,
                logits: if built.config.softmax {
                    Some(module.kernel("msda_band_logits")?)
                } else {
                    None
                },
            }),
            None => None,
        };
        let starts = fwd.m.level_start();
        let row = fwd.m.heads * fwd.m.channels;
        let mut maps = Vec::new();
        // The band design: each level's value box over the value buffer, then its grad_value
        // box over grad_value in the storage type.
        if let Some(bb) = &built.bands {
            for (l, valid) in bb.ins.iter().enumerate() {
                let bound = valid.bound().ok_or("a level tile has static dims")?;
                let off = starts[l] * row;
                maps.push(match &fwd.value {
                    Buf::U16(v) => TensorMap::new_raw_bits(&bound, &v.slice(off..))?,
                    Buf::F32(v) => TensorMap::new(&bound, &v.slice(off..))?,
                });
            }
            for (l, valid) in bb.outs.iter().enumerate() {
                let bound = valid.bound().ok_or("a level tile has static dims")?;
                let off = starts[l] * row;
                maps.push(match &self.gv16 {
                    Some(g) => TensorMap::new_raw_bits(&bound, &g.slice(off..))?,
                    None => TensorMap::new(&bound, &self.gv32.slice(off..))?,
                });
            }
        }
        for (l, valid) in &built.staged {
            let bound = valid.bound().ok_or("a level tile has static dims")?;
            let off = starts[*l] * row;
            maps.push(match (&self.gv16, built.config.writes_storage_type()) {
                (Some(g), true) => TensorMap::new_raw_bits(&bound, &g.slice(off..))?,
                _ => TensorMap::new(&bound, &self.gv32.slice(off..))?,
            });
        }
        Ok(LoadedBwd {
            built,
            kernel,
            cast,
            tiles,
            planes,
            rows,
            bands,
            maps,
        })
    }

    /// NaN in every gradient the operator writes (grad_value's 16-bit copy, grad_loc,
    /// grad_attn); the f32 accumulator is zeroed by the operator itself.
    pub fn poison(&mut self, fwd: &FastDevice) -> Res<()> {
        let s = &fwd.stream;
        if let Some(g) = &mut self.gv16 {
            s.memcpy_htod(&vec![0xffffu16; g.len()], g)?;
        }
        s.memcpy_htod(&vec![f32::NAN; self.gv32.len()], &mut self.gv32)?;
        s.memcpy_htod(&vec![f32::NAN; self.gloc.len()], &mut self.gloc)?;
        s.memcpy_htod(&vec![f32::NAN; self.gattn.len()], &mut self.gattn)?;
        Ok(())
    }

    /// Queues the whole backward: zero grad_value, the kernel, the cast (16-bit through f32).
    pub fn launch(&mut self, fwd: &FastDevice, k: &LoadedBwd) -> Res<()> {
        if let (Some(tiles), Some((_, grid))) = (&k.tiles, &k.built.tiles) {
            return self.launch_tiles(fwd, k, tiles, *grid);
        }
        if let (Some(planes), Some((_, grid))) = (&k.planes, &k.built.planes) {
            return self.launch_planes(fwd, k, planes, *grid);
        }
        if let (Some(kernels), Some(bb)) = (&k.bands, &k.built.bands) {
            return self.launch_bands(fwd, k, kernels, bb);
        }
        let b = &k.built;
        let stream = &fwd.stream;
        let grad16 = b.config.grad16();
        match (&mut self.gv16, grad16) {
            (Some(g), true) => stream.memset_zeros(g)?,
            _ => stream.memset_zeros(&mut self.gv32)?,
        }
        let cfg = k.kernel.plan_config(stream, (b.grid, 1, 1))?;
        let (queries, spatial, batch) = (
            fwd.m.queries as i32,
            fwd.m.spatial() as i32,
            fwd.m.batch as i32,
        );
        {
            let mut l = k.kernel.launch_builder(&cfg);
            point_inputs(&mut l, fwd, &self.grad_out, b.config.softmax)?;
            match (&mut self.gv16, grad16) {
                (Some(g), true) => l.arg(g),
                _ => l.arg(&mut self.gv32),
            };
            l.arg(&mut self.gloc)
                .arg(&mut self.gattn)
                .arg(ByValue(&fwd.shapes))
                .arg(&queries)
                .arg(&spatial);
            if b.config.design == BwdDesign::Atomic {
                l.arg(&batch);
            }
            for map in &k.maps {
                l.arg(map);
            }
            // SAFETY: msda_bwd(_atomic)(value, loc, attn, grad_out, grad_value, grad_loc,
            // grad_attn, MsdaShapes, queries, spatial[, batch][, maps]): value and grad_out hold
            // N * S * M * D and N * Q * M * D elements of the kernel's type, loc / grad_loc
            // 2 * N * Q * M * L * P f32, attn / grad_attn N * Q * M * L * P f32, grad_value
            // N * S * M * D of gv_t (f32, or the storage type with grad16); the maps cover views of
            // that grad_value buffer, which lives in self; the grid is build_bwd's.
            unsafe { l.launch() }?;
        }
        if let (Some(cast), Some(g)) = (&k.cast, &mut self.gv16) {
            let blocks = (self.gv32.len() / 8)
                .div_ceil(CAST_THREADS as usize)
                .min(4 * 132 * 8);
            let cfg = cast.plan_config(stream, (blocks as u32, 1, 1))?;
            let count = self.gv32.len() as i64;
            let mut c = cast.launch_builder(&cfg);
            c.arg(&self.gv32).arg(g).arg(&count);
            // SAFETY: msda_bwd_cast(const float* src, msda_t* dst, long long count): both hold
            // `count` elements (a multiple of 8: D * 2 bytes is a multiple of 16).
            unsafe { c.launch() }?;
        }
        Ok(())
    }

    /// The tile design: the point pass (grad_loc, grad_attn, the softmax's weights, the
    /// deterministic scale's bound), then msda_bwd_tiles (grad_value, every row).
    fn launch_tiles(
        &mut self,
        fwd: &FastDevice,
        k: &LoadedBwd,
        tiles: &Kernel,
        tiles_grid: u32,
    ) -> Res<()> {
        let b = &k.built;
        let stream = &fwd.stream;
        let m = &fwd.m;
        // A pair a (batch, head, tile, point block): made again for a config of more tiles.
        let segments = tiles_grid as usize * m.queries.div_ceil(TILES_QPB as usize);
        if self
            .scratch
            .as_ref()
            .is_none_or(|sc| sc.desc.len() < 2 * segments)
        {
            self.scratch = Some(TilesScratch {
                entries: stream.alloc_zeros(2 * 4 * m.attn_len())?,
                desc: stream.alloc_zeros(2 * segments)?,
                stats: stream.alloc_zeros(STATS)?,
            });
        }
        let Some(sc) = self.scratch.as_mut() else {
            return Err("no scratch".into());
        };
        let (queries, spatial) = (m.queries as i32, m.spatial() as i32);
        stream.memset_zeros(&mut sc.stats)?;
        {
            let cfg = k.kernel.plan_config(stream, (b.grid, 1, 1))?;
            let mut l = k.kernel.launch_builder(&cfg);
            point_inputs(&mut l, fwd, &self.grad_out, b.config.softmax)?;
            l.arg(&mut sc.entries)
                .arg(&mut sc.desc)
                .arg(&mut sc.stats)
                .arg(&mut self.gloc)
                .arg(&mut self.gattn)
                .arg(ByValue(&fwd.shapes))
                .arg(&queries)
                .arg(&spatial);
            // SAFETY: msda_bwd (tiles)(value, loc, attn, grad_out, entries, desc, stats,
            // grad_loc, grad_attn, MsdaShapes, queries, spatial): entries holds a pair a corner
            // (4 N Q M L P), desc a pair a (batch, head, tile, point block), stats 4 u32 (zeroed:
            // the filing counter); the rest as in the other designs; the grid is build_bwd's.
            unsafe { l.launch() }?;
        }
        {
            let cfg = tiles.plan_config(stream, (tiles_grid, 1, 1))?;
            let mut l = tiles.launch_builder(&cfg);
            l.arg(&sc.entries).arg(&sc.desc);
            match (&self.grad_out, &mut self.gv16) {
                (Buf::U16(g), Some(out)) => l.arg(g).arg(out),
                (Buf::F32(g), None) => l.arg(g).arg(&mut self.gv32),
                _ => return Err("grad_out and grad_value differ in type".into()),
            };
            l.arg(&sc.stats)
                .arg(ByValue(&fwd.shapes))
                .arg(&queries)
                .arg(&spatial);
            // SAFETY: msda_bwd_tiles(entries, desc, grad_out, grad_value, stats, MsdaShapes,
            // queries, spatial): entries and desc as msda_bwd filed them for this problem,
            // grad_out N * Q * M * D and grad_value N * S * M * D elements of the storage type;
            // the grid is tiles_grid's (a block per tile of each level of each (batch, head)).
            unsafe { l.launch() }?;
        }
        Ok(())
    }

    /// The plane design: the point pass (grad_loc, grad_attn, and the softmax's weights), then
    /// msda_bwd_planes (grad_value, every row, through the maps).
    fn launch_planes(
        &mut self,
        fwd: &FastDevice,
        k: &LoadedBwd,
        planes: &Kernel,
        planes_grid: u32,
    ) -> Res<()> {
        let b = &k.built;
        let stream = &fwd.stream;
        let m = &fwd.m;
        let (queries, spatial, batch) = (m.queries as i32, m.spatial() as i32, m.batch as i32);
        if self.points.is_none() {
            self.points = Some(PlanesScratch {
                keys: stream.alloc_zeros::<i32>(m.attn_len())?,
                weights: stream.alloc_zeros::<f32>(4 * m.attn_len())?,
                sorted: None,
            });
        }
        let Some(pts) = self.points.as_mut() else {
            return Err("no point keys".into());
        };
        let units = m.batch * m.heads * m.levels.len();
        if k.rows.is_some() && pts.sorted.is_none() {
            pts.sorted = Some((
                stream.alloc_zeros::<i32>(2 * m.attn_len())?,
                stream.alloc_zeros::<i32>(units * (ROW_BINS + 1))?,
            ));
        }
        {
            let cfg = k.kernel.plan_config(stream, (b.grid, 1, 1))?;
            let mut l = k.kernel.launch_builder(&cfg);
            point_inputs(&mut l, fwd, &self.grad_out, b.config.softmax)?;
            l.arg(&mut pts.keys)
                .arg(&mut pts.weights)
                .arg(&mut self.gloc)
                .arg(&mut self.gattn)
                .arg(ByValue(&fwd.shapes))
                .arg(&queries)
                .arg(&spatial);
            // SAFETY: msda_bwd (planes)(value, loc, attn, grad_out, pkey, pw, grad_loc, grad_attn,
            // MsdaShapes, queries, spatial): pkey holds N Q M L P i32, pw 4 N Q M L P f32 (float4
            // a point, 16-byte aligned: a fresh allocation); the rest as in the other designs; the
            // grid is build_bwd's.
            unsafe { l.launch() }?;
        }
        if let (Some(rows), Some((sorted, bins))) = (&k.rows, pts.sorted.as_mut()) {
            let cfg = rows.plan_config(stream, (units as u32, 1, 1))?;
            let mut l = rows.launch_builder(&cfg);
            l.arg(&pts.keys)
                .arg(sorted)
                .arg(bins)
                .arg(ByValue(&fwd.shapes))
                .arg(&queries);
            // SAFETY: msda_bwd_rows(pkey, sorted, bins, MsdaShapes, queries): pkey as the point
            // pass wrote it (N M L Q P keys), sorted 2 N M L Q P i32 (an int2 a point, 8-byte
            // aligned: a fresh allocation), bins N M L (ROW_BINS + 1); a block per (batch, head,
            // level).
            unsafe { l.launch() }?;
        }
        {
            let cfg = planes.plan_config(stream, (planes_grid, 1, 1))?;
            let mut l = planes.launch_builder(&cfg);
            l.arg(&pts.keys).arg(&pts.weights);
            match &self.grad_out {
                Buf::U16(g) => l.arg(g),
                Buf::F32(g) => l.arg(g),
            };
            // Without rows the kernel reads neither: the keys stand in for both pointers.
            match &pts.sorted {
                Some((sorted, bins)) => l.arg(sorted).arg(bins),
                None => l.arg(&pts.keys).arg(&pts.keys),
            };
            l.arg(ByValue(&fwd.shapes)).arg(&batch).arg(&queries);
            for map in &k.maps {
                l.arg(map);
            }
            // SAFETY: msda_bwd_planes(pkey, pw, grad_out, sorted, bins, MsdaShapes, batch,
            // queries, maps): pkey and pw as the point pass wrote them for this problem (sorted
            // and bins as msda_bwd_rows wrote them, when the build reads them), grad_out N Q M D of the
            // storage type; a map a level over grad_value's level
            // rows in the storage type (self.gv16, or gv32 for f32), both in self; the grid is
            // planes_plan's.
            unsafe { l.launch() }?;
        }
        Ok(())
    }

    /// The band design: count each band's entries, file them, then msda_bwd_bands (every
    /// gradient but, with the fused softmax, the logits', which msda_band_logits makes last).
    fn launch_bands(
        &mut self,
        fwd: &FastDevice,
        k: &LoadedBwd,
        kernels: &BandKernels,
        bb: &BandsBuild,
    ) -> Res<()> {
        let b = &k.built;
        let stream = &fwd.stream;
        let m = &fwd.m;
        let bands = (m.batch * m.heads) * bb.per_head as usize;
        let wts = if b.config.softmax { m.attn_len() } else { 1 };
        let (room, work) = (bb.room as i32, BAND_WORK * bands + bb.room as usize + 1);
        if self.bands.as_ref().is_none_or(|sc| {
            sc.acc.len() < BAND_ACC * bands + m.batch * m.heads
                || sc.work.len() < work
                || sc.pband.len() < m.attn_len()
                || sc.entries.len() < 2 * m.attn_len()
                || sc.wts.len() < wts
        }) {
            self.bands = Some(BandsScratch {
                acc: stream.alloc_zeros(BAND_ACC * bands + m.batch * m.heads)?,
                acc_zero: true,

                work: stream.alloc_zeros(work)?,
                pband: stream.alloc_zeros(m.attn_len())?,
                entries: stream.alloc_zeros(2 * m.attn_len())?,
                wts: stream.alloc_zeros(wts)?,
            });
        }
        let Some(sc) = self.bands.as_mut() else {
            return Err("no band buffers".into());
        };
        let (queries, batch, nbands) = (m.queries as i32, m.batch as i32, bands as i32);
        // (a launch that stopped before msda_bwd_bands left acc as it was)
        if !sc.acc_zero {
            stream.memset_zeros(&mut sc.acc)?;
        }
        sc.acc_zero = false;
        let attn = if b.config.softmax {
            &fwd.logits
        } else {
            &fwd.attn
        };
        {
            let cfg = kernels.count.plan_config(stream, (b.grid, 1, 1))?;
            let mut l = kernels.count.launch_builder(&cfg);
            l.arg(&fwd.loc).arg(attn);
            match &self.grad_out {
                Buf::U16(g) => l.arg(g),
                Buf::F32(g) => l.arg(g),
            };
            l.arg(&mut sc.acc)
                .arg(&nbands)
                .arg(&mut sc.pband)
                .arg(&mut sc.wts)
                .arg(&mut self.gloc)
                .arg(&mut self.gattn)
                .arg(ByValue(&fwd.shapes))
                .arg(&queries)
                .arg(&mut sc.work)
                .arg(&room);
            // SAFETY: msda_band_count(loc, attn, grad_out, acc, bands, pband, wts, grad_loc,
            // grad_attn, MsdaShapes, queries, work, room): loc / grad_loc 2 N Q M L P f32, attn (the
            // logits with the fused softmax) / grad_attn / pband N Q M L P, grad_out N Q M D of
            // the storage type, acc BAND_ACC u32 a band and one a (batch, head) (zero), wts
            // N Q M L P f32 with the fused softmax (else unused), work BAND_WORK u32 a band and
            // room + 1 (MsdaWork); the grid is build_bwd's (a warp a (query, head)).
            unsafe { l.launch() }?;
        }
        {
            let cfg = kernels.fill.plan_config(stream, (b.grid, 1, 1))?;
            let mut l = kernels.fill.launch_builder(&cfg);
            l.arg(&sc.pband)
                .arg(&mut sc.acc)
                .arg(&mut sc.entries)
                .arg(&queries)
                .arg(&nbands)
                .arg(&mut sc.work)
                .arg(&room);
            // SAFETY: msda_band_fill(pband, acc, entries, queries, bands, work, room): pband, acc
            // and work as msda_band_count left them (acc's cursors and work's count zero),
            // entries 2 N Q M L P u32 (a point's entries are at most two); msda_band_count's
            // grid.
            unsafe { l.launch() }?;
        }
        {
            let wts = if b.config.softmax { &sc.wts } else { attn };
            let cfg = k.kernel.plan_config(stream, (bb.grid, 1, 1))?;
            let mut l = k.kernel.launch_builder(&cfg);
            l.arg(&sc.entries)
                .arg(&sc.work)
                .arg(&room)
                .arg(&mut sc.acc)
                .arg(&fwd.loc)
                .arg(wts);
            match &self.grad_out {
                Buf::U16(g) => l.arg(g),
                Buf::F32(g) => l.arg(g),
            };
            l.arg(&mut self.gloc)
                .arg(&mut self.gattn)
                .arg(ByValue(&fwd.shapes))
                .arg(&batch);
            for map in &k.maps {
                l.arg(map);
            }
            // SAFETY: msda_bwd_bands(entries, work, room, acc, loc, wts, grad_out, grad_loc, grad_attn,
            // MsdaShapes, batch, maps): entries, work (a record a block of the grid) and acc as
            // the two kernels above left them, the weights (the softmax's from msda_band_count,
            // or the input), the rest as there; a value map then a grad_value map a level (self.gv16, or gv32 for
            // f32), encoded over buffers that live in fwd and self; the grid is bands_plan's.
            unsafe { l.launch() }?;
            sc.acc_zero = true;
        }
        if let Some(logits) = &kernels.logits {
            let pairs = (m.batch * m.queries * m.heads) as i64;
            let warps = (BAND_LOGITS_THREADS / 32) as u64;
            let cfg = logits.plan_config(stream, ((pairs as u64).div_ceil(warps) as u32, 1, 1))?;
            let mut l = logits.launch_builder(&cfg);
            l.arg(&sc.wts).arg(&mut self.gattn).arg(&pairs);
            // SAFETY: msda_band_logits(wts, grad_attn, pairs): both N Q M L P f32, a warp a
            // (batch, query, head) of the `pairs`, BAND_LOGITS_THREADS / 32 a block.
            unsafe { l.launch() }?;
        }
        Ok(())
    }

    /// The three gradients as f64 (grad_value in the storage type).
    pub fn grads(&self, fwd: &FastDevice) -> Res<Grads> {
        let s = &fwd.stream;
        let value = match &self.gv16 {
            Some(g) => s
                .clone_dtoh(g)?
                .iter()
                .map(|&b| f64::from(fwd.ty.bits16_to_f32(b)))
                .collect(),
            None => s
                .clone_dtoh(&self.gv32)?
                .iter()
                .map(|&v| f64::from(v))
                .collect(),
        };
        let f = |v: Vec<f32>| v.into_iter().map(f64::from).collect();
        Ok(Grads {
            value,
            loc: f(s.clone_dtoh(&self.gloc)?),
            attn: f(s.clone_dtoh(&self.gattn)?),
        })
    }
}

/// Whether two runs' gradients are the same bits, every element.
pub fn same_bits(a: &Grads, b: &Grads) -> bool {
    let eq = |x: &[f64], y: &[f64]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
    };
    eq(&a.value, &b.value) && eq(&a.loc, &b.loc) && eq(&a.attn, &b.attn)
}

/// How far each gradient is from the f64 reference.
#[derive(Clone, Debug, Default)]
pub struct BwdCheck {
    /// grad_value in the storage type, against the reference's rounding floor.
    pub value: setup::Check,
    pub value_max_ref: f64,
    /// (relative L2, max abs error / max |reference|, non-finite) of grad_loc and grad_attn;
    /// grad_loc leaves out points at a kink (a pixel boundary within `KINK` of a coordinate:
    /// there either side's derivative is right).
    pub loc: (f64, f64, usize),
    pub attn: (f64, f64, usize),
    pub kinks: usize,
    /// Looser grad_value limits: 16-bit reductions (each partial sum rounded to the type).
    pub grad16: bool,
}

/// Distance in pixels from a pixel boundary within which grad_loc is not compared: more
/// than the f32 rounding of `x * W - 0.5` (half an ulp of 160 is 7.6e-6).
pub const KINK: f64 = 2e-4;

fn rel(out: &[f64], reference: &[f64], skip: &dyn Fn(usize) -> bool) -> (f64, f64, usize) {
    let (mut num, mut den, mut max_e, mut max_r, mut bad) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0);
    for (i, (&o, &r)) in out.iter().zip(reference).enumerate() {
        if skip(i) {
            continue;
        }
        if !o.is_finite() {
            bad += 1;
            continue;
        }
        num += (o - r) * (o - r);
        den += r * r;
        max_e = max_e.max((o - r).abs());
        max_r = max_r.max(r.abs());
    }
    bad += out.len().abs_diff(reference.len());
    (
        (num / den.max(f64::MIN_POSITIVE)).sqrt(),
        max_e / max_r.max(f64::MIN_POSITIVE),
        bad,
    )
}

impl BwdCheck {
    pub fn new(
        m: &Msda,
        ty: Ty,
        grad16: bool,
        out: &Grads,
        reference: &Grads,
        loc: &[f32],
    ) -> BwdCheck {
        let pph = m.points_per_head();
        let kink: Vec<bool> = (0..m.attn_len())
            .map(|i| {
                let (h, w) = m.levels[(i % pph) / m.points];
                let (x, y) = (f64::from(loc[2 * i]), f64::from(loc[2 * i + 1]));
                let near = |v: f64| (v - v.round()).abs() < KINK || !v.is_finite();
                near(y * h as f64 - 0.5) || near(x * w as f64 - 0.5)
            })
            .collect();
        BwdCheck {
            value: setup::Check::of(&out.value, &reference.value, |r| ty.round(r)),
            value_max_ref: reference.value.iter().fold(0.0f64, |a, &r| a.max(r.abs())),
            loc: rel(&out.loc, &reference.loc, &|i| kink[i / 2]),
            attn: rel(&out.attn, &reference.attn, &|_| false),
            kinks: kink.iter().filter(|&&k| k).count(),
            grad16,
        }
    }

    /// grad_value: at the rounding floor (within 10%, plus f32 accumulation: sqrt(k) 2^-24
    /// for up to 10^4 terms an element) and within one ulp of the largest element (f32: 8
    /// ulps); 16-bit reductions (grad16): within 4x the floor and 4 ulps, which they meet
    /// only with a few terms an element (uniform and local at the seed size): callers report
    /// grad16 as a measurement, not a failure. grad_loc and grad_attn (f32 outputs):
    /// relative L2 within 1e-4 for 16-bit inputs (the coordinates in f32, as the standard op:
    /// the bilinear fractions are off by up to 7.6e-6) and 1e-5 for f32, max error 10x that
    /// of the largest element.
    pub fn ok(&self, ty: Ty) -> bool {
        let v = &self.value;
        let (floor_x, ulps) = if self.grad16 { (4.0, 4.0) } else { (1.1, 1.0) };
        let ulp = match ty {
            Ty::F16 => 2f64.powi(-10),
            Ty::Bf16 => 2f64.powi(-7),
            // f32: up to ~10^4 f32 additions an element (clustered), in any order.
            Ty::F32 => 2f64.powi(-15),
        };
        let tol = if ty == Ty::F32 { 1e-5 } else { 1e-4 };
        let small = |(r, m, bad): (f64, f64, usize)| bad == 0 && r <= tol && m <= 10.0 * tol;
        v.non_finite == 0
            && v.rel_l2 <= floor_x * v.rounding_rel_l2 + 1e-5
            && v.max_abs <= ulps * ulp * self.value_max_ref.max(1e-30)
            && small(self.loc)
            && small(self.attn)
    }

    pub fn line(&self, ty: Ty) -> String {
        format!(
            "value rel L2 {:.2e} (floor {:.2e}) max {:.1e}; loc rel L2 {:.1e} max {:.1e} ({} kinks); attn rel L2 {:.1e} max {:.1e}; non-finite {}",
            self.value.rel_l2,
            self.value.rounding_rel_l2,
            self.value.max_abs / self.value_max_ref.max(1e-30),
            self.loc.0,
            self.loc.1,
            self.kinks,
            self.attn.0,
            self.attn.1,
            self.value.non_finite + self.loc.2 + self.attn.2,
        ) + match (self.ok(ty), self.grad16) {
            (true, _) => " OK",
            (false, true) => " INACCURATE (16-bit reductions)",
            (false, false) => " FAIL",
        }
    }
}
