//! Rules on the static parts of a spec: names, rank and list lengths, box, element strides,
//! swizzle, interleave, dtype, target, and the shared-memory plan's sizes.

use super::collect::*;
use crate::error::Field;
use crate::ident::{generated_clash, shared_generated_name, NameKind};
use crate::limits::*;
use crate::rules::Rule;
use crate::size::Size;
use crate::smem::PlanSizes;
use crate::spec::{Interleave, OobFill, Swizzle, TileSpec};

/// Dim names name the fields of the generated coordinate struct (a dim without one is
/// `d<i>`), its constants and its encode parameters: no two alike or meeting in a generated
/// name, none meeting the generated code's own names. Reported at the named dim of a clashing
/// pair (the later one when both are named).
fn check_dim_labels(spec: &TileSpec, c: &mut Collector) {
    let labels: Vec<String> = (0..spec.dim_names.len())
        .map(|d| spec.dim_label(d))
        .collect();
    for (d, label) in labels.iter().enumerate() {
        let Some(name) = spec.dim_name(d) else {
            continue;
        };
        if crate::ident::check_name(name).is_err() {
            continue; // NameIsIdentifier says why
        }
        let earlier = |o: usize| o != d && (o < d || spec.dim_name(o).is_none());
        if let Some(other) = (0..labels.len()).find(|&o| earlier(o) && labels[o] == *label) {
            c.error(
                Field::DimName { dim: d },
                format!("{name:?}"),
                Rule::DimNameClash,
                format!(
                    "dim {other} is `{label}` too{}: dim names name the fields of the tile's coordinate struct, so no two may be alike",
                    if spec.dim_name(other).is_none() { " (a dim without a name is `d<index>`)" } else { "" }
                ),
            );
        } else if let Some(why) = generated_clash(NameKind::Dim, name) {
            c.error(
                Field::DimName { dim: d },
                format!("{name:?}"),
                Rule::GeneratedNameClash,
                format!("dim names name generated CUDA; this one clashes: {why}"),
            );
        } else if let Some((other, ident)) = (0..labels.len())
            .filter(|&o| earlier(o))
            .find_map(|o| shared_generated_name(NameKind::Dim, &labels[o], label).map(|i| (o, i)))
        {
            c.error(
                Field::DimName { dim: d },
                format!("{name:?}"),
                Rule::DimNameClash,
                format!(
                    "dim {other} (`{}`) and this one would both give the generated CUDA a `{ident}` (coordinate members, `BOX_<dim>`, the encode function's `<dim>` and `stride_<dim>` parameters)",
                    labels[other]
                ),
            );
        }
    }
}

