//! Runtime of `tma`: finding CUDA, NVRTC JIT with caches, tensor maps, launch.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cuda_libs;
pub mod error;
mod hash;
pub mod jit;
pub mod launch;
pub mod tensor_map;
pub mod testing;

pub use cuda_libs::{gpu_available, nvrtc_available, GpuInfo, NvrtcInfo};
pub use error::{CuResult, Error};
pub use jit::{CompileOptions, Compiled, Compiler};
pub use launch::{Kernel, Launch, LaunchConfig, Module};
pub use tensor_map::{TensorMap, TensorMapArray, TmaElement};
