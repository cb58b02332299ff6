//! Loaded modules and their kernels: load a [`Compiled`] into a context, find a kernel, opt
//! it in to large dynamic shared memory and clusters, and explain a failure (hang record
//! first, else the driver's status).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};

use cudarc::driver::sys::{self, CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use tma_core::Arch;

use crate::compile::{CompileOptions, Compiled, Compiler, Source};
use crate::error::{CuResult, Error};

use super::cache::WeakCache;
use super::capture::{capturing_on_this_thread, refuse_if_capturing, CaptureOp};
use super::checks::{check_args, check_dynamic_smem, check_pipelines, kernel_needs, SmemNeed};
use super::hang::{MappedRecord, DEBUG_RECORD_SYMBOL};

/// Shared memory a block gets without opting in (48 KB): static and dynamic together.
pub const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;
/// Largest portable cluster (blocks); larger needs the non-portable attribute (max 16 on H100).
pub const MAX_PORTABLE_CLUSTER: u32 = 8;

/// Modules loaded by [`Module::compile_and_load`], per (context, [`Compiled::key`]), shared
/// while someone holds them. Keyed by the raw `CUcontext`: a live entry's module holds its
/// context, so a live entry's address names a live context, and only that one (every
/// `CudaContext::new(n)` of one device is the same primary context). Holding `Weak`s, the
/// cache keeps no module and so no context alive ([`WeakCache`]).
static LOADED: LazyLock<WeakCache<(usize, String), Module>> = LazyLock::new(WeakCache::new);

/// A compiled module loaded into a context.
pub struct Module {
    module: Arc<CudaModule>,
    compiled: Arc<Compiled>,
    ctx: Arc<CudaContext>,
    record: Option<MappedRecord>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("key", &self.compiled.key)
            .field("arch", &self.compiled.arch)
            .field("debug_waits", &self.compiled.debug_waits)
            .field("hang_record", &self.record.is_some())
            .finish_non_exhaustive()
    }
}

