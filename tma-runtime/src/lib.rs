//! Runtime of `tma`: finding CUDA, NVRTC JIT with caches, tensor maps, launch.
//!
//! Two layers, one way:
//!
//! | module | job | needs | uses |
//! | --- | --- | --- | --- |
//! | [`compile`] | source -> [`Compiled`] (NVRTC, options, in-process and disk caches) | libnvrtc | leaves |
//! | [`driver`] | [`Compiled`] -> [`Module`], [`Kernel`], [`Launch`]; [`TensorMap`]; hang records | libcuda, a GPU | [`compile`], leaves |
//! | [`tune`] | candidates -> the fastest, timed and kept per problem and device on disk | libnvrtc, libcuda, a GPU | [`compile`], [`driver`] |
//! | [`timeline`] | a module's per-role timeline: its buffer, the events read back, Chrome trace JSON, SVG | libcuda, a GPU (decoding and pictures: nothing) | [`driver`], leaves |
//! | [`cuda_libs`], [`error`] | finding the libraries; the one error type | | nothing here |
//!
//! The compile layer imports nothing of the driver, so everything that only compiles (build
//! scripts, CI without a GPU, cache warm-up) runs where there is no libcuda. The items users
//! need are re-exported here: `tma_runtime::{Compiler, Module, ...}`.
//!
//! # Finding CUDA ([`cuda_libs`])
//! cudarc panics when it cannot `dlopen` libcuda or libnvrtc; this crate looks first and
//! returns [`Error::CudaLibraryMissing`] listing every place it tried and what to do.
//! [`nvrtc_available`] needs no GPU; [`gpu_available`] describes device 0.
//!
//! ```no_run
//! # fn main() -> Result<(), tma_runtime::Error> {
//! let nvrtc = tma_runtime::nvrtc_available()?; // e.g. 13.0 from $TMA_NVRTC_PATH
//! println!("NVRTC {:?} at {}", nvrtc.version, nvrtc.location);
//! let gpu = tma_runtime::gpu_available()?;     // needs libcuda and a device
//! println!("{} (sm {:?}) -> {:?}", gpu.name, gpu.compute_capability, gpu.arch);
//! # Ok(()) }
//! ```
//!
//! # Compiling ([`compile`]), no GPU needed
//! ```no_run
//! use tma_core::Arch;
//! use tma_runtime::{CompileOptions, Compiler, Source};
//! # fn main() -> Result<(), tma_runtime::Error> {
//! let compiler = Compiler::global()?; // configured from TMA_JIT_* / TMA_CACHE_DIR
//! let source = Source::new("extern \"C\" __global__ void k(int* p) { *p = 1; }");
//! let opts = CompileOptions::new(Arch::Sm90a).debug_waits(true).line_info(true);
//! let out = compiler.compile_source(&source, &opts)?; // Arc<Compiled>
//! assert!(out.cubin.starts_with(b"\x7fELF") && out.ptx.contains(".entry k"));
//! # Ok(()) }
//! ```
//! A compile error is [`Error::Compile`]: NVRTC's log, then the source around each line its
//! errors report (3 lines each side, numbered as the log counts lines: after a `#line` of
//! `KernelSource::body_at`, in the user's file; the reported lines marked `>`). The whole
//! numbered unit is its `numbered_source` field, and its message with `TMA_FULL_SOURCE=1`.
//! [`Compiled::resources`] gives a kernel's registers, spills, local and static shared memory
//! as ptxas allocated them for the CUBIN ([`KernelResources`]; NVRTC runs ptxas with `-v`).
//! Hold a [`Source`] on hot paths: it is hashed once, and a cached compile is then a map
//! lookup (well under a microsecond). [`Compiler::compile`] takes a `&str`: text at an
//! address it compiled from before is compared with the cached text (about 0.5 us for 40 KB),
//! other text is hashed (a few microseconds for a 50 KB source).
//!
//! Caches: in-process (source fingerprint + options), then on disk: one content-addressed
//! file per [`compile::CacheKey`] (source, NVRTC args and arch, NVRTC version, crate version,
//! cache format), written to a temp file and renamed (safe across processes), checksummed (a
//! corrupt file is ignored and rebuilt), holding its key's text (a load compares it: a
//! renamed or colliding file is a miss); a failed write is a warning on stderr.
//! [`Compiler::precompile`] fills both ahead of time, in parallel (the `tma precompile`
//! command does the same from a shell); [`Compiler::stats`] counts NVRTC compiles and disk
//! hits (a warm start shows no compile); [`compile::DiskCache`] lists, clears and prunes.
//!
//! | variable | effect |
//! | --- | --- |
//! | `TMA_NVRTC_PATH` | libnvrtc (file or directory); when set, nothing else is tried |
//! | `TMA_LIBCUDA_PATH` | libcuda (file or directory); likewise |
//! | `TMA_CACHE_DIR` | disk cache (default `$XDG_CACHE_HOME/tma` or `~/.cache/tma`) |
//! | `TMA_JIT_NO_CACHE=1` | no in-process or disk cache |
//! | `TMA_JIT_DEBUG=1` | print NVRTC options, compile time, disk hits |
//! | `TMA_JIT_DUMP=dir` | write `.cu`, `.ptx`, `.cubin` (`cuobjdump -sass`), `.log`, `.args` |
//! | `TMA_FULL_SOURCE=1` | a compile error shows the whole numbered source, not the lines around its errors |
//! | `TMA_REQUIRE_GPU=1` | the workspace's GPU tests fail instead of skipping (`tma-test-support`) |
//! | `TMA_REQUIRE_NVRTC=1`, `CI=true` | its NVRTC tests fail instead of skipping |
//!
//! # Tensor maps and launch ([`driver`])
//! ```no_run
//! use cudarc::driver::CudaContext;
//! use tma_core::{validate, Arch, DType, TileSpec};
//! use tma_runtime::{CompileOptions, Compiler, LaunchConfig, Module, Source, TensorMap};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let cuda_source = String::new();
//! let ctx = CudaContext::new(0)?;
//! let stream = ctx.default_stream();
//! let spec = TileSpec::new("a", DType::BF16, [4096, 1024], [64, 64]);
//! let bound = validate(&spec)?.bound().ok_or("runtime dims: use ValidSpec::bind")?;
//! let a = stream.alloc_zeros::<half::bf16>(4096 * 1024)?;
//! // Element size, base alignment and length are checked before the driver call.
//! let map = TensorMap::new(&bound, &a)?;
//! let options = CompileOptions::new(Arch::Sm90a).debug_waits(true);
//! // Compiles (cached), loads (shared per context while `module` lives).
//! let module = Module::compile_and_load(&ctx, Compiler::global()?, &Source::new(cuda_source),
//!     &options)?;
//! let kernel = module.kernel("my_kernel")?;
//! let cfg = LaunchConfig::new(&stream, (132, 1, 1), (384, 1, 1))
//!     .dynamic_smem(160 * 1024) // > 48 KB: opted in automatically
//!     .cluster((2, 1, 1));      // cuLaunchKernelEx with the cluster attribute
//! let mut out = stream.alloc_zeros::<f32>(1024)?;
//! // SAFETY: my_kernel(const __grid_constant__ CUtensorMap, float*).
//! unsafe { kernel.launch_builder(&cfg).arg(&map).arg(&mut out).launch_and_sync() }?;
//! # Ok(()) }
//! ```
//! Before the driver sees a launch, the arguments' sizes are checked against the kernel's
//! parameters (`cuFuncGetParamInfo`: [`Error::ArgumentCount`], [`Error::ArgumentSize`]) and
//! the shape against the hardware's limits. A source given with its typed description
//! ([`Source::kernel`]; never read out of the text or PTX) adds: a plan kernel's launch must be
//! its plan's ([`Kernel::plan_config`], [`Error::PlanLaunch`]); a kernel without a plan must
//! give the largest tile the source holds outside its plans room with its alignment slack
//! ([`Kernel::min_dynamic_smem`], [`Error::DynamicSmemTooSmall`];
//! [`LaunchConfig::unchecked_dynamic_smem`] for a kernel that keeps no tile there) and fit
//! one of those pipelines ([`Error::PipelineLaunch`]; [`LaunchConfig::unchecked_pipelines`]).
//! [`TensorMap::new`] takes a buffer whose element type carries the map's data type
//! ([`Error::ElementTypeMismatch`] otherwise; [`TensorMap::new_raw_bits`] for raw bits).
//! [`Module::compile_and_load`] shares one loaded module per (context, compile) among the
//! callers that hold it, and keeps none alive itself: when the last [`Module`] / [`Kernel`]
//! handle and the last `Arc<CudaContext>` go, the context goes. [`Module::load`] loads a
//! [`Compiled`] without sharing.
//!
//! [`TensorMap`] is `#[repr(transparent)]` over cudarc's `CUtensorMap` and goes to the kernel
//! by value. [`TensorMapArray`] uploads many maps into global memory for kernels that index
//! them (`prefetch.tensormap` + `fence.proxy.tensormap::generic.acquire`).
//!
//! # Hangs become errors
//! Every wait of tma's generated helpers is bounded in debug builds (`TMA_DEBUG_TIMEOUT_NS`,
//! 1 s), and in release builds that opt in with [`CompileOptions::bounded_waits`]
//! (`TMA_WAIT_TIMEOUT_NS`, 10 s; off by default: the bound costs up to ~15% of a GEMM's
//! throughput). Such a module gets a pinned, device-mapped [`HangRecord`] whose address
//! goes into its `tma_debug_record` global before any launch. A wait that gives up writes
//! the record and traps; the failed launch or synchronisation ([`Launch::launch_and_sync`],
//! [`Module::synchronize`]) then returns [`Error::BarrierTimeout`] naming the tile (from the
//! source's typed description, [`Source::kernel`]; its id for text alone), block, thread,
//! barrier, parity, expected bytes and how long it waited.
//! **After a trap the CUDA context is unusable** (every later call fails): report the error
//! and start a fresh process. Run such tests alone (`#[ignore]` + `--ignored`).
//!
//! # CUDA graphs
//! Launches on a stream captured with [`Capture`] record into a graph (maps, by value, are
//! copied into its nodes). What a capture cannot take is refused by name before the driver
//! ([`Error::Capture`]): compiling and loading modules (do it before: warm first),
//! synchronising, uploading map arrays; [`driver::capture`] has the reasoning, operation by
//! operation.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod compile;
pub mod cuda_libs;
pub mod driver;
pub mod error;
mod progress;
pub mod timeline;
pub mod tune;

pub use compile::{
    parse_ptxas_report, CompileOptions, CompileStats, Compiled, Compiler, JitConfig,
    KernelResources, Source,
};
pub use cuda_libs::{gpu_available, nvrtc_available, GpuInfo, NvrtcInfo};
pub use driver::{
    check_plan_launch, ByValue, Capture, HangRecord, Kernel, KernelArg, Launch, LaunchConfig,
    Module, TensorMap, TensorMapArray, TmaElement,
};
pub use error::{CuResult, Error};
