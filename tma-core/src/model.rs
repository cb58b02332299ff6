//! A bit-exact CPU reference model of TMA tiled copies: what one helper call
//! (`load` / `store` / `reduce_*`, every repeated box included) does to shared and global memory.
//!
//! GPU tests compare the hardware against these functions byte for byte.
//!
//! # Semantics (PTX ISA "Tensors", "cp.async.bulk.tensor"; CUDA driver `cuTensorMapEncodeTiled`)
//! - Box traversal: along user dim `d` the box holds `ceil(boxed[d] / element_strides[d])`
//!   elements; element `j` reads global index `coords[d] + j * element_strides[d]` (the nvFuser
//!   "TMA modeling in depth" pseudo-code, and the driver's "TMA loads `ceil(boxDim[i] /
//!   elementStrides[i])` elements").
//! - Out of bounds: loads write zero, or the OOB-NaN of [`oob_nan_bytes`] with
//!   [`OobFill::NanRequestZeroFma`], for an index `< 0` or `>= global[d]` in any dim; stores
//!   and reductions skip out-of-bounds elements, but bounds-check the inner dim rounded up to
//!   16 bytes ([`BoundSpec::inner_bound`]), as an H100 does. Stores take no negative
//!   coordinate and every copy's innermost coordinate sits on 16 bytes
//!   ([`crate::ValidSpec::check_store_coords`], [`crate::ValidSpec::check_coords`]).
//! - On the way into shared memory TF32 maps round to TF32 ([`convert_on_load`]).
//! - Shared memory: the box is written row by row (innermost dim fastest); rows are
//!   [`crate::swizzle::row_pitch_bytes`] apart; then [`crate::swizzle::swizzle`] permutes the
//!   address. Repeated boxes land at [`crate::ValidSpec::repeat_placements`].
//! - Interleave (16B/32B): the unit of the innermost dim is a chunk of 16 or 32 bytes, not an
//!   element: the inner extent, box, coordinate and element stride count chunks, chunk `c` of
//!   a row is `c * chunk` bytes into it, bounds are checked per chunk, rows are packed in
//!   shared memory, and one position is taken along dim 1 (validation demands a box of 1
//!   there). Fitted to an H200's raw dumps (docs/INTERLEAVE.md, tests/interleave_dumps.rs).
//!
//! Everything above was checked against an H100 or H200 bit for bit (tests/gpu_model.rs,
//! BENCHMARKS.md), except the Blackwell-only swizzles.
//!
//! The shared-memory result starts at a base aligned to the swizzle period, as validation
//! demands of every destination.

use crate::dtype::DType;
use crate::size::Size;
use crate::spec::OobFill;
use crate::swizzle::{self, InnerRowLayout, DEFAULT_INNER_ROW_LAYOUT};
use crate::validate::BoundSpec;
use std::fmt;

/// Why the model could not run a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Packed sub-byte types (Blackwell) are not modelled yet.
    #[error("the model does not handle the packed sub-byte type {dtype} yet (Blackwell only; no hardware here to check it)")]
    PackedType { dtype: DType },
    /// The PTX ISA has no `cp.reduce.async.bulk.tensor` of this operation on this type.
    #[error("cp.reduce.async.bulk.tensor has no .{op} on {dtype}; .{op} takes {supported}")]
    ReduceUnsupported {
        op: ReduceOp,
        dtype: DType,
        supported: &'static str,
    },
    #[error("{got} coordinates given for a rank-{rank} tile")]
    CoordCount { rank: usize, got: usize },
    /// Coordinates the hardware refuses (an innermost coordinate not on 16 bytes).
    #[error(transparent)]
    Coords(#[from] crate::SpecErrors),
    /// Coordinates are `.s32` operands of the instruction.
    #[error("coordinate {dim} = {value} (plus the repeat offset) does not fit the instruction's signed 32-bit operand")]
    CoordRange { dim: usize, value: i64 },
    #[error("the global buffer holds {got} bytes but the tensor reaches {needed}")]
    GlobalTooSmall { needed: u64, got: u64 },
    #[error("the shared-memory buffer holds {got} bytes but one call spans {needed}")]
    SmemTooSmall { needed: u64, got: u64 },
    /// One call spans more shared memory than an SM has: no kernel can run it (validation
    /// only warns about footprints above the per-block limit), so the model refuses to
    /// allocate it.
    #[error("one call spans {len} B of shared memory; an SM on the target has {limit} B")]
    SmemTooLarge { len: Size, limit: u64 },
    /// With rows padded to the swizzle span a box takes more shared memory than its data.
    #[error("repeated boxes are {stride} B apart but each spans {extent} B of shared memory (rows padded to the swizzle span): give a larger smem_stride")]
    BoxesOverlap { stride: u64, extent: u64 },
}

