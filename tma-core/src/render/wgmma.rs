//! wgmma operands in CUDA: an operand tile's descriptor constants and `desc()` (rendered into
//! its struct from [`OperandPlan`]), and the `wgmma.mma_async` wrappers the source's operand
//! tiles need (one per B tile's (type, N) and each A type that pairs with it; for an f16 or
//! bf16 B also the form with A from registers, `tma_wgmma_rs<B>`), and the runs that issue a B
//! tile's k-slices as one call (`tma_wgmma_k<A, B>`, `tma_wgmma_rs_k<B>`).

use super::*;
use crate::operand::{Operand, WgmmaType};
use crate::wgmma::OperandPlan;
use std::collections::{BTreeMap, BTreeSet};

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
    wgmma_slices(specs).into_keys().collect()
}

/// Each shape [`wgmma_shapes`] gives, with the k-slice counts of its B tiles (a stage's K / the
/// instruction's K): the runs `tma_wgmma_k<A, B>` and `tma_wgmma_rs_k<B>` issue as one call, in
/// asm statements of at most [`RUN_STATEMENT_SLICES`].
fn wgmma_slices(specs: &[ValidSpec]) -> BTreeMap<Shape, BTreeSet<u64>> {
    let mut slices: BTreeMap<Shape, BTreeSet<u64>> = BTreeMap::new();
    for plan in specs.iter().filter_map(OperandPlan::new) {
        if plan.operand.operand != Operand::B {
            continue;
        }
        for a in WgmmaType::ALL {
            if a.pairs_with(plan.kind) {
                slices
                    .entry((a, plan.kind, plan.mn))
                    .or_default()
                    .insert(plan.k_slices);
            }
        }
    }
    slices
}

/// The most k-slices one asm statement of a run issues: with 9, attention compiles to the calls'
/// SASS byte for byte on 10 of its 16 best configurations (the other 6 one uniform-register
/// instruction apart); 16 in one statement made ptxas order head dim 256's QK^T wgmmas
/// differently, 8 + 8 did not (BENCHMARKS.md, "The cold compile").
const RUN_STATEMENT_SLICES: u64 = 9;

/// One asm statement of a run: its first slice and, per slice, the operand numbers of its A
/// descriptor (or its 4 A registers) and B descriptor, then of scale_d and the transposes.
#[derive(Serialize)]
struct WgmmaStatement {
    /// Whether this is the run's first statement: it scales D by scale_d, the others add.
    first: bool,
    /// `[k, a, b]` per slice (shared-memory A).
    ss: Vec<[u64; 3]>,
    scale: u64,
    trans_a: u64,
    trans_b: u64,
    /// `[k, a0, a1, a2, a3, b]` per slice (A from registers).
    rs: Vec<[u64; 6]>,
    rs_scale: u64,
    rs_trans_b: u64,
}

impl WgmmaStatement {
    fn new(k0: u64, s: u64, n_acc: u64) -> WgmmaStatement {
        let ss = (0..s)
            .map(|i| [k0 + i, n_acc + 2 * i, n_acc + 2 * i + 1])
            .collect();
        let scale = n_acc + 2 * s;
        let rs = (0..s)
            .map(|i| {
                let a = n_acc + 4 * i;
                [k0 + i, a, a + 1, a + 2, a + 3, n_acc + 4 * s + i]
            })
            .collect();
        WgmmaStatement {
            first: k0 == 0,
            ss,
            scale,
            trans_a: scale + 1,
            trans_b: scale + 2,
            rs,
            rs_scale: n_acc + 5 * s,
            rs_trans_b: n_acc + 5 * s + 1,
        }
    }
}

/// A run of `s` wgmmas of a shape (a B tile's k-slices): as few asm statements as hold at most
/// [`RUN_STATEMENT_SLICES`] each, of nearly equal sizes.
#[derive(Serialize)]
struct WgmmaRun {
    s: u64,
    statements: Vec<WgmmaStatement>,
}

impl WgmmaRun {
    fn new(s: u64, n_acc: u64) -> WgmmaRun {
        let n = s.div_ceil(RUN_STATEMENT_SLICES).max(1);
        let mut statements = Vec::new();
        let mut k0 = 0;
        for i in 0..n {
            let len = s / n + u64::from(i < s % n);
            statements.push(WgmmaStatement::new(k0, len, n_acc));
            k0 += len;
        }
        WgmmaRun { s, statements }
    }
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
    /// Also the register-A form (`tma_wgmma_rs<B>`): f16 / bf16, the same type on both sides.
    rs: bool,
    /// The runs of k-slices the source's B tiles of this shape hold.
    runs: Vec<WgmmaRun>,
    /// The operand numbers of the one-slice wrappers (`tma_wgmma`, `tma_wgmma_rs`): a run's
    /// statement of one slice, so both forms number their operands in one place.
    one: WgmmaStatement,
}

