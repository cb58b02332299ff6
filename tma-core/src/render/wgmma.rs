//! wgmma operands in CUDA: an operand tile's descriptor constants and `desc()` (rendered into
//! its struct from [`OperandPlan`]), and the `wgmma.mma_async` wrappers the source's operand
//! tiles need (one per B tile's (type, N) and each A type that pairs with it).

use super::*;
use crate::operand::{Operand, WgmmaType};
use crate::wgmma::OperandPlan;
use std::collections::BTreeSet;

/// The `wgmma` entry of a tile's template context: `false` for a tile that is no operand.
pub(super) fn operand_context(valid: &ValidSpec) -> Value {
    let Some(p) = OperandPlan::new(valid) else {
        return Value::from(false);
    };
    let Some(desc_base) = p.base_word() else {
        return Value::from(false);
    };
    let operand = match p.operand.operand {
        Operand::A => "A",
        Operand::B => "B",
    };
    // The user dims (outer -> inner) of MN and K: what a debug check of `desc()` names. An
    // operand tile has rank 2 or more, and MN and K are its two innermost dims (TMA dims 0, 1).
    let rank = valid.spec().rank();
    let (mn_inner, k_inner) = p.operand.dims_from_inner();
    let user_dim = |from_inner: usize| crate::layout::user_dim_of_tma_dim(rank, from_inner);
    map([
        ("mn_dim", Value::from(user_dim(mn_inner))),
        ("k_dim", Value::from(user_dim(k_inner))),
        ("operand", Value::from(operand)),
        (
            "major",
            Value::from(match p.operand.major {
                crate::operand::Major::K => "K",
                crate::operand::Major::MN => "MN",
            }),
        ),
        ("kind", Value::from(p.kind.ptx_name())),
        (
            "rows_name",
            Value::from(if p.operand.operand == Operand::A {
                "M"
            } else {
                "N"
            }),
        ),
        ("mn", Value::from(p.mn)),
        ("k", Value::from(p.k)),
        (
            "n_text",
            Value::from(if p.operand.operand == Operand::A {
                "N".to_string()
            } else {
                p.mn.to_string()
            }),
        ),
        ("inst_k", Value::from(p.shape.k)),
        ("k_slices", Value::from(p.k_slices)),
        ("slices_per_box", Value::from(p.slices_per_box)),
        ("slice_step", Value::from(p.slice_step)),
        ("box_step", Value::from(p.box_step)),
        ("m_blocks", Value::from(p.m_blocks)),
        ("m_block_step", Value::from(p.m_block_step)),
        ("lbo", Value::from(p.lbo)),
        ("sbo", Value::from(p.sbo)),
        ("layout", Value::from(p.layout.name())),
        ("layout_bits", Value::from(p.layout.bits())),
        ("transpose", Value::from(u32::from(p.transpose()))),
        ("desc_base", Value::from(format!("{desc_base:#018x}"))),
    ])
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

/// The `wgmma.mma_async` wrappers of `specs`' operand tiles (empty when there are none),
/// include-guarded per shape.
pub(super) fn wgmma_ops(specs: &[ValidSpec]) -> Result<String, RenderError> {
    let ops: Vec<Value> = wgmma_shapes(specs)
        .into_iter()
        .map(|(a, b, n)| {
            let n_acc = n / 2;
            let rows: Vec<Value> = (0..n_acc)
                .collect::<Vec<u64>>()
                .chunks(8)
                .map(|c| Value::from(c.to_vec()))
                .collect();
            map([
                ("a", Value::from(a.ptx_name())),
                ("b", Value::from(b.ptx_name())),
                ("n", Value::from(n)),
                ("k", Value::from(a.k())),
                ("n_acc", Value::from(n_acc)),
                ("rows", Value::from(rows)),
                (
                    "trans",
                    Value::from(a.allows_mn_major() && b.allows_mn_major()),
                ),
            ])
        })
        .collect();
    if ops.is_empty() {
        return Ok(String::new());
    }
    let mut ctx = Context::new();
    ctx.insert_value("ops", Value::from(ops));
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
    let mut ctx = Context::new();
    ctx.insert("set", set);
    ctx.insert("a_init", &coord_init(a, "a_mn", "a_k"));
    ctx.insert("b_init", &coord_init(b, "b_mn", "b_k"));
    ctx.insert("a_desc", &describe(a));
    ctx.insert("b_desc", &describe(b));
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