/// A reduction of `cp.reduce.async.bulk.tensor` (`.add .min .max .inc .dec .and .or .xor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
    Inc,
    Dec,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 8] = [
        ReduceOp::Add,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
        ReduceOp::Inc,
        ReduceOp::Dec,
    ];

    /// The PTX spelling (`add`, `min`, ...).
    pub fn ptx_name(self) -> &'static str {
        match self {
            ReduceOp::Add => "add",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
            ReduceOp::Inc => "inc",
            ReduceOp::Dec => "dec",
        }
    }

    /// The tensor-map types the operation takes (PTX ISA, `cp.reduce.async.bulk` /
    /// `.tensor`: `.add` on `.u32 .s32 .u64 .f32 .f16 .bf16`; `.min/.max` on
    /// `.u32 .s32 .u64 .s64 .f16 .bf16`; `.inc/.dec` on `.u32`; `.and/.or/.xor` on `.b32 .b64`).
    /// `.add` on `i64` is accepted as the same bits as `.u64` (CCCL emulates `.add.s64` so).
    pub fn supported_types(self) -> &'static str {
        match self {
            ReduceOp::Add => "u32, i32, u64, f32, f32_ftz, f16, bf16",
            ReduceOp::Min | ReduceOp::Max => "u32, i32, u64, i64, f16, bf16",
            ReduceOp::Inc | ReduceOp::Dec => "u32",
            ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => "u32, i32, u64",
        }
    }

    /// True when the PTX ISA has this reduction on `dtype`.
    /// Whether the hardware takes this reduction on a tensor map of `dtype`. An INT64 map
    /// traps with an illegal instruction on add/and/or/xor on an H100 (driver 580; min/max
    /// run, and every op runs on a UINT64 map), so those are refused here. The renderer
    /// generates exactly these reductions.
    pub fn supports(self, dtype: DType) -> bool {
        use DType::*;
        match self {
            ReduceOp::Add => matches!(dtype, U32 | I32 | U64 | F32 | F32Ftz | F16 | BF16),
            ReduceOp::Min | ReduceOp::Max => matches!(dtype, U32 | I32 | U64 | I64 | F16 | BF16),
            ReduceOp::Inc | ReduceOp::Dec => dtype == U32,
            ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => matches!(dtype, U32 | I32 | U64),
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ptx_name())
    }
}

/// Options of the model that the hardware has not settled yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelOptions {
    /// Rows narrower than the swizzle span: padded or dense (see [`crate::swizzle`]).
    pub inner_rows: InnerRowLayout,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            inner_rows: DEFAULT_INNER_ROW_LAYOUT,
        }
    }
}

/// Where one call's boxes sit in shared memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmemLayout {
    /// Bytes of data in one box row (innermost dim).
    pub row_bytes: u64,
    /// Bytes from one row to the next, before swizzling.
    pub row_pitch: u64,
    /// Rows per box (product of the outer box dims, after element strides).
    pub rows: u64,
    /// Bytes one box spans: `rows * row_pitch`, rounded up to whole 128-byte lines when
    /// swizzled (the plan's `box_bytes` when rows are dense and fill whole lines).
    pub box_extent: u64,
    /// Bytes between repeated boxes (the plan's).
    pub stride: u64,
    /// Boxes per call.
    pub boxes: u64,
    /// Bytes one call spans: `(boxes - 1) * stride + box_extent`.
    pub len: u64,
}