/// The context of `wgmma_ops.cuh.tera`.
#[derive(Serialize)]
struct WgmmaOpsContext {
    ops: Vec<WgmmaOp>,
}

/// The `wgmma.mma_async` wrappers of `specs`' operand tiles (empty when there are none),
/// include-guarded per shape.
pub(super) fn wgmma_ops(specs: &[ValidSpec]) -> Result<String, RenderError> {
    let ops: Vec<WgmmaOp> = wgmma_slices(specs)
        .into_iter()
        .map(|((a, b, n), slices)| {
            let n_acc = n / 2;
            let runs = slices.iter().map(|&s| WgmmaRun::new(s, n_acc)).collect();
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
                rs: a == b && matches!(a, WgmmaType::F16 | WgmmaType::BF16),
                runs,
                one: WgmmaStatement::new(0, 1, n_acc),
            }
        })
        .collect();
    if ops.is_empty() {
        return Ok(String::new());
    }
    let ctx = WgmmaOpsContext { ops };
    let mut out = String::from(
        "\n// ---- wgmma.mma_async for the operand tiles of this source (tma_wgmma<A, B>, tma_wgmma_rs<B> and their runs pick one) ----",
    );
    out.push_str(&render("wgmma_ops.cuh.tera", &ctx)?);
    out.push('\n');
    Ok(out)
}

/// The wgmma element types in the prelude's `tma_wgmma_type` order.
pub(super) fn wgmma_type_names() -> Vec<&'static str> {
    WgmmaType::ALL.iter().map(|t| t.ptx_name()).collect()
}

/// An f32 as PTX writes it exactly: `0f` and its bits in hex.
pub(super) fn ptx_f32(v: f32) -> String {
    format!("0f{:08X}", v.to_bits())
}

/// One polynomial of `tma_wgmma_ex2_poly<DEG>`: its degree and `c_deg .. c1` (Horner's order)
/// as PTX floats, from the model's coefficients (`registers::Ex2Poly`).
#[derive(Serialize)]
pub(super) struct Ex2PolyCode {
    degree: u32,
    top_down: Vec<String>,
}

pub(super) fn ex2_polys() -> Vec<Ex2PolyCode> {
    crate::wgmma::registers::Ex2Poly::ALL
        .iter()
        .map(|p| Ex2PolyCode {
            degree: p.degree(),
            top_down: p.coefficients().iter().rev().map(|&c| ptx_f32(c)).collect(),
        })
        .collect()
}

/// The context of `wgmma_exercise.cu.tera`.
#[derive(Serialize)]
struct WgmmaExerciseContext<'a> {
    /// The plan's (and its kernel's) name, its struct and its launch-bounds macro.
    plan: &'a str,
    cuda: String,
    launch_macro: String,
    set: &'a str,
    a_init: String,
    b_init: String,
    a_desc: String,
    b_desc: String,
}

/// Threads of the wgmma exercise's block: one warpgroup.
pub const WGMMA_EXERCISE_THREADS: u32 = 128;

/// The plan of a wgmma exercise kernel `name` ([`wgmma_exercise_body`]): tile set `set` of
/// members `a` (an A operand tile) and `b` (a B operand tile), on one warpgroup. Validate it
/// and give it to both the source ([`KernelSource::plan`]) and the body.
pub fn wgmma_exercise_plan(
    name: &str,
    set: &str,
    a: &ValidSpec,
    b: &ValidSpec,
) -> crate::plan::KernelPlan {
    crate::plan::KernelPlan::new(name)
        .tile_set(set, &[("a", a), ("b", b)])
        .block_threads(WGMMA_EXERCISE_THREADS)
}

