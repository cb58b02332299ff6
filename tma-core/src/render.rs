//! CUDA rendering: tera 2 templates (`tma-core/templates/`, embedded) turn a
//! [`ValidSpec`] into self-contained CUDA C++ helpers that compile under NVRTC with no
//! include path.
//!
//! - [`prelude`]: types (`CUtensorMap`, `tma_half`, `tma_bfloat16`, `tma_mbarrier`) and the
//!   free helpers (bulk groups, fences, mbarriers, the debug-aware wait), include-guarded.
//! - [`TileCode`]: one tile's `struct tma_<name>` (see `docs/CONTRACTS.md`).
//! - [`KernelSource`]: prelude + tile lines ([`crate::manifest`]) + helpers + a kernel body,
//!   the unit the runtime compiles.
//! - [`header`]: a standalone `.cuh` for C++ users.
//!
//! ```
//! use tma_core::{render::KernelSource, validate, DType, Swizzle, TileSpec};
//! let spec = TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64])
//!     .swizzle(Swizzle::B128)
//!     .repeat([1, 2])
//!     .smem_stride(4096);
//! let valid = validate(&spec)?;
//! let src = KernelSource::new().tile(&valid).body("// kernel here\n").build()?;
//! assert!(src.contains("static constexpr unsigned TX_BYTES = 16384u;"));
//! assert!(src.contains("// tma-tile 0 a smem=16384 align=1024 target=sm_90a\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Output is deterministic: the same specs give the same bytes.

use crate::layout::{to_tma_order, EncodeArgs};
use crate::limits::{TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES};
use crate::spec::{Extent, TileSpec};
use crate::validate::ValidSpec;
use crate::DType;
use std::collections::BTreeMap;
use tera::{Context, Tera, Value};

const PRELUDE_TEMPLATE: &str = include_str!("../templates/prelude.cuh.tera");
const COMPONENTS_TEMPLATE: &str = include_str!("../templates/components.tera");
const TILE_TEMPLATE: &str = include_str!("../templates/tile.cuh.tera");
const EXERCISE_TEMPLATE: &str = include_str!("../templates/exercise.cu.tera");

/// Default of `TMA_DEBUG_TIMEOUT_NS` (docs/CONTRACTS.md: 1 s of `%globaltimer`).
pub const DEBUG_TIMEOUT_NS: u64 = 1_000_000_000;

/// Tile id written into hang records when the tile is unknown.
pub const UNKNOWN_TILE_ID: u32 = 0xffff_ffff;

/// What can go wrong while rendering.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A template failed to parse or render (a bug in `tma-core/templates/`).
    #[error("template `{template}` failed: {message}")]
    Template { template: String, message: String },
    /// Two tiles of one translation unit share a name: their structs would collide.
    #[error("two tiles are named `{name}` (ids {first} and {second}); tile names name CUDA structs and must differ within one source")]
    DuplicateTile {
        name: String,
        first: u32,
        second: u32,
    },
    /// Tile ids index the hang record's `tile_id`; 0xffffffff means "unknown".
    #[error("tile id {0:#x} is reserved for \"unknown tile\"")]
    ReservedTileId(u32),
}

/// The template engine, parsed once per process: every tile declared with a macro renders
/// through it at expansion time, so parsing per call would cost every build.
fn engine() -> Result<&'static Tera, RenderError> {
    static ENGINE: std::sync::OnceLock<Result<Tera, RenderError>> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(build_engine)
        .as_ref()
        .map_err(Clone::clone)
}

fn build_engine() -> Result<Tera, RenderError> {
    let mut tera = Tera::new();
    // CUDA is not HTML: never escape.
    tera.autoescape_on(Vec::<&str>::new());
    tera.add_raw_templates([
        ("components.tera", COMPONENTS_TEMPLATE),
        ("prelude.cuh.tera", PRELUDE_TEMPLATE),
        ("tile.cuh.tera", TILE_TEMPLATE),
        ("exercise.cu.tera", EXERCISE_TEMPLATE),
    ])
    .map_err(|e| template_error("templates", &e))?;
    Ok(tera)
}