impl Module {
    /// Loads `compiled` (CUBIN, else PTX) into `ctx`: always a new module, shared with no
    /// one ([`Module::compile_and_load`] shares). When the module has the prelude's
    /// `tma_debug_record` (bounded waits: debug, or release with `TMA_BOUNDED_WAITS`),
    /// allocates the hang record and points that global at it.
    pub fn load(ctx: &Arc<CudaContext>, compiled: Arc<Compiled>) -> Result<Arc<Module>, Error> {
        if capturing_on_this_thread() {
            return Err(CaptureOp::ModuleLoad.error());
        }
        crate::cuda_libs::libcuda_available()?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(Error::driver("cuDeviceGetAttribute"))?;
        let device_arch = Arch::from_compute_capability(major, minor);
        if compiled.has_cubin() && device_arch != Some(compiled.arch) {
            return Err(Error::ArchMismatch {
                compiled: compiled.arch,
                major,
                minor,
            });
        }
        let image = if compiled.has_cubin() {
            cudarc::nvrtc::Ptx::from_binary(compiled.cubin.clone())
        } else {
            cudarc::nvrtc::Ptx::from_src(compiled.ptx.clone())
        };
        let module = ctx
            .load_module(image)
            .map_err(Error::driver("cuModuleLoadData"))?;
        // The tma prelude defines the record's global whenever its waits are bounded: in
        // debug builds always, in release with TMA_BOUNDED_WAITS. A module without it loads
        // and has no record (no cuMemHostAlloc): a release one with the bare loop, or a source
        // without the prelude (a raw kernel; nothing of tma's can hang or fail a check there).
        // Debug on, a source described with tiles must have it.
        let has_tiles = compiled.facts.as_ref().is_some_and(|f| !f.tiles.is_empty());
        // The driver is asked only when the PTX declares the global (or there is no PTX to
        // tell), or when the record is required (its failed lookup is then the error): a
        // lookup of a missing global is an API error compute-sanitizer reports.
        let required = compiled.debug_waits && has_tiles;
        let may_have = compiled.ptx.is_empty() || compiled.ptx_names(DEBUG_RECORD_SYMBOL);
        let record = if may_have || required {
            match MappedRecord::attach(ctx, &module) {
                Ok(record) => Some(record),
                Err(Error::DebugRecordMissing { .. }) if !required => None,
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        Ok(Arc::new(Module {
            module,
            compiled,
            ctx: ctx.clone(),
            record,
        }))
    }

    /// Compiles `source` with `compiler` (its caches first) and loads it into `ctx`, or
    /// returns the module loaded from the same compile into the same context while any
    /// handle to it ([`Module`], [`Kernel`]) is alive. The cache keeps nothing alive: once
    /// the last handle goes, the module is unloaded, its context can go, and the next call
    /// loads again (compiling is still a cache hit). Hold the module to keep the hit.
    /// During a [`Capture`](super::Capture) on this thread only that hit is taken: a compile
    /// or load is refused ([`CaptureOp::CompileAndLoad`]).
    pub fn compile_and_load(
        ctx: &Arc<CudaContext>,
        compiler: &Compiler,
        source: &Source,
        options: &CompileOptions,
    ) -> Result<Arc<Module>, Error> {
        if capturing_on_this_thread() {
            // The key alone finds a held module (it compiles nothing), with or without the
            // in-process compile cache (TMA_JIT_NO_CACHE).
            let key = compiler.cache_key(source, options)?.hex();
            let loaded = LOADED.get(&(ctx.cu_ctx() as usize, key));
            return loaded.ok_or_else(|| CaptureOp::CompileAndLoad.error());
        }
        let compiled = compiler.compile_source(source, options)?;
        let key = (ctx.cu_ctx() as usize, compiled.key.clone());
        LOADED.get_or_try_insert_with(key, || Module::load(ctx, compiled))
    }

    /// What was loaded (tile names for hang reports, the cache key).
    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }
    /// The context it was loaded into.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// cudarc's module, for what this crate does not wrap.
    pub fn cuda_module(&self) -> &Arc<CudaModule> {
        &self.module
    }

    /// The kernel `name` (an `extern "C" __global__` function).
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, Error> {
        let func = self
            .module
            .load_function(name)
            .map_err(|e| Error::KernelNotFound {
                name: name.to_string(),
                result: e.into(),
            })?;
        let static_smem = func
            .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            .map_err(Error::driver("cuFuncGetAttribute"))?;
        // After get_attribute, which bound the module's context to this thread.
        let param_bytes = param_bytes(&func, self.compiled.entry_param_count(name))?;
        // Launch facts come from the source's typed description, never from its text or PTX:
        // a plan kernel's are its plan's, exactly; a kernel without a plan may keep any tile
        // and run any pipeline the source holds outside its plans. Text alone gives none.
        let needs = kernel_needs(self.compiled.facts.as_deref(), name);
        let static_smem = u32::try_from(static_smem).unwrap_or(0);
        Ok(Kernel {
            func,
            name: name.to_string(),
            module: self.clone(),
            static_smem,
            // Without the opt-in a block gets 48 KB of static and dynamic shared memory
            // together: a kernel with static shared memory must opt in below 48 KB of dynamic
            // (48 KB of dynamic plus a 16-byte mbarrier was refused, CUDA_ERROR_INVALID_VALUE,
            // H100: gpu_model's seed 1795655312674227616).
            dynamic_smem_opted: AtomicU32::new(
                DEFAULT_DYNAMIC_SMEM_LIMIT.saturating_sub(static_smem),
            ),
            param_bytes,
            smem_need: needs.smem,
            pipelines: needs.pipelines,
            plan: needs.plan,
        })
    }

    /// The hang record's error, if a bounded wait (or, debug on, a check) of this module gave up.
    pub fn hang_error(&self) -> Option<Error> {
        let rec = self.record.as_ref()?.read();
        rec.is_set().then(|| rec.to_error(&self.compiled))
    }

    /// Turns a failure of work from this module into the hang error when one was recorded,
    /// else [`Error::Launch`].
    pub fn explain_failure(&self, kernel: &str, e: impl Into<CuResult>) -> Error {
        if let Some(h) = self.hang_error() {
            return h;
        }
        let result = e.into();
        Error::Launch {
            kernel: kernel.to_string(),
            context_lost: is_sticky(result),
            result,
        }
    }

    /// Synchronises `stream`; a failure becomes [`Error::BarrierTimeout`] when a bounded wait
    /// recorded a hang. After any such error the context is unusable: start a fresh process.
    /// A stream being captured is refused ([`CaptureOp::Synchronize`]).
    pub fn synchronize(&self, stream: &CudaStream) -> Result<(), Error> {
        refuse_if_capturing(stream, CaptureOp::Synchronize)?;
        stream
            .synchronize()
            .map_err(|e| self.explain_failure("<stream>", e))
    }
}

/// Bytes of each parameter of `func`, in order (`cuFuncGetParamInfo`, CUDA 12.4+). With the
/// count its PTX declares (`declared`), at most those parameters are asked for; without it, it
/// asks until the driver answers `CUDA_ERROR_INVALID_VALUE` past the last one (an API error
/// under compute-sanitizer). That answer ends the list either way: the driver's count wins.
fn param_bytes(func: &CudaFunction, declared: Option<usize>) -> Result<Vec<usize>, Error> {
    crate::cuda_libs::libcuda_has("cuFuncGetParamInfo")?;
    // A kernel's parameters fit in 32764 bytes (CUDA 12.1+), so at most that many.
    let limit = declared.unwrap_or(usize::MAX).min(32765);
    let mut bytes = Vec::new();
    while bytes.len() < limit {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: a function of a loaded module; valid out-pointers; the symbol exists
        // (checked above), so cudarc's loader finds it.
        let r = unsafe {
            sys::cuFuncGetParamInfo(func.cu_function(), bytes.len(), &mut offset, &mut size)
        };
        match r {
            sys::CUresult::CUDA_SUCCESS => bytes.push(size),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => break,
            other => {
                return Err(Error::Driver {
                    call: "cuFuncGetParamInfo",
                    result: CuResult(other),
                })
            }
        }
    }
    Ok(bytes)
}

/// Errors after which the context cannot be used again.
pub(crate) fn is_sticky(r: CuResult) -> bool {
    use sys::CUresult::*;
    matches!(
        r.0,
        CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_TENSOR_MEMORY_LEAK
    )
}

/// A kernel of a loaded module.
#[derive(Debug)]
pub struct Kernel {
    func: CudaFunction,
    name: String,
    module: Arc<Module>,
    static_smem: u32,
    dynamic_smem_opted: AtomicU32,
    param_bytes: Vec<usize>,
    smem_need: Option<SmemNeed>,
    /// The pipelines a launch's cluster and dynamic shared memory are checked against (it
    /// must fit one): a kernel without a plan may run any the source holds outside its plans.
    pipelines: Vec<tma_core::facts::PipelineFacts>,
    /// The kernel's plan, when its source was given one: its launches are checked against it.
    plan: Option<tma_core::plan::LaunchPlan>,
}

impl Kernel {
    /// The kernel's name in the module.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The kernel's plan (from its source's description, [`crate::Source::kernel`]): a launch
    /// must have its block, cluster and dynamic shared memory ([`crate::Error::PlanLaunch`]).
    pub fn plan(&self) -> Option<&tma_core::plan::LaunchPlan> {
        self.plan.as_ref()
    }
    /// The module it is in (kept alive by the kernel).
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }
    /// cudarc's function, for what this crate does not wrap.
    pub fn function(&self) -> &CudaFunction {
        &self.func
    }

