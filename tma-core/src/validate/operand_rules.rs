//! The rules of a wgmma operand tile ([`crate::TileSpec::wgmma`]): each names the field,
//! its value and the PTX ISA's rule. Run after the TMA rules, on the per-dim lists only
//! (their lengths already checked), so they stand alone.

use super::collect::*;
use crate::error::Field;
use crate::operand::{self, Major, Operand, WgmmaType};
use crate::rules::Rule;
use crate::spec::{Arch, Interleave, TileSpec};

/// Checks every operand rule on `spec` (nothing when it is no operand).
pub(super) fn check_operand(spec: &TileSpec, c: &mut Collector) {
    let Some(w) = spec.wgmma else {
        return;
    };
    let kind = WgmmaType::of(spec.dtype);
    match kind {
        None => c.error(
            Field::DType,
            spec.dtype,
            Rule::WgmmaDType,
            format!(
                "a wgmma operand ({w}) is f16, bf16, tf32, e4m3 or e5m2 (the types wgmma.mma_async reads from shared memory); {} is none of them",
                spec.dtype
            ),
        ),
        Some(k) if w.major == Major::MN && !k.allows_mn_major() => c.error(
            Field::Wgmma,
            w,
            Rule::WgmmaMajor,
            format!(
                "{k} operands are K-major only: only f16 and bf16 have wgmma's transpose immediates (PTX ISA 9.7.15.5.2); declare the tile [MN][K] and `{}`",
                match w.operand {
                    Operand::A => "a_k_major",
                    Operand::B => "b_k_major",
                }
            ),
        ),
        Some(_) => {}
    }
    if spec.target != Arch::Sm90a {
        c.error(
            Field::Target,
            spec.target,
            Rule::WgmmaNeedsSm90a,
            format!(
                "wgmma.mma_async is an sm_90a instruction; {} has none",
                spec.target
            ),
        );
    }
    let rank = spec.rank();
    if rank < 2 {
        c.error(
            Field::Rank,
            rank,
            Rule::WgmmaTileShape,
            "a wgmma operand is a matrix: rank 2 or more, its last two dims [MN][K] (K-major) or [K][MN] (MN-major)".into(),
        );
        return;
    }
    let shape_ok = check_shape(spec, c);
    let (Some(kind), true) = (kind, shape_ok) else {
        return;
    };
    let inner = rank - 1;
    let outer = rank - 2;
    let elem = kind.bytes();
    let inner_bytes = u64::from(spec.boxed[inner]) * elem;
    let inner_repeat = u64::from(spec.repeat[inner].max(1));
    let span = spec.swizzle.span_bytes();
    // The inner box against the canonical layouts.
    let inner_ok = match (w.major, span) {
        (_, None) => inner_bytes == 16,
        (Major::K, Some(span)) => inner_bytes % operand::K_BYTES == 0 && inner_bytes <= span,
        (Major::MN, Some(span)) => inner_bytes == span,
    };
    if !inner_ok {
        let want = match (w.major, span) {
            (_, None) => format!(
                "without swizzle wgmma reads core matrices of 8 rows x 16 contiguous bytes, so the inner box is exactly 16 bytes ({} {kind} elements); more {} comes from `repeat` along it",
                16 / elem,
                if w.major == Major::K { "K" } else { "MN" }
            ),
            (Major::K, Some(span)) => format!(
                "a K-major {} operand reads K in slices of 32 bytes within each {span}-byte row, so the inner box is a multiple of 32 bytes ({} {kind} elements)",
                spec.swizzle.name(),
                32 / elem
            ),
            (Major::MN, Some(span)) => format!(
                "an MN-major {} operand is made of swizzle atoms {span} bytes wide, so the inner box is exactly {span} bytes ({} {kind} elements); more MN comes from `repeat` along it",
                spec.swizzle.name(),
                span / elem
            ),
        };
        c.error(
            field_box(spec, inner),
            spec.boxed[inner],
            Rule::WgmmaInnerBox,
            format!(
                "{inner_bytes} B of {kind}: {want} (PTX ISA 9.7.15.5.1.2.1.3, canonical layouts)"
            ),
        );
    }
    // The MN and K extents, in elements.
    let (mn_dim, k_dim) = match w.major {
        Major::K => (outer, inner),
        Major::MN => (inner, outer),
    };
    let extent = |d: usize| u64::from(spec.boxed[d]) * u64::from(spec.repeat[d].max(1));
    let (mn, k) = (extent(mn_dim), extent(k_dim));
    let mn_ok = match w.operand {
        Operand::A => mn % operand::M == 0,
        Operand::B => (operand::N_MIN..=operand::N_MAX).contains(&mn) && mn % operand::N_STEP == 0,
    };
    if !mn_ok {
        let what = match w.operand {
            Operand::A => format!(
                "A's M ({mn}) is whole 64-row blocks: wgmma is .m64 (PTX ISA 9.7.15.2)"
            ),
            Operand::B => format!(
                "B's N ({mn}) is the instruction's N: a multiple of 8 from 8 to 256 (PTX ISA 9.7.15.2)"
            ),
        };
        c.error(
            field_box(spec, mn_dim),
            spec.boxed[mn_dim],
            Rule::WgmmaMnExtent,
            if spec.repeat[mn_dim] > 1 {
                format!(
                    "{what}; it is box x repeat = {} x {}",
                    spec.boxed[mn_dim], spec.repeat[mn_dim]
                )
            } else {
                what
            },
        );
    }
    if k == 0 || (k * elem) % operand::K_BYTES != 0 {
        c.error(
            field_box(spec, k_dim),
            spec.boxed[k_dim],
            Rule::WgmmaKExtent,
            format!(
                "K ({k} {kind} elements{}) is whole instructions of k{} (32 bytes; PTX ISA 9.7.15.2)",
                if k_dim == inner && inner_repeat > 1 {
                    format!(" = box x repeat = {} x {inner_repeat}", spec.boxed[k_dim])
                } else {
                    String::new()
                },
                kind.k()
            ),
        );
    }
}

