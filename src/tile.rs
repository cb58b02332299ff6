//! What the macros generate: [`Tile`] for each `tma_Nd!` declaration, and for each
//! `#[derive(TmaTiles)]` struct its [`TileInfo`] table, its [`SmemLayout`] (the one layout
//! type of `tma::smem`) and encode arguments from fields that implement [`TileArg`].
//!
//! A kernel's operands described once (the full list of generated items is in the
//! derive's documentation, [`crate::TmaTiles`]):
//!
//! ```
//! use tma::TmaTiles;
//! use tma::tile::Role;
//!
//! #[derive(TmaTiles)]
//! struct Attention {
//!     #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
//!     q: [u64; 2],
//!     #[tma(dtype = f32, global = [S = _, D = 64], boxed = [64, 64], store)]
//!     o: [u64; 2],
//! }
//!
//! # fn main() -> Result<(), tma::SpecErrors> {
//! // Shared memory: q (8 KB, 1024-aligned for the 128B swizzle), then o (16 KB).
//! assert_eq!(Attention::TILES[0].smem_offset, 0);
//! assert_eq!(Attention::TILES[1].smem_offset, 8192);
//! assert_eq!(Attention::SMEM_BYTES, 8192 + 16384);
//! assert_eq!(Attention::TILES[1].role, Role::Store);
//! // The kernel's parameters, in field order.
//! assert!(Attention::CUDA_PARAMS.starts_with("const __grid_constant__ CUtensorMap q_map"));
//! // Bound to run-time shapes: the encode arguments of each map.
//! let tiles = Attention { q: [4096, 64], o: [4096, 64] };
//! let args = tiles.encode_args()?;
//! assert_eq!(args[0].global_dim, vec![64, 4096]); // innermost first
//! # Ok(()) }
//! ```

use std::sync::OnceLock;
use tma_core::{
    Arch, BoundIm2col, BoundSpec, EncodeArgs, Im2colEncodeArgs, Im2colSpec, SpecErrors, TileSpec,
    ValidIm2col, ValidSpec,
};

/// A tile declared with `tma_1d!` .. `tma_5d!`, checked at compile time by the same
/// `tma_core::validate` the run-time path uses.
///
/// ```
/// use tma::Tile;
/// tma::tma_2d! {
///     pub Rows: bf16,
///     global = [M = _, K = 1024],
///     boxed = [64, 64],
///     swizzle = 128,
/// }
/// # fn main() -> Result<(), tma::SpecErrors> {
/// assert_eq!(Rows::TX_BYTES, 64 * 64 * 2);
/// let args = Rows::encode_args(&[4096, 1024])?;
/// assert_eq!(args.global_dim, vec![1024, 4096]); // innermost first
/// # Ok(()) }
/// ```
pub trait Tile {
    /// The tile name (snake case of the type, or `name = ".."`).
    const NAME: &'static str;
    /// The generated CUDA helper: `tma_<name>`.
    const CUDA_NAME: &'static str;
    const RANK: usize;
    /// Bytes the mbarrier must expect per helper call (repeats included).
    const TX_BYTES: u64;
    /// Shared memory one helper call spans (footprint, repeats included).
    const SMEM_BYTES: u64;
    /// Alignment the shared-memory destination needs.
    const SMEM_ALIGN: u64;
    /// Shared-memory bytes of one box.
    const BOX_BYTES: u64;
    /// The tile's CUDA helpers, rendered at compile time.
    const CUDA_SOURCE: &'static str;
    /// The architecture it targets (`target = ..`).
    const TARGET: Arch;

    /// The declared spec, field for field.
    fn spec() -> TileSpec;

    /// The validated spec, computed once on first use. The macro validated this same spec
    /// with the same `tma_core::validate` at compile time, so there is nothing left to fail.
    fn valid() -> &'static ValidSpec;

    /// Binds run-time global dims (user order, outer -> inner); static dims must agree.
    fn bind(global: &[u64]) -> Result<BoundSpec, SpecErrors> {
        Self::valid().bind(global, None)
    }

    /// Binds run-time global dims and strides (elements, user order).
    fn bind_strided(global: &[u64], strides: &[u64]) -> Result<BoundSpec, SpecErrors> {
        Self::valid().bind(global, Some(strides))
    }

