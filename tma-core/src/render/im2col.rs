//! One im2col tile's CUDA (`templates/im2col.cuh.tera`): its coordinate and offset structs in
//! user order, the load (`cp.async.bulk.tensor.{3,4,5}d ... .im2col`), the byte count the
//! mbarrier expects and where each pixel's channels land.

use super::*;
use crate::encode_args::Im2colEncodeArgs;
use crate::limits::{im2col_corner_bits, im2col_offset_max};
use crate::validate::ValidIm2col;

/// One dim of an im2col tile (user order); the bounding box and traversal stride for the
/// spatial ones.
#[derive(Serialize)]
struct Im2colDim {
    i: usize,
    var: String,
    label: String,
    global: String,
    stride: String,
    spatial: bool,
    lower: i32,
    upper: i32,
    estride: u32,
}

/// The encode arguments the comment states (TMA order; dims and strides when static).
#[derive(Serialize)]
struct Im2colEncode {
    global_dim: String,
    global_strides: String,
    lower_corner: String,
    upper_corner: String,
    element_strides: String,
}

#[derive(Serialize)]
struct Im2colContext {
    name: String,
    cuda: String,
    tile_id: u32,
    rank: usize,
    spatial_rank: usize,
    dtype: &'static str,
    dtype_cu: &'static str,
    storage: &'static str,
    target: &'static str,
    swizzle: &'static str,
    swizzle_cu: &'static str,
    l2: &'static str,
    l2_cu: &'static str,
    oob: &'static str,
    oob_cu: &'static str,
    channels: u32,
    pixels: u32,
    elem_bytes: u64,
    row_bytes: u64,
    pitch: u64,
    tx_bytes: u64,
    smem_bytes: u64,
    align: u64,
    inner_coord_multiple: u64,
    offset_bits: u32,
    offset_max: u32,
    swizzled: String,
    first_label: String,
    last_label: String,
    inner_var: String,
    dims: Vec<Im2colDim>,
    spatial: Vec<Im2colDim>,
    tma_vars: Vec<String>,
    tma_offset_vars: Vec<String>,
    encode: Im2colEncode,
    /// The box as a wgmma operand (`Im2colSpec::wgmma`): the tiled operand's numbers.
    #[serde(serialize_with = "or_false")]
    wgmma: Option<super::wgmma::OperandContext>,
}

fn context(valid: &ValidIm2col, tile_id: u32) -> Im2colContext {
    let spec = valid.spec();
    let plan = valid.plan();
    let rank = spec.rank();
    let k = spec.spatial_rank();
    let vars: Vec<String> = (0..rank).map(|d| format!("c{d}")).collect();
    let strides: Vec<String> = match &spec.strides {
        Some(s) => s.iter().map(Extent::to_string).collect(),
        None => vec!["dense".to_string(); rank],
    };
    let dim = |d: usize, var: String, label: String| {
        let spatial = d >= 1 && d <= k;
        Im2colDim {
            i: d,
            var,
            label,
            global: spec.global[d].to_string(),
            stride: strides[d].clone(),
            spatial,
            lower: if spatial { spec.lower_corner[d - 1] } else { 0 },
            upper: if spatial { spec.upper_corner[d - 1] } else { 0 },
            estride: if spatial {
                spec.element_strides[d - 1]
            } else {
                1
            },
        }
    };
    let dims: Vec<Im2colDim> = (0..rank)
        .map(|d| dim(d, vars[d].clone(), spec.dim_label(d)))
        .collect();
    let offset_vars: Vec<String> = (1..=k).map(|d| format!("o{d}")).collect();
    let spatial: Vec<Im2colDim> = (1..=k)
        .map(|d| dim(d, offset_vars[d - 1].clone(), spec.dim_label(d)))
        .collect();
    let esize = spec.dtype.size_bytes().unwrap_or(1);
    let row_bytes = u64::from(spec.channels_per_pixel) * esize;
    let pitch =
        crate::smem::row_pitch_bytes(&spec.smem_view(), crate::smem::DEFAULT_INNER_ROW_LAYOUT)
            .get()
            .unwrap_or(row_bytes);
    let swizzled = spec
        .swizzle
        .xor_terms()
        .iter()
        .fold("u".to_string(), |acc, (mask, shift)| {
            format!("{acc} ^ ((u >> {shift}) & {mask:#x}u)")
        });
    let static_args = valid.bound().map(|b| Im2colEncodeArgs::new(&b));
    let unbound = Im2colEncodeArgs::from_parts(spec, &[], &[]);
    let encode = Im2colEncode {
        global_dim: static_args.as_ref().map_or_else(
            || "bound at run time".to_string(),
            |a| list_text(&a.global_dim),
        ),
        global_strides: static_args.as_ref().map_or_else(
            || "bound at run time (bytes, dim 0 omitted)".to_string(),
            |a| format!("{}  (bytes, dim 0 omitted)", list_text(&a.global_strides)),
        ),
        lower_corner: list_text(&unbound.lower_corner),
        upper_corner: list_text(&unbound.upper_corner),
        element_strides: list_text(&unbound.element_strides),
    };
    Im2colContext {
        name: spec.name.clone(),
        cuda: format!("tma_{}", spec.name),
        tile_id,
        rank,
        spatial_rank: k,
        dtype: spec.dtype.name(),
        dtype_cu: spec.dtype.cu_name(),
        storage: spec.dtype.cuda_storage(),
        target: spec.target.nvrtc_name(),
        swizzle: spec.swizzle.name(),
        swizzle_cu: spec.swizzle.cu_name(),
        l2: spec.l2_promotion.name(),
        l2_cu: spec.l2_promotion.cu_name(),
        oob: spec.oob_fill.name(),
        oob_cu: spec.oob_fill.cu_name(),
        channels: spec.channels_per_pixel,
        pixels: spec.pixels_per_column,
        elem_bytes: esize,
        row_bytes,
        pitch,
        tx_bytes: valid.tx_bytes(),
        smem_bytes: plan.footprint_bytes,
        align: plan.align_bytes,
        inner_coord_multiple: valid.inner_coord_multiple(),
        offset_bits: im2col_corner_bits(k),
        offset_max: im2col_offset_max(k),
        swizzled,
        first_label: spec.dim_label(0),
        last_label: spec.dim_label(k),
        inner_var: vars[rank - 1].clone(),
        dims,
        spatial,
        tma_vars: to_tma_order(&vars),
        tma_offset_vars: to_tma_order(&offset_vars),
        encode,
        wgmma: valid
            .smem_tile()
            .ok()
            .and_then(super::wgmma::operand_context),
    }
}

/// One im2col tile's CUDA helpers (`struct tma_<name>`), without the prelude.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Im2colCode {
    name: String,
    tile_id: u32,
    source: String,
}

impl Im2colCode {
    /// Renders the helpers of `valid` as tile `tile_id` of its translation unit.
    pub fn new(valid: &ValidIm2col, tile_id: u32) -> Result<Im2colCode, RenderError> {
        if tile_id == UNKNOWN_TILE_ID || tile_id & GROUP_TILE_ID_FLAG != 0 {
            return Err(RenderError::ReservedTileId(tile_id));
        }
        let source = render("im2col.cuh.tera", &context(valid, tile_id))?;
        Ok(Im2colCode {
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
    /// The tile id within its translation unit.
    pub fn tile_id(&self) -> u32 {
        self.tile_id
    }
}
