#![doc = include_str!("../README.md")]

// The declaration, and the proof that it breaks no rule.
pub use kernel::Plan;
pub use pipe::{Pipeline, Roles};
pub use tile::{Im2colTile, Tile};
pub use tma_core::{validate, BoundSpec, EncodeArgs, MapUpdate, SpecErrors, TileSpec, ValidSpec};
pub use tma_core::{validate_im2col, BoundIm2col, Im2colEncodeArgs, Im2colSpec, ValidIm2col};
pub use tma_core::{Arch, DType, Swizzle};
pub use tma_macros::{
    tma_1d, tma_2d, tma_3d, tma_4d, tma_5d, tma_im2col, tma_kernel, tma_pipeline, tma_warp_roles,
    TmaTiles,
};
// Compiling and launching kernels that use it.
pub use tma_runtime::{Compiler, LaunchConfig, TensorMap};

/// What else a declaration can say, the rules it is checked against, and how its dims map
/// to the driver's order.
pub mod spec {
    pub use tma_core::encode_args::to_tma_order;
    pub use tma_core::error::{Field, Severity, SpecError};
    pub use tma_core::ident::{check_name, NameProblem};
    pub use tma_core::limits;
    pub use tma_core::operand::{Major, Operand, WgmmaOperand, WgmmaType};
    pub use tma_core::rules::Rule;
    pub use tma_core::size::Size;
    pub use tma_core::spec::{Extent, Interleave, L2Promotion, OobFill, MAX_RANK};
}

/// What a kernel source declares, typed (`SourceFacts`: tiles, pipelines, plans' launches):
/// made by `KernelSource::facts`, carried by `runtime::Source::kernel` to the runtime.
pub use tma_core::facts;
pub use tma_core::{launch, model, pipeline, plan, render, smem, wgmma};
// Inlined: a re-exported crate is otherwise one `pub use` line in rustdoc, and `cargo doc -p tma
// --no-deps` would show none of the runtime's items (Compiler, Source, Module, LaunchConfig, ...).
#[doc(inline)]
pub use tma_runtime as runtime;

/// The cudarc this crate is built with (driver, NVRTC, dynamic loading, CUDA 13.0 bindings,
/// `f16`): allocate buffers and contexts through it, and no version needs to match.
pub use cudarc;
/// The `half` this crate is built with: `half::bf16` / `half::f16` buffers carry the bf16 /
/// f16 maps.
pub use half;

pub mod kernel;
pub mod pipe;
pub mod tile;

/// What the macros' expansions name: absolute paths that do not depend on the user's
/// imports. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::kernel::support::*;
    pub use crate::kernel::{Plan, RegionInfo};
    pub use crate::pipe::support::*;
    pub use crate::pipe::{BarrierInfo, Pipeline, Roles, StageTileInfo};
    pub use crate::tile::support::*;
    pub use crate::tile::{Im2colTile, Role, SmemLayout, Tile, TileArg, TileBuffer, TileInfo};
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{self, Err, Ok};
    pub use std::string::String;
    pub use std::sync::OnceLock;
    pub use std::vec::Vec;
    pub use tma_core::operand::{Major, Operand, WgmmaOperand};
    pub use tma_core::pipeline::{
        ClusterAxis, Consumers, NamedBarrier, PipelineSpec, RegisterSplit, RoleWarps, StageTile,
        ValidPipeline, ValidWarpRoles, WarpRoles,
    };
    pub use tma_core::render::KernelSource;
    pub use tma_core::{
        Arch, BoundSpec, DType, EncodeArgs, Extent, Im2colSpec, Interleave, L2Promotion, OobFill,
        SpecErrors, Swizzle, TileSpec, ValidIm2col, ValidSpec,
    };
    pub use tma_runtime::{Error as RuntimeError, TensorMap};
}