    /// The `cuTensorMapEncodeTiled` arguments for a tensor of these global dims.
    fn encode_args(global: &[u64]) -> Result<EncodeArgs, SpecErrors> {
        Self::bind(global).map(|b| EncodeArgs::new(&b))
    }
}

/// An im2col tile declared with `tma_im2col!`, checked at compile time by the same
/// `tma_core::validate_im2col` the run-time path uses (docs/IM2COL.md).
///
/// ```
/// use tma::Im2colTile;
/// tma::tma_im2col! {
///     pub Act: bf16,
///     global = [N = _, H = 56, W = 56, C = 64],
///     channels_per_pixel = 64,
///     pixels_per_column = 128,
///     lower_corner = [-1, -1],
///     upper_corner = [-1, -1],
///     swizzle = 128,
/// }
/// # fn main() -> Result<(), tma::SpecErrors> {
/// assert_eq!(Act::TX_BYTES, 128 * 64 * 2);
/// let args = Act::encode_args(&[8, 56, 56, 64])?;
/// assert_eq!(args.global_dim, vec![64, 56, 56, 8]); // innermost first
/// assert_eq!(args.lower_corner, vec![-1, -1]); // W first
/// # Ok(()) }
/// ```
pub trait Im2colTile {
    /// The tile name (snake case of the type, or `name = ".."`).
    const NAME: &'static str;
    /// The generated CUDA helper: `tma_<name>`.
    const CUDA_NAME: &'static str;
    /// The tensor's rank: 3 (NWC), 4 (NHWC) or 5 (NDHWC).
    const RANK: usize;
    /// Channels each pixel contributes to one load.
    const CHANNELS_PER_PIXEL: u32;
    /// Pixels one load takes: the rows of the shared-memory tile.
    const PIXELS_PER_COLUMN: u32;
    /// Bytes the mbarrier must expect per load (filled pixels included).
    const TX_BYTES: u64;
    /// Shared memory one load spans.
    const SMEM_BYTES: u64;
    /// Alignment the shared-memory destination needs.
    const SMEM_ALIGN: u64;
    /// The tile's CUDA helpers, rendered at compile time.
    const CUDA_SOURCE: &'static str;
    /// The architecture it targets (`target = ..`).
    const TARGET: Arch;

    /// The declared spec, field for field.
    fn spec() -> Im2colSpec;

    /// The validated spec, computed once on first use (the macro validated the same spec
    /// with the same function at compile time).
    fn valid() -> &'static ValidIm2col;

    /// Binds run-time global dims (user order, outer -> inner); static dims must agree, and
    /// every bounding box must hold a position.
    fn bind(global: &[u64]) -> Result<BoundIm2col, SpecErrors> {
        Self::valid().bind(global, None)
    }

    /// Binds run-time global dims and strides (elements, user order).
    fn bind_strided(global: &[u64], strides: &[u64]) -> Result<BoundIm2col, SpecErrors> {
        Self::valid().bind(global, Some(strides))
    }

    /// The `cuTensorMapEncodeIm2col` arguments for a tensor of these global dims.
    fn encode_args(global: &[u64]) -> Result<Im2colEncodeArgs, SpecErrors> {
        Self::bind(global).map(|b| Im2colEncodeArgs::new(&b))
    }
}

/// Whether a `#[derive(TmaTiles)]` field is loaded, stored, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Load,
    Store,
    LoadStore,
}

/// One field of a `#[derive(TmaTiles)]` struct, computed at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileInfo {
    /// The Rust field.
    pub field: &'static str,
    /// The tile name: `<struct>_<field>` in snake case.
    pub name: &'static str,
    /// The CUDA helper: `tma_<name>`.
    pub cuda_name: &'static str,
    /// The kernel parameter: `<field>_map`.
    pub map_param: &'static str,
    pub role: Role,
    pub rank: usize,
    pub tx_bytes: u64,
    pub box_bytes: u64,
    /// Shared memory one helper call spans.
    pub smem_bytes: u64,
    pub smem_align: u64,
    /// Byte offset of this tile in the struct's shared-memory layout (`smem_layout()`'s
    /// `offsets`).
    pub smem_offset: u64,
}

