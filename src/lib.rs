//! `tma`: NVIDIA's Tensor Memory Accelerator, safe and fast.
//!
//! One declaration of a tile gives, from the same checked spec, CUDA device helpers,
//! the host code that encodes its `CUtensorMap`, and a JIT runtime that compiles and
//! launches kernels using them.
pub use tma_core as core;
pub use tma_core::*;
pub use tma_macros::*;
pub use tma_runtime as runtime;
