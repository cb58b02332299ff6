//! `tma explain`: what a declaration comes to — findings, layout, `TX_BYTES`, the encode
//! arguments and the shared-memory picture — all read from `tma_core`, nothing recomputed.

use crate::decl::Tile;
use std::collections::BTreeMap;
use std::fmt::Write;
use tma_core::model::picture::smem_picture;
use tma_core::pipeline::ValidPipeline;
use tma_core::{BoundSpec, EncodeArgs, Extent, ValidSpec};

/// Run-time dims and strides given on the command line: `ROW=4096`, `stride_ROW=2048`.
pub type Dims = BTreeMap<String, u64>;

/// How a tile was bound for the encode arguments and the picture.
pub enum Binding {
    /// Every dim is static, or given with `--dims`.
    Given(BoundSpec),
    /// Run-time dims taken as one call's extent (box x repeat), for the picture only.
    Example(BoundSpec, String),
    /// No binding (the message says why).
    None(String),
}

/// The names `--dims` takes for `valid`: each run-time dim's label and `stride_<label>` for
/// each run-time stride, outer -> inner.
pub fn runtime_names(valid: &ValidSpec) -> Vec<String> {
    let spec = valid.spec();
    let mut out = Vec::new();
    for (d, e) in spec.global.iter().enumerate() {
        if matches!(e, Extent::Runtime) {
            out.push(spec.dim_label(d));
        }
    }
    for (d, e) in spec.strides.iter().flatten().enumerate() {
        if matches!(e, Extent::Runtime) {
            out.push(format!("stride_{}", spec.dim_label(d)));
        }
    }
    out
}

/// Binds `valid` with the dims given; run-time ones not given make an example binding.
pub fn bind(valid: &ValidSpec, dims: &Dims) -> Binding {
    let spec = valid.spec();
    let rank = spec.rank();
    let mut missing = Vec::new();
    let mut example = Vec::new();
    let global: Vec<u64> = (0..rank)
        .map(|d| match spec.global[d] {
            Extent::Static(v) => v,
            Extent::Runtime => {
                let label = spec.dim_label(d);
                dims.get(&label).copied().unwrap_or_else(|| {
                    let v = u64::from(spec.boxed[d]) * u64::from(spec.repeat[d]);
                    missing.push(label.clone());
                    example.push(format!("{label} = {v}"));
                    v
                })
            }
        })
        .collect();
    let strides: Option<Vec<u64>> = match &spec.strides {
        None => None,
        Some(list) => {
            let mut out = Vec::with_capacity(rank);
            for (d, e) in list.iter().enumerate() {
                match e {
                    Extent::Static(v) => out.push(*v),
                    Extent::Runtime => {
                        let key = format!("stride_{}", spec.dim_label(d));
                        match dims.get(&key) {
                            Some(v) => out.push(*v),
                            None => {
                                missing.push(key);
                                // Dense over the dims inside, as if not declared.
                                let dense = tma_core::validate::dense_strides(
                                    &global,
                                    spec.inner_unit_elements(),
                                )
                                .map_or(1, |s| s[d]);
                                example.push(format!("stride_{} = {dense}", spec.dim_label(d)));
                                out.push(dense);
                            }
                        }
                    }
                }
            }
            Some(out)
        }
    };
    match valid.bind(&global, strides.as_deref()) {
        Ok(b) if missing.is_empty() => Binding::Given(b),
        Ok(b) => Binding::Example(
            b,
            format!(
                "run-time {} not given (--dims {}=..): the picture takes {}",
                if missing.len() == 1 {
                    "value"
                } else {
                    "values"
                },
                missing[0],
                example.join(", ")
            ),
        ),
        Err(e) if missing.is_empty() => Binding::None(format!("the dims given are refused:\n{e}")),
        Err(e) if runtime_names(valid).iter().any(|n| dims.contains_key(n)) => {
            Binding::None(format!(
                "the dims given are refused (with {} for the ones not given):\n{e}",
                example.join(", ")
            ))
        }
        Err(e) => Binding::None(format!("no example binding: {e}")),
    }
}

