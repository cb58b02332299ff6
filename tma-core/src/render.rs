//! CUDA rendering: tera 2 templates (`tma-core/templates/`, embedded) turn a
//! [`ValidSpec`] into self-contained CUDA C++ helpers that compile under NVRTC with no
//! include path.
//!
//! - [`prelude`]: types (`CUtensorMap`, `tma_half`, `tma_bfloat16`, `tma_mbarrier`), the
//!   free helpers (bulk groups, fences, mbarriers, the debug-aware wait), what the tiles'
//!   coordinate structs need, and the helpers over several tiles (`tma_group` / `tma_expect`,
//!   `tma_align_smem`), include-guarded.
//! - [`TileCode`]: one tile's `struct tma_<name>` (see `docs/CONTRACTS.md`): its coordinate
//!   struct, box extents, element offsets and copy helpers.
//! - [`TileSetCode`]: a set of tiles in one block's shared memory, `struct tma_<set>` with each
//!   tile's offset, and the kernel's tensor-map parameter list as a macro.
//! - [`KernelSource`]: prelude + tile lines ([`crate::manifest`]) + helpers + the kernel's names
//!   for its tiles + a kernel body, the unit the runtime compiles.
//! - [`header`]: a standalone `.cuh` for C++ users; [`host_header`]: the tiles' shapes
//!   (coordinates, extents, element offsets) for host C++20.
//!
//! The generated helpers take coordinates as C++20 designated initializers
//! (`T::load(&map, &bar, smem, {.M = m0, .K = k0})`): compile them with `-std=c++20`
//! ([`CXX_STANDARD`]).
//!
//! ```
//! use tma_core::{render::KernelSource, validate, DType, Swizzle, TileSpec};
//! let spec = TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64])
//!     .swizzle(Swizzle::B128)
//!     .repeat([1, 2])
//!     .smem_stride(4096);
//! let valid = validate(&spec)?;
//! let src = KernelSource::new()
//!     .tile_as(&valid, "A")
//!     .body("// kernel here: A::load(&map, &bar, smem, {.d0 = m0, .d1 = k0});\n")
//!     .build()?;
//! assert!(src.contains("static constexpr unsigned TX_BYTES = 16384u;"));
//! assert!(src.contains("// tma-tile 0 a smem=16384 align=1024 target=sm_90a\n"));
//! assert!(src.contains("using A = tma_a;\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Output is deterministic: the same specs give the same bytes.

use crate::ident::{check_name, NameProblem};
use crate::layout::{to_tma_order, EncodeArgs};
use crate::limits::{MAX_TX_BYTES, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES};
use crate::smem::{ElementOffsets, TileSet};
use crate::spec::Extent;
use crate::validate::ValidSpec;
use crate::DType;
use std::collections::BTreeMap;
use tera::{Context, Tera, Value};

const PRELUDE_TEMPLATE: &str = include_str!("../templates/prelude.cuh.tera");
const SHAPES_TEMPLATE: &str = include_str!("../templates/shapes.cuh.tera");
const KERNEL_TEMPLATE: &str = include_str!("../templates/kernel.cuh.tera");
const COMPONENTS_TEMPLATE: &str = include_str!("../templates/components.tera");
const SHAPE_TEMPLATE: &str = include_str!("../templates/shape.cuh.tera");
const TILE_TEMPLATE: &str = include_str!("../templates/tile.cuh.tera");
const HOST_TILE_TEMPLATE: &str = include_str!("../templates/host_tile.cuh.tera");
const SET_TEMPLATE: &str = include_str!("../templates/set.cuh.tera");
const EXERCISE_TEMPLATE: &str = include_str!("../templates/exercise.cu.tera");

/// The C++ standard the generated helpers need (`-std=c++20` for NVRTC, nvcc or a host
/// compiler): their coordinates are designated initializers, which C++20 requires in
/// declaration order.
pub const CXX_STANDARD: &str = "c++20";

/// Default of `TMA_DEBUG_TIMEOUT_NS` (docs/CONTRACTS.md: 1 s of `%globaltimer`).
pub const DEBUG_TIMEOUT_NS: u64 = 1_000_000_000;

/// Tile id written into hang records when the tile is unknown.
pub const UNKNOWN_TILE_ID: u32 = 0xffff_ffff;

