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

/// A tile's `position` / `offset` arithmetic (absent for packed types).
#[derive(Serialize)]
pub(super) struct OffsetsContext {
    positions: u64,
    chunk_elems: u64,
    sum: String,
    swizzled: String,
    describe: String,
}

/// One dim of a tile (user order); `extent`, `from_n` and `pos` only where the tile has
/// element offsets.
#[derive(Serialize)]
pub(super) struct TileDim {
    i: usize,
    var: String,
    label: String,
    global: String,
    stride: String,
    #[serde(rename = "box")]
    box_: u32,
    estride: u32,
    repeat: u32,
    reach: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    extent: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_n: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pos: Option<String>,
}

/// One repeated box of a call: its index, its offset (user order), where it lands, its
/// coordinates (TMA order).
#[derive(Serialize)]
pub(super) struct TilePlacement {
    n: usize,
    index: String,
    offset: String,
    smem_offset: u64,
    coords: Vec<String>,
}

/// The encode arguments a tile's comment states (TMA order).
#[derive(Serialize)]
pub(super) struct TileEncode {
    global_dim: String,
    global_strides: String,
    box_dim: String,
    element_strides: String,
}

/// One field of a device-side map update (`map_update.cuh.tera`): the user dim, its label,
/// its `tensormap.replace` ordinal (from [`to_tma_order`]) and its declared value when static.
#[derive(Serialize)]
pub(super) struct UpdateField {
    i: usize,
    label: String,
    ord: usize,
    #[serde(serialize_with = "or_false")]
    fixed: Option<u64>,
}

/// The state spaces a map is updated in: `update_global` edits it in global memory,
/// `update_shared` a copy in shared memory (a 32-bit shared address).
#[derive(Serialize)]
pub(super) struct UpdateSpace {
    suffix: &'static str,
    space: &'static str,
    constraint: &'static str,
    addr_type: &'static str,
}

/// The context of a tile's device-side map update (docs/MAP_UPDATE.md): the fields a grouped
/// kernel replaces, with the TMA ordinal each lands in, and the encode's checks.
#[derive(Serialize)]
pub(super) struct UpdateContext {
    dims: Vec<UpdateField>,
    strides: Vec<UpdateField>,
    init_doc: String,
    elem_bits: u32,
    chunk_bytes: u64,
    base_align: u64,
    stride_align: u64,
    stride_align_rule: String,
    max_stride_bytes: u64,
    packed_inner_multiple: u64,
    inner: usize,
    inner_label: String,
    spaces: Vec<UpdateSpace>,
}

/// The ordinal of each user-order entry of a list once [`to_tma_order`] reversed it: the
/// `tensormap.replace` ordinal of a dim (all dims) or a stride (the outer dims').
fn tma_ordinals(n: usize) -> Vec<usize> {
    let tma = to_tma_order(&(0..n).collect::<Vec<usize>>());
    (0..n)
        .map(|d| tma.iter().position(|&u| u == d).unwrap_or(0))
        .collect()
}

/// A tile's map-update context.
pub(super) fn update_context(valid: &ValidSpec) -> UpdateContext {
    let spec = valid.spec();
    let rank = spec.rank();
    let dim_ords = tma_ordinals(rank);
    let stride_ords = tma_ordinals(rank.saturating_sub(1));
    let dims: Vec<UpdateField> = (0..rank)
        .map(|d| UpdateField {
            i: d,
            label: spec.dim_label(d),
            ord: dim_ords[d],
            fixed: spec.global[d].get(),
        })
        .collect();
    let strides: Vec<UpdateField> = (0..rank.saturating_sub(1))
        .map(|d| UpdateField {
            i: d,
            label: spec.dim_label(d),
            ord: stride_ords[d],
            fixed: spec.strides.as_ref().and_then(|s| s[d].get()),
        })
        .collect();
    let init_doc = dims
        .iter()
        .map(|d| format!(".{} = ..", d.label))
        .chain(strides.iter().map(|d| format!(".stride_{} = ..", d.label)))
        .collect::<Vec<_>>()
        .join(", ");
    let (stride_align, stride_rule) = valid.stride_align();
    let packed = matches!(spec.dtype, DType::U4x16Align16B | DType::U6x16Align16B);
    UpdateContext {
        dims,
        strides,
        init_doc: format!("{{{init_doc}}}"),
        elem_bits: spec.dtype.global_bits(),
        chunk_bytes: spec.interleave.chunk_bytes().unwrap_or(0),
        base_align: valid.base_address_align(),
        stride_align,
        stride_align_rule: format!("{stride_rule:?}"),
        max_stride_bytes: crate::limits::MAX_STRIDE_BYTES,
        packed_inner_multiple: if packed {
            crate::limits::PACKED_INNER_DIM_MULTIPLE
        } else {
            0
        },
        inner: rank - 1,
        inner_label: spec.dim_label(rank - 1),
        spaces: vec![
            UpdateSpace {
                suffix: "global",
                space: "global",
                constraint: "l",
                addr_type: "unsigned long long",
            },
            UpdateSpace {
                suffix: "shared",
                space: "shared::cta",
                constraint: "r",
                addr_type: "unsigned",
            },
        ],
    }
}

