//! The C++ side of [`header_with`]: each tile's host encode function
//! (`tma_encode_<name>`, the checks of tma-runtime's `TensorMap::new` in C++) and, for Mirage
//! MPK users, MPK's names and contract over the checked tiles.

use super::*;
use crate::encode_args::user_dim_of_tma_dim;
use crate::limits::{MAX_GLOBAL_DIM, MAX_STRIDE_BYTES, PACKED_INNER_DIM_MULTIPLE};
use crate::pipeline::ValidPipeline;
use crate::rules::Rule;
use crate::validate::ValidIm2col;

/// What [`header_with`] emits besides the device helpers and the host encode functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeaderOptions {
    /// Mirage MPK's contract: `kernel::Barrier` and its functions, `kernel::tma::{
    /// store_commit_group, store_async_wait<N>, async_proxy_fence}`, and per tile a
    /// template-free `kernel::tma::tma_<name>` whose `tma_cp_async(bar, smem, coords)` /
    /// `tma_store_async(smem, coords)` take MPK's innermost-first coordinate array.
    pub mpk: bool,
}

fn rule(r: Rule) -> String {
    format!("{r:?}")
}

/// The rules the encode functions name, from their one home.
#[derive(Serialize)]
struct EncodeRules {
    base_align: String,
    global_dim: String,
    overflow: String,
    inner_stride: String,
    whole_bytes: String,
    stride_max: String,
    packed: String,
    box_empty: String,
}

/// The context of `encode.cuh.tera`.
#[derive(Serialize)]
struct EncodeCommonContext {
    rules: EncodeRules,
    max_global_dim: u64,
    max_stride_bytes: u64,
}

/// The shared part of the encode functions: rule names and limits from their one home.
fn encode_common() -> Result<String, RenderError> {
    let ctx = EncodeCommonContext {
        rules: EncodeRules {
            base_align: rule(Rule::BaseAddressAlignment),
            global_dim: rule(Rule::GlobalDimRange),
            overflow: rule(Rule::SizeOverflow),
            inner_stride: rule(Rule::InnerStrideIsOne),
            whole_bytes: rule(Rule::StrideWholeBytes),
            stride_max: rule(Rule::StrideMax),
            packed: rule(Rule::PackedTypeAlignment),
            box_empty: rule(Rule::Im2colBoxEmpty),
        },
        max_global_dim: MAX_GLOBAL_DIM,
        max_stride_bytes: MAX_STRIDE_BYTES,
    };
    render("encode.cuh.tera", &ctx)
}

/// A run-time parameter of `tma_encode_<name>`.
#[derive(Serialize)]
struct EncodeParam {
    name: String,
    what: String,
}

/// The context of `encode_tile.cuh.tera`: one tile's constant encode arguments (user order)
/// and its run-time parameters.
#[derive(Serialize)]
struct EncodeTileContext<'a> {
    name: &'a str,
    rank: usize,
    dtype_cu: &'static str,
    elem_bits: u32,
    inner_unit: u64,
    chunk_bytes: u64,
    base_align: u64,
    stride_align: u64,
    stride_align_rule: String,
    packed_inner_multiple: u64,
    #[serde(rename = "box")]
    box_: Vec<u32>,
    element_strides: Vec<u32>,
    tma_order: Vec<usize>,
    interleave_cu: &'static str,
    swizzle_cu: &'static str,
    l2_cu: &'static str,
    oob_cu: &'static str,
    params: Vec<EncodeParam>,
    global: Vec<String>,
    strides: Vec<String>,
    strides_doc: String,
}

/// `tma_encode_<name>`: its constant encode arguments (user order, with the TMA order from
/// [`to_tma_order`]) and its run-time parameters.
fn encode_tile(valid: &ValidSpec) -> Result<String, RenderError> {
    render("encode_tile.cuh.tera", &encode_tile_context(valid))
}