/// Bit 31 of a hang record's `tile_id`: the wait was a `tma_group`'s, the other bits name its
/// tiles (docs/CONTRACTS.md, "Debug waits"). `0xffffffff` (unknown) has it too: test that first.
pub const GROUP_TILE_ID_FLAG: u32 = 0x8000_0000;

/// Tiles with ids below this are listed one bit each in a group's `tile_id`.
pub const GROUP_LISTED_TILES: u32 = 30;

/// Bit 30 of a group's `tile_id`: the group also holds tiles whose id is
/// [`GROUP_LISTED_TILES`] or more (not listed).
pub const GROUP_MORE_TILES: u32 = 1 << GROUP_LISTED_TILES;

/// What the `tile_id` of a hang record names: the one decoder of what the generated waits
/// write (`T::wait`, `tma_group<..>::wait`, a bare `tma_mbarrier_wait`).
///
/// ```
/// use tma_core::render::HangTiles;
/// assert_eq!(HangTiles::decode(0xffff_ffff), HangTiles::Unknown);
/// assert_eq!(HangTiles::decode(7), HangTiles::Tile(7));
/// assert_eq!(
///     HangTiles::decode(0x8000_0005),
///     HangTiles::Group { tiles: vec![0, 2], more: false }
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HangTiles {
    /// [`UNKNOWN_TILE_ID`]: the wait named no tile.
    Unknown,
    /// One tile: its `// tma-tile` id.
    Tile(u32),
    /// The tiles of a `tma_group` (ids below [`GROUP_LISTED_TILES`], ascending); `more`: it
    /// also holds tiles whose ids are not listed.
    Group { tiles: Vec<u32>, more: bool },
}

impl HangTiles {
    /// Decodes a hang record's `tile_id`.
    pub fn decode(tile_id: u32) -> HangTiles {
        if tile_id == UNKNOWN_TILE_ID {
            HangTiles::Unknown
        } else if tile_id & GROUP_TILE_ID_FLAG == 0 {
            HangTiles::Tile(tile_id)
        } else {
            HangTiles::Group {
                tiles: (0..GROUP_LISTED_TILES)
                    .filter(|i| tile_id & (1 << i) != 0)
                    .collect(),
                more: tile_id & GROUP_MORE_TILES != 0,
            }
        }
    }
}

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
    /// A name the kernel source declares (a tile set, a set member, an alias) is no usable C
    /// identifier.
    #[error("the {what} `{name}` names generated CUDA; it {}", .problem.describe())]
    InvalidName {
        what: &'static str,
        name: String,
        problem: NameProblem,
    },
    /// A name the kernel source declares is already taken in its scope.
    #[error("the {what} `{name}` is already taken: {by}")]
    NameTaken {
        what: &'static str,
        name: String,
        by: String,
    },
    /// The tiles of a set up to `member` span more shared memory than 64 bits hold.
    #[error("the tiles of set `{set}` up to `{member}` span more shared memory than any GPU has")]
    TileSetOverflow { set: String, member: String },
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
        ("shapes.cuh.tera", SHAPES_TEMPLATE),
        ("kernel.cuh.tera", KERNEL_TEMPLATE),
        ("shape.cuh.tera", SHAPE_TEMPLATE),
        ("tile.cuh.tera", TILE_TEMPLATE),
        ("host_tile.cuh.tera", HOST_TILE_TEMPLATE),
        ("set.cuh.tera", SET_TEMPLATE),
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

/// The prelude every translation unit starts with (include-guarded, so it may appear twice):
/// the base types and helpers, then what the tiles' coordinate structs need, then the helpers
/// over several tiles.
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
    ctx.insert("max_tx_bytes", &MAX_TX_BYTES);
    ctx.insert("group_flag", &format!("{GROUP_TILE_ID_FLAG:#x}"));
    ctx.insert("group_listed", &GROUP_LISTED_TILES);
    let mut out = render("prelude.cuh.tera", &ctx)?;
    for part in ["shapes.cuh.tera", "kernel.cuh.tera"] {
        out.push('\n');
        out.push_str(&render(part, &ctx)?);
    }
    Ok(out)
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

