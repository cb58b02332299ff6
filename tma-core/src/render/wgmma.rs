//! wgmma operands in CUDA: an operand tile's descriptor constants and `desc()` (rendered into
//! its struct from [`OperandPlan`]), and the `wgmma.mma_async` wrappers the source's operand
//! tiles need (one per B tile's (type, N) and each A type that pairs with it).

use super::*;
use crate::operand::{Operand, WgmmaType};
use crate::wgmma::OperandPlan;
use std::collections::BTreeSet;

/// The `wgmma` entry of a tile's template context: an operand tile's descriptor numbers.
#[derive(Serialize)]
pub(super) struct OperandContext {
    mn_dim: usize,
    k_dim: usize,
    operand: &'static str,
    major: &'static str,
    kind: &'static str,
    rows_name: &'static str,
    mn: u64,
    k: u64,
    n_text: String,
    inst_k: u64,
    k_slices: u64,
    slices_per_box: u64,
    slice_step: u64,
    box_step: u64,
    m_blocks: u64,
    m_block_step: u64,
    lbo: u64,
    sbo: u64,
    layout: &'static str,
    layout_bits: u64,
    transpose: u32,
    desc_base: String,
}

/// The `wgmma` entry of a tile's template context: `None` for a tile that is no operand.
pub(super) fn operand_context(valid: &ValidSpec) -> Option<OperandContext> {
    let p = OperandPlan::new(valid)?;
    let desc_base = p.base_word()?;
    let operand = match p.operand.operand {
        Operand::A => "A",
        Operand::B => "B",
    };
    // The user dims (outer -> inner) of MN and K: what a debug check of `desc()` names. An
    // operand tile has rank 2 or more, and MN and K are its two innermost dims (TMA dims 0, 1).
    let rank = valid.spec().rank();
    let (mn_inner, k_inner) = p.operand.dims_from_inner();
    let user_dim = |from_inner: usize| crate::encode_args::user_dim_of_tma_dim(rank, from_inner);
    Some(OperandContext {
        mn_dim: user_dim(mn_inner),
        k_dim: user_dim(k_inner),
        operand,
        major: match p.operand.major {
            crate::operand::Major::K => "K",
            crate::operand::Major::MN => "MN",
        },
        kind: p.kind.ptx_name(),
        rows_name: if p.operand.operand == Operand::A {
            "M"
        } else {
            "N"
        },
        mn: p.mn,
        k: p.k,
        n_text: if p.operand.operand == Operand::A {
            "N".to_string()
        } else {
            p.mn.to_string()
        },
        inst_k: p.shape.k,
        k_slices: p.k_slices,
        slices_per_box: p.slices_per_box,
        slice_step: p.slice_step,
        box_step: p.box_step,
        m_blocks: p.m_blocks,
        m_block_step: p.m_block_step,
        lbo: p.lbo,
        sbo: p.sbo,
        layout: p.layout.name(),
        layout_bits: p.layout.bits(),
        transpose: u32::from(p.transpose()),
        desc_base: format!("{desc_base:#018x}"),
    })
}

/// One `wgmma.mma_async` shape: (A type, B type, N).
type Shape = (WgmmaType, WgmmaType, u64);

/// The shapes the operand tiles of `specs` need: per B tile, its N with each A type that pairs
/// with its type. Sorted, each once.
pub fn wgmma_shapes(specs: &[ValidSpec]) -> Vec<(WgmmaType, WgmmaType, u64)> {
    let mut shapes: BTreeSet<Shape> = BTreeSet::new();
    for plan in specs.iter().filter_map(OperandPlan::new) {
        if plan.operand.operand != Operand::B {
            continue;
        }
        for a in WgmmaType::ALL {
            if a.pairs_with(plan.kind) {
                shapes.insert((a, plan.kind, plan.mn));
            }
        }
    }
    shapes.into_iter().collect()
}

/// One `wgmma.mma_async` wrapper: the types, N, K, the accumulator registers in rows of 8.
#[derive(Serialize)]
struct WgmmaOp {
    a: &'static str,
    b: &'static str,
    n: u64,
    k: u64,
    n_acc: u64,
    rows: Vec<Vec<u64>>,
    trans: bool,
}