/// The context of `encode_tile.cuh.tera`; an im2col tile's tensor (its one-pixel tiled view)
/// takes the same.
fn encode_tile_context(valid: &ValidSpec) -> EncodeTileContext<'_> {
    let spec = valid.spec();
    let rank = spec.rank();
    let mut params: Vec<EncodeParam> = Vec::new();
    let mut global = Vec::with_capacity(rank);
    for d in 0..rank {
        match spec.global[d] {
            Extent::Static(v) => global.push(format!("{v}ull")),
            Extent::Runtime => {
                let name = crate::ident::encode_param(&spec.dim_label(d));
                params.push(EncodeParam {
                    name: name.clone(),
                    what: format!("the extent of dim {d}"),
                });
                global.push(name);
            }
        }
    }
    let (strides, strides_doc): (Vec<String>, String) = match &spec.strides {
        None => (
            Vec::new(),
            "dense row-major, from the dims (declare `strides = [..]` to pad rows)".to_string(),
        ),
        Some(list) => {
            let mut out = Vec::with_capacity(rank);
            for (d, e) in list.iter().enumerate() {
                match e {
                    Extent::Static(v) => out.push(format!("{v}ull")),
                    Extent::Runtime => {
                        let name =
                            crate::ident::encode_param(&format!("stride_{}", spec.dim_label(d)));
                        params.push(EncodeParam {
                            name: name.clone(),
                            what: format!("the stride of dim {d}, elements"),
                        });
                        out.push(name);
                    }
                }
            }
            (out, "as declared, in elements".to_string())
        }
    };
    let pad = |v: &[u32]| -> Vec<u32> {
        let mut v = v.to_vec();
        v.resize(crate::MAX_RANK, 1);
        v
    };
    let users: Vec<usize> = (0..rank).collect();
    let mut tma_order = to_tma_order(&users);
    debug_assert!(tma_order
        .iter()
        .enumerate()
        .all(|(t, &d)| d == user_dim_of_tma_dim(rank, t)));
    tma_order.resize(crate::MAX_RANK, 0);
    let (stride_align, stride_rule) = valid.stride_align();
    let packed_multiple = if matches!(spec.dtype, DType::U4x16Align16B | DType::U6x16Align16B) {
        PACKED_INNER_DIM_MULTIPLE
    } else {
        0
    };
    EncodeTileContext {
        name: &spec.name,
        rank,
        dtype_cu: spec.dtype.cu_name(),
        elem_bits: spec.dtype.global_bits(),
        inner_unit: spec.inner_unit_elements(),
        chunk_bytes: spec.interleave.chunk_bytes().unwrap_or(0),
        base_align: valid.base_address_align(),
        stride_align,
        stride_align_rule: rule(stride_rule),
        packed_inner_multiple: packed_multiple,
        box_: pad(&spec.boxed),
        element_strides: pad(&spec.element_strides),
        tma_order,
        interleave_cu: spec.interleave.cu_name(),
        swizzle_cu: spec.swizzle.cu_name(),
        l2_cu: spec.l2_promotion.cu_name(),
        oob_cu: spec.oob_fill.cu_name(),
        params,
        global,
        strides,
        strides_doc,
    }
}

/// The context of `encode_im2col_tile.cuh.tera`: the tensor's encode spec (the tiled view's)
/// and the im2col arguments, spatial lists in user order with their TMA order.
#[derive(Serialize)]
struct EncodeIm2colTileContext<'a> {
    #[serde(flatten)]
    tensor: EncodeTileContext<'a>,
    spatial_rank: usize,
    spatial_labels: Vec<String>,
    lower: Vec<i32>,
    upper: Vec<i32>,
    traversal: Vec<u32>,
    spatial_tma_order: Vec<usize>,
    channels: u32,
    pixels: u32,
}

/// `tma_encode_<name>` of an im2col tile: the checks of its tensor (its one-pixel tiled view,
/// [`ValidIm2col::tensor`]) and of its bounding boxes, then `cuTensorMapEncodeIm2col`.
fn encode_im2col_tile(valid: &ValidIm2col) -> Result<String, RenderError> {
    let spec = valid.spec();
    let k = spec.spatial_rank();
    // Three entries each (the C struct's arrays); only the first `k` are read.
    let pad = |v: &[i32]| -> Vec<i32> {
        let mut v = v.to_vec();
        v.resize(3, 0);
        v
    };
    let mut traversal = spec.element_strides.clone();
    traversal.resize(3, 1);
    let spatial: Vec<usize> = (0..k).collect();
    let mut spatial_tma_order = to_tma_order(&spatial);
    spatial_tma_order.resize(3, 0);
    let ctx = EncodeIm2colTileContext {
        tensor: encode_tile_context(valid.tensor()),
        spatial_rank: k,
        spatial_labels: (1..=k).map(|d| spec.dim_label(d)).collect(),
        lower: pad(&spec.lower_corner),
        upper: pad(&spec.upper_corner),
        traversal,
        spatial_tma_order,
        channels: spec.channels_per_pixel,
        pixels: spec.pixels_per_column,
    };
    render("encode_im2col_tile.cuh.tera", &ctx)
}