/// The shared-memory layout of one call of `bound` under `opts`.
pub fn smem_layout(bound: &BoundSpec, opts: ModelOptions) -> Result<SmemLayout, ModelError> {
    let spec = bound.spec();
    if spec.dtype.is_packed() {
        return Err(ModelError::PackedType { dtype: spec.dtype });
    }
    let plan = bound.plan();
    let inner = plan.box_elems.len().saturating_sub(1);
    let rows: Size = plan.box_elems[..inner].iter().copied().product();
    let row_pitch = swizzle::row_pitch_bytes(spec, opts.inner_rows);
    // The swizzle permutes 16-byte chunks within a 128-byte line, so a swizzled box whose
    // data ends inside a line may put bytes anywhere in that line.
    let box_extent = match spec.swizzle {
        crate::spec::Swizzle::None => rows * row_pitch,
        _ => (rows * row_pitch).next_multiple_of(128),
    };
    let len = (Size::new(plan.boxes) - 1u64) * plan.stride_bytes + box_extent;
    let limit = spec.target.smem_per_sm();
    let (Some(rows), Some(row_pitch), Some(box_extent), Some(len)) =
        (rows.get(), row_pitch.get(), box_extent.get(), len.get())
    else {
        return Err(ModelError::SmemTooLarge { len, limit });
    };
    if len > limit {
        return Err(ModelError::SmemTooLarge {
            len: Size::new(len),
            limit,
        });
    }
    if plan.boxes > 1 && plan.stride_bytes < box_extent {
        return Err(ModelError::BoxesOverlap {
            stride: plan.stride_bytes,
            extent: box_extent,
        });
    }
    Ok(SmemLayout {
        row_bytes: swizzle::row_bytes(spec).get().unwrap_or(row_pitch),
        row_pitch,
        rows,
        box_extent,
        stride: plan.stride_bytes,
        boxes: plan.boxes,
        len,
    })
}

/// Bytes of shared memory one call writes or reads, padding included (the model's output length).
pub fn smem_len(bound: &BoundSpec) -> Result<u64, ModelError> {
    smem_layout(bound, ModelOptions::default()).map(|l| l.len)
}

/// The OOB-NaN a load writes with [`OobFill::NanRequestZeroFma`], little-endian.
///
/// An H100 fills with the 16-bit pattern `0x7ff7` repeated, whatever the float type:
/// `0x7ff7` (f16/bf16), `0x7ff77ff7` (f32/tf32), `0x7ff77ff77ff77ff7` (f64), all NaNs
/// (tests/gpu_model.rs saw it; the PTX ISA only says "OOB-NaN").
pub fn oob_nan_bytes(dtype: DType) -> Vec<u8> {
    match dtype.size_bytes() {
        Some(n) if dtype.is_float() => [0xf7u8, 0x7f].repeat(n as usize / 2),
        Some(n) => vec![0; n as usize],
        None => Vec::new(),
    }
}

/// What a load does to an element on its way into shared memory: TF32 maps round f32 to
/// TF32 (nearest, ties to even: the low 13 mantissa bits go) and turn
/// every NaN into `0x7fffe000`; nothing else changes (the FTZ types do not flush on a copy).
/// Seen on an H100 (tests/gpu_model.rs); stores copy bits unchanged.
pub fn convert_on_load(dtype: DType, element: &mut [u8]) {
    if !matches!(dtype, DType::TF32 | DType::TF32Ftz) || element.len() != 4 {
        return;
    }
    let mut bits = u32::from_le_bytes([element[0], element[1], element[2], element[3]]);
    let exponent = (bits >> 23) & 0xff;
    let mantissa = bits & 0x007f_ffff;
    if exponent == 0xff && mantissa != 0 {
        bits = 0x7fff_e000;
    } else if exponent != 0xff {
        // round to nearest, ties to even
        let lsb = (bits >> 13) & 1;
        bits = (bits + 0x0fff + lsb) & !0x1fff;
    }
    element.copy_from_slice(&bits.to_le_bytes());
}

