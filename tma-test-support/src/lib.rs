//! Test scaffolding of the tma workspace, kept out of the libraries' public items:
//!
//! - [`testgen`]: a deterministic RNG and random valid specs / wgmma operand cases for the
//!   property and GPU tests;
//! - [`nvcc`]: nvcc with the CUDA headers, for tests that build generated headers as a C++
//!   user does;
//! - `skip` (feature `runtime`): skip GPU, NVRTC and CUDA-tool tests visibly, or fail them
//!   when the environment requires the hardware (`TMA_REQUIRE_GPU`, `TMA_REQUIRE_NVRTC`,
//!   `CI`), and `cuobjdump -sass` (or other cuobjdump output) of a CUBIN;
//! - `jit` (feature `runtime`): a compiler caching in a test's own folder.
//!
//! Not published (`publish = false`): the crates name it as a path dev-dependency without a
//! version, which `cargo package` leaves out of their packages.
#![forbid(unsafe_code)]

#[cfg(feature = "runtime")]
pub mod jit;
pub mod nvcc;
#[cfg(feature = "runtime")]
pub mod skip;
pub mod testgen;

#[cfg(feature = "runtime")]
pub use skip::{require_gpu_or_skip, require_nvrtc_or_skip, require_tool_or_skip};