    /// Bytes of each of the kernel's parameters, in order, as the driver reports them
    /// (`cuFuncGetParamInfo`): a launch must push arguments of exactly these sizes.
    pub fn param_bytes(&self) -> &[usize] {
        &self.param_bytes
    }

    /// The least dynamic shared memory a launch must give (unless
    /// `LaunchConfig::unchecked_dynamic_smem`): for a kernel without a plan of a described
    /// source ([`crate::Source::kernel`]), what one call of the largest tile the source holds
    /// outside its plans needs, with the slack to align it
    /// ([`tma_core::smem::SmemLayout::min_dynamic_smem`] of that tile): a necessary condition
    /// for a kernel that keeps that tile there, whatever else it keeps where. 0 for a plan
    /// kernel (its plan gives the exact bytes, [`Kernel::plan`]) and for text without a
    /// description. A kernel whose dynamic shared memory holds no tile launches with
    /// `LaunchConfig::unchecked_dynamic_smem`.
    pub fn min_dynamic_smem(&self) -> u64 {
        self.smem_need.as_ref().map_or(0, |n| n.bytes)
    }

    /// The pipelines a launch is checked against (unless
    /// `LaunchConfig::unchecked_pipelines`): for a kernel without a plan of a described source,
    /// those the source holds outside its plans (a launch must fit one of them); none for a
    /// plan kernel (its plan is checked) and for text without a description.
    pub fn pipelines(&self) -> &[tma_core::facts::PipelineFacts] {
        &self.pipelines
    }