fn template_error(template: &str, e: &tera::Error) -> RenderError {
    // tera's Display is short; walk the sources for the detail.
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    RenderError::Template {
        template: template.to_string(),
        message,
    }
}

fn render(template: &str, ctx: &Context) -> Result<String, RenderError> {
    engine()?
        .render(template, ctx)
        .map_err(|e| template_error(template, &e))
}

/// The prelude every translation unit starts with (include-guarded, so it may appear twice).
pub fn prelude() -> String {
    prelude_checked().unwrap_or_else(|e| format!("#error \"tma prelude: {e}\"\n"))
}

fn prelude_checked() -> Result<String, RenderError> {
    let mut ctx = Context::new();
    ctx.insert("debug_timeout_ns", &DEBUG_TIMEOUT_NS);
    let codes = |entries: Vec<(String, u32)>| -> Value {
        Value::from(
            entries
                .into_iter()
                .map(|(name, code)| map([("name", Value::from(name)), ("code", Value::from(code))]))
                .collect::<Vec<Value>>(),
        )
    };
    ctx.insert_value(
        "device_rules",
        codes(
            crate::rules::Rule::DEVICE_CHECKED
                .iter()
                .map(|(r, c)| (format!("{r:?}"), *c))
                .collect(),
        ),
    );
    ctx.insert_value(
        "device_helpers",
        codes(
            crate::rules::Helper::ALL
                .iter()
                .map(|(h, c)| (format!("{h:?}"), *c))
                .collect(),
        ),
    );
    ctx.insert("tensor_map_bytes", &TENSOR_MAP_BYTES);
    ctx.insert("tensor_map_words", &(TENSOR_MAP_BYTES / 8));
    ctx.insert("tensor_map_align", &TENSOR_MAP_ALIGN);
    render("prelude.cuh.tera", &ctx)
}

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

fn map(entries: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    let m: BTreeMap<String, Value> = entries
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Value::from(m)
}

fn list_text<T: std::fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn dim_label(spec: &TileSpec, d: usize) -> String {
    spec.dim_name(d)
        .map_or_else(|| format!("d{d}"), ToString::to_string)
}

