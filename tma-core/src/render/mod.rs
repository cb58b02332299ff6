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
//! - [`PipelineCode`]: a ring of stages of tiles, `struct tma_pipe_<name>` (producer `acquire` /
//!   `load`, consumer `wait` / `release`, the stage/phase `state`); [`WarpRolesCode`]: warp
//!   roles, `struct tma_roles_<name>` (setmaxnreg split, named barriers); [`warp_support`]:
//!   the helpers both use.
//! - [`KernelSource`]: prelude + helpers + the kernel's names for its tiles + a kernel body, the
//!   unit the runtime compiles, and the typed description of what it declares
//!   ([`KernelSource::facts`], [`crate::facts`]) the runtime carries beside it.
//! - [`header`]: a standalone `.cuh` for C++ users, device helpers and host encode functions
//!   (`tma_encode_<name>`); [`header_with`] adds Mirage MPK's contract; [`host_header`]: the
//!   tiles' shapes (coordinates, extents, element offsets) for host C++20.
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
//! assert!(src.contains("static constexpr unsigned TILE_ID = 0u;"));
//! assert!(src.contains("using A = tma_a;\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Output is deterministic: the same specs give the same bytes.

use crate::encode_args::{to_tma_order, EncodeArgs};
use crate::ident::{check_name, NameProblem};
use crate::limits::{MAX_TX_BYTES, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES};
use crate::smem::{ElementOffsets, SmemLayout};
use crate::spec::Extent;
use crate::validate::ValidSpec;
use crate::DType;
use serde::Serialize;
use std::collections::BTreeMap;
use tera::{Context, Tera};

mod cpp;
mod engine;
mod hang;
mod im2col;
mod pipeline;
mod plan;
mod set;
mod source;
mod tile;
mod wgmma;

pub use cpp::{
    header_with, header_with_im2col, header_with_pipelines, mpk_dim_names, HeaderOptions,
};
use engine::*;
pub use hang::HangTiles;
pub use im2col::Im2colCode;
pub use pipeline::{warp_support, PipelineCode, WarpRolesCode};
pub use plan::PlanCode;
pub use set::TileSetCode;
use set::*;
pub use source::{exercise_body, exercise_body_checked, header, host_header, KernelSource};
use tile::*;
pub use tile::{reduce_ops, TileCode};
use wgmma::*;
pub use wgmma::{wgmma_exercise_body, wgmma_exercise_plan, wgmma_shapes, WGMMA_EXERCISE_THREADS};

/// The C++ standard the generated helpers need (`-std=c++20` for NVRTC, nvcc or a host
/// compiler): their coordinates are designated initializers, which C++20 requires in
/// declaration order.
pub const CXX_STANDARD: &str = "c++20";

/// Default of `TMA_DEBUG_TIMEOUT_NS` (docs/CONTRACTS.md: 1 s of `%globaltimer`).
pub const DEBUG_TIMEOUT_NS: u64 = 1_000_000_000;

/// Default of `TMA_WAIT_TIMEOUT_NS`, the bound of a bounded release build's waits (docs/CONTRACTS.md
/// "Bounded waits": 10 s of `%globaltimer`, generous: a wait that long is a hang).
pub const WAIT_TIMEOUT_NS: u64 = 10_000_000_000;

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
    /// Tile ids index the hang record's `tile_id`: 0xffffffff means "unknown" and ids with
    /// bit 31 set mean a group of tiles.
    #[error(
        "tile id {0:#x} is reserved: 0xffffffff means an unknown tile and bit 31 a group of tiles"
    )]
    ReservedTileId(u32),
    /// A name the kernel source declares (a tile set, a set member, an alias) is no usable C
    /// identifier.
    #[error("the {what} `{name}` names generated CUDA; it {}", .problem.describe())]
    InvalidName {
        what: &'static str,
        name: String,
        problem: NameProblem,
    },
    /// A name the kernel source declares (a tile set, a set member, an alias) would meet what
    /// the generated code already calls by name ([`crate::Rule::GeneratedNameClash`]).
    #[error("the {what} `{name}` names generated CUDA; this one clashes (rule GeneratedNameClash): {clash}")]
    GeneratedName {
        what: &'static str,
        name: String,
        clash: crate::ident::GeneratedClash,
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
    /// The tiles of a set up to `member` end past the shared memory one block may use on the
    /// members' target (the smallest, if they differ), the base-alignment slack counted: no
    /// launch can give the set its `DYNAMIC_SMEM_BYTES`, and past 2^32 the struct's `unsigned` constants would wrap. (A kernel
    /// plan's tile set is checked with the plan's other regions, `Rule::PlanSmemFits`.)
    #[error("the tiles of set `{set}` up to `{member}`, with the base-alignment slack, need {bytes} B of dynamic shared memory; a block on {target} has at most {limit} B")]
    TileSetTooLarge {
        set: String,
        member: String,
        bytes: u64,
        limit: u64,
        target: crate::Arch,
    },
    /// A pipeline's consumers disagree with the source's warp roles: released in the roles'
    /// consumer unit but with another count (beside one warp roles), or by more consumer
    /// threads than any warp roles of the source has (the empty barriers would wait for
    /// arrivals no thread makes), or taken in turn by other than one of two or more consumers.
    #[error(
        "pipeline `{pipeline}` is released by {consumers} ({threads} threads) but warp roles `{roles}` have consumers {roles_consumers} ({} threads): {why}",
        32 * roles_consumers.warps()
    )]
    ConsumersDisagree {
        pipeline: String,
        /// `warpgroups(2)`.
        consumers: String,
        threads: u64,
        roles: String,
        /// The roles' consumers: `warps(4)`.
        roles_consumers: crate::pipeline::RoleWarps,
        why: &'static str,
    },
    /// The plan given to [`wgmma_exercise_body`] is not one it can run on
    /// ([`wgmma_exercise_plan`] declares one that is).
    #[error("kernel plan `{plan}` {problem}: the wgmma exercise needs tile set `{set}` of members `a` (an A operand tile) and `b` (a B operand tile) on one warpgroup (128 threads); render::wgmma_exercise_plan declares it")]
    WgmmaExercisePlan {
        plan: String,
        set: String,
        problem: &'static str,
    },
}