/// The context of `wgmma_ops.cuh.tera`.
#[derive(Serialize)]
struct WgmmaOpsContext {
    ops: Vec<WgmmaOp>,
}

/// The `wgmma.mma_async` wrappers of `specs`' operand tiles (empty when there are none),
/// include-guarded per shape.
pub(super) fn wgmma_ops(specs: &[ValidSpec]) -> Result<String, RenderError> {
    let ops: Vec<WgmmaOp> = wgmma_shapes(specs)
        .into_iter()
        .map(|(a, b, n)| {
            let n_acc = n / 2;
            let rows: Vec<Vec<u64>> = (0..n_acc)
                .collect::<Vec<u64>>()
                .chunks(8)
                .map(<[u64]>::to_vec)
                .collect();
            WgmmaOp {
                a: a.ptx_name(),
                b: b.ptx_name(),
                n,
                k: a.k(),
                n_acc,
                rows,
                trans: a.allows_mn_major() && b.allows_mn_major(),
            }
        })
        .collect();
    if ops.is_empty() {
        return Ok(String::new());
    }
    let ctx = WgmmaOpsContext { ops };
    let mut out = String::from(
        "\n// ---- wgmma.mma_async for the operand tiles of this source (tma_wgmma<A, B> picks one) ----",
    );
    out.push_str(&render("wgmma_ops.cuh.tera", &ctx)?);
    out.push('\n');
    Ok(out)
}

/// The wgmma element types in the prelude's `tma_wgmma_type` order.
pub(super) fn wgmma_type_names() -> Vec<&'static str> {
    WgmmaType::ALL.iter().map(|t| t.ptx_name()).collect()
}

/// The context of `wgmma_exercise.cu.tera`.
#[derive(Serialize)]
struct WgmmaExerciseContext<'a> {
    set: &'a str,
    a_init: String,
    b_init: String,
    a_desc: String,
    b_desc: String,
}

/// A kernel `tma_wgmma_exercise(TMA_<SET>_PARAMS, float* d, int a_mn, int a_k, int b_mn, int
/// b_k)` computing `D = A * B` on one warpgroup from two operand tiles loaded by TMA: the
/// tile set `set` must hold members `a` (an A operand tile) and `b` (a B operand tile) of equal
/// K. Coordinates are the tiles' MN and K (outer dims at 0). Build it with
/// `KernelSource::new().tile_set(set, &[("a", a), ("b", b)]).body(&wgmma_exercise_body(..)?)`.
/// Its SASS shows HGMMA (QGMMA for fp8); tests/gpu_wgmma.rs runs it.
pub fn wgmma_exercise_body(set: &str, a: &ValidSpec, b: &ValidSpec) -> Result<String, RenderError> {
    let describe = |v: &ValidSpec| {
        v.spec().wgmma.map_or_else(
            || "no operand".to_string(),
            |w| format!("{} {}", v.spec().dtype, w),
        )
    };
    let ctx = WgmmaExerciseContext {
        set,
        a_init: coord_init(a, "a_mn", "a_k"),
        b_init: coord_init(b, "b_mn", "b_k"),
        a_desc: describe(a),
        b_desc: describe(b),
    };
    render("wgmma_exercise.cu.tera", &ctx)
}

/// `{.M = mn, .K = k}` in the tile's dim order: the last two dims are MN and K (or K and MN);
/// outer dims 0.
fn coord_init(v: &ValidSpec, mn: &str, k: &str) -> String {
    let spec = v.spec();
    let rank = spec.rank();
    let mn_inner = spec
        .wgmma
        .is_some_and(|w| w.major == crate::operand::Major::MN);
    let fields: Vec<String> = (0..rank)
        .map(|d| {
            let value = match (rank - d, mn_inner) {
                (1, false) | (2, true) => k,
                (1, true) | (2, false) => mn,
                _ => "0",
            };
            format!(".{} = {value}", spec.dim_label(d))
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}
