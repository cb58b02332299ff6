#![doc = include_str!("../README.md")]
pub use tma_core::*;
pub use tma_macros::*;
pub use tma_runtime as runtime;

mod tile;
pub use tile::{Role, SmemLayout, Strided, Tile, TileArg, TileBuffer, TileInfo};

/// What the macros' expansions name: absolute paths that do not depend on the user's
/// imports. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::tile::support::*;
    pub use crate::tile::{Role, SmemLayout, Tile, TileArg, TileBuffer, TileInfo};
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{self, Err, Ok};
    pub use std::string::String;
    pub use std::sync::OnceLock;
    pub use std::vec::Vec;
    pub use tma_core::{
        Arch, BoundSpec, DType, EncodeArgs, Extent, Interleave, L2Promotion, OobFill, SpecErrors,
        Swizzle, TileSpec, ValidSpec,
    };
    pub use tma_runtime::{Error as RuntimeError, TensorMap};
}
