//! One tile's CUDA: its template context (dims, placements, element offsets, encode
//! arguments) and [`TileCode`].

use super::*;

/// The reductions generated for a tensor-map type: exactly those of
/// [`crate::model::ReduceOp::supported_types`], so an unsupported one fails to compile instead
/// of trapping.
pub fn reduce_ops(dtype: DType) -> Vec<&'static str> {
    crate::model::ReduceOp::ALL
        .iter()
        .filter(|op| op.supports(dtype))
        .map(|op| op.ptx_name())
        .collect()
}

/// One dim of a tile's `position` / `offset`: its extent, its index in position `n`, the
/// local holding its position.
pub(super) struct DimOffsets {
    pub(super) extent: u64,
    pub(super) from_n: String,
    pub(super) pos: String,
}

/// What the tile's `position` / `offset` render from ([`ElementOffsets`]): per dim the
/// extent, how position `n` splits, and the offset's terms. `None` for packed types.
pub(super) fn offsets_context(valid: &ValidSpec) -> Option<(Value, Vec<DimOffsets>)> {
    let o = ElementOffsets::new(valid)?;
    let rank = o.extent.len();
    let mut per_dim = Vec::with_capacity(rank);
    let mut terms = Vec::new();
    for d in 0..rank {
        let inside: u64 = o.extent[d + 1..].iter().product();
        let from_n = match (d, rank) {
            (_, 1) => "n".to_string(),
            (0, _) => format!("n / {inside}u"),
            (d, r) if d + 1 == r => format!("n % {}u", o.extent[d]),
            _ => format!("n / {inside}u % {}u", o.extent[d]),
        };
        let pos = format!("j{d}");
        if o.repeat[d] == 1 {
            terms.push(format!("{pos} * {}u", o.step_bytes[d]));
        } else if o.box_elems[d] == 1 {
            // One position per box along this dim: the position is the repeat index.
            terms.push(format!("{pos} * {}u", o.box_step_bytes[d]));
        } else {
            terms.push(format!(
                "{pos} % {n}u * {}u + {pos} / {n}u * {}u",
                o.step_bytes[d],
                o.box_step_bytes[d],
                n = o.box_elems[d]
            ));
        }
        per_dim.push(DimOffsets {
            extent: o.extent[d],
            from_n,
            pos,
        });
    }
    if o.chunk_elems > 1 {
        terms.push(format!(
            "static_cast<unsigned>(in_chunk) * {}u",
            o.elem_bytes
        ));
    }
    let swizzled = o
        .swizzle
        .xor_terms()
        .iter()
        .fold("u".to_string(), |acc, (mask, shift)| {
            format!("{acc} ^ ((u >> {shift}) & {mask:#x}u)")
        });
    let inner = rank - 1;
    let pitch = if rank > 1 { o.step_bytes[inner - 1] } else { 0 };
    let mut describe = Vec::new();
    if rank > 1 {
        describe.push(format!("rows {pitch} B apart"));
    }
    describe.push(format!("{} B per innermost step", o.step_bytes[inner]));
    if o.repeat.iter().any(|&r| r > 1) {
        describe.push(format!(
            "repeated boxes {} B apart",
            valid.plan().stride_bytes
        ));
    }
    describe.push(match o.swizzle.xor_terms() {
        [] => "no swizzle".to_string(),
        _ => format!("then the {} swizzle", o.swizzle.name()),
    });
    let value = map([
        ("positions", Value::from(o.positions())),
        ("chunk_elems", Value::from(o.chunk_elems)),
        ("sum", Value::from(terms.join(" + "))),
        ("swizzled", Value::from(swizzled)),
        ("describe", Value::from(describe.join(", "))),
    ]);
    Some((value, per_dim))
}