/// One element of a call: where it sits in shared memory and (if in bounds) in global memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementPlace {
    /// Byte offset in shared memory from the call's (period-aligned) base, after swizzling.
    pub smem: u64,
    /// Byte offset in global memory from the tensor's base; `None` out of bounds.
    pub global: Option<u64>,
    /// The global element index (user order); may be negative or past the end. With
    /// interleave the innermost entry is the chunk; see [`ElementPlace::in_chunk`].
    pub index: Vec<i64>,
    /// With interleave, the element's position inside its chunk (0 otherwise).
    pub in_chunk: u64,
    /// Which repeated box (index into [`crate::ValidSpec::repeat_placements`]).
    pub box_index: usize,
}

/// Every element one call moves, in the order the box is traversed (boxes in placement order,
/// innermost dim fastest). The building block of [`load`], [`store`], [`reduce`] and the picture.
pub fn elements(
    bound: &BoundSpec,
    coords: &[i64],
    opts: ModelOptions,
) -> Result<Vec<ElementPlace>, ModelError> {
    let mut out = Vec::new();
    visit(bound, coords, opts, Access::Load, |e| {
        out.push(e);
        Ok(())
    })?;
    Ok(out)
}

/// Which way a call moves data: the two bounds-check the inner dim differently.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Loads see exactly `global[inner]` elements; the rest is fill.
    Load,
    /// Stores and reductions write up to the inner dim rounded up to 16 bytes
    /// ([`BoundSpec::inner_bound`]), as an H100 does.
    Store,
}

fn visit(
    bound: &BoundSpec,
    coords: &[i64],
    opts: ModelOptions,
    access: Access,
    mut f: impl FnMut(ElementPlace) -> Result<(), ModelError>,
) -> Result<SmemLayout, ModelError> {
    let spec = bound.spec();
    let rank = spec.rank();
    let esize = spec
        .dtype
        .size_bytes()
        .ok_or(ModelError::PackedType { dtype: spec.dtype })?;
    // With interleave each step of the innermost dim is a chunk of several elements.
    let unit = spec.inner_unit_bytes().unwrap_or(esize);
    let per_unit = unit / esize;
    if coords.len() != rank {
        return Err(ModelError::CoordCount {
            rank,
            got: coords.len(),
        });
    }
    bound.valid().check_coords(coords)?;
    let layout = smem_layout(bound, opts)?;
    let plan = bound.plan();
    let n = &plan.box_elems;
    let inner = rank - 1;
    let total: u64 = n.iter().product();
    let global = bound.global();
    let strides = bound.strides();
    let inner_bound = bound.inner_bound();
    let mut j = vec![0u64; rank];
    for (box_index, place) in bound.valid().repeat_placements().into_iter().enumerate() {
        let mut start = vec![0i64; rank];
        for d in 0..rank {
            let s = coords[d] + place.global_offset[d];
            if i32::try_from(s).is_err() {
                return Err(ModelError::CoordRange { dim: d, value: s });
            }
            start[d] = s;
        }
        for lin in 0..total {
            let mut rest = lin;
            for d in (0..rank).rev() {
                j[d] = rest % n[d];
                rest /= n[d];
            }
            let row = lin / n[inner];
            let local = row * layout.row_pitch + j[inner] * unit;
            let mut index = vec![0i64; rank];
            let mut in_bounds = true;
            let mut global_off: u64 = 0;
            for d in 0..rank {
                let g = start[d] + (j[d] as i64) * i64::from(spec.element_strides[d]);
                index[d] = g;
                // Stores bounds-check the inner dim rounded up to 16 bytes; loads exactly.
                let limit = if d == inner && access == Access::Store {
                    inner_bound
                } else {
                    global[d]
                };
                if g < 0 || g as u64 >= limit {
                    in_bounds = false;
                } else {
                    // Bytes per step: the inner dim (stride 1) steps by an element or a
                    // chunk, the others by their stride in elements.
                    let step = if d == inner { unit } else { strides[d] * esize };
                    global_off += g as u64 * step;
                }
            }
            // The swizzle moves 16-byte pieces: the elements of a 32-byte chunk are placed
            // one by one.
            for k in 0..per_unit {
                f(ElementPlace {
                    smem: swizzle::swizzle(spec.swizzle, place.smem_offset + local + k * esize),
                    global: in_bounds.then_some(global_off + k * esize),
                    index: index.clone(),
                    in_chunk: k,
                    box_index,
                })?;
            }
        }
    }
    Ok(layout)
}

