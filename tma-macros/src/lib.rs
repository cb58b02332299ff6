//! Proc macros of `tma`: `tma_1d!` .. `tma_5d!` declare one checked tile each, `tma_im2col!`
//! one checked im2col tile;
//! `#[derive(TmaTiles)]` declares one tile per `#[tma(..)]` field of a struct;
//! `tma_pipeline!` declares a ring of stages over inline tiles, `tma_warp_roles!` a
//! warp-specialized block's roles, `tma_kernel!` a kernel plan (its shared memory and launch).
//!
//! The checks are `tma_core::validate`, run at expansion time: the same function the
//! runtime calls. Every finding points at the token that caused it. See the `tma` crate
//! for the syntax and the generated API (`tma::Tile`, `tma::TileInfo`).
//!
//! One direction: `parse` (token shapes) -> `check` (spec, validation, rendered CUDA,
//! the derive's shared-memory layout; every error, spanned) -> `expand` (generated code,
//! which cannot fail; `fallback` on error). `parse` and `check` live in the plain library
//! `tma-syntax`, which the `tma` command line shares; `paths` is the `::tma::__private`
//! path both `expand` and `fallback` generate.

mod expand;
mod fallback;
mod paths;

use tma_syntax::{check, parse};

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// `syn::parse_macro_input!` behind tma-syntax's limits on untrusted tokens (nesting depth,
/// length: `parse::parse_bounded`), so a declaration nested 100,000 deep is an error at its
/// bracket, not a stack overflow.
macro_rules! parse_macro_input {
    ($input:ident as $ty:ty) => {
        match parse::parse_bounded::<$ty>(proc_macro2::TokenStream::from($input)) {
            Ok(parsed) => parsed,
            Err(e) => return e.to_compile_error().into(),
        }
    };
}

