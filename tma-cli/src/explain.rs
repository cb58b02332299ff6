//! `tma explain`: what a declaration comes to — findings, layout, `TX_BYTES`, the encode
//! arguments and the shared-memory picture — all read from `tma_core`, nothing recomputed.

use crate::decl::{Im2colTile, Tile};
use std::collections::BTreeMap;
use std::fmt::Write;
use tma_core::model::picture::{im2col_picture, smem_picture};
use tma_core::pipeline::ValidPipeline;
use tma_core::{
    BoundIm2col, BoundSpec, EncodeArgs, Extent, Im2colEncodeArgs, ValidIm2col, ValidSpec,
};

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
    if spec.in_turn {
        let _ = writeln!(
            out,
            "  taken in turn: each stage waited on, read and released by the one consumer of the warp roles that took it (ping-pong; skip the others' stages with state::advance(n))"
        );
    }
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

/// How an im2col tile was bound for the encode arguments, the walk and the picture.
pub enum Im2colBinding {
    /// Every dim is static, or given with `--dims`.
    Given(BoundIm2col),
    /// Run-time dims taken as example values (the message says which), for the walk and the
    /// picture only.
    Example(BoundIm2col, String),
    /// No binding (the message says why).
    None(String),
}

/// The names `--dims` takes for an im2col tile: each run-time dim's label and
/// `stride_<label>` for each run-time stride, outer -> inner.
pub fn im2col_runtime_names(valid: &ValidIm2col) -> Vec<String> {
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

/// Binds an im2col tile with the dims given. A run-time dim not given takes an example value:
/// N 1, C the channels of one load, a spatial dim 8 (or what its bounding box needs to hold a
/// position); a run-time stride, the dense one.
pub fn bind_im2col(valid: &ValidIm2col, dims: &Dims) -> Im2colBinding {
    let spec = valid.spec();
    let rank = spec.rank();
    let mut example = Vec::new();
    let global: Vec<u64> = (0..rank)
        .map(|d| match spec.global[d] {
            Extent::Static(v) => v,
            Extent::Runtime => {
                let label = spec.dim_label(d);
                dims.get(&label).copied().unwrap_or_else(|| {
                    let v = if d == 0 {
                        1
                    } else if d + 1 == rank {
                        u64::from(spec.channels_per_pixel)
                    } else {
                        let (lo, up) = (spec.lower_corner[d - 1], spec.upper_corner[d - 1]);
                        u64::try_from(1 + i64::from(lo) - i64::from(up))
                            .unwrap_or(1)
                            .max(8)
                    };
                    example.push(format!("{label} = {v}"));
                    v
                })
            }
        })
        .collect();
    let strides: Option<Vec<u64>> = spec.strides.as_ref().map(|list| {
        list.iter()
            .enumerate()
            .map(|(d, e)| match e {
                Extent::Static(v) => *v,
                Extent::Runtime => {
                    let key = format!("stride_{}", spec.dim_label(d));
                    dims.get(&key).copied().unwrap_or_else(|| {
                        let dense =
                            tma_core::validate::dense_strides(&global, 1).map_or(1, |s| s[d]);
                        example.push(format!("{key} = {dense}"));
                        dense
                    })
                }
            })
            .collect()
    });
    match valid.bind(&global, strides.as_deref()) {
        Ok(b) if example.is_empty() => Im2colBinding::Given(b),
        Ok(b) => Im2colBinding::Example(
            b,
            format!(
                "run-time values not given (--dims NAME=..): the walk and the picture take {}",
                example.join(", ")
            ),
        ),
        Err(e) if example.is_empty() => {
            Im2colBinding::None(format!("the dims given are refused:\n{e}"))
        }
        Err(e) => Im2colBinding::None(format!(
            "the dims given are refused (with {} for the ones not given):\n{e}",
            example.join(", ")
        )),
    }
}

/// The example load `explain` walks: every spatial coordinate at its lower corner (the first
/// position of the bounding box), N and C at 0, the filter tap (0, ..).
pub fn example_call(spec: &tma_core::Im2colSpec) -> (Vec<i64>, Vec<i64>) {
    let mut coords = vec![0i64];
    coords.extend(spec.lower_corner.iter().map(|&l| i64::from(l)));
    coords.push(0);
    (coords, vec![0; spec.spatial_rank()])
}

/// The whole report of one im2col tile: findings, the tensor and the walk's parameters, one
/// load's shared memory and `TX_BYTES`, the `cuTensorMapEncodeIm2col` arguments, the pixels an
/// example load takes and its shared-memory picture. Everything read from `tma_core`.
pub fn explain_im2col(tile: &Im2colTile, dims: &Dims) -> String {
    let valid = &tile.checked.valid;
    let spec = valid.spec();
    let plan = valid.plan();
    let rank = spec.rank();
    let k = spec.spatial_rank();
    let layout_name = match rank {
        3 => "NWC",
        4 => "NHWC",
        _ => "NDHWC",
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "im2col tile `{}` ({}): {} elements, rank {rank} ({layout_name}), target {} -> CUDA struct {}",
        spec.name,
        tile.ident,
        spec.dtype,
        spec.target.nvrtc_name(),
        tile.checked.cuda_name
    );
    let binding = bind_im2col(valid, dims);
    out.push_str("\nfindings:\n");
    if valid.warnings().is_empty() {
        out.push_str("  every rule passed, no warning\n");
    }
    for w in valid.warnings() {
        let _ = writeln!(out, "  warning: {w}");
    }

    out.push_str("\ntensor (user order, outer -> inner; elements) and the walk:\n");
    let strides: Vec<String> = match (&spec.strides, &binding) {
        (Some(s), _) => s.iter().map(Extent::to_string).collect(),
        (None, Im2colBinding::Given(b)) => b.strides().iter().map(u64::to_string).collect(),
        (None, _) => vec!["dense".to_string(); rank],
    };
    let rows: Vec<[String; 7]> = (0..rank)
        .map(|d| {
            let spatial = d >= 1 && d <= k;
            let s = |v: String| if spatial { v } else { "-".to_string() };
            [
                d.to_string(),
                spec.dim_label(d),
                spec.global[d].to_string(),
                strides[d].clone(),
                s(spec
                    .lower_corner
                    .get(d.wrapping_sub(1))
                    .map_or(String::new(), i32::to_string)),
                s(spec
                    .upper_corner
                    .get(d.wrapping_sub(1))
                    .map_or(String::new(), i32::to_string)),
                s(spec
                    .element_strides
                    .get(d.wrapping_sub(1))
                    .map_or(String::new(), u32::to_string)),
            ]
        })
        .collect();
    let head = [
        "dim",
        "name",
        "global",
        "stride",
        "lower corner",
        "upper corner",
        "traversal stride",
    ];
    write_table(&mut out, &head, &rows);
    let _ = writeln!(
        out,
        "  swizzle {}, l2 promotion {}, oob fill {}",
        spec.swizzle.name(),
        spec.l2_promotion.name(),
        spec.oob_fill.name()
    );
    let esize = spec.dtype.size_bytes().unwrap_or(1);
    let _ = writeln!(
        out,
        "  one load: {} pixels x {} channels, each pixel a row of {} B in shared memory; footprint {} B, destination aligned to {} B",
        spec.pixels_per_column,
        spec.channels_per_pixel,
        u64::from(spec.channels_per_pixel) * esize,
        plan.footprint_bytes,
        plan.align_bytes
    );
    let _ = writeln!(
        out,
        "  offsets (the filter tap) per spatial dim in [0, {}]",
        valid.offset_max()
    );
    let _ = writeln!(
        out,
        "\nTX_BYTES = {} ({} pixels x {} channels x {esize} B, filled ones included): what the mbarrier expects per load",
        valid.tx_bytes(),
        spec.pixels_per_column,
        spec.channels_per_pixel
    );

    out.push_str("\nencode arguments (TMA order, innermost first):\n");
    match &binding {
        Im2colBinding::Given(b) => {
            for l in Im2colEncodeArgs::new(b).to_string().lines() {
                let _ = writeln!(out, "  {l}");
            }
        }
        Im2colBinding::Example(_, why) | Im2colBinding::None(why) => {
            let _ = writeln!(
                out,
                "  bound at run time (tma_encode_{} takes the run-time dims); {why}",
                spec.name
            );
        }
    }

    let bound = match &binding {
        Im2colBinding::Given(b) | Im2colBinding::Example(b, _) => b,
        Im2colBinding::None(why) => {
            let _ = writeln!(out, "\none load: none: {why}");
            return out;
        }
    };
    let (coords, offsets) = example_call(spec);
    let labels: Vec<String> = (0..rank).map(|d| spec.dim_label(d)).collect();
    let named = |vals: &[i64], names: &[String]| -> String {
        vals.iter()
            .zip(names)
            .map(|(v, n)| format!(".{n} = {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "\none load (docs/IM2COL.md): coords {{{}}}, offsets {{{}}}:",
        named(&coords, &labels),
        named(&offsets, &labels[1..=k])
    );
    for i in 0..k {
        let (lo, hi) = bound.bounding_box(i);
        let e = i64::from(spec.element_strides[i]);
        let _ = writeln!(
            out,
            "  {}: bounding box [{lo}, {hi}), every {e}: {} positions a row",
            labels[i + 1],
            (hi - lo - 1).div_euclid(e) + 1
        );
    }
    match tma_core::model::im2col::pixels(bound, &coords, &offsets) {
        Ok(pixels) => {
            let _ = writeln!(
                out,
                "  the {} pixels ({}), in runs along {}; pixel = position + offset, outside the tensor filled:",
                pixels.len(),
                labels[..=k].join(", "),
                labels[k]
            );
            for line in runs(&pixels, bound, spec.element_strides[k - 1]) {
                let _ = writeln!(out, "    {line}");
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  no walk: {e}");
        }
    }
    out.push_str("\nshared-memory picture (the load above):\n");
    for l in im2col_picture(bound, &coords, &offsets).lines() {
        let _ = writeln!(out, "  {l}");
    }
    out
}

/// The pixels of one load as runs along the innermost spatial dim: `rows 0..55: (0, -1, -1..54)
/// step 1, 2 filled`. At most 12 runs are listed.
fn runs(pixels: &[Vec<i64>], bound: &BoundIm2col, step: u32) -> Vec<String> {
    const MAX_RUNS: usize = 12;
    let global = bound.global();
    let step = i64::from(step);
    let outside = |p: &[i64]| {
        p.iter()
            .enumerate()
            .any(|(d, &x)| x < 0 || x as u64 >= global[d])
    };
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for i in 0..pixels.len() {
        let continues = i > 0 && {
            let (a, b) = (&pixels[i - 1], &pixels[i]);
            let last = a.len() - 1;
            a[..last] == b[..last] && b[last] == a[last] + step
        };
        match groups.last_mut() {
            Some(g) if continues => g.1 = i,
            _ => groups.push((i, i)),
        }
    }
    let mut out: Vec<String> = groups
        .iter()
        .take(MAX_RUNS)
        .map(|&(a, b)| {
            let (first, last) = (&pixels[a], &pixels[b]);
            let n = first.len() - 1;
            let mut parts: Vec<String> = first[..n].iter().map(i64::to_string).collect();
            if a == b {
                parts.push(first[n].to_string());
            } else {
                parts.push(format!("{}..{}", first[n], last[n]));
            }
            let filled = pixels[a..=b].iter().filter(|p| outside(p)).count();
            format!(
                "rows {a}..{b}: ({}){}{}",
                parts.join(", "),
                if step != 1 && a != b {
                    format!(" step {step}")
                } else {
                    String::new()
                },
                if filled > 0 {
                    format!(", {filled} filled")
                } else {
                    String::new()
                }
            )
        })
        .collect();
    if groups.len() > MAX_RUNS {
        out.push(format!("... {} more runs", groups.len() - MAX_RUNS));
    }
    out
}