fn check_global(bound: &BoundSpec, len: usize) -> Result<(), ModelError> {
    let needed = bound.extent_bytes();
    if (len as u64) < needed {
        return Err(ModelError::GlobalTooSmall {
            needed,
            got: len as u64,
        });
    }
    Ok(())
}

fn range(off: u64, len: u64) -> std::ops::Range<usize> {
    off as usize..(off + len) as usize
}

/// The shared-memory bytes one `load` call writes (every repeated box, padding left 0), with
/// the default [`ModelOptions`]. `coords` are user order (outer -> inner) and may be negative
/// or past the end; `global` holds the tensor's bytes from its base address.
pub fn load(bound: &BoundSpec, global: &[u8], coords: &[i64]) -> Result<Vec<u8>, ModelError> {
    load_with(bound, global, coords, ModelOptions::default())
}

/// [`load`] under explicit options.
pub fn load_with(
    bound: &BoundSpec,
    global: &[u8],
    coords: &[i64],
    opts: ModelOptions,
) -> Result<Vec<u8>, ModelError> {
    check_global(bound, global.len())?;
    let spec = bound.spec();
    let esize = spec.dtype.size_bytes().unwrap_or(0);
    let fill = match spec.oob_fill {
        OobFill::NanRequestZeroFma if spec.dtype.is_float() => oob_nan_bytes(spec.dtype),
        _ => vec![0u8; esize as usize],
    };
    let len = smem_layout(bound, opts)?.len;
    let mut out = vec![0u8; len as usize];
    visit(bound, coords, opts, Access::Load, |e| {
        let dst = out
            .get_mut(range(e.smem, esize))
            .ok_or(ModelError::SmemTooSmall {
                needed: e.smem + esize,
                got: len,
            })?;
        match e.global {
            Some(g) => {
                let src = global
                    .get(range(g, esize))
                    .ok_or(ModelError::GlobalTooSmall {
                        needed: g + esize,
                        got: global.len() as u64,
                    })?;
                dst.copy_from_slice(src);
                convert_on_load(spec.dtype, dst);
            }
            None => dst.copy_from_slice(&fill),
        }
        Ok(())
    })?;
    Ok(out)
}

/// One `store` call: writes the in-bounds elements of `smem` (laid out as [`load`] writes them)
/// to `global`; out-of-bounds elements are skipped.
pub fn store(
    bound: &BoundSpec,
    smem: &[u8],
    coords: &[i64],
    global: &mut [u8],
) -> Result<(), ModelError> {
    store_with(bound, smem, coords, global, ModelOptions::default())
}

/// [`store`] under explicit options.
pub fn store_with(
    bound: &BoundSpec,
    smem: &[u8],
    coords: &[i64],
    global: &mut [u8],
    opts: ModelOptions,
) -> Result<(), ModelError> {
    combine_into(bound, smem, coords, global, opts, |dst, src| {
        dst.copy_from_slice(src);
    })
}

/// One `reduce` call (`cp.reduce.async.bulk.tensor`): combines each in-bounds element of
/// `smem` into `global` with `op`. Floating-point adds round to nearest even (see
/// [`combine`] for the details and what is uncertain).
pub fn reduce(
    bound: &BoundSpec,
    op: ReduceOp,
    smem: &[u8],
    coords: &[i64],
    global: &mut [u8],
) -> Result<(), ModelError> {
    reduce_with(bound, op, smem, coords, global, ModelOptions::default())
}

/// [`reduce`] under explicit options.
pub fn reduce_with(
    bound: &BoundSpec,
    op: ReduceOp,
    smem: &[u8],
    coords: &[i64],
    global: &mut [u8],
    opts: ModelOptions,
) -> Result<(), ModelError> {
    let dtype = bound.spec().dtype;
    if dtype.is_packed() {
        return Err(ModelError::PackedType { dtype });
    }
    if !op.supports(dtype) {
        return Err(ModelError::ReduceUnsupported {
            op,
            dtype,
            supported: op.supported_types(),
        });
    }
    combine_into(bound, smem, coords, global, opts, |dst, src| {
        combine(op, dtype, dst, src);
    })
}