/// Where each tile of a `#[derive(TmaTiles)]` struct lives in shared memory (its
/// `smem_layout()`): fields in order, each at the next offset its swizzle's alignment allows.
/// The same type as `tma::smem::SmemLayout`, which lays out tile sets, pipeline stages and
/// kernel plans; the struct's `TILES` (`smem_offset`), `SMEM_BYTES` and `SMEM_ALIGN` are its
/// numbers as constants.
pub use tma_core::smem::SmemLayout;

/// A `#[derive(TmaTiles)]` field's run-time shape: global dims (user order, elements)
/// and optionally strides. Implemented for `[u64; N]`, `Vec<u64>`, `[u64]`, [`Strided`]
/// and references to them; the runtime implements it for its device tensors.
pub trait TileArg {
    fn global_dims(&self) -> &[u64];
    fn strides(&self) -> Option<&[u64]> {
        None
    }
}

impl<const N: usize> TileArg for [u64; N] {
    fn global_dims(&self) -> &[u64] {
        self
    }
}
impl TileArg for [u64] {
    fn global_dims(&self) -> &[u64] {
        self
    }
}
impl TileArg for Vec<u64> {
    fn global_dims(&self) -> &[u64] {
        self
    }
}
impl<T: TileArg + ?Sized> TileArg for &T {
    fn global_dims(&self) -> &[u64] {
        (**self).global_dims()
    }
    fn strides(&self) -> Option<&[u64]> {
        (**self).strides()
    }
}

/// Global dims with explicit strides (elements, user order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Strided {
    pub dims: Vec<u64>,
    pub strides: Vec<u64>,
}

impl TileArg for Strided {
    fn global_dims(&self) -> &[u64] {
        &self.dims
    }
    fn strides(&self) -> Option<&[u64]> {
        Some(&self.strides)
    }
}

/// A device buffer a tile's `CUtensorMap` can be encoded over: a `CudaSlice<T>` or
/// `CudaView<T>` of a TMA element type. `#[derive(TmaTiles)]`'s `tensor_maps` takes one per
/// field.
pub trait TileBuffer {
    /// Encodes `bound` over this buffer (element type, alignment and length are checked
    /// before the driver is called).
    fn encode(&self, bound: &BoundSpec) -> Result<tma_runtime::TensorMap, tma_runtime::Error>;
}

impl<T: tma_runtime::TmaElement> TileBuffer for cudarc::driver::CudaSlice<T> {
    fn encode(&self, bound: &BoundSpec) -> Result<tma_runtime::TensorMap, tma_runtime::Error> {
        tma_runtime::TensorMap::new(bound, self)
    }
}

impl<T: tma_runtime::TmaElement> TileBuffer for cudarc::driver::CudaView<'_, T> {
    fn encode(&self, bound: &BoundSpec) -> Result<tma_runtime::TensorMap, tma_runtime::Error> {
        tma_runtime::TensorMap::new(bound, self)
    }
}

/// Helpers the generated code calls through `::tma::__private`.
#[doc(hidden)]
pub mod support {
    use super::*;

    /// A spec the macro accepted, validated again: the one branch of the generated code
    /// that cannot be taken, kept in this one place.
    #[allow(clippy::panic)]
    fn proven(spec: &TileSpec) -> ValidSpec {
        match tma_core::validate(spec) {
            Ok(valid) => valid,
            // Cannot happen. At expansion time the macro ran this same `tma_core::validate`
            // (the same tma-core: `tma` and `tma-macros` depend on one version, which has no
            // features) on this same spec: `spec()` is the accepted `ValidSpec::spec()`
            // written out field for field. `validate` is a pure function of the spec: no
            // clock, no environment, every size a `u64`. Reaching this arm is a bug in tma.
            Err(e) => panic!(
                "tma bug: tile `{}` passed tma_core::validate at compile time but not at run time: {e}",
                spec.name
            ),
        }
    }