/// The template context of one tile. Every TMA-order list comes from [`to_tma_order`].
pub(super) fn tile_context(valid: &ValidSpec, tile_id: u32) -> Context {
    let spec = valid.spec();
    let plan = valid.plan();
    let rank = spec.rank();
    let vars: Vec<String> = (0..rank).map(|d| format!("c{d}")).collect();
    let offsets = offsets_context(valid);
    let strides: Vec<String> = match &spec.strides {
        Some(s) => s.iter().map(Extent::to_string).collect(),
        None => vec!["dense".to_string(); rank],
    };
    let dims: Vec<Value> = (0..rank)
        .map(|d| {
            let mut entries = vec![
                ("i", Value::from(d)),
                ("var", Value::from(vars[d].clone())),
                ("label", Value::from(spec.dim_label(d))),
                ("global", Value::from(spec.global[d].to_string())),
                ("stride", Value::from(strides[d].clone())),
                ("box", Value::from(spec.boxed[d])),
                ("estride", Value::from(spec.element_strides[d])),
                ("repeat", Value::from(spec.repeat[d])),
                // How far past its coordinate the last repeated box starts along this dim.
                (
                    "reach",
                    Value::from(
                        u64::from(spec.repeat[d].saturating_sub(1)) * u64::from(spec.boxed[d]),
                    ),
                ),
            ];
            if let Some((_, per_dim)) = &offsets {
                let dim = &per_dim[d];
                entries.push(("extent", Value::from(dim.extent)));
                entries.push(("from_n", Value::from(dim.from_n.clone())));
                entries.push(("pos", Value::from(dim.pos.clone())));
            }
            map(entries)
        })
        .collect();
    let placements: Vec<Value> = valid
        .repeat_placements()
        .iter()
        .enumerate()
        .map(|(n, p)| {
            let user: Vec<String> = vars
                .iter()
                .zip(&p.global_offset)
                .map(|(v, &off)| match off {
                    0 => v.clone(),
                    o if o > 0 => format!("{v} + {o}"),
                    o => format!("{v} - {}", o.unsigned_abs()),
                })
                .collect();
            let coords: Vec<Value> = to_tma_order(&user).into_iter().map(Value::from).collect();
            map([
                ("n", Value::from(n)),
                (
                    "index",
                    Value::from(list_text(&p.index).trim_matches(['[', ']']).to_string()),
                ),
                (
                    "offset",
                    Value::from(
                        list_text(&p.global_offset)
                            .trim_matches(['[', ']'])
                            .to_string(),
                    ),
                ),
                ("smem_offset", Value::from(p.smem_offset)),
                ("coords", Value::from(coords)),
            ])
        })
        .collect();
    let static_args = valid.bound().map(|b| EncodeArgs::new(&b));
    let encode = map([
        (
            "global_dim",
            Value::from(static_args.as_ref().map_or_else(
                || "bound at run time".to_string(),
                |a| list_text(&a.global_dim),
            )),
        ),
        (
            "global_strides",
            Value::from(static_args.as_ref().map_or_else(
                || "bound at run time (bytes, dim 0 omitted)".to_string(),
                |a| format!("{}  (bytes, dim 0 omitted)", list_text(&a.global_strides)),
            )),
        ),
        (
            "box_dim",
            Value::from(list_text(&to_tma_order(&spec.boxed))),
        ),
        (
            "element_strides",
            Value::from(list_text(&to_tma_order(&spec.element_strides))),
        ),
    ]);
    let mut ctx = Context::new();
    ctx.insert("name", &spec.name);
    ctx.insert("cuda", &format!("tma_{}", spec.name));
    ctx.insert("tile_id", &tile_id);
    ctx.insert("rank", &rank);
    ctx.insert("dtype", spec.dtype.name());
    ctx.insert("dtype_cu", spec.dtype.cu_name());
    ctx.insert("storage", spec.dtype.cuda_storage());
    ctx.insert("target", spec.target.nvrtc_name());
    ctx.insert("swizzle", spec.swizzle.name());
    ctx.insert("swizzle_cu", spec.swizzle.cu_name());
    ctx.insert("interleave", spec.interleave.name());
    ctx.insert("interleave_cu", spec.interleave.cu_name());
    ctx.insert(
        "interleave_chunk",
        &spec.interleave.chunk_bytes().unwrap_or(0),
    );
    ctx.insert("l2", spec.l2_promotion.name());
    ctx.insert("l2_cu", spec.l2_promotion.cu_name());
    ctx.insert("oob", spec.oob_fill.name());
    ctx.insert("oob_cu", spec.oob_fill.cu_name());
    ctx.insert("boxes", &plan.boxes);
    ctx.insert("box_bytes", &plan.box_bytes);
    ctx.insert("box_data_bytes", &plan.box_data_bytes);
    ctx.insert("stride_bytes", &plan.stride_bytes);
    ctx.insert("tx_bytes", &plan.tx_bytes);
    ctx.insert("smem_bytes", &plan.footprint_bytes);
    ctx.insert("align", &plan.align_bytes);
    ctx.insert("inner_coord_multiple", &valid.inner_coord_multiple());
    ctx.insert("outer_box", &spec.boxed.first().copied().unwrap_or(1));
    ctx.insert_value("dims", Value::from(dims));
    ctx.insert_value(
        "offsets",
        offsets.map_or(Value::from(false), |(value, _)| value),
    );
    ctx.insert_value("placements", Value::from(placements));
    ctx.insert_value("encode", encode);
    ctx.insert("tma_vars", &to_tma_order(&vars));
    ctx.insert("reduce_ops", &reduce_ops(spec.dtype));
    ctx.insert_value("wgmma", operand_context(valid));
    ctx
}

/// One tile's CUDA helpers (`struct tma_<name>`), without the prelude.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileCode {
    name: String,
    tile_id: u32,
    source: String,
}

impl TileCode {
    /// Renders the helpers of `valid` as tile `tile_id` of its translation unit (the id the
    /// debug hang record reports).
    pub fn new(valid: &ValidSpec, tile_id: u32) -> Result<TileCode, RenderError> {
        // 0xffffffff means "unknown" and bit 31 marks a group in the hang record: a single
        // tile's id must be below both, or a hang would be decoded as the wrong thing.
        if tile_id == UNKNOWN_TILE_ID || tile_id & GROUP_TILE_ID_FLAG != 0 {
            return Err(RenderError::ReservedTileId(tile_id));
        }
        let source = render("tile.cuh.tera", &tile_context(valid, tile_id))?;
        Ok(TileCode {
            name: valid.spec().name.clone(),
            tile_id,
            source,
        })
    }

    /// The helpers, without the prelude.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The struct name: `tma_<name>`.
    pub fn cuda_name(&self) -> String {
        format!("tma_{}", self.name)
    }

    /// The tile's name as declared.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tile id within its translation unit.
    pub fn tile_id(&self) -> u32 {
        self.tile_id
    }
}