fn combine_into(
    bound: &BoundSpec,
    smem: &[u8],
    coords: &[i64],
    global: &mut [u8],
    opts: ModelOptions,
    mut f: impl FnMut(&mut [u8], &[u8]),
) -> Result<(), ModelError> {
    bound.valid().check_store_coords(coords)?;
    check_global(bound, global.len())?;
    let len = smem_layout(bound, opts)?.len;
    if (smem.len() as u64) < len {
        return Err(ModelError::SmemTooSmall {
            needed: len,
            got: smem.len() as u64,
        });
    }
    let esize = bound.spec().dtype.size_bytes().unwrap_or(0);
    let glen = global.len() as u64;
    visit(bound, coords, opts, Access::Store, |e| {
        let Some(g) = e.global else { return Ok(()) };
        let src = smem
            .get(range(e.smem, esize))
            .ok_or(ModelError::SmemTooSmall {
                needed: e.smem + esize,
                got: smem.len() as u64,
            })?;
        let dst = global
            .get_mut(range(g, esize))
            .ok_or(ModelError::GlobalTooSmall {
                needed: g + esize,
                got: glen,
            })?;
        f(dst, src);
        Ok(())
    })?;
    Ok(())
}

/// Whether `.add` on f32 flushes subnormal inputs and results to sign-preserving zero.
/// The PTX ISA says so of `red`/`atom` `.add.f32` and spells the 16-bit bulk adds `.noftz`,
/// implying the f32 bulk add flushes. **Unverified on hardware** for the tensor form.
pub const F32_ADD_FLUSHES_SUBNORMALS: bool = true;

/// Combines one element `src` into `dst` (little-endian bytes of `dtype`) with `op`.
/// Callers check [`ReduceOp::supports`] first; unsupported pairs leave `dst` unchanged.
///
/// - Integers: `add` wraps; `min`/`max` compare signed for `i32`/`i64`; `inc` is
///   `dst >= src ? 0 : dst + 1` and `dec` is `dst == 0 || dst > src ? src : dst - 1`
///   (PTX `atom.inc`/`atom.dec`).
/// - f32 `add`: IEEE round to nearest even, subnormals flushed per
///   [`F32_ADD_FLUSHES_SUBNORMALS`]; a NaN result is the canonical `0x7fffffff`.
/// - f16/bf16 `add`: the exact sum rounded once to nearest even (computed in f64, which holds
///   every f16 sum exactly and cannot double-round a bf16 one); subnormals kept (`.noftz`);
///   a NaN result is `0x7fff`.
/// - f16/bf16 `min`/`max`: a NaN operand yields the other; both NaN yield `0x7fff`;
///   `-0 < +0`.
pub fn combine(op: ReduceOp, dtype: DType, dst: &mut [u8], src: &[u8]) {
    match dtype.size_bytes() {
        Some(2) => {
            let (Ok(d), Ok(s)) = (<[u8; 2]>::try_from(&*dst), <[u8; 2]>::try_from(src)) else {
                return;
            };
            let (d, s) = (u16::from_le_bytes(d), u16::from_le_bytes(s));
            let fmt = match dtype {
                DType::F16 => F16,
                DType::BF16 => BF16,
                _ => return,
            };
            let r = match op {
                ReduceOp::Add => fmt.round(fmt.value(d) + fmt.value(s)),
                ReduceOp::Min => fmt.min_max(d, s, true),
                ReduceOp::Max => fmt.min_max(d, s, false),
                _ => return,
            };
            dst.copy_from_slice(&r.to_le_bytes());
        }
        Some(4) => {
            let (Ok(d), Ok(s)) = (<[u8; 4]>::try_from(&*dst), <[u8; 4]>::try_from(src)) else {
                return;
            };
            let (d, s) = (u32::from_le_bytes(d), u32::from_le_bytes(s));
            let r = match (dtype, op) {
                (DType::F32 | DType::F32Ftz, ReduceOp::Add) => f32_add(d, s),
                (DType::F32 | DType::F32Ftz, _) => return,
                (_, ReduceOp::Add) => d.wrapping_add(s),
                (DType::I32, ReduceOp::Min) => (d as i32).min(s as i32) as u32,
                (DType::I32, ReduceOp::Max) => (d as i32).max(s as i32) as u32,
                (_, ReduceOp::Min) => d.min(s),
                (_, ReduceOp::Max) => d.max(s),
                (_, ReduceOp::And) => d & s,
                (_, ReduceOp::Or) => d | s,
                (_, ReduceOp::Xor) => d ^ s,
                (_, ReduceOp::Inc) => {
                    if d >= s {
                        0
                    } else {
                        d + 1
                    }
                }
                (_, ReduceOp::Dec) => {
                    if d == 0 || d > s {
                        s
                    } else {
                        d - 1
                    }
                }
            };
            dst.copy_from_slice(&r.to_le_bytes());
        }
        Some(8) => {
            let (Ok(d), Ok(s)) = (<[u8; 8]>::try_from(&*dst), <[u8; 8]>::try_from(src)) else {
                return;
            };
            let (d, s) = (u64::from_le_bytes(d), u64::from_le_bytes(s));
            let signed = dtype == DType::I64;
            let r = match op {
                ReduceOp::Add => d.wrapping_add(s),
                ReduceOp::Min if signed => (d as i64).min(s as i64) as u64,
                ReduceOp::Max if signed => (d as i64).max(s as i64) as u64,
                ReduceOp::Min => d.min(s),
                ReduceOp::Max => d.max(s),
                ReduceOp::And => d & s,
                ReduceOp::Or => d | s,
                ReduceOp::Xor => d ^ s,
                ReduceOp::Inc | ReduceOp::Dec => return,
            };
            dst.copy_from_slice(&r.to_le_bytes());
        }
        _ => {}
    }
}

