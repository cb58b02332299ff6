//! The compile layer: CUDA source in (with its typed description when rendered,
//! [`Source::kernel`]), [`Compiled`] (PTX, CUBIN and that description, for hang reports and
//! launch checks) out. Needs libnvrtc, never libcuda or a GPU: nothing here imports the
//! driver, so a build machine, a test without a GPU, or a cache warm-up can use all of it. The driver layer
//! (`crate::driver`) loads what this layer produces; this layer knows nothing of it.
//!
//! - [`CompileOptions`]: how to compile; turned into NVRTC arguments in one place.
//! - [`Source`]: the text, hashed once, and what it declares ([`tma_core::facts`]).
//! - [`Compiler`]: NVRTC behind an in-process cache (source fingerprint + options) and a
//!   content-addressed [`DiskCache`]; [`Compiler::global`] is the process-wide one;
//!   [`Compiler::precompile`] warms both ahead of time.
//! - [`CacheKey`]: everything a compile's output depends on, in one place: the in-process and
//!   disk caches and `tma precompile` key by it.
//!
//! Environment (read once by [`JitConfig::from_env`], in the spirit of DeepGEMM's JIT):
//! - `TMA_JIT_DEBUG=1`: print the NVRTC options, compile time and cache hits to stderr.
//! - `TMA_JIT_DUMP=<dir>`: write `<key>.cu`, `.ptx`, `.cubin` (for `cuobjdump -sass`),
//!   `.log` and `.args` of every NVRTC compile into `<dir>`.
//! - `TMA_JIT_NO_CACHE=1`: no in-process or disk cache; every compile runs NVRTC.
//! - `TMA_CACHE_DIR=<dir>`: the disk cache (default `$XDG_CACHE_HOME/tma`, else `~/.cache/tma`).
//! - `TMA_FULL_SOURCE=1`: a compile error ([`crate::Error::Compile`]) shows the whole numbered
//!   source after NVRTC's log, not the lines around each error (read when the error is made).

mod compiled;
mod compiler;
mod diagnostics;
mod disk;
mod hash;
mod key;
mod nvrtc;
mod options;
mod resources;
mod source;

pub use compiled::Compiled;
pub use compiler::{default_cache_dir, CompileStats, Compiler, JitConfig, Origin, Precompiled};
pub(crate) use disk::{read_file, write_atomic};
pub use disk::{CacheEntry, DiskCache, Entry, EntryInfo, EntryState, Removed};
pub use key::{CacheKey, CACHE_FORMAT};
pub use options::CompileOptions;
pub use resources::{parse_ptxas_report, KernelResources};
pub use source::{numbered_source, Source};