    /// `Tile::valid`: the declared spec, validated once.
    pub fn valid_once(
        cell: &'static OnceLock<ValidSpec>,
        spec: fn() -> TileSpec,
    ) -> &'static ValidSpec {
        cell.get_or_init(|| proven(&spec()))
    }

    /// [`valid_once`] for every tile of a `#[derive(TmaTiles)]` struct, in field order.
    pub fn valid_once_all(
        cell: &'static OnceLock<Vec<ValidSpec>>,
        specs: fn() -> Vec<TileSpec>,
    ) -> &'static [ValidSpec] {
        cell.get_or_init(|| specs().iter().map(proven).collect())
    }

    /// The im2col spec a `tma_im2col!` accepted, validated again ([`proven`]'s twin).
    #[allow(clippy::panic)]
    fn proven_im2col(spec: &Im2colSpec) -> ValidIm2col {
        match tma_core::validate_im2col(spec) {
            Ok(valid) => valid,
            // Cannot happen, for the reasons `proven` gives: the macro ran this same
            // `validate_im2col` on this same spec at expansion time.
            Err(e) => panic!(
                "tma bug: im2col tile `{}` passed tma_core::validate_im2col at compile time but not at run time: {e}",
                spec.name
            ),
        }
    }

    /// `Im2colTile::valid`: the declared spec, validated once.
    pub fn valid_im2col_once(
        cell: &'static OnceLock<ValidIm2col>,
        spec: fn() -> Im2colSpec,
    ) -> &'static ValidIm2col {
        cell.get_or_init(|| proven_im2col(&spec()))
    }

    /// The im2col spec of a `tma_im2col!` that failed to compile (never run).
    pub fn stub_im2col_spec(name: &str) -> Im2colSpec {
        Im2colSpec::new(name, tma_core::DType::U8, [], 0, 0)
    }

    /// `Im2colTile::valid` of a `tma_im2col!` that failed to compile (never run): a fixed
    /// spec that passes.
    pub fn stub_im2col_valid() -> &'static ValidIm2col {
        static STUB: OnceLock<ValidIm2col> = OnceLock::new();
        valid_im2col_once(&STUB, || {
            Im2colSpec::new("tma_stub", tma_core::DType::U8, [1, 16, 16], 16, 16)
        })
    }

    /// Encode arguments of one tile from a field's run-time shape.
    pub fn bind_field<A: TileArg + ?Sized>(
        valids: &[ValidSpec],
        index: usize,
        arg: &A,
    ) -> Result<BoundSpec, SpecErrors> {
        let valid = valids.get(index).ok_or_else(|| SpecErrors {
            tile: format!("#{index}"),
            errors: Vec::new(),
        })?;
        valid.bind(arg.global_dims(), arg.strides())
    }

    /// The error for a `tensor_maps` call with the wrong number of buffers.
    pub fn buffer_count(tiles: usize, given: usize) -> tma_runtime::Error {
        tma_runtime::Error::InvalidLaunch {
            kernel: "tensor_maps".into(),
            reason: format!(
                "{given} buffers given for {tiles} tiles: one per #[tma] field, in field order"
            ),
        }
    }

    /// The spec of a declaration that failed to compile (never run: the crate does not
    /// build), so uses of its type do not add errors of their own.
    pub fn stub_spec(name: &str) -> TileSpec {
        TileSpec::new(name, tma_core::DType::U8, [], [])
    }

    /// `Tile::valid` of a declaration that failed to compile (never run, like
    /// [`stub_spec`]): a fixed spec that passes, so no second impossible branch is needed.
    pub fn stub_valid() -> &'static ValidSpec {
        static STUB: OnceLock<ValidSpec> = OnceLock::new();
        valid_once(&STUB, || {
            TileSpec::new("tma_stub", tma_core::DType::U8, [16], [16])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::support::*;
    use std::sync::OnceLock;
    use tma_core::{DType, TileSpec, ValidSpec};

    #[test]
    fn the_stub_spec_is_valid() {
        assert_eq!(stub_valid().spec().name, "tma_stub");
        assert_eq!(stub_im2col_valid().spec().name, "tma_stub");
    }

    fn rows() -> TileSpec {
        TileSpec::new("rows", DType::BF16, [1024, 64], [64, 64])
    }

    fn both() -> Vec<TileSpec> {
        vec![rows(), TileSpec::new("cols", DType::U8, [16], [16])]
    }

    #[test]
    fn valid_once_validates_once() {
        static ONE: OnceLock<ValidSpec> = OnceLock::new();
        let first = valid_once(&ONE, rows);
        assert!(std::ptr::eq(first, valid_once(&ONE, rows)));
        assert_eq!(first.spec(), &rows());

        static ALL: OnceLock<Vec<ValidSpec>> = OnceLock::new();
        let names: Vec<&str> = valid_once_all(&ALL, both)
            .iter()
            .map(|v| v.spec().name.as_str())
            .collect();
        assert_eq!(names, ["rows", "cols"]);
    }
}
