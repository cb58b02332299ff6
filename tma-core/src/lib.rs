//! The pure core of `tma`: a tile declaration becomes a checked spec, its shared-memory
//! layout, the driver's encode arguments, a bit-exact CPU model of TMA, and CUDA.
//!
//! The modules, in the order data flows through them (each uses only those above it):
//!
//! | stage | module | what it holds |
//! | --- | --- | --- |
//! | declaration | [`spec`], [`dtype`], [`swizzle`], [`operand`] | [`TileSpec`] (plain data, user order) and its options; a wgmma operand's role and major-ness |
//! | arithmetic | [`size`], [`limits`], [`ident`] | checked sizes, hardware limits with sources, names |
//! | rules | [`rules`], [`error`], [`echo`] | the [`Rule`] catalogue; findings naming field, value, rule (user text cut to a length) |
//! | shared memory | [`smem`] | where a call's boxes land; a set of tiles in one block |
//! | validate | [`validate`](mod@validate) | [`validate()`] -> [`ValidSpec`] -> [`ValidSpec::bind`] -> [`BoundSpec`] |
//! | pipeline | [`pipeline`] | [`pipeline::PipelineSpec`] (stages of valid tiles) -> [`pipeline::ValidPipeline`]; warp roles; work queues ([`pipeline::WorkQueue`]) |
//! | launch | [`launch`] | a kernel launch's grid, block and cluster against the hardware's limits |
//! | operands | [`wgmma`] | a wgmma operand tile's matrix descriptors (from its [`SmemPlan`]) and a CPU model of what wgmma reads |
//! | outputs | [`encode_args`], [`model`] (and its `picture`), [`render`] | [`EncodeArgs`] in TMA order, the CPU model, generated CUDA |
//! | | [`facts`] | what a kernel source declares, typed, carried beside its text for the runtime (tiles, pipelines, plans' launches) |
//! | | [`timeline`] | what the pipeline helpers record with `TMA_TIMELINE`: the event kinds and their device codes |
//!
//! Random valid specs for the property and GPU tests live in the `tma-test-support` crate
//! (not published), not here.
#![forbid(unsafe_code)]

pub mod dtype;
pub mod echo;
pub mod encode_args;
pub mod error;
pub mod facts;
pub mod ident;
pub mod launch;
pub mod limits;
pub mod model;
pub mod operand;
pub mod pipeline;
pub mod plan;
pub mod render;
pub mod rules;
pub mod size;
pub mod smem;
pub mod spec;
pub mod swizzle;
mod templates;
pub mod timeline;
pub mod validate;
pub mod wgmma;

pub use dtype::DType;
pub use encode_args::{to_tma_order, EncodeArgs, Im2colEncodeArgs};
pub use error::{Field, Severity, SpecError, SpecErrors};
pub use operand::{Major, Operand, WgmmaOperand};
pub use rules::Rule;
pub use size::Size;
pub use smem::{RepeatPlacement, SmemPlan};
pub use spec::{
    Arch, Extent, Im2colSpec, Interleave, L2Promotion, OobFill, Swizzle, TileSpec, MAX_RANK,
};
pub use validate::{
    validate, validate_im2col, BoundIm2col, BoundSpec, MapUpdate, ValidIm2col, ValidSpec,
};
