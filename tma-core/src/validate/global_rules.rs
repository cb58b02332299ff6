//! Rules on a concrete global shape (dims and strides, user order) and the sizes it implies:
//! byte strides, the inner bound, the extent.

use super::collect::*;
use crate::error::Field;
use crate::limits::*;
use crate::rules::Rule;
use crate::size::Size;
use crate::spec::{Interleave, TileSpec};

/// Dense row-major strides (elements) for `global` (user order), whose innermost step covers
/// `inner_unit` elements (1; a chunk's worth with interleave, see
/// [`TileSpec::inner_unit_elements`]). The innermost stride is 1 step. `None` when a stride
/// does not fit in 64 bits.
pub fn dense_strides(global: &[u64], inner_unit: u64) -> Option<Vec<u64>> {
    let rank = global.len();
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        let step = if d + 1 == rank - 1 { inner_unit } else { 1 };
        strides[d] = (Size::new(strides[d + 1]) * step * global[d + 1]).get()?;
    }
    Some(strides)
}

/// The byte multiple every outer global stride must be, and the rule a stride that is not
/// breaks: 16 B, 32 B with 32-byte interleave or the 16-byte-aligned packed types.
pub(super) fn stride_align(spec: &TileSpec) -> (u64, Rule) {
    if spec.interleave == Interleave::B32 {
        (STRIDE_ALIGN_INTERLEAVE_32B, Rule::StrideAlignment)
    } else if matches!(
        spec.dtype,
        crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
    ) {
        (PACKED_ALIGN16B_ADDRESS_ALIGN, Rule::PackedTypeAlignment)
    } else {
        (STRIDE_ALIGN, Rule::StrideAlignment)
    }
}

/// The findings for dense strides that overflow: the dims outside [1, 2^32] when there are
/// any (the cause to fix, as [`check_global`] names them), else the shape itself is too large.
pub(super) fn dense_overflow(spec: &TileSpec, global: &[u64], c: &mut Collector) {
    if !check_dim_ranges(spec, global, c) {
        return;
    }
    c.error(
        Field::List("global"),
        format!("{global:?}"),
        Rule::SizeOverflow,
        format!(
            "the dense strides of this shape of {} need more than 2^64 - 1 elements: more than any GPU can address",
            spec.dtype
        ),
    );
}

/// [`Rule::GlobalDimRange`] on every dim; true when all are in range.
fn check_dim_ranges(spec: &TileSpec, global: &[u64], c: &mut Collector) -> bool {
    let mut ok = true;
    for (d, &g) in global.iter().enumerate() {
        if g == 0 || g > MAX_GLOBAL_DIM {
            ok = false;
            c.error(
                field_global(spec, d),
                g,
                Rule::GlobalDimRange,
                "global dims must be in [1, 2^32] (cuTensorMapEncodeTiled: globalDim)".into(),
            );
        }
    }
    ok
}

/// Sizes of a bound shape, each proven to fit in 64 bits.
pub(super) struct GlobalSizes {
    pub(super) byte_strides: Vec<u64>,
    pub(super) inner_bound: u64,
    pub(super) extent_bytes: u64,
}