/// The whole report of one tile.
pub fn explain(tile: &Tile, dims: &Dims) -> String {
    let valid = &tile.checked.valid;
    let spec = valid.spec();
    let plan = valid.plan();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tile `{}` ({}): {} elements, rank {}, target {} -> CUDA struct {}",
        spec.name,
        tile.ident,
        spec.dtype,
        spec.rank(),
        spec.target.nvrtc_name(),
        tile.checked.cuda_name
    );
    let binding = bind(valid, dims);
    let bound_warnings: Vec<String> = match &binding {
        Binding::Given(b) => b.warnings().map(ToString::to_string).collect(),
        _ => valid.warnings().iter().map(ToString::to_string).collect(),
    };
    out.push_str("\nfindings:\n");
    if bound_warnings.is_empty() {
        out.push_str("  every rule passed, no warning\n");
    }
    for w in &bound_warnings {
        let _ = writeln!(out, "  warning: {w}");
    }

    out.push_str("\nlayout (user order, outer -> inner; elements):\n");
    let strides: Vec<String> = match &spec.strides {
        Some(s) => s.iter().map(Extent::to_string).collect(),
        None => match &binding {
            Binding::Given(b) => b.strides().iter().map(u64::to_string).collect(),
            _ => vec!["dense".to_string(); spec.rank()],
        },
    };
    let rows: Vec<[String; 7]> = (0..spec.rank())
        .map(|d| {
            [
                d.to_string(),
                spec.dim_label(d),
                spec.global[d].to_string(),
                strides[d].clone(),
                spec.boxed[d].to_string(),
                spec.element_strides[d].to_string(),
                spec.repeat[d].to_string(),
            ]
        })
        .collect();
    let head = [
        "dim",
        "name",
        "global",
        "stride",
        "box",
        "element stride",
        "repeat",
    ];
    write_table(&mut out, &head, &rows);
    let _ = writeln!(
        out,
        "  swizzle {}, interleave {}, l2 promotion {}, oob fill {}",
        spec.swizzle.name(),
        spec.interleave.name(),
        spec.l2_promotion.name(),
        spec.oob_fill.name()
    );
    let _ = writeln!(
        out,
        "  shared memory: {} box(es) of {} B, {} B apart; footprint {} B, destination aligned to {} B",
        plan.boxes, plan.box_bytes, plan.stride_bytes, plan.footprint_bytes, plan.align_bytes
    );
    for p in valid.repeat_placements() {
        let _ = writeln!(
            out,
            "    box {:?}: global offset {:?} (user order), smem +{} B",
            p.index, p.global_offset, p.smem_offset
        );
    }
    let _ = writeln!(
        out,
        "\nTX_BYTES = {} ({} B of data per box x {} box(es)): what the mbarrier expects per load",
        plan.tx_bytes, plan.box_data_bytes, plan.boxes
    );

    out.push_str("\nencode arguments (TMA order, innermost first):\n");
    match &binding {
        Binding::Given(b) => {
            for l in EncodeArgs::new(b).to_string().lines() {
                let _ = writeln!(out, "  {l}");
            }
        }
        Binding::Example(_, why) | Binding::None(why) => {
            let _ = writeln!(
                out,
                "  bound at run time (tma_encode_{} takes the run-time dims); {why}",
                spec.name
            );
        }
    }

    out.push_str("\nshared-memory picture:\n");
    match &binding {
        Binding::Given(b) | Binding::Example(b, _) => {
            for l in smem_picture(b).lines() {
                let _ = writeln!(out, "  {l}");
            }
        }
        Binding::None(why) => {
            let _ = writeln!(out, "  none: {why}");
        }
    }
    out
}

/// The report of a pipeline: its stage layout, `STAGE_TX_BYTES` and the shared-memory budget
/// (each tile's own report follows it).
pub fn explain_pipeline(ident: &str, pipe: &ValidPipeline) -> String {
    let spec = pipe.spec();
    let l = pipe.layout();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pipeline `{}` ({ident}): {} stages, target {} -> CUDA struct tma_pipe_{}",
        spec.name,
        spec.stages,
        spec.target.nvrtc_name(),
        spec.name
    );
    let _ = writeln!(
        out,
        "  consumers {} ({} arrival(s) per CTA), cluster {:?}, peers {}, empty barriers count {}",
        spec.consumers,
        pipe.consumer_arrivals(),
        spec.cluster,
        pipe.peers(),
        pipe.empty_arrivals()
    );
    let _ = writeln!(
        out,
        "\nstage layout (from a base aligned to {} B):",
        l.align_bytes()
    );
    let head = [
        "member",
        "tile",
        "offset",
        "bytes",
        "align",
        "tx bytes",
        "multicast",
    ];
    let rows: Vec<[String; 7]> = spec
        .tiles
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let plan = t.tile.plan();
            let multicast = match pipe.split(i) {
                Some(m) => format!(
                    "{} ({} CTAs, {} box(es) each)",
                    m.axis.name(),
                    m.ctas,
                    m.boxes_per_cta
                ),
                None => "-".into(),
            };
            [
                t.member.clone(),
                t.tile.spec().name.clone(),
                l.stage.offsets.get(i).copied().unwrap_or(0).to_string(),
                plan.footprint_bytes.to_string(),
                plan.align_bytes.to_string(),
                plan.tx_bytes.to_string(),
                multicast,
            ]
        })
        .collect();
    write_table(&mut out, &head, &rows);
    let _ = writeln!(
        out,
        "  a stage spans {} B, one every {} B; {} full mbarriers at +{}, {} empty at +{}; {} B in all",
        l.stage.total_bytes,
        l.stage_stride,
        l.stages,
        l.full_offset(),
        l.stages,
        l.empty_offset(),
        l.total_bytes()
    );
    let parts: Vec<String> = spec
        .tiles
        .iter()
        .map(|t| t.tile.tx_bytes().to_string())
        .collect();
    let _ = writeln!(
        out,
        "\nSTAGE_TX_BYTES = {} = {}: what each CTA's full barrier expects per stage, in load()",
        parts.join(" + "),
        pipe.stage_tx_bytes()
    );
    let limit = spec.target.max_smem_per_block();
    let dynamic = pipe.dynamic_smem_bytes();
    let _ = writeln!(
        out,
        "\nbudget on {} ({limit} B of shared memory per block):",
        spec.target.nvrtc_name()
    );
    let _ = writeln!(
        out,
        "  {} stages x ({} + 16 B of mbarriers) + {} B alignment slack = {dynamic} B of dynamic shared memory (DYNAMIC_SMEM_BYTES)",
        l.stages,
        l.stage_stride,
        l.align_bytes()
    );
    let _ = writeln!(
        out,
        "  + reserve_smem {} B = {} B of {limit}; at most {} stages fit",
        spec.reserve_smem,
        dynamic.saturating_add(spec.reserve_smem),
        pipe.max_stages()
    );
    out
}

/// Writes `head` and `rows` as a table indented by two spaces, each column as wide as its
/// widest cell, two spaces apart, no trailing blanks.
fn write_table<const N: usize>(out: &mut String, head: &[&str; N], rows: &[[String; N]]) {
    let widths: Vec<usize> = (0..N)
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([head[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| -> String {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("  {}", parts.join("  ").trim_end())
    };
    let _ = writeln!(out, "{}", line(head));
    for r in rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
    }
}