/// MPK's names for the dims of a rank-`rank` tile, user order (outer -> inner): its
/// `tma_2d` / `tma_3d` / `tma_4d` parameters (`GMEM_ROW`, `SMEM_COL`, ...).
pub fn mpk_dim_names(rank: usize) -> Vec<&'static str> {
    const NAMES: [&str; 5] = ["DIM0", "OUTERMOST", "DEPTH", "ROW", "COL"];
    NAMES[NAMES.len() - rank.min(NAMES.len())..].to_vec()
}

/// A dim of an MPK tile: its label and its index in MPK's (innermost-first) array.
#[derive(Serialize)]
struct MpkDim {
    label: String,
    mpk_index: usize,
}

/// An MPK parameter known now.
#[derive(Serialize)]
struct MpkConst {
    name: String,
    value: u64,
}

/// The context of `mpk_tile.cuh.tera`.
#[derive(Serialize)]
struct MpkTileContext<'a> {
    name: &'a str,
    rank: usize,
    mpk_b: i64,
    dims: Vec<MpkDim>,
    mpk_consts: Vec<MpkConst>,
    mpk_params: Vec<String>,
    mpk_order: Vec<String>,
}

/// `kernel::tma::tma_<name>`: MPK's parameters as constants and its coordinate array mapped
/// to the tile's coordinates through [`to_tma_order`].
fn mpk_tile(valid: &ValidSpec) -> Result<String, RenderError> {
    let spec = valid.spec();
    let rank = spec.rank();
    let names = mpk_dim_names(rank);
    let users: Vec<usize> = (0..rank).collect();
    let order = to_tma_order(&users);
    let dims: Vec<MpkDim> = (0..rank)
        .map(|d| MpkDim {
            label: spec.dim_label(d),
            mpk_index: order.iter().position(|&u| u == d).unwrap_or(d),
        })
        .collect();
    let mut consts: Vec<MpkConst> = Vec::new();
    let mut params: Vec<String> = Vec::new();
    let mut push = |name: String, value: Option<u64>| {
        params.push(format!(
            "{name} = {}",
            value.map_or("_".to_string(), |v| v.to_string())
        ));
        if let Some(v) = value {
            consts.push(MpkConst { name, value: v });
        }
    };
    for (d, n) in names.iter().enumerate() {
        push(format!("GMEM_{n}"), spec.global[d].get());
    }
    for (d, n) in names.iter().enumerate() {
        push(format!("SMEM_{n}"), Some(u64::from(spec.boxed[d])));
    }
    let strides: Vec<Option<u64>> = match &spec.strides {
        Some(s) => s.iter().map(|e| e.get()).collect(),
        None => {
            let global: Option<Vec<u64>> = spec.global.iter().map(|e| e.get()).collect();
            match global
                .and_then(|g| crate::validate::dense_strides(&g, spec.inner_unit_elements()))
            {
                Some(s) => s.into_iter().map(Some).collect(),
                // Dense strides of run-time dims: the outer ones are known at run time only.
                None => (0..rank).map(|d| (d + 1 == rank).then_some(1)).collect(),
            }
        }
    };
    for (d, n) in names.iter().enumerate() {
        push(format!("GMEM_STRIDE_{n}"), strides[d]);
    }
    for (d, n) in names.iter().enumerate() {
        push(format!("SMEM_REPEAT_{n}"), Some(u64::from(spec.repeat[d])));
    }
    let smem_stride = spec.smem_stride.or_else(|| {
        valid
            .plan()
            .stride_bytes
            .checked_div(spec.dtype.size_bytes().unwrap_or(0))
    });
    push("SMEM_STRIDE".to_string(), smem_stride);
    let mpk_order: Vec<String> = order.iter().map(|&d| names[d].to_lowercase()).collect();
    let ctx = MpkTileContext {
        name: &spec.name,
        rank,
        mpk_b: spec.swizzle.mpk_class().map_or(-1, i64::from),
        dims,
        mpk_consts: consts,
        mpk_params: params,
        mpk_order,
    };
    render("mpk_tile.cuh.tera", &ctx)
}