/// The kernel of `plan` (named by it: `<plan>(TMA_<SET>_PARAMS, float* d, int a_mn, int a_k,
/// int b_mn, int b_k, int run)`) computing `D = A * B` on one warpgroup (the k-slices one
/// `tma_wgmma<A, B>` each; with `run` 1 one `tma_wgmma_k<A, B>`; with `run` 2 the same on
/// `tma_wgmma_a_descs<A>`) from two operand tiles loaded by TMA into its tile set `set`, whose
/// members `a` (an A operand tile) and `b` (a B operand tile) hold equal K
/// ([`wgmma_exercise_plan`] declares such a plan). Coordinates are the tiles' MN and K (outer
/// dims at 0). Shared memory and launch are the plan's: build it with
/// `KernelSource::new().plan(&plan).body(&wgmma_exercise_body(&plan, set)?)` and launch it
/// from the plan (one block). [`RenderError::WgmmaExercisePlan`] when the plan has no such
/// set or another block. Its SASS shows HGMMA (QGMMA for fp8); tests/gpu_wgmma.rs runs it.
pub fn wgmma_exercise_body(
    plan: &crate::plan::ValidKernelPlan,
    set: &str,
) -> Result<String, RenderError> {
    let refuse = |problem| RenderError::WgmmaExercisePlan {
        plan: plan.name().to_string(),
        set: set.to_string(),
        problem,
    };
    let decl = (plan.plan().tile_sets.iter())
        .find(|s| s.name == set)
        .ok_or_else(|| refuse("has no tile set of that name"))?;
    let member = |m: &str| {
        (decl.members.iter())
            .find(|(name, _)| name == m)
            .map(|(_, v)| v)
    };
    let (Some(a), Some(b), 2) = (member("a"), member("b"), decl.members.len()) else {
        return Err(refuse("holds a set whose members are not `a` and `b`"));
    };
    if plan.launch().block != [WGMMA_EXERCISE_THREADS, 1, 1] {
        return Err(refuse("launches other than one warpgroup (128 threads)"));
    }
    let describe = |v: &ValidSpec| {
        v.spec().wgmma.map_or_else(
            || "no operand".to_string(),
            |w| format!("{} {}", v.spec().dtype, w),
        )
    };
    let ctx = WgmmaExerciseContext {
        plan: plan.name(),
        cuda: super::plan::plan_cuda_name(plan.name()),
        launch_macro: super::plan::plan_launch_macro(plan.name()),
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn operands() -> (ValidSpec, ValidSpec) {
        let specs = corpus::corpus();
        let find = |n: &str| specs.iter().find(|v| v.spec().name == n).unwrap().clone();
        (find("wg_a_bf16_k"), find("wg_b_bf16_mn"))
    }

    #[test]
    fn the_exercise_takes_its_shared_memory_and_name_from_its_plan() {
        let (a, b) = operands();
        let plan = wgmma_exercise_plan("mma", "ops", &a, &b)
            .validate()
            .unwrap();
        assert_eq!(plan.launch().block, [WGMMA_EXERCISE_THREADS, 1, 1]);
        let body = wgmma_exercise_body(&plan, "ops").unwrap();
        for want in [
            "void TMA_PLAN_MMA_LAUNCH_BOUNDS mma(TMA_OPS_PARAMS,",
            "using P = tma_plan_mma;",
            "using S = P::tile_ops;",
            "unsigned char* smem = P::ops(P::base(raw));",
        ] {
            assert!(body.contains(want), "{want}\n{body}");
        }
        assert!(!body.contains("tma_align_smem"), "{body}");
    }

    /// The plan's kernel is `extern "C"` at namespace scope: a plan `j0` (drawn by
    /// `generated_names_compile`) met CUDA's Bessel function and NVRTC refused the unit.
    #[test]
    fn a_plan_named_as_a_cuda_function_is_refused() {
        let (a, b) = operands();
        let e = wgmma_exercise_plan("j0", "ops", &a, &b)
            .validate()
            .unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        assert_eq!(e.errors[0].rule, crate::Rule::GeneratedNameClash);
        assert!(
            e.to_string()
                .contains("a kernel named `j0` meets CUDA's own `j0`, which cuda.h"),
            "{e}"
        );
        assert!(e.to_string().contains("rename the plan"), "{e}");
    }

    #[test]
    fn a_plan_the_exercise_cannot_run_on_is_refused_naming_what_it_lacks() {
        let (a, b) = operands();
        let problem = |plan: &crate::plan::KernelPlan, set: &str| match wgmma_exercise_body(
            &plan.validate().unwrap(),
            set,
        ) {
            Err(e @ RenderError::WgmmaExercisePlan { .. }) => e.to_string(),
            other => panic!("{other:?}"),
        };
        let good = wgmma_exercise_plan("mma", "ops", &a, &b);
        let text = problem(&good, "other");
        assert!(
            text.starts_with("kernel plan `mma` has no tile set of that name")
                && text.contains("tile set `other`"),
            "{text}"
        );
        let swapped = crate::plan::KernelPlan::new("mma")
            .tile_set("ops", &[("b", &a), ("x", &b)])
            .block_threads(128);
        assert!(problem(&swapped, "ops").contains("not `a` and `b`"));
        let wide = good.block_threads(256);
        assert!(problem(&wide, "ops").contains("one warpgroup (128 threads)"));
    }
}