    /// Refuses, before any driver call, arguments of `arg_bytes` sizes that do not match the
    /// parameters, `dynamic_smem` below [`Kernel::min_dynamic_smem`] (`None`: unchecked),
    /// and, when `pipelines`, a `cluster` or `dynamic_smem` none of [`Kernel::pipelines`] can
    /// run under ([`Error::PipelineLaunch`]).
    pub(super) fn check_launch(
        &self,
        arg_bytes: &[usize],
        dynamic_smem: Option<u32>,
        cluster: Option<(u32, u32, u32)>,
        pipelines: bool,
    ) -> Result<(), Error> {
        check_args(&self.name, &self.param_bytes, arg_bytes)?;
        if let Some(given) = dynamic_smem {
            check_dynamic_smem(&self.name, self.smem_need.as_ref(), given)?;
        }
        if pipelines {
            check_pipelines(&self.name, &self.pipelines, cluster, dynamic_smem)?;
        }
        Ok(())
    }

    /// Readies the kernel for a launch of a checked shape: refuses it when an earlier launch
    /// of the module set the debug record (that record's error: a hang or failed check the
    /// caller has not seen yet, since it did not synchronise; the context is lost, and
    /// clearing the record would turn it into a bare `Error::Launch`), binds its context,
    /// opts in to `want` bytes of dynamic shared memory and to a non-portable `cluster`.
    /// Takes numbers, not a `LaunchConfig`, so that loading knows nothing of launching.
    pub(super) fn prepare(&self, want: u32, cluster: Option<(u32, u32, u32)>) -> Result<(), Error> {
        if let Some(recorded) = self.module.hang_error() {
            return Err(recorded);
        }
        let ctx = &self.module.ctx;
        ctx.bind_to_thread()
            .map_err(Error::driver("cuCtxSetCurrent"))?;
        if want > self.dynamic_smem_opted.load(Ordering::Relaxed) {
            let optin = ctx
                .attribute(
                    CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                )
                .map_err(Error::driver("cuDeviceGetAttribute"))?;
            let max = u32::try_from(optin).unwrap_or(0);
            if u64::from(want) + u64::from(self.static_smem) > u64::from(max) {
                return Err(Error::SharedMemoryTooLarge {
                    kernel: self.name.clone(),
                    requested: want,
                    static_bytes: self.static_smem,
                    max,
                });
            }
            self.func
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    want as i32,
                )
                .map_err(Error::driver(
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                ))?;
            self.dynamic_smem_opted.fetch_max(want, Ordering::Relaxed);
        }
        if let Some(c) = cluster {
            // In u64: a shape is checked before it gets here, but no product may wrap.
            let ctas = u64::from(c.0) * u64::from(c.1) * u64::from(c.2);
            if ctas > u64::from(MAX_PORTABLE_CLUSTER) {
                self.func
                    .set_attribute(
                        CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                        1,
                    )
                    .map_err(Error::driver(
                        "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)",
                    ))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_errors_are_flagged() {
        assert!(is_sticky(CuResult(
            sys::CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
        )));
        assert!(!is_sticky(CuResult(
            sys::CUresult::CUDA_ERROR_INVALID_VALUE
        )));
    }
}