/// The template context of one tile. Every TMA-order list comes from [`to_tma_order`].
fn tile_context(valid: &ValidSpec, tile_id: u32) -> Context {
    let spec = valid.spec();
    let plan = valid.plan();
    let rank = spec.rank();
    let vars: Vec<String> = (0..rank).map(|d| format!("c{d}")).collect();
    let strides: Vec<String> = match &spec.strides {
        Some(s) => s.iter().map(Extent::to_string).collect(),
        None => vec!["dense".to_string(); rank],
    };
    let dims: Vec<Value> = (0..rank)
        .map(|d| {
            map([
                ("i", Value::from(d)),
                ("var", Value::from(vars[d].clone())),
                ("label", Value::from(dim_label(spec, d))),
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
            ])
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
    ctx.insert_value("placements", Value::from(placements));
    ctx.insert_value("encode", encode);
    ctx.insert("tma_vars", &to_tma_order(&vars));
    ctx.insert("reduce_ops", &reduce_ops(spec.dtype));
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
        if tile_id == UNKNOWN_TILE_ID {
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

/// Builds one translation unit: prelude, tile lines ([`crate::manifest`]), the tiles'
/// helpers (ids in the order added) and a kernel body.
#[derive(Clone, Debug, Default)]
pub struct KernelSource {
    tiles: Vec<ValidSpec>,
    body: String,
}

impl KernelSource {
    pub fn new() -> KernelSource {
        KernelSource::default()
    }

    /// Adds a tile; tiles get ids 0, 1, ... in the order added.
    pub fn tile(mut self, valid: &ValidSpec) -> KernelSource {
        self.tiles.push(valid.clone());
        self
    }

    /// Appends kernel code after the helpers.
    pub fn body(mut self, body: &str) -> KernelSource {
        self.body.push_str(body);
        self
    }

    /// Appends kernel code whose first line is line `line` of `file`, after a `#line`
    /// directive: NVRTC's messages about it then name that file and line. E.g.
    /// `.body_at("kernels/copy.cu", 1, COPY_CU)` for the text of that file, or
    /// `.body_at(file!(), line!(), r#"...` for a raw string that opens on the line of
    /// `line!()`. Code appended after it counts on from there.
    pub fn body_at(mut self, file: &str, line: u32, body: &str) -> KernelSource {
        if !self.body.is_empty() && !self.body.ends_with('\n') {
            self.body.push('\n');
        }
        let file = file.replace('\\', "\\\\").replace('"', "\\\"");
        self.body.push_str(&format!("#line {line} \"{file}\"\n"));
        self.body(body)
    }

    /// The whole source. Deterministic: the same inputs give the same bytes.
    pub fn build(&self) -> Result<String, RenderError> {
        let tiles = render_tiles(&self.tiles)?;
        let mut out = prelude_checked()?;
        out.push('\n');
        out.push_str(&tile_list(&self.tiles));
        for t in &tiles {
            out.push('\n');
            out.push_str(t.source());
        }
        if !self.body.is_empty() {
            out.push('\n');
            out.push_str(&self.body);
            if !self.body.ends_with('\n') {
                out.push('\n');
            }
        }
        Ok(out)
    }
}

fn render_tiles(specs: &[ValidSpec]) -> Result<Vec<TileCode>, RenderError> {
    let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
    let mut tiles = Vec::with_capacity(specs.len());
    for (id, v) in (0u32..).zip(specs) {
        let name = v.spec().name.as_str();
        if let Some(&first) = seen.get(name) {
            return Err(RenderError::DuplicateTile {
                name: name.to_string(),
                first,
                second: id,
            });
        }
        seen.insert(name, id);
        tiles.push(TileCode::new(v, id)?);
    }
    Ok(tiles)
}

/// The tile lines ([`crate::manifest`]) the runtime reads: names for hang records, shared
/// memory for launch checks, the target for the compile's arch. Ids in slice order, as
/// [`render_tiles`] gives them.
fn tile_list(specs: &[ValidSpec]) -> String {
    let mut out = String::from(
        "// tiles of this translation unit (id name smem align target), read by tma-runtime:\n",
    );
    for (id, v) in (0u32..).zip(specs) {
        out.push_str(&format!("{}\n", crate::manifest::DeclaredTile::of(v, id)));
    }
    out
}

/// A standalone header for C++ (e.g. Mirage MPK) users: `#pragma once`, the prelude and
/// every tile's helpers (ids in slice order). Include it from `.cu` files compiled with
/// `-arch=sm_90a` (nvcc: the real `CUtensorMap` comes from `<cuda.h>`).
pub fn header(specs: &[ValidSpec]) -> Result<String, RenderError> {
    let tiles = render_tiles(specs)?;
    let mut out = String::from(
        "// Generated by tma-core (tma::render::header); do not edit.\n\
         // Each tile below states the spec it came from and its cuTensorMapEncodeTiled arguments.\n\
         #pragma once\n\n",
    );
    out.push_str(&prelude_checked()?);
    out.push('\n');
    out.push_str(&tile_list(specs));
    for t in &tiles {
        out.push('\n');
        out.push_str(t.source());
    }
    Ok(out)
}

/// A kernel `tma_exercise_<name>(const __grid_constant__ CUtensorMap map, const
/// CUtensorMap* maps, int flags)` that calls every helper of the tile (as tile 0 of its
/// source) and of the prelude, so that its SASS shows UTMALDG, UTMASTG, UTMAREDG (when the
/// type has reductions), UTMAPF and UTMACCTL. Build it with
/// `KernelSource::new().tile(valid).body(&exercise_body(valid)?)`.
pub fn exercise_body(valid: &ValidSpec) -> String {
    exercise_body_checked(valid).unwrap_or_else(|e| format!("#error \"tma exercise body: {e}\"\n"))
}

/// [`exercise_body`] with the error returned instead of written as `#error`.
pub fn exercise_body_checked(valid: &ValidSpec) -> Result<String, RenderError> {
    render("exercise.cu.tera", &tile_context(valid, 0))
}

/// A fixed corpus of valid specs covering ranks 1-5, every sm_90 swizzle, repeats, element
/// strides, interleave, dtype sizes 1/2/4/8 and the Mirage MPK seed. The snapshot tests and
/// the NVRTC compile test (root package) render every entry.
pub mod corpus {
    use crate::spec::{Interleave, L2Promotion, OobFill, Swizzle, TileSpec};
    use crate::validate::{validate, ValidSpec};
    use crate::DType;

    /// The specs, before validation (names are unique).
    pub fn specs() -> Vec<TileSpec> {
        vec![
            // Mirage MPK's example: 4096 x 1024 bf16, box 64 x 64, 128B swizzle, repeat 1 x 2,
            // smem stride 4096 elements -> TX_BYTES 16384.
            TileSpec::new("mpk_a", DType::BF16, [4096, 1024], [64, 64])
                .dim_names(["row", "col"])
                .swizzle(Swizzle::B128)
                .repeat([1, 2])
                .smem_stride(4096),
            TileSpec::new("r1_u8", DType::U8, [4096], [256]).dim_names(["x"]),
            TileSpec::new("r2_f32_sw32", DType::F32, [512, 512], [32, 8])
                .dim_names(["m", "k"])
                .swizzle(Swizzle::B32),
            TileSpec::new("r2_f16_sw64", DType::F16, [1024, 256], [64, 32])
                .dim_names(["m", "k"])
                .swizzle(Swizzle::B64)
                .l2_promotion(L2Promotion::B128),
            TileSpec::new("r2_u32_repeat", DType::U32, [256, 256], [16, 4])
                .repeat([2, 3])
                .oob_fill(OobFill::Zero),
            TileSpec::new("r3_deform", DType::F16, [94, 162, 32], [2, 2, 32])
                .dim_names(["H", "W", "C"])
                .oob_fill(OobFill::NanRequestZeroFma),
            TileSpec::new("r3_i64_estride", DType::I64, [64, 128, 64], [8, 16, 2])
                .dim_names(["b", "h", "w"])
                .element_strides([2, 4, 1]),
            TileSpec::new("r4_f64_sw128", DType::F64, [8, 16, 32, 64], [2, 4, 8, 16])
                .dim_names(["n", "c", "h", "w"])
                .swizzle(Swizzle::B128)
                .l2_promotion(L2Promotion::B256),
            // NC/8HWC8 activations: the innermost dim counts 16-byte chunks (8 channels of
            // one pixel); one channel slice per box, two slices per call.
            TileSpec::new("r4_nc8hwc8_f16", DType::F16, [2, 4, 16, 32], [1, 1, 8, 8])
                .dim_names(["n", "c8", "h", "w"])
                .interleave(Interleave::B16)
                .swizzle(Swizzle::B128)
                .repeat([1, 2, 1, 1]),
            // 32-byte chunks (8 f32 channels), with the 32B swizzle they require.
            TileSpec::new("r3_nc8wc8_f32", DType::F32, [4, 8, 64], [2, 1, 8])
                .dim_names(["n", "c8", "w"])
                .interleave(Interleave::B32)
                .swizzle(Swizzle::B32),
            TileSpec::new("r5_bf16", DType::BF16, [2, 3, 4, 8, 64], [1, 2, 2, 4, 64])
                .dim_names(["a", "b", "c", "d", "e"])
                .swizzle(Swizzle::B128)
                .repeat([2, 1, 1, 1, 1]),
            TileSpec::new(
                "r5_i32_strided",
                DType::I32,
                [2, 4, 8, 8, 8],
                [1, 2, 4, 4, 8],
            )
            .swizzle(Swizzle::B32)
            .element_strides([1, 2, 1, 2, 1]),
        ]
    }

    /// Every spec of [`specs`], validated. A spec that fails validation is left out (and
    /// the render tests check that none is).
    pub fn corpus() -> Vec<ValidSpec> {
        specs().iter().filter_map(|s| validate(s).ok()).collect()
    }
}

pub use corpus::corpus;
