//! The pure core of `tma`: the tile spec, validation of every TMA rule, the one layout
//! mapping, swizzle math, a bit-exact CPU model of TMA, and CUDA rendering.
//!
//! Data flows one way: [`TileSpec`] -> [`validate()`] -> [`ValidSpec`] -> [`ValidSpec::bind`]
//! -> [`BoundSpec`] -> [`EncodeArgs`] (host) / model / rendered CUDA (device).
#![forbid(unsafe_code)]

pub mod dtype;
pub mod error;
pub mod ident;
pub mod layout;
pub mod limits;
pub mod model;
pub mod picture;
pub mod render;
pub mod rules;
pub mod size;
pub mod smem;
pub mod spec;
pub mod swizzle;
pub mod testgen;
pub mod validate;

pub use dtype::DType;
pub use error::{Field, Severity, SpecError, SpecErrors};
pub use layout::{to_tma_order, EncodeArgs};
pub use rules::Rule;
pub use size::Size;
pub use smem::{RepeatPlacement, SmemPlan};
pub use spec::{Arch, Extent, Interleave, L2Promotion, OobFill, Swizzle, TileSpec, MAX_RANK};
pub use validate::{validate, BoundSpec, ValidSpec};