/// Rank and list lengths. Returns false when the per-dim rules cannot be checked.
pub(super) fn check_shape_lists(spec: &TileSpec, c: &mut Collector) -> bool {
    let rank = spec.rank();
    if let Err(problem) = crate::ident::check_name(&spec.name) {
        c.error(
            Field::Name,
            format!("{:?}", spec.name),
            Rule::NameIsIdentifier,
            format!(
                "the tile name names CUDA helpers (`tma_<name>`); this one {}",
                problem.describe()
            ),
        );
    } else if let Some(why) = generated_clash(NameKind::Tile, &spec.name) {
        c.error(
            Field::Name,
            format!("{:?}", spec.name),
            Rule::GeneratedNameClash,
            format!("the tile name names CUDA helpers (`tma_<name>`, `tma_encode_<name>`, ..); this one clashes: {why}"),
        );
    }
    for (d, name) in spec.dim_names.iter().enumerate() {
        if let Some(Err(problem)) = name.as_deref().map(crate::ident::check_name) {
            c.error(
                Field::DimName { dim: d },
                format!("{:?}", name.as_deref().unwrap_or_default()),
                Rule::NameIsIdentifier,
                format!(
                    "dim names appear in generated CUDA; this one {}",
                    problem.describe()
                ),
            );
        }
    }
    check_dim_labels(spec, c);
    if rank == 0 || rank > MAX_RANK {
        c.error(
            Field::Rank,
            rank,
            Rule::RankRange,
            format!("TMA tensors have 1 to {MAX_RANK} dims (cuTensorMapEncodeTiled: tensorRank)"),
        );
        return false;
    }
    let mut ok = true;
    let lists: [(&'static str, Option<usize>); 5] = [
        ("boxed", Some(spec.boxed.len())),
        ("element_strides", Some(spec.element_strides.len())),
        ("repeat", Some(spec.repeat.len())),
        ("strides", spec.strides.as_ref().map(Vec::len)),
        ("dim_names", Some(spec.dim_names.len())),
    ];
    for (list, len) in lists {
        if let Some(len) = len {
            if len != rank {
                c.error(
                    Field::List(list),
                    len,
                    Rule::ListLength,
                    format!("needs one entry per dim: the global shape has {rank} dims, `{list}` has {len}"),
                );
                ok = false;
            }
        }
    }
    ok
}

/// The inner box extent in bytes, rounded up to whole bytes (the box's last user dim).
fn inner_box_bytes(spec: &TileSpec) -> u64 {
    let inner = spec.rank() - 1;
    // A u32 box of at most 64-bit elements: below 2^38 bits, no overflow possible.
    (u64::from(spec.boxed[inner]) * u64::from(spec.dtype.global_bits())).div_ceil(8)
}

/// Rules on the static parts: box, element strides, swizzle, interleave, dtype, target.
pub(super) fn check_static(spec: &TileSpec, c: &mut Collector) {
    let rank = spec.rank();
    let inner = rank - 1;
    let interleaved = spec.interleave != Interleave::None;
    if interleaved && rank < MIN_RANK_INTERLEAVED {
        c.error(
            Field::Interleave,
            spec.interleave.name(),
            Rule::InterleaveNeedsRank3,
            format!(
                "interleaved layouts need at least {MIN_RANK_INTERLEAVED} dims; this tile has {rank} (cuTensorMapEncodeTiled: tensorRank)"
            ),
        );
    }
    if interleaved && rank >= MIN_RANK_INTERLEAVED && spec.boxed[1] != 1 {
        c.error(
            field_box(spec, 1),
            spec.boxed[1],
            Rule::InterleaveDim1BoxIsOne,
            "with interleave the hardware copies one position along dim 1 (the channel-slice dim) \
             whatever its box says (the driver accepts any box; an H200 ignores it): use a box of 1, and \
             `repeat` along this dim for several positions per call"
                .into(),
        );
    }
    for d in 0..rank {
        let b = spec.boxed[d];
        if b == 0 || b > MAX_BOX_DIM {
            c.error(
                field_box(spec, d),
                b,
                Rule::BoxDimRange,
                format!("box dims must be in [1, {MAX_BOX_DIM}] (cuTensorMapEncodeTiled: boxDim)"),
            );
        }
        let e = spec.element_strides[d];
        if e == 0 || e > MAX_ELEMENT_STRIDE {
            c.error(
                field_estride(spec, d),
                e,
                Rule::ElementStrideRange,
                format!(
                    "element strides must be in [1, {MAX_ELEMENT_STRIDE}] (cuTensorMapEncodeTiled: elementStrides)"
                ),
            );
        }
        let r = spec.repeat[d];
        if r == 0 || r > MAX_BOX_DIM {
            c.error(
                field_repeat(spec, d),
                r,
                Rule::RepeatRange,
                format!("repeats must be in [1, {MAX_BOX_DIM}] boxes per dim"),
            );
        }
    }
    if !interleaved && spec.element_strides[inner] != 1 {
        c.error(
            field_estride(spec, inner),
            spec.element_strides[inner],
            Rule::InnerElementStrideIgnored,
            "without interleave the hardware ignores the innermost element stride (cuTensorMapEncodeTiled: \
             \"TMA doesn't support the stride for dimension zero\"); it must be 1"
                .into(),
        );
    }
    let inner_bytes = inner_box_bytes(spec);
    // Exactly, in bits: 21 6-bit values are 15.75 bytes, which rounds up to 16 but is not.
    let inner_multiple = spec.dtype.elements_per_whole(INNER_BOX_BYTES_ALIGN);
    if u64::from(spec.boxed[inner]) % inner_multiple != 0 {
        let message = if interleaved {
            format!(
                "with interleave the inner box counts chunks, but the driver checks it as {} elements of {} = {inner_bytes} B, which must be a multiple of {INNER_BOX_BYTES_ALIGN} B: use a multiple of {} chunks",
                spec.boxed[inner],
                spec.dtype,
                INNER_BOX_BYTES_ALIGN / spec.dtype.size_bytes().unwrap_or(1).max(1)
            )
        } else {
            // Whole bytes where they are whole; bits only for packed types that end mid-byte.
            let bits = u64::from(spec.boxed[inner]) * u64::from(spec.dtype.global_bits());
            let extent = if bits % 8 == 0 {
                format!("{} B", bits / 8)
            } else {
                format!("{bits} bits")
            };
            format!(
                "the inner box extent is {} x {} = {extent}; it must be a multiple of {INNER_BOX_BYTES_ALIGN} B: use a multiple of {inner_multiple} elements",
                spec.boxed[inner],
                spec.dtype,
            )
        };
        c.error(
            field_box(spec, inner),
            spec.boxed[inner],
            Rule::InnerBoxBytesMultipleOf16,
            message,
        );
    }
    if let (false, Some(span)) = (interleaved, spec.swizzle.span_bytes()) {
        if inner_bytes > span {
            c.error(
                field_box(spec, inner),
                spec.boxed[inner],
                Rule::InnerBoxFitsSwizzleSpan,
                format!(
                    "the inner box extent is {inner_bytes} B; the {} swizzle holds at most {span} B per row: use at most {} elements and repeat the box along this dim",
                    spec.swizzle.name(),
                    span * 8 / u64::from(spec.dtype.global_bits())
                ),
            );
        }
    }
    if spec.interleave == Interleave::B32 && spec.swizzle != Swizzle::B32 {
        c.error(
            Field::Swizzle,
            spec.swizzle.name(),
            Rule::Interleave32NeedsSwizzle32,
            "32-byte interleave requires the 32B swizzle (cuTensorMapEncodeTiled: \"When interleave is \
             CU_TENSOR_MAP_INTERLEAVE_32B, swizzle must be CU_TENSOR_MAP_SWIZZLE_32B\")"
                .into(),
        );
    }
    if spec.swizzle.is_blackwell_only() && !spec.target.is_blackwell() {
        c.error(
            Field::Swizzle,
            spec.swizzle.name(),
            Rule::SwizzleNeedsBlackwell,
            format!(
                "the {} swizzle exists only on Blackwell (sm_100a and later); the target is {}",
                spec.swizzle.name(),
                spec.target
            ),
        );
    }
    if spec.dtype.is_packed() {
        if !spec.target.is_blackwell() {
            c.error(
                Field::DType,
                spec.dtype,
                Rule::PackedTypeNeedsBlackwell,
                format!(
                    "packed sub-byte types exist only on Blackwell (sm_100a and later); the target is {}",
                    spec.target
                ),
            );
        }
        if interleaved {
            c.error(
                Field::Interleave,
                spec.interleave.name(),
                Rule::PackedTypeNoInterleave,
                format!(
                    "packed sub-byte type {} needs interleave = none",
                    spec.dtype
                ),
            );
        }
    }
    if spec.oob_fill == OobFill::NanRequestZeroFma
        && (!spec.dtype.is_float() || spec.dtype.is_packed())
    {
        c.error(
            Field::OobFill,
            spec.oob_fill.name(),
            Rule::NanFillNeedsFloat,
            format!(
                "NaN out-of-bounds fill needs a floating-point type; {} is not (cuTensorMapEncodeTiled: oobFill)",
                spec.dtype
            ),
        );
    }
}

/// The rules on a plan's sizes; an overflowed size counts as larger than every limit.
pub(super) fn check_plan(spec: &TileSpec, plan: &PlanSizes, c: &mut Collector) {
    let boxes = plan.boxes.get().unwrap_or(u64::MAX);
    let smem_stride_value = |bytes: Size| {
        spec.smem_stride
            .map_or(bytes.to_string(), |s| s.to_string())
    };
    if !plan.stride_bytes.is_below(u64::MAX) && spec.smem_stride.is_some() {
        c.error(
            Field::SmemStride,
            smem_stride_value(plan.stride_bytes),
            Rule::SizeOverflow,
            format!(
                "{} elements of {} are more than 2^64 - 1 bytes: more than any GPU can address",
                smem_stride_value(plan.stride_bytes),
                spec.dtype
            ),
        );
    } else if boxes > 1 {
        let stride = smem_stride_value(plan.stride_bytes);
        if plan
            .box_bytes
            .get()
            .is_none_or(|b| plan.stride_bytes.is_below(b))
        {
            c.error(
                Field::SmemStride,
                stride.clone(),
                Rule::SmemStrideOverlap,
                format!(
                    "repeated boxes are {} B apart in shared memory but each box takes {} B: they would overwrite each other",
                    plan.stride_bytes, plan.box_bytes
                ),
            );
        }
        if !plan.stride_bytes.is_multiple_of(plan.align_bytes) {
            c.error(
                Field::SmemStride,
                stride,
                Rule::SmemStrideAlignment,
                format!(
                    "repeated boxes are {} B apart; each must start {} B-aligned ({} swizzle)",
                    plan.stride_bytes,
                    plan.align_bytes,
                    spec.swizzle.name()
                ),
            );
        }
    }
    let box_limit = spec.target.smem_per_sm();
    let driver_bytes = plan.driver_box_bytes;
    let interleaved = spec.interleave != Interleave::None;
    if !driver_bytes.is_below(box_limit + 1) {
        c.error(
            Field::List("boxed"),
            format!("{:?}", spec.boxed),
            Rule::BoxTooLarge,
            format!(
                "one box holds {driver_bytes} B of data counted as the driver does ({}); the driver refuses boxes over the {box_limit} B of shared memory of one SM on {}",
                if interleaved { "in elements, every dim's box" } else { "floor(box / element stride) elements per dim" },
                spec.target,
            ),
        );
    } else if !plan.box_data_bytes.is_below(box_limit + 1) {
        c.error(
            Field::List("boxed"),
            format!("{:?}", spec.boxed),
            Rule::BoxDataTooLarge,
            format!(
                "one box moves {} B ({}), more than the {box_limit} B of shared memory of one SM on {}: the copy would overflow it (the driver counts {driver_bytes} B, {}, and accepts it)",
                plan.box_data_bytes,
                if interleaved { "whole chunks" } else { "ceil(box / element stride) elements per dim" },
                spec.target,
                if interleaved { "in elements" } else { "with floor(box / element stride)" },
            ),
        );
    }
    let tx_over = !plan.tx_bytes.is_below(MAX_TX_BYTES + 1);
    if tx_over {
        c.error(
            Field::SmemFootprint,
            plan.tx_bytes,
            Rule::TxBytesMax,
            format!(
                "one call delivers {} B but an mbarrier phase can expect at most {MAX_TX_BYTES} B (PTX ISA: tx-count)",
                plan.tx_bytes
            ),
        );
    }
    let limit = spec.target.max_smem_per_block();
    let sm = spec.target.smem_per_sm();
    match plan.footprint_bytes.get() {
        // More tx bytes than an mbarrier counts (2^20) is always more than an SM holds: that
        // finding already says it.
        Some(bytes) if bytes > sm && !tx_over => c.error(
            Field::SmemFootprint,
            bytes,
            Rule::SmemFootprintTooLarge,
            format!(
                "one call spans {bytes} B of shared memory ({boxes} box(es) {} B apart, each {} B); an SM on {} has {sm} B: use a smaller smem_stride, box or repeat",
                plan.stride_bytes,
                plan.box_bytes,
                spec.target
            ),
        ),
        Some(bytes) if bytes > limit => c.warning(
            Field::SmemFootprint,
            bytes,
            Rule::SmemFootprintLimit,
            format!(
                "one call spans {bytes} B of shared memory; a block on {} may use at most {limit} B",
                spec.target
            ),
        ),
        Some(_) => {}
        None if !c.has_errors() => c.error(
            Field::SmemStride,
            smem_stride_value(plan.stride_bytes),
            Rule::SizeOverflow,
            format!(
                "{boxes} repeated boxes {} B apart span more than 2^64 - 1 bytes of shared memory",
                plan.stride_bytes
            ),
        ),
        None => {}
    }
}