/// Rules on concrete global dims and strides (elements, user order). Returns the shape's
/// sizes when every one of them fits (findings may still have been recorded).
pub(super) fn check_global(
    spec: &TileSpec,
    global: &[u64],
    strides: &[u64],
    c: &mut Collector,
) -> Option<GlobalSizes> {
    let rank = spec.rank();
    let inner = rank - 1;
    let dtype = spec.dtype;
    check_dim_ranges(spec, global, c);
    #[allow(clippy::needless_range_loop)] // d indexes global, boxed and the field names
    for d in 0..rank {
        let g = global[d];
        if u64::from(spec.boxed[d]) > g && g > 0 {
            c.warning(
                field_box(spec, d),
                spec.boxed[d],
                Rule::BoxExceedsGlobal,
                format!(
                    "the box is larger than the tensor ({g}) along this dim: the excess is always out of bounds (loads fill it, stores skip it)"
                ),
            );
        }
    }
    let interleaved = spec.interleave != Interleave::None;
    let inner_bytes = dtype.global_bytes(global[inner]);
    if let (false, Some(bytes)) = (interleaved, inner_bytes.get()) {
        if bytes % INNER_COORD_ALIGN != 0 {
            c.warning(
                field_global(spec, inner),
                global[inner],
                Rule::InnerDimRoundedUp,
                format!(
                    "{bytes} B: TMA bounds-checks the inner dim rounded up to 16 bytes, so loads read and stores write up to {} B past its end",
                    INNER_COORD_ALIGN - bytes % INNER_COORD_ALIGN
                ),
            );
        }
    }
    if strides[inner] != 1 {
        c.error(
            field_stride(spec, inner),
            strides[inner],
            Rule::InnerStrideIsOne,
            "the innermost dim must be contiguous (stride 1): TMA's dim 0 has no stride".into(),
        );
    }
    let (align, align_rule) = stride_align(spec);
    let mut byte_strides: Vec<Size> = Vec::with_capacity(rank);
    for d in 0..inner {
        let bytes = dtype.global_bytes(strides[d]);
        byte_strides.push(bytes);
        if !dtype.is_whole_bytes(strides[d]) {
            c.error(
                field_stride(spec, d),
                strides[d],
                Rule::StrideWholeBytes,
                format!(
                    "{} elements of {dtype} ({} bits each) do not end on a byte, and strides are encoded in bytes: use a multiple of {} elements",
                    strides[d],
                    dtype.global_bits(),
                    dtype.elements_per_whole(1)
                ),
            );
        } else if !bytes.is_below(MAX_STRIDE_BYTES) {
            c.error(
                field_stride(spec, d),
                strides[d],
                Rule::StrideMax,
                format!("{} elements of {dtype} = {bytes} B; global strides must be below 2^40 B (cuTensorMapEncodeTiled: globalStrides)", strides[d]),
            );
        } else if !bytes.is_multiple_of(align) {
            c.error(
                field_stride(spec, d),
                strides[d],
                align_rule,
                format!(
                    "{} elements of {dtype} = {bytes} B; global strides must be multiples of {align} B (cuTensorMapEncodeTiled: globalStrides)",
                    strides[d]
                ),
            );
        }
        // Positions along a dim of extent 1 cannot alias each other.
        if global[d] > 1 {
            let unit = if d + 1 == inner {
                spec.inner_unit_elements()
            } else {
                1
            };
            let inside = Size::new(strides[d + 1]) * unit * global[d + 1];
            if strides[d] == 0 {
                c.warning(
                    field_stride(spec, d),
                    0,
                    Rule::StrideOverlap,
                    format!(
                        "every one of the {} positions along this dim reads and writes the same elements (loads duplicate, stores race)",
                        global[d]
                    ),
                );
            } else if inside.get().is_none_or(|v| v > strides[d]) {
                c.warning(
                    field_stride(spec, d),
                    strides[d],
                    Rule::StrideOverlap,
                    format!(
                        "the dim inside spans {inside} elements, more than this stride: elements alias (loads may duplicate, stores race)"
                    ),
                );
            }
        }
    }
    if matches!(
        dtype,
        crate::DType::U4x16Align16B | crate::DType::U6x16Align16B
    ) && global[inner] % PACKED_INNER_DIM_MULTIPLE != 0
    {
        c.error(
            field_global(spec, inner),
            global[inner],
            Rule::PackedTypeAlignment,
            format!(
                "with {dtype} the inner global dim must be a multiple of {PACKED_INNER_DIM_MULTIPLE}"
            ),
        );
    }
    if c.has_errors() {
        return None;
    }
    // Every dim is in [1, 2^32] and every stride below 2^40 B here: only the extent can
    // still overflow (2^32 positions of a 2^40-byte stride).
    let (inner_bound, extent) = match spec.interleave.chunk_bytes() {
        Some(chunk) => {
            let outer: Size = (0..inner).map(|d| byte_strides[d] * (global[d] - 1)).sum();
            (
                Size::new(global[inner]),
                outer + Size::new(global[inner]) * chunk,
            )
        }
        None => {
            let bound = (inner_bytes.next_multiple_of(INNER_COORD_ALIGN) * 8u64)
                .div_floor(u64::from(dtype.global_bits()));
            let last: Size = (0..inner)
                .map(|d| byte_strides[d] * (global[d] - 1))
                .sum::<Size>()
                + dtype.global_bytes(bound);
            (bound, last)
        }
    };
    match (
        inner_bound.get(),
        extent.get(),
        byte_strides
            .iter()
            .map(|b| b.get())
            .collect::<Option<Vec<u64>>>(),
    ) {
        (Some(inner_bound), Some(extent_bytes), Some(byte_strides)) => Some(GlobalSizes {
            byte_strides,
            inner_bound,
            extent_bytes,
        }),
        _ => {
            c.error(
                Field::List("global"),
                format!("{global:?}"),
                Rule::SizeOverflow,
                format!(
                    "this shape of {dtype} with strides {strides:?} spans {extent} bytes: more than any GPU can address"
                ),
            );
            None
        }
    }
}