/// One dim of a tile's `position` / `offset`: its extent, its index in position `n`, the
/// local holding its position.
struct DimOffsets {
    extent: u64,
    from_n: String,
    pos: String,
}

/// What the tile's `position` / `offset` render from ([`ElementOffsets`]): per dim the
/// extent, how position `n` splits, and the offset's terms. `None` for packed types.
fn offsets_context(valid: &ValidSpec) -> Option<(Value, Vec<DimOffsets>)> {
    let spec = valid.spec();
    let o = ElementOffsets::new(spec, valid.plan())?;
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
fn tile_context(valid: &ValidSpec, tile_id: u32) -> Context {
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

/// The names a tile set struct holds besides its members' (`OFFSET_<member>` aside): a
/// member may not take them.
const SET_OWN_NAMES: [&str; 4] = ["TILES", "SMEM_BYTES", "SMEM_ALIGN", "DYNAMIC_SMEM_BYTES"];

/// Several tiles laid out in one block's shared memory: `struct tma_<set>` with each member's
/// tile struct (as a member type), its `OFFSET_<member>` from the aligned base, `SMEM_BYTES`,
/// `SMEM_ALIGN`, `DYNAMIC_SMEM_BYTES`, and the macro `TMA_<SET>_PARAMS`, the kernel's
/// parameter list (`const __grid_constant__ CUtensorMap <member>_map, ..`). The layout is
/// [`TileSet`]'s. The tiles' own helpers are not included (see [`KernelSource::tile_set`]).
///
/// ```
/// use tma_core::{render::TileSetCode, validate, DType, Swizzle, TileSpec};
/// let q = validate(&TileSpec::new("q", DType::BF16, [4096, 64], [64, 64]).swizzle(Swizzle::B128))?;
/// let k = validate(&TileSpec::new("k", DType::BF16, [4096, 64], [64, 64]).swizzle(Swizzle::B128))?;
/// let set = TileSetCode::new("attn", &[("q", &q), ("k", &k)])?;
/// assert!(set.source().contains("static constexpr unsigned OFFSET_k = 8192u;"));
/// assert_eq!(set.params_macro(), "TMA_ATTN_PARAMS");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileSetCode {
    name: String,
    layout: TileSet,
    source: String,
}

impl TileSetCode {
    /// Renders set `name` of `members` (member name, tile), laid out in this order. Member
    /// names name the tile's type and offset in the struct and its map parameter
    /// (`<member>_map`): each a C identifier, no two alike.
    pub fn new(name: &str, members: &[(&str, &ValidSpec)]) -> Result<TileSetCode, RenderError> {
        if let Err(problem) = check_name(name) {
            return Err(RenderError::InvalidName {
                what: "tile set",
                name: name.to_string(),
                problem,
            });
        }
        for (i, (member, _)) in members.iter().enumerate() {
            if let Err(problem) = check_name(member) {
                return Err(RenderError::InvalidName {
                    what: "tile set member",
                    name: member.to_string(),
                    problem,
                });
            }
            let taken = if SET_OWN_NAMES.contains(member) || member.starts_with("OFFSET_") {
                Some(format!("struct tma_{name} uses it (TILES, SMEM_BYTES, SMEM_ALIGN, DYNAMIC_SMEM_BYTES, OFFSET_<member>)"))
            } else {
                members[..i]
                    .iter()
                    .any(|(m, _)| m == member)
                    .then(|| format!("set `{name}` has two members of this name"))
            };
            if let Some(by) = taken {
                return Err(RenderError::NameTaken {
                    what: "tile set member",
                    name: member.to_string(),
                    by,
                });
            }
        }
        let layout = TileSet::new(members.iter().map(|(_, v)| v.plan())).map_err(|o| {
            RenderError::TileSetOverflow {
                set: name.to_string(),
                member: members
                    .get(o.tile)
                    .map_or_else(String::new, |(m, _)| m.to_string()),
            }
        })?;
        let rows: Vec<Value> = members
            .iter()
            .zip(&layout.offsets)
            .map(|((member, valid), offset)| {
                let plan = valid.plan();
                map([
                    ("name", Value::from(member.to_string())),
                    ("cuda", Value::from(format!("tma_{}", valid.spec().name))),
                    ("offset", Value::from(*offset)),
                    ("bytes", Value::from(plan.footprint_bytes)),
                    ("align", Value::from(plan.align_bytes)),
                    ("tx", Value::from(plan.tx_bytes)),
                ])
            })
            .collect();
        let mut ctx = Context::new();
        ctx.insert("name", name);
        ctx.insert("cuda", &format!("tma_{name}"));
        ctx.insert("params_macro", &params_macro(name));
        ctx.insert("total", &layout.total_bytes);
        ctx.insert("align", &layout.align_bytes);
        ctx.insert("dynamic", &layout.dynamic_smem_bytes());
        ctx.insert_value("members", Value::from(rows));
        let source = render("set.cuh.tera", &ctx)?;
        Ok(TileSetCode {
            name: name.to_string(),
            layout,
            source,
        })
    }

    /// The struct, its comment and the parameter macro.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The struct name: `tma_<name>`.
    pub fn cuda_name(&self) -> String {
        format!("tma_{}", self.name)
    }

    /// The parameter-list macro: `TMA_<NAME>_PARAMS` (the name upper-cased).
    pub fn params_macro(&self) -> String {
        params_macro(&self.name)
    }

    /// The layout the struct states ([`TileSet`]).
    pub fn layout(&self) -> &TileSet {
        &self.layout
    }
}

fn params_macro(set: &str) -> String {
    format!("TMA_{}_PARAMS", set.to_ascii_uppercase())
}

/// A tile set declared on a [`KernelSource`]: its name and, per member, the member name and
/// the index of its tile.
#[derive(Clone, Debug)]
struct SetDecl {
    name: String,
    members: Vec<(String, usize)>,
}

/// Builds one translation unit: prelude, tile lines ([`crate::manifest`]), the tiles'
/// helpers (ids in the order added), the tile sets, the kernel's names for its tiles
/// (`using <alias> = tma_<name>;`) and a kernel body.
///
/// A kernel body names a tile by the alias it chose ([`KernelSource::tile_as`]) or through its
/// set (`tma_<set>::<member>`), so no CUDA name is pasted into it:
///
/// ```
/// use tma_core::{render::KernelSource, validate, DType, TileSpec};
/// let rows = validate(&TileSpec::new("rows", DType::F32, [1024, 256], [32, 32]).dim_names(["M", "K"]))?;
/// let src = KernelSource::new()
///     .tile_as(&rows, "Rows")
///     .body(r#"
/// extern "C" __global__ void copy(const __grid_constant__ CUtensorMap in) {
///   extern __shared__ unsigned char raw[];
///   __shared__ alignas(8) tma_mbarrier bar;
///   unsigned char* smem = tma_align_smem<Rows>(raw);
///   // ... init bar ...
///   if (threadIdx.x == 0) {
///     tma_expect<Rows>(&bar);
///     Rows::load(&in, &bar, smem, {.M = 32 * (int)blockIdx.x, .K = 0});
///   }
///   tma_group<Rows>::wait(&bar, 0);
///   float x = Rows::at(smem, {.M = 1, .K = (int)threadIdx.x});
/// }
/// "#)
///     .build()?;
/// assert!(src.contains("using Rows = tma_rows;"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct KernelSource {
    tiles: Vec<ValidSpec>,
    sets: Vec<SetDecl>,
    aliases: Vec<(String, usize)>,
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

    /// Adds a tile (as [`KernelSource::tile`]) and names it `alias` for the kernel body:
    /// `using <alias> = tma_<name>;`. The alias must be a C identifier no other alias, set or
    /// tile struct of the source uses.
    pub fn tile_as(mut self, valid: &ValidSpec, alias: &str) -> KernelSource {
        self.aliases.push((alias.to_string(), self.tiles.len()));
        self.tiles.push(valid.clone());
        self
    }

    /// Adds the tiles of a set (as [`KernelSource::tile`], in order) and their layout in one
    /// block's shared memory ([`TileSetCode`]): `struct tma_<name>` with, per member, the
    /// tile's struct as `tma_<name>::<member>` and its offset `OFFSET_<member>`, and the
    /// kernel's parameter list `TMA_<NAME>_PARAMS` (one `<member>_map` per tile).
    pub fn tile_set(mut self, name: &str, members: &[(&str, &ValidSpec)]) -> KernelSource {
        let mut decl = SetDecl {
            name: name.to_string(),
            members: Vec::with_capacity(members.len()),
        };
        for (member, valid) in members {
            decl.members.push((member.to_string(), self.tiles.len()));
            self.tiles.push((*valid).clone());
        }
        self.sets.push(decl);
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
        // Every struct and alias is a global name: tiles, sets and aliases must differ.
        let mut globals: BTreeMap<String, String> = tiles
            .iter()
            .map(|t| (t.cuda_name(), format!("tile `{}`", t.name())))
            .collect();
        let mut macros: BTreeMap<String, String> = BTreeMap::new();
        let mut sets = Vec::with_capacity(self.sets.len());
        for set in &self.sets {
            let members: Vec<(&str, &ValidSpec)> = set
                .members
                .iter()
                .map(|(m, i)| (m.as_str(), &self.tiles[*i]))
                .collect();
            let code = TileSetCode::new(&set.name, &members)?;
            for (what, name, table) in [
                ("tile set", code.cuda_name(), &mut globals),
                ("tile set macro", code.params_macro(), &mut macros),
            ] {
                if let Some(by) = table.insert(name.clone(), format!("tile set `{}`", set.name)) {
                    return Err(RenderError::NameTaken { what, name, by });
                }
            }
            sets.push(code);
        }
        let mut aliases = String::new();
        for (alias, index) in &self.aliases {
            if let Err(problem) = check_name(alias) {
                return Err(RenderError::InvalidName {
                    what: "tile alias",
                    name: alias.clone(),
                    problem,
                });
            }
            let tile = &tiles[*index];
            if let Some(by) =
                globals.insert(alias.clone(), format!("alias of tile `{}`", tile.name()))
            {
                return Err(RenderError::NameTaken {
                    what: "tile alias",
                    name: alias.clone(),
                    by,
                });
            }
            aliases.push_str(&format!("using {alias} = {};\n", tile.cuda_name()));
        }
        let mut out = prelude_checked()?;
        out.push('\n');
        out.push_str(&tile_list(&self.tiles));
        for t in &tiles {
            out.push('\n');
            out.push_str(t.source());
        }
        for set in &sets {
            out.push('\n');
            out.push_str(set.source());
        }
        if !aliases.is_empty() {
            out.push_str("\n// The kernel's names for its tiles (KernelSource::tile_as).\n");
            out.push_str(&aliases);
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

/// The tiles' shapes for host C++20 code (`g++ -std=c++20`): `#pragma once`, what the
/// coordinate structs need, and per tile a `struct tma_<name>` holding its `coords`,
/// `BOX_<dim>`, `EXTENT_<dim>`, `POSITIONS`, `position(n)` and `offset(p)`: the same text
/// its device struct holds, so a host program computes the shared-memory offsets a kernel
/// uses (and the tests check them against the CPU model).
pub fn host_header(specs: &[ValidSpec]) -> Result<String, RenderError> {
    let mut out = String::from(
        "// Generated by tma-core (tma::render::host_header); do not edit. Host C++20.\n#pragma once\n\n",
    );
    out.push_str(&render("shapes.cuh.tera", &Context::new())?);
    let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
    for (id, v) in (0u32..).zip(specs) {
        let name = v.spec().name.as_str();
        if seen.insert(name, ()).is_some() {
            let first = specs
                .iter()
                .position(|s| s.spec().name == name)
                .unwrap_or(0) as u32;
            return Err(RenderError::DuplicateTile {
                name: name.to_string(),
                first,
                second: id,
            });
        }
        out.push('\n');
        out.push_str(&render("host_tile.cuh.tera", &tile_context(v, id))?);
    }
    Ok(out)
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
/// CUtensorMap* maps, int flags)` that calls every copy helper of the tile (as tile 0 of its
/// source) and of the prelude, so that its SASS shows UTMALDG, UTMASTG, UTMAREDG (when the
/// type has reductions), UTMAPF and UTMACCTL; and a kernel
/// `tma_exercise_<name>_shape(const __grid_constant__ CUtensorMap map, <tile>::elem* out)`
/// using `tma_align_smem`, `tma_expect`, `tma_group`, `position` and `at`. Build it with
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