/// The context of a tile's templates (`tile.cuh.tera`, `host_tile.cuh.tera`,
/// `exercise.cu.tera`).
#[derive(Serialize)]
pub(super) struct TileContext {
    name: String,
    cuda: String,
    tile_id: u32,
    rank: usize,
    dtype: &'static str,
    dtype_cu: &'static str,
    storage: &'static str,
    target: &'static str,
    swizzle: &'static str,
    swizzle_cu: &'static str,
    interleave: &'static str,
    interleave_cu: &'static str,
    interleave_chunk: u64,
    l2: &'static str,
    l2_cu: &'static str,
    oob: &'static str,
    oob_cu: &'static str,
    boxes: u64,
    box_bytes: u64,
    box_data_bytes: u64,
    stride_bytes: u64,
    tx_bytes: u64,
    smem_bytes: u64,
    align: u64,
    inner_coord_multiple: u64,
    outer_box: u32,
    dims: Vec<TileDim>,
    #[serde(serialize_with = "or_false")]
    offsets: Option<OffsetsContext>,
    placements: Vec<TilePlacement>,
    encode: TileEncode,
    tma_vars: Vec<String>,
    reduce_ops: Vec<&'static str>,
    #[serde(serialize_with = "or_false")]
    wgmma: Option<OperandContext>,
    update: UpdateContext,
}

/// What the tile's `position` / `offset` render from ([`ElementOffsets`]): per dim the
/// extent, how position `n` splits, and the offset's terms. `None` for packed types.
pub(super) fn offsets_context(valid: &ValidSpec) -> Option<(OffsetsContext, Vec<DimOffsets>)> {
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
    let value = OffsetsContext {
        positions: o.positions(),
        chunk_elems: o.chunk_elems,
        sum: terms.join(" + "),
        swizzled,
        describe: describe.join(", "),
    };
    Some((value, per_dim))
}

/// The template context of one tile. Every TMA-order list comes from [`to_tma_order`].
pub(super) fn tile_context(valid: &ValidSpec, tile_id: u32) -> TileContext {
    let spec = valid.spec();
    let plan = valid.plan();
    let rank = spec.rank();
    let vars: Vec<String> = (0..rank).map(|d| format!("c{d}")).collect();
    let offsets = offsets_context(valid);
    let strides: Vec<String> = match &spec.strides {
        Some(s) => s.iter().map(Extent::to_string).collect(),
        None => vec!["dense".to_string(); rank],
    };
    let dims: Vec<TileDim> = (0..rank)
        .map(|d| {
            let per_dim = offsets.as_ref().map(|(_, per_dim)| &per_dim[d]);
            TileDim {
                i: d,
                var: vars[d].clone(),
                label: spec.dim_label(d),
                global: spec.global[d].to_string(),
                stride: strides[d].clone(),
                box_: spec.boxed[d],
                estride: spec.element_strides[d],
                repeat: spec.repeat[d],
                // How far past its coordinate the last repeated box starts along this dim.
                reach: u64::from(spec.repeat[d].saturating_sub(1)) * u64::from(spec.boxed[d]),
                extent: per_dim.map(|p| p.extent),
                from_n: per_dim.map(|p| p.from_n.clone()),
                pos: per_dim.map(|p| p.pos.clone()),
            }
        })
        .collect();
    let placements: Vec<TilePlacement> = valid
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
            TilePlacement {
                n,
                index: list_text(&p.index).trim_matches(['[', ']']).to_string(),
                offset: list_text(&p.global_offset)
                    .trim_matches(['[', ']'])
                    .to_string(),
                smem_offset: p.smem_offset,
                coords: to_tma_order(&user),
            }
        })
        .collect();
    let static_args = valid.bound().map(|b| EncodeArgs::new(&b));
    let encode = TileEncode {
        global_dim: static_args.as_ref().map_or_else(
            || "bound at run time".to_string(),
            |a| list_text(&a.global_dim),
        ),
        global_strides: static_args.as_ref().map_or_else(
            || "bound at run time (bytes, dim 0 omitted)".to_string(),
            |a| format!("{}  (bytes, dim 0 omitted)", list_text(&a.global_strides)),
        ),
        box_dim: list_text(&to_tma_order(&spec.boxed)),
        element_strides: list_text(&to_tma_order(&spec.element_strides)),
    };
    TileContext {
        name: spec.name.clone(),
        cuda: format!("tma_{}", spec.name),
        tile_id,
        rank,
        dtype: spec.dtype.name(),
        dtype_cu: spec.dtype.cu_name(),
        storage: spec.dtype.cuda_storage(),
        target: spec.target.nvrtc_name(),
        swizzle: spec.swizzle.name(),
        swizzle_cu: spec.swizzle.cu_name(),
        interleave: spec.interleave.name(),
        interleave_cu: spec.interleave.cu_name(),
        interleave_chunk: spec.interleave.chunk_bytes().unwrap_or(0),
        l2: spec.l2_promotion.name(),
        l2_cu: spec.l2_promotion.cu_name(),
        oob: spec.oob_fill.name(),
        oob_cu: spec.oob_fill.cu_name(),
        boxes: plan.boxes,
        box_bytes: plan.box_bytes,
        box_data_bytes: plan.box_data_bytes,
        stride_bytes: plan.stride_bytes,
        tx_bytes: plan.tx_bytes,
        smem_bytes: plan.footprint_bytes,
        align: plan.align_bytes,
        inner_coord_multiple: valid.inner_coord_multiple(),
        outer_box: spec.boxed.first().copied().unwrap_or(1),
        dims,
        offsets: offsets.map(|(value, _)| value),
        placements,
        encode,
        tma_vars: to_tma_order(&vars),
        reduce_ops: reduce_ops(spec.dtype),
        wgmma: operand_context(valid),
        update: update_context(valid),
    }
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
        // The box of an im2col tile (a pipeline's im2col member) is that tile's struct.
        let source = match valid.im2col() {
            Some(im2col) => Im2colCode::new(im2col, tile_id)?.source().to_string(),
            None => render("tile.cuh.tera", &tile_context(valid, tile_id))?,
        };
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
