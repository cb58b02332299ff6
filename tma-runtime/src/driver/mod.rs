//! The driver layer: what the compile layer produced, on a GPU. Needs libcuda and a device.
//! It may use [`crate::compile`]; the compile layer never uses it.
//!
//! - [`Module`]: a [`Compiled`](crate::Compiled) loaded into a context, with its hang record
//!   when compiled with debug waits; [`Kernel`]: one of its functions.
//! - [`LaunchConfig`] and [`Launch`]: grid, block, dynamic shared memory (opted in above
//!   48 KB), clusters (`cuLaunchKernelEx`), typed arguments ([`KernelArg`], [`ByValue`]).
//!   Checked on the host first: the arguments' sizes against the kernel's parameters, the
//!   dynamic shared memory against the source's tiles (`checks`).
//! - [`TensorMap`], [`TensorMapArray`]: `CUtensorMap`s encoded from a validated, bound spec
//!   and a device buffer, checked before the driver sees them.
//! - [`HangRecord`]: what a debug wait that gave up wrote; it becomes
//!   [`Error::BarrierTimeout`](crate::Error::BarrierTimeout).
//! - [`Capture`]: launches recorded into a CUDA graph; what a capture cannot take (a module
//!   load, a synchronisation) refused by name ([`capture`]).

mod cache;
pub mod capture;
mod checks;
mod cu_enums;
mod hang;
mod launch;
mod module;
mod plan;
mod tensor_map;

pub use capture::{is_capturing, Capture, CaptureOp};
pub use hang::{HangRecord, DEBUG_RECORD_SYMBOL};
pub use launch::{check_launch_shape, ByValue, KernelArg, Launch, LaunchConfig};
pub use module::{Kernel, Module, DEFAULT_DYNAMIC_SMEM_LIMIT, MAX_PORTABLE_CLUSTER};
pub use plan::check_plan_launch;
pub use tensor_map::{
    check_buffer, check_buffer_bits, encode_args, encode_im2col_args, TensorMap, TensorMapArray,
    TmaElement,
};