fn f32_add(d: u32, s: u32) -> u32 {
    let flush = |x: f32| {
        if F32_ADD_FLUSHES_SUBNORMALS && x.is_subnormal() {
            if x.is_sign_negative() {
                -0.0
            } else {
                0.0
            }
        } else {
            x
        }
    };
    let r = flush(flush(f32::from_bits(d)) + flush(f32::from_bits(s)));
    if r.is_nan() {
        0x7fff_ffff
    } else {
        r.to_bits()
    }
}

/// A 16-bit binary float format: exponent and mantissa widths.
#[derive(Clone, Copy)]
struct Half {
    ebits: u32,
    mbits: u32,
}

const F16: Half = Half {
    ebits: 5,
    mbits: 10,
};
const BF16: Half = Half { ebits: 8, mbits: 7 };
const HALF_NAN: u16 = 0x7fff;

impl Half {
    fn bias(self) -> i32 {
        (1 << (self.ebits - 1)) - 1
    }
    fn is_nan(self, b: u16) -> bool {
        let e = (u32::from(b) >> self.mbits) & ((1 << self.ebits) - 1);
        e == (1 << self.ebits) - 1 && (u32::from(b) & ((1 << self.mbits) - 1)) != 0
    }
    fn value(self, b: u16) -> f64 {
        let b = u32::from(b);
        let sign = if b >> 15 == 1 { -1.0 } else { 1.0 };
        let e = ((b >> self.mbits) & ((1 << self.ebits) - 1)) as i32;
        let m = f64::from(b & ((1 << self.mbits) - 1));
        let emax = (1 << self.ebits) - 1;
        let mb = self.mbits as i32;
        if e == emax {
            return if m == 0.0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if e == 0 {
            return sign * m * 2f64.powi(1 - self.bias() - mb);
        }
        sign * (m + 2f64.powi(mb)) * 2f64.powi(e - self.bias() - mb)
    }
    /// Rounds `v` to this format, nearest even; NaN -> `0x7fff`.
    fn round(self, v: f64) -> u16 {
        if v.is_nan() {
            return HALF_NAN;
        }
        let sign: u32 = if v.is_sign_negative() { 0x8000 } else { 0 };
        let x = v.abs();
        let mb = self.mbits as i32;
        let inf = ((1u32 << self.ebits) - 1) << self.mbits;
        if x.is_infinite() {
            return (sign | inf) as u16;
        }
        if x == 0.0 {
            return sign as u16;
        }
        let emin = 1 - self.bias();
        let e = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        if e < emin {
            // Subnormal (may round up to the smallest normal: the bits then read right too).
            let q = (x * 2f64.powi(mb - emin)).round_ties_even() as u32;
            return (sign | q) as u16;
        }
        let mut q = (x * 2f64.powi(mb - e)).round_ties_even() as u32;
        let mut e = e;
        if q == 1 << (self.mbits + 1) {
            q >>= 1;
            e += 1;
        }
        if e > self.bias() {
            return (sign | inf) as u16;
        }
        let field = (e + self.bias()) as u32;
        (sign | (field << self.mbits) | (q - (1 << self.mbits))) as u16
    }
    fn min_max(self, a: u16, b: u16, min: bool) -> u16 {
        match (self.is_nan(a), self.is_nan(b)) {
            (true, true) => return HALF_NAN,
            (true, false) => return b,
            (false, true) => return a,
            _ => {}
        }
        let (x, y) = (self.value(a), self.value(b));
        let a_first = if x == y {
            // Equal values differ only in the sign of zero: -0 is the smaller.
            (a >> 15 == 1) == min
        } else {
            (x < y) == min
        };
        if a_first {
            a
        } else {
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_round_trips_every_finite_value() {
        for fmt in [F16, BF16] {
            for b in 0..=u16::MAX {
                if fmt.is_nan(b) {
                    continue;
                }
                assert_eq!(fmt.round(fmt.value(b)), b, "{b:#06x}");
            }
        }
    }

    #[test]
    fn half_rounding_is_nearest_even() {
        // f16: 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10 -> even (1.0).
        assert_eq!(F16.round(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(F16.round(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
        assert_eq!(F16.round(65520.0), 0x7c00);
        assert_eq!(F16.round(65519.0), 0x7bff);
        // bf16: 1 + 2^-8 -> 1.0; 1 + 3 * 2^-8 -> 1 + 2^-6.
        assert_eq!(BF16.round(1.0 + 2f64.powi(-8)), 0x3f80);
        assert_eq!(BF16.round(1.0 + 3.0 * 2f64.powi(-8)), 0x3f82);
        // Smallest f16 subnormal and half of it (ties to even -> 0).
        assert_eq!(F16.round(2f64.powi(-24)), 1);
        assert_eq!(F16.round(2f64.powi(-25)), 0);
    }

    #[test]
    fn integer_reductions() {
        let mut d = 5u32.to_le_bytes();
        combine(ReduceOp::Inc, DType::U32, &mut d, &5u32.to_le_bytes());
        assert_eq!(u32::from_le_bytes(d), 0);
        let mut d = 0u32.to_le_bytes();
        combine(ReduceOp::Dec, DType::U32, &mut d, &7u32.to_le_bytes());
        assert_eq!(u32::from_le_bytes(d), 7);
        let mut d = (-3i32).to_le_bytes();
        combine(ReduceOp::Min, DType::I32, &mut d, &2i32.to_le_bytes());
        assert_eq!(i32::from_le_bytes(d), -3);
        let mut d = (-3i32).to_le_bytes();
        combine(ReduceOp::Min, DType::U32, &mut d, &2i32.to_le_bytes());
        assert_eq!(i32::from_le_bytes(d), 2);
    }

    #[test]
    fn half_min_max_and_add() {
        let mut d = 0x8000u16.to_le_bytes(); // -0
        combine(ReduceOp::Max, DType::F16, &mut d, &0u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes(d), 0);
        let mut d = 0x7e00u16.to_le_bytes(); // NaN
        combine(ReduceOp::Min, DType::BF16, &mut d, &0x3f80u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes(d), 0x3f80);
        let mut d = 0x3c00u16.to_le_bytes(); // 1.0 + 1.0
        combine(ReduceOp::Add, DType::F16, &mut d, &0x3c00u16.to_le_bytes());
        assert_eq!(u16::from_le_bytes(d), 0x4000);
    }
}
