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
//!   [`crate::smem::row_pitch_bytes`] apart; then [`crate::Swizzle::apply`] permutes the
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
use crate::smem::{self, CallRows, InnerRowLayout, LayoutError, DEFAULT_INNER_ROW_LAYOUT};
use crate::spec::OobFill;
use crate::validate::BoundSpec;

pub(crate) mod float;
pub mod im2col;
pub mod picture;
mod reduce;

pub use reduce::{combine, ReduceOp, F32_ADD_FLUSHES_SUBNORMALS};

fn type_list(types: &[DType]) -> String {
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    names.join(", ")
}

/// Why the model could not run a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Packed sub-byte types (Blackwell) are not modelled yet.
    #[error("the model does not handle the packed sub-byte type {dtype} yet (Blackwell only; no hardware here to check it)")]
    PackedType { dtype: DType },
    /// The PTX ISA has no `cp.reduce.async.bulk.tensor` of this operation on this type.
    #[error("cp.reduce.async.bulk.tensor has no .{op} on {dtype}; .{op} takes {}", type_list(.supported))]
    ReduceUnsupported {
        op: ReduceOp,
        dtype: DType,
        supported: &'static [DType],
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
    /// The call does not fit one SM's shared memory (see [`crate::smem::layout`]).
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Options of the model: the row layout the hardware uses by default, the refuted one for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelOptions {
    /// Rows narrower than the swizzle span: padded (the hardware) or dense (see [`crate::smem`]).
    pub inner_rows: InnerRowLayout,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            inner_rows: DEFAULT_INNER_ROW_LAYOUT,
        }
    }
}

/// The shared-memory layout of one call of `bound` under `opts` ([`crate::smem::layout`]).
pub fn smem_layout(bound: &BoundSpec, opts: ModelOptions) -> Result<CallRows, ModelError> {
    let spec = bound.spec();
    if spec.dtype.is_packed() {
        return Err(ModelError::PackedType { dtype: spec.dtype });
    }
    Ok(smem::layout(spec, bound.plan(), opts.inner_rows)?)
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
    /// The element's position in the call (user order; see [`crate::smem::ElementOffsets`]):
    /// along each dim, its index in its box plus the boxes repeated before it.
    pub position: Vec<u64>,
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
) -> Result<CallRows, ModelError> {
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
            let position: Vec<u64> = (0..rank)
                .map(|d| u64::from(place.index[d]) * n[d] + j[d])
                .collect();
            for k in 0..per_unit {
                f(ElementPlace {
                    smem: spec.swizzle.apply(place.smem_offset + local + k * esize),
                    global: in_bounds.then_some(global_off + k * esize),
                    index: index.clone(),
                    in_chunk: k,
                    box_index,
                    position: position.clone(),
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
