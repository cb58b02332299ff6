//! Proc macros of `tma`: `tma_1d!` .. `tma_5d!` declare one checked tile each;
//! `#[derive(TmaTiles)]` declares one tile per `#[tma(..)]` field of a struct.
//!
//! The checks are `tma_core::validate`, run at expansion time: the same function the
//! runtime calls. Every finding points at the token that caused it. See the `tma` crate
//! for the syntax and the generated API (`tma::Tile`, `tma::TileInfo`).
//!
//! One direction: `parse` (token shapes) -> `check` (spec, validation, rendered CUDA,
//! the derive's shared-memory layout; every error, spanned) -> `expand` (generated code,
//! which cannot fail; `fallback` on error). `errors` accumulates errors; `paths` is the
//! `::tma::__private` path both `expand` and `fallback` generate.

mod check;
mod errors;
mod expand;
mod fallback;
mod parse;
mod paths;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;
use syn::parse_macro_input;

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
    /// A rank-3 tile: a unit struct implementing `tma::Tile`, checked at compile time.
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

/// One tile per `#[tma(dtype = .., global = [..], boxed = [..], ..)]` field (plus the
/// `load` / `store` flags): kernel parameters, CUDA helpers, a shared-memory plan and
/// encode arguments, in field order.
#[proc_macro_derive(TmaTiles, attributes(tma))]
pub fn derive_tma_tiles(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}