macro_rules! tile_macro {
    ($($(#[$doc:meta])* $name:ident => $rank:literal,)*) => {$(
        $(#[$doc])*
        #[proc_macro]
        pub fn $name(input: TokenStream) -> TokenStream {
            let decl = parse_macro_input!(input as parse::TileDecl);
            expand::tile_macro($rank, stringify!($name), decl).into()
        }
    )*};
}

tile_macro! {
    /// A rank-1 tile. See [`tma_3d!`] for the syntax.
    tma_1d => 1,
    /// A rank-2 tile. See [`tma_3d!`] for the syntax.
    tma_2d => 2,
    /// A rank-3 tile: a unit struct (deriving `Clone`, `Copy`, `Debug`, `Default`,
    /// `PartialEq`, `Eq`, `Hash`) implementing `tma::Tile`, checked at compile time.
    ///
    /// ```text
    /// tma_3d! {
    ///     pub DeformValue: f16,                  // type (vis, attrs, docs) and dtype
    ///     global = [H = 94, W = 162, C = 32],    // outer -> inner; `H = _` / `_`: run time
    ///     boxed = [2, 2, 32],
    ///     strides = [10368, 64, 1],              // optional, elements; `_`: run time
    ///     element_strides = [1, 1, 1],           // optional
    ///     swizzle = none,                        // none|32|64|128|128b_atom_32b|..; or mpk_b = 0..3
    ///     interleave = none,                     // none|16|32: the inner dim then counts
    ///                                            // 16/32-byte chunks, dim 1's box is 1
    ///     l2_promotion = 128,                    // none|64|128|256
    ///     oob_fill = zero,                       // zero|nan
    ///     repeat = [1, 1, 1],                    // boxes per call along each dim
    ///     smem_stride = 4096,                    // elements between repeated boxes
    ///     target = sm_90a,                       // sm_90a|sm_100a|sm_120a
    ///     name = "deform_value",                 // optional: the CUDA name (default: snake case)
    /// }
    /// ```
    tma_3d => 3,
    /// A rank-4 tile. See [`tma_3d!`] for the syntax.
    tma_4d => 4,
    /// A rank-5 tile. See [`tma_3d!`] for the syntax.
    tma_5d => 5,
}

/// An im2col tile (TMA's im2col mode, `cuTensorMapEncodeIm2col`; docs/IM2COL.md): a unit
/// struct (deriving what the tile macros' types derive) implementing `tma::Im2colTile`, checked
/// at compile time by `tma_core::validate_im2col`, every finding at its token. The keys are
/// the `Im2colSpec` fields; those shared with [`tma_3d!`] read as there.
///
/// ```text
/// tma_im2col! {
///     pub Act: bf16,                             // type (vis, attrs, docs) and dtype
///     global = [N = _, H = 56, W = 56, C = 64],  // NWC / NHWC / NDHWC, outer -> inner; `_`: run time
///     channels_per_pixel = 64,                   // channels of each pixel one load takes (the box of C)
///     pixels_per_column = 128,                   // pixels one load takes: the rows in shared memory
///     lower_corner = [H = -1, W = -1],           // optional, spatial dims (user order); default 0
///     upper_corner = [-1, -1],                   // optional; the box is [lower, extent + upper)
///     element_strides = [1, 1],                  // optional: the traversal (convolution) strides
///     strides = [_, 3584, 64, 1],                // optional, elements; `_`: run time
///     swizzle = 128,                             // none|32|64|128
///     l2_promotion = 128,                        // none|64|128|256
///     oob_fill = zero,                           // zero|nan
///     target = sm_90a,
///     name = "act",                              // optional: the CUDA name (default: snake case)
/// }
/// ```
#[proc_macro]
pub fn tma_im2col(input: TokenStream) -> TokenStream {
    let decl = parse_macro_input!(input as parse::TileDecl);
    expand::im2col::im2col_macro(decl).into()
}

/// One tile per `#[tma(..)]` field of a struct with named fields, checked at compile time.
///
/// The attribute takes the keys of [`tma_3d!`] (`global`, `boxed`, `strides`, `swizzle`,
/// ..), plus `dtype = ..` and the flags `load` / `store` (at least one; a field
/// with neither is an error). The field's type
/// holds the tile's run-time shape: it implements `tma::TileArg` (`[u64; N]`, `Vec<u64>`,
/// `&[u64]`, `tma::Strided`). Every field is checked, and all their errors are reported
/// together.
///
/// ```text
/// #[derive(TmaTiles)]
/// struct Attention<'a> {
///     #[tma(dtype = bf16, global = [S = _, D = 64], boxed = [64, 64], swizzle = 128, load)]
///     q: &'a [u64],
///     #[tma(dtype = f32, global = [S = _, D = 64], boxed = [64, 64], store)]
///     o: [u64; 2],
///     scale: f32, // no `#[tma]`: not a tile
/// }
/// ```
///
/// It generates one inherent `impl` with these items, each listing the tiles in field order
/// (the kernel parameter order); the types are `tma`'s:
///
/// | Item | What it is |
/// |---|---|
/// | `const TILES: &'static [TileInfo]` | each tile: field, name, CUDA helper, map parameter, role, bytes, shared-memory offset |
/// | `const SMEM_BYTES: u64` | shared memory all tiles span, from a base aligned to `SMEM_ALIGN` |
/// | `const SMEM_ALIGN: u64` | the largest tile alignment |
/// | `const CUDA_PARAMS: &'static str` | `const __grid_constant__ CUtensorMap <field>_map, ..` |
/// | `const CUDA_HELPERS: &'static str` | the CUDA helpers `tma_<struct>_<field>` of every tile, then the tile set struct |
/// | `const CUDA_NAME: &'static str` | the tile set struct `tma_<struct>`: per field the tile as a member type and its `OFFSET_<field>`, `SMEM_BYTES`, `SMEM_ALIGN` |
/// | `const CUDA_PARAMS_MACRO: &'static str` | `TMA_<STRUCT>_PARAMS`, the macro holding `CUDA_PARAMS` |
/// | `fn kernel_source() -> KernelSource` | the prelude, the tiles' helpers and the set struct: add the kernel with `.body(..)` |
/// | `fn cuda_params() -> &'static str` | `CUDA_PARAMS` |
/// | `fn cuda_helpers() -> &'static str` | `CUDA_HELPERS` |
/// | `fn smem_layout() -> SmemLayout` | the tiles' layout (`tma::smem::SmemLayout`): the offsets of `TILES`, `SMEM_BYTES` and `SMEM_ALIGN` together |
/// | `fn tile_specs() -> Vec<TileSpec>` | the declared specs |
/// | `fn valid_specs() -> &'static [ValidSpec]` | the validated specs (validated at compile time, computed once) |
/// | `fn bound_specs(&self) -> Result<Vec<BoundSpec>, SpecErrors>` | each tile bound to its field's run-time shape |
/// | `fn encode_args(&self) -> Result<Vec<EncodeArgs>, SpecErrors>` | the `cuTensorMapEncodeTiled` arguments of each tile |
/// | `fn tensor_maps(&self, buffers: &[&dyn TileBuffer]) -> Result<Vec<TensorMap>, runtime::Error>` | one `CUtensorMap` per tile, encoded over `buffers[i]` |
///
/// A validation warning becomes a deprecation warning at its token. A rejected struct gets
/// the errors and the same items with empty values, so its uses add no errors of their own.
#[proc_macro_derive(TmaTiles, attributes(tma))]
pub fn derive_tma_tiles(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}

/// A pipeline: a ring of shared-memory stages, each loading the tiles declared inline with
/// the tile macros' own syntax, checked at compile time (`tma_core::pipeline`'s rules: stage
/// count, stages that fit beside `reserve_smem` on the target, consumers, cluster shape,
/// multicast). Generates each tile's type (as its tile macro does) and a unit struct
/// implementing `tma::Pipeline`.
///
/// ```text
/// tma_pipeline! {
///     pub GemmRing,                       // type (vis, attrs, docs)
///     stages = 4,
///     consumers = warpgroups(2),          // threads(n) | warps(n) | warpgroups(n)
///     cluster = [2, 1, 1],                // optional, default [1, 1, 1]
///     reserve_smem = 32768,               // optional: the kernel's other shared memory
///     target = sm_90a,                    // optional; tiles without a target take it
///     name = "gemm_ring",                 // optional: the CUDA name (default: snake case)
///     in_turn = false,                    // optional; true: each stage taken by one consumer
///                                         // of the warp roles (ping-pong): consumers = its unit
///     tiles = {
///         a: tma_2d! { pub GemmA: bf16, global = [M = _, K = _], boxed = [128, 64], swizzle = 128 },
///         b: tma_2d! { pub GemmB: bf16, global = [N = _, K = _], boxed = [64, 64], swizzle = 128,
///                      repeat = [2, 1] } multicast(x),   // boxes split over cluster axis x
///     },
/// }
/// ```
#[proc_macro]
pub fn tma_pipeline(input: TokenStream) -> TokenStream {
    let decl = parse_macro_input!(input as parse::PipelineDecl);
    expand::pipeline::pipeline(decl).into()
}

/// Warp roles: producer and consumer warps (or warpgroups), optionally the registers each
/// keeps after `setmaxnreg` (checked against the register file; whole warpgroups only) and
/// named barriers (ids 1, 2, ..; a per-consumer barrier takes one id per consumer), checked at
/// compile time. Generates a unit struct implementing `tma::Roles`.
///
/// ```text
/// tma_warp_roles! {
///     pub GemmRoles,
///     producer_warpgroups = 1,            // optional, default 1 (or producer_warps = n)
///     producer_regs = 40,                 // optional: after setmaxnreg.dec
///     consumer_warpgroups = 2,            // or consumer_warps = n
///     consumer_regs = 232,                // with producer_regs: after setmaxnreg.inc
///     blocks_per_sm = 1,                  // optional, default 1 (__launch_bounds__)
///     barriers = [epilogue = 256, epi = per_consumer(128)],  // optional: name = threads
///     name = "gemm",                      // optional: the CUDA name (default: snake case)
/// }
/// tma_warp_roles! {
///     pub EpiRoles,
///     producer_warps = 1, consumer_warps = 4,         // 160 threads, no setmaxnreg
///     barriers = [slice = per_consumer(32)],          // sync_slice(consumer): ids 1 .. 4
/// }
/// ```
#[proc_macro]
pub fn tma_warp_roles(input: TokenStream) -> TokenStream {
    let decl = parse_macro_input!(input as parse::RolesDecl);
    expand::pipeline::roles(decl).into()
}

/// A kernel plan: the kernel's shared memory (its pipelines' rings, staging tiles beside them,
/// scratch) laid out once, and its launch (block, cluster, dynamic shared memory with the
/// alignment slack, the opt-in), checked at compile time by `tma_core::plan`'s rules. Parts
/// are named by type or declared inline with their own macros. Generates a unit struct
/// implementing `tma::Plan` (and each inline part's type).
///
/// ```text
/// tma_kernel! {
///     pub GemmKernel,                     // type (vis, attrs, docs)
///     name = "gemm",                      // optional: the kernel's name (default: snake case)
///     target = sm_90a,                    // optional; inline tiles without a target take it
///     roles = GemmRoles,                  // or tma_warp_roles! { pub GemmRoles, .. }
///     pipelines = [GemmRing],             // or tma_pipeline! { pub GemmRing, .. }; regions
///                                         // named by each pipeline's name
///     tiles = [A: GemmA],                 // optional aliases: `using A = tma_gemm_a;`
///     staging = [d: tma_2d! { pub GemmD: bf16, .. } x 2],   // or `d: GemmD x 2`; `x 1` default
///     scratch = [counters = 64 align 16], // bytes, alignment (default 16)
///     work_queues = [tiles = 4 readers warpgroups(2)],  // slots, who pops (tma::pipeline::WorkQueue)
///     block_threads = 384,                // without roles: required; with them: must agree
///     cluster = [2, 1, 1],                // optional: the pipelines' (must agree)
///     blocks_per_sm = 1,                  // optional: the roles', else 1
/// }
/// ```
#[proc_macro]
pub fn tma_kernel(input: TokenStream) -> TokenStream {
    let decl = parse_macro_input!(input as parse::KernelDecl);
    expand::kernel::kernel(decl).into()
}