/// A standalone header for C++ users ([`header`] with options): the prelude, every tile's
/// device helpers (ids in slice order), and the host side: per tile `CUresult
/// tma_encode_<name>(CUtensorMap* map, const void* base, unsigned long long base_bytes,
/// <run-time dims>, tma_encode_error* err = nullptr)`, which checks what tma-runtime's
/// `TensorMap::new` checks before it calls the driver. With [`HeaderOptions::mpk`], Mirage
/// MPK's names and contract follow. Compiles under nvcc (`-std=c++20 -arch=sm_90a`; host
/// code only outside NVRTC) and NVRTC (device helpers only).
pub fn header_with(specs: &[ValidSpec], opts: HeaderOptions) -> Result<String, RenderError> {
    header_with_pipelines(specs, &[], opts)
}

/// [`header_with`] and pipelines: each pipeline's `struct tma_pipe_<name>`
/// ([`PipelineCode`], after the warp helpers it uses) and its tiles. A pipeline's tile that
/// `specs` does not hold is added after them (one equal to a tile of `specs` is shared), with
/// its device helpers and its host encode function like every other tile.
pub fn header_with_pipelines(
    specs: &[ValidSpec],
    pipelines: &[ValidPipeline],
    opts: HeaderOptions,
) -> Result<String, RenderError> {
    header_with_im2col(specs, &[], pipelines, opts)
}

/// [`header_with_pipelines`] and im2col tiles: each one's device helpers ([`Im2colCode`], tile
/// ids after the tiled tiles') and its host encode function `tma_encode_<name>(CUtensorMap*
/// map, const void* base, unsigned long long base_bytes, <run-time dims>, tma_encode_error* err
/// = nullptr)`, which checks what tma-runtime's `TensorMap::new_im2col` checks before it calls
/// `cuTensorMapEncodeIm2col`. Mirage MPK has no im2col tiles: [`HeaderOptions::mpk`] adds
/// nothing for them. A name may be one tile's only, tiled or im2col.
pub fn header_with_im2col(
    specs: &[ValidSpec],
    im2col: &[ValidIm2col],
    pipelines: &[ValidPipeline],
    opts: HeaderOptions,
) -> Result<String, RenderError> {
    let mut tiles: Vec<ValidSpec> = specs.to_vec();
    for p in pipelines {
        for t in &p.spec().tiles {
            if !tiles.contains(&t.tile) {
                tiles.push(t.tile.clone());
            }
        }
    }
    // The device part is a kernel source without a body: one renderer, one set of name checks.
    let mut device = KernelSource::new();
    for t in &tiles {
        device = device.tile(t);
    }
    for p in pipelines {
        device = device.pipeline(p);
    }
    let mut out = String::from(
        "// Generated by tma-core (tma::render::header); do not edit.\n\
         // Each tile below states the spec it came from and its cuTensorMapEncodeTiled arguments.\n\
         #pragma once\n\n",
    );
    out.push_str(&device.build()?);
    // im2col tiles: ids after the tiled ones, names unlike every other tile's.
    let first_id = u32::try_from(tiles.len()).unwrap_or(u32::MAX);
    let mut names: Vec<&str> = tiles.iter().map(|t| t.spec().name.as_str()).collect();
    for (id, v) in (first_id..).zip(im2col) {
        let name = v.spec().name.as_str();
        if let Some(first) = names.iter().position(|n| *n == name) {
            return Err(RenderError::DuplicateTile {
                name: name.to_string(),
                first: u32::try_from(first).unwrap_or(u32::MAX),
                second: id,
            });
        }
        names.push(name);
        out.push('\n');
        out.push_str(Im2colCode::new(v, id)?.source());
    }
    out.push('\n');
    out.push_str(&encode_common()?);
    for v in &tiles {
        out.push('\n');
        out.push_str(&encode_tile(v)?);
    }
    for v in im2col {
        out.push('\n');
        out.push_str(&encode_im2col_tile(v)?);
    }
    if opts.mpk {
        out.push('\n');
        out.push_str(&render("mpk.cuh.tera", &NoContext {})?);
        for v in &tiles {
            out.push('\n');
            out.push_str(&mpk_tile(v)?);
        }
    }
    Ok(out)
}