impl RenderError {
    /// The rule a refused name breaks, where there is one.
    pub fn rule(&self) -> Option<crate::Rule> {
        match self {
            RenderError::GeneratedName { .. } => Some(crate::Rule::GeneratedNameClash),
            RenderError::InvalidName { .. } => Some(crate::Rule::NameIsIdentifier),
            _ => None,
        }
    }
}

/// Every name `kind` `name` becomes at namespace scope (structs, functions, macros), entered
/// into `globals` as taken by `by`: the first already taken comes back as a
/// [`RenderError::NameTaken`] (tiles `a` and `encode_a` both give a `tma_encode_a`).
pub(super) fn take_global_names(
    globals: &mut BTreeMap<String, String>,
    what: &'static str,
    kind: crate::ident::NameKind,
    name: &str,
    by: String,
) -> Result<(), RenderError> {
    for g in crate::ident::generated_names(kind, name) {
        if !g.global {
            continue;
        }
        match globals.get(&g.ident) {
            Some(first) if *first != by => {
                return Err(RenderError::NameTaken {
                    what,
                    name: name.to_string(),
                    by: format!("{first} gives the generated CUDA a `{}` too", g.ident),
                });
            }
            Some(_) => {}
            None => {
                globals.insert(g.ident, by.clone());
            }
        }
    }
    Ok(())
}

/// The prelude every translation unit starts with (include-guarded, so it may appear twice):
/// the base types and helpers, then what the tiles' coordinate structs need, then the helpers
/// over several tiles.
pub fn prelude() -> String {
    prelude_checked().unwrap_or_else(|e| format!("#error \"tma prelude: {e}\"\n"))
}

/// A rule's or helper's name and device code.
#[derive(Serialize)]
struct DeviceCode {
    name: String,
    code: u32,
}

/// The context of the prelude and the parts after it (`shapes`, `kernel`, `wgmma`).
#[derive(Serialize)]
struct PreludeContext {
    debug_timeout_ns: u64,
    wait_timeout_ns: u64,
    device_rules: Vec<DeviceCode>,
    device_helpers: Vec<DeviceCode>,
    tensor_map_bytes: usize,
    tensor_map_words: usize,
    tensor_map_align: usize,
    max_tx_bytes: u64,
    group_flag: String,
    group_listed: u32,
    wgmma_types: Vec<&'static str>,
    ex2_polys: Vec<wgmma::Ex2PolyCode>,
    ex2_poly_lo: String,
    ex2_poly_hi: String,
    ex2_poly_shifter: String,
}

