//! The tile declaration syntax of `tma`, as a plain library: parsing and checking, shared by
//! the proc macros (`tma-macros`, whose entry points stay thin) and the `tma` command line,
//! so both accept the same declarations and report the same errors at the same tokens.
//!
//! One direction: [`parse`] (token shapes) -> [`check`] (spec, validation, rendered CUDA,
//! the derive's shared-memory layout; every error, spanned). [`errors`] accumulates errors.
//! Expansion (Rust code generation) stays in `tma-macros`.

pub mod check;
pub mod errors;
pub mod parse;