/// The shape rules (rank checked before): no interleave, element strides 1, outer dims a box
/// of 1 and one repeat, repeats along the outer matrix dim only where the boxes continue the
/// canonical layout ([`outer_repeat_problem`]). True when all hold.
fn check_shape(spec: &TileSpec, c: &mut Collector) -> bool {
    let before = c.findings.len();
    let rank = spec.rank();
    if spec.interleave != Interleave::None {
        c.error(
            Field::Interleave,
            spec.interleave.name(),
            Rule::WgmmaTileShape,
            "a wgmma operand is a plain matrix: interleaved layouts are no canonical wgmma layout"
                .into(),
        );
    }
    for d in 0..rank {
        if spec.element_strides[d] != 1 {
            c.error(
                field_estride(spec, d),
                spec.element_strides[d],
                Rule::WgmmaTileShape,
                "a wgmma operand takes every element: element strides are 1".into(),
            );
        }
        if d + 2 < rank && spec.boxed[d] != 1 {
            c.error(
                field_box(spec, d),
                spec.boxed[d],
                Rule::WgmmaTileShape,
                "a wgmma operand is the matrix of its last two dims: every dim outside them has a box of 1".into(),
            );
        }
        if d + 2 < rank && spec.repeat[d] > 1 {
            c.error(
                field_repeat(spec, d),
                spec.repeat[d],
                Rule::WgmmaTileShape,
                "a wgmma operand is the matrix of its last two dims: every dim outside them has one repeat".into(),
            );
        }
    }
    let outer = rank - 2;
    if spec.repeat[outer] > 1 {
        if let Some(why) = outer_repeat_problem(spec) {
            c.error(
                field_repeat(spec, outer),
                spec.repeat[outer],
                Rule::WgmmaTileShape,
                why,
            );
        }
    }
    c.findings.len() == before
}

/// Why repeats along the outer matrix dim break the canonical layout (`None`: they continue
/// it). Only a K-major swizzled operand's MN rows may be repeated: its rows sit `span` bytes
/// apart and 8-row groups `SBO = 8 span` apart, so boxes of whole 8-row groups placed back to
/// back (stride = rows x span, a multiple of the swizzle period) are one taller matrix; e.g. a
/// 256-row B tile whose two 128-row halves two cluster CTAs multicast. K must then be one box
/// (a repeat along K would sit between the MN boxes).
fn outer_repeat_problem(spec: &TileSpec) -> Option<String> {
    let rank = spec.rank();
    let (outer, inner) = (rank - 2, rank - 1);
    let w = spec.wgmma?;
    let Some(span) = spec.swizzle.span_bytes() else {
        return Some(format!(
            "a wgmma operand without swizzle repeats boxes only along its innermost dim (the leading byte offset steps over them); make the {} box larger instead",
            if w.major == Major::K { "MN" } else { "K" }
        ));
    };
    if w.major == Major::MN {
        return Some(
            "an MN-major operand repeats boxes only along its innermost dim (MN: the leading byte offset steps over the atoms); make the box larger along K instead".into(),
        );
    }
    if spec.repeat[inner] > 1 {
        return Some(format!(
            "a K-major operand repeats along MN only when K is one box (repeat[{inner}] = {}): the boxes along K would sit between the MN boxes and break the uniform 8-row stride (SBO)",
            spec.repeat[inner]
        ));
    }
    let rows = u64::from(spec.boxed[outer]);
    if rows % 8 != 0 {
        return Some(format!(
            "repeated MN boxes continue the canonical layout only in whole 8-row groups (the swizzle period, SBO = 8 x {span} B); a box of {rows} rows is not"
        ));
    }
    let want = rows * span;
    let stride = crate::smem::plan(spec).stride_bytes.get();
    if stride != Some(want) {
        return Some(format!(
            "repeated MN boxes must sit back to back ({rows} rows x {span} B = {want} B apart) so the rows continue at SBO = 8 x {span} B; smem_stride puts them {} B apart",
            stride.map_or("more than 2^64".to_string(), |s| s.to_string())
        ));
    }
    None
}