fn prelude_checked() -> Result<String, RenderError> {
    let codes = |entries: Vec<(String, u32)>| -> Vec<DeviceCode> {
        entries
            .into_iter()
            .map(|(name, code)| DeviceCode { name, code })
            .collect()
    };
    let ctx = PreludeContext {
        debug_timeout_ns: DEBUG_TIMEOUT_NS,
        wait_timeout_ns: WAIT_TIMEOUT_NS,
        device_rules: codes(
            crate::rules::Rule::DEVICE_CHECKED
                .iter()
                .map(|(r, c)| (format!("{r:?}"), *c))
                .collect(),
        ),
        device_helpers: codes(
            crate::rules::Helper::ALL
                .iter()
                .map(|(h, c)| (format!("{h:?}"), *c))
                .collect(),
        ),
        tensor_map_bytes: TENSOR_MAP_BYTES,
        tensor_map_words: TENSOR_MAP_BYTES / 8,
        tensor_map_align: TENSOR_MAP_ALIGN,
        max_tx_bytes: MAX_TX_BYTES,
        group_flag: format!("{GROUP_TILE_ID_FLAG:#x}"),
        group_listed: GROUP_LISTED_TILES,
        wgmma_types: wgmma_type_names(),
        ex2_polys: wgmma::ex2_polys(),
        ex2_poly_lo: wgmma::ptx_f32(crate::wgmma::registers::EX2_POLY_LO),
        ex2_poly_hi: wgmma::ptx_f32(crate::wgmma::registers::EX2_POLY_HI),
        ex2_poly_shifter: wgmma::ptx_f32(crate::wgmma::registers::EX2_POLY_SHIFTER),
    };
    let mut out = render("prelude.cuh.tera", &ctx)?;
    for part in ["shapes.cuh.tera", "kernel.cuh.tera", "wgmma.cuh.tera"] {
        out.push('\n');
        out.push_str(&render(part, &ctx)?);
    }
    Ok(out)
}

/// A fixed corpus of valid specs covering ranks 1-5, every sm_90 swizzle, repeats, element
/// strides, interleave, dtype sizes 1/2/4/8 and the Mirage MPK seed. The snapshot tests and
/// the NVRTC compile test (root package) render every entry.
pub mod corpus {
    use crate::operand::{Major, Operand};
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
            // wgmma operands (tma_core::wgmma): DeepGEMM's A (128 x 64 bf16, K-major, 128B).
            TileSpec::new("wg_a_bf16_k", DType::BF16, [4096, 4096], [128, 64])
                .dim_names(["M", "K"])
                .swizzle(Swizzle::B128)
                .wgmma(Operand::A, Major::K),
            // B, N-major: K x N = 64 x 128, two 128-byte swizzle atoms along N.
            TileSpec::new("wg_b_bf16_mn", DType::BF16, [4096, 4096], [64, 64])
                .dim_names(["K", "N"])
                .swizzle(Swizzle::B128)
                .repeat([1, 2])
                .wgmma(Operand::B, Major::MN),
            // A, M-major f16 with the 32B swizzle: four 16-wide atoms make M = 64.
            TileSpec::new("wg_a_f16_mn", DType::F16, [1024, 1024], [32, 16])
                .dim_names(["K", "M"])
                .swizzle(Swizzle::B32)
                .repeat([1, 4])
                .wgmma(Operand::A, Major::MN),
            // B, N-major f16 without swizzle: 16-byte rows, N = 8 boxes of 8.
            TileSpec::new("wg_b_f16_mn_none", DType::F16, [1024, 1024], [32, 8])
                .dim_names(["K", "N"])
                .repeat([1, 8])
                .wgmma(Operand::B, Major::MN),
            // B, tf32 K-major without swizzle: core-matrix columns of 4, K = 16 (two k8).
            TileSpec::new("wg_b_tf32_k_none", DType::TF32, [1024, 1024], [64, 4])
                .dim_names(["N", "K"])
                .repeat([1, 4])
                .wgmma(Operand::B, Major::K),
            // fp8: A e5m2 and B e4m3 (N = 256), K-major, 64B swizzle.
            TileSpec::new("wg_a_e5m2_k", DType::E5M2, [1024, 1024], [64, 64])
                .dim_names(["M", "K"])
                .swizzle(Swizzle::B64)
                .wgmma(Operand::A, Major::K),
            TileSpec::new("wg_b_e4m3_k", DType::E4M3, [1024, 1024], [256, 64])
                .dim_names(["N", "K"])
                .swizzle(Swizzle::B64)
                .wgmma(Operand::B, Major::K),
        ]
    }

    /// Pairs of the corpus's operand tiles (A name, B name) that one wgmma takes: the same
    /// K, types that pair. The NVRTC test compiles the wgmma exercise (`wgmma_exercise_body`) for each.
    pub fn operand_pairs() -> Vec<(&'static str, &'static str)> {
        vec![
            ("wg_a_bf16_k", "wg_b_bf16_mn"),
            ("wg_a_f16_mn", "wg_b_f16_mn_none"),
            ("wg_a_e5m2_k", "wg_b_e4m3_k"),
        ]
    }

    /// Every spec of [`specs`], validated. A spec that fails validation is left out (and
    /// the render tests check that none is).
    pub fn corpus() -> Vec<ValidSpec> {
        specs().iter().filter_map(|s| validate(s).ok()).collect()
    }
}

pub use corpus::corpus;
