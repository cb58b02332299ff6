//! Loading compiled modules and launching kernels, with clusters, automatic opt-in to large
//! dynamic shared memory, and hang-to-error for modules compiled with debug waits.
//!
//! cudarc 0.19's launch builder keeps its argument list private and has no
//! `cuLaunchKernelEx`, so clusters cannot go through it; this module has its own small
//! typed builder ([`Launch`]) with the same synchronisation rules (slices wait for their last
//! write and record their use, through cudarc's `DevicePtr`/`DevicePtrMut`), and one launch
//! path: `cuLaunchKernelEx`, with the cluster-dimension attribute when asked.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr,
    DevicePtrMut, DeviceRepr, SyncOnDrop,
};
use tma_core::Arch;

use crate::compile::{CompileOptions, Compiled, Compiler, Source};
use crate::error::{CuResult, Error};
use crate::tensor_map::TensorMap;

/// Dynamic shared memory a kernel gets without opting in (48 KB).
pub const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;
/// Largest portable cluster (blocks); larger needs the non-portable attribute (max 16 on H100).
pub const MAX_PORTABLE_CLUSTER: u32 = 8;
/// The module global the debug waits write through (CONTRACTS.md).
pub const DEBUG_RECORD_SYMBOL: &str = "tma_debug_record";

/// Loaded modules per (cache key, context), so one compile loads once per context.
#[derive(Default)]
pub(crate) struct ModuleCache {
    map: Mutex<HashMap<(String, usize), Arc<Module>>>,
}

/// The hang record of CONTRACTS.md, written by a debug wait that gave up (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HangRecord {
    pub hung: u32,
    pub block_x: u32,
    pub block_y: u32,
    pub block_z: u32,
    pub thread: u32,
    pub barrier: u32,
    pub phase: u32,
    pub expected_tx: u32,
    pub tile_id: u32,
    pub pad: u32,
    pub waited_ns: u64,
}

const _: () = assert!(std::mem::size_of::<HangRecord>() == 48);

impl HangRecord {
    /// The error this record describes, naming the tile from the source's `// tma-tile` list.
    pub fn to_error(&self, compiled: &Compiled) -> Error {
        let tile = match compiled.tile_name(self.tile_id) {
            Some(n) => n.to_string(),
            None if self.tile_id == u32::MAX => "<unknown tile>".to_string(),
            None => format!("<tile {}>", self.tile_id),
        };
        Error::BarrierTimeout {
            tile,
            block: [self.block_x, self.block_y, self.block_z],
            thread: self.thread,
            barrier: self.barrier,
            phase: self.phase,
            expected_tx: self.expected_tx,
            waited_ns: self.waited_ns,
        }
    }
}

/// Pinned host memory mapped into the device (`cuMemHostAlloc(DEVICEMAP | PORTABLE)`),
/// holding one [`HangRecord`]. It outlives a trapped context (it is host memory), so the
/// record can be read after the kernel died.
struct MappedRecord {
    host: *mut HangRecord,
    device: u64,
    ctx: Arc<CudaContext>,
}

// SAFETY: the pointer is to pinned host memory owned by this value; accesses are volatile
// reads/writes of plain integers.
unsafe impl Send for MappedRecord {}
// SAFETY: as above.
unsafe impl Sync for MappedRecord {}

impl MappedRecord {
    fn new(ctx: &Arc<CudaContext>) -> Result<MappedRecord, Error> {
        ctx.bind_to_thread()
            .map_err(Error::driver("cuCtxSetCurrent"))?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a context is current; the size is the record's.
        let host = unsafe {
            cudarc::driver::result::malloc_host(std::mem::size_of::<HangRecord>(), flags)
        }
        .map_err(Error::driver("cuMemHostAlloc"))?
        .cast::<HangRecord>();
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was just allocated with DEVICEMAP; valid out-pointer.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) };
        let rec = MappedRecord {
            host,
            device,
            ctx: ctx.clone(),
        };
        r.result()
            .map_err(Error::driver("cuMemHostGetDevicePointer"))?;
        rec.reset();
        Ok(rec)
    }
    fn reset(&self) {
        // SAFETY: `host` points to a live, aligned HangRecord-sized pinned allocation.
        unsafe { std::ptr::write_volatile(self.host, HangRecord::default()) };
    }
    fn read(&self) -> HangRecord {
        std::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: as in `reset`; the device wrote it with __threadfence_system.
        unsafe { std::ptr::read_volatile(self.host) }
    }
}

impl Drop for MappedRecord {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by cuMemHostAlloc in `new`, freed once here.
        let _ = unsafe { cudarc::driver::result::free_host(self.host.cast()) };
    }
}

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
            .field("debug_waits", &self.record.is_some())
            .finish_non_exhaustive()
    }
}

impl Module {
    /// Loads `compiled` (CUBIN, else PTX) into `ctx`. With debug waits, allocates the hang
    /// record and points the module's `tma_debug_record` at it.
    pub fn load(ctx: &Arc<CudaContext>, compiled: Arc<Compiled>) -> Result<Arc<Module>, Error> {
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
        let record = if compiled.debug_waits {
            let rec = MappedRecord::new(ctx)?;
            let stream = ctx.default_stream();
            let mut global = module
                .get_global(DEBUG_RECORD_SYMBOL, &stream)
                .map_err(|e| Error::DebugRecordMissing { result: e.into() })?;
            if global.len() != 8 {
                return Err(Error::DebugRecordMissing {
                    result: CuResult(sys::CUresult::CUDA_ERROR_INVALID_VALUE),
                });
            }
            stream
                .memcpy_htod(&rec.device.to_le_bytes(), &mut global)
                .map_err(Error::driver("cuMemcpyHtoD(tma_debug_record)"))?;
            stream
                .synchronize()
                .map_err(Error::driver("cuStreamSynchronize"))?;
            Some(rec)
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

    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
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
        Ok(Kernel {
            func,
            name: name.to_string(),
            module: self.clone(),
            static_smem: u32::try_from(static_smem).unwrap_or(0),
            dynamic_smem_opted: AtomicU32::new(DEFAULT_DYNAMIC_SMEM_LIMIT),
        })
    }

    /// The hang record's error, if a debug wait of this module gave up.
    pub fn hang_error(&self) -> Option<Error> {
        let rec = self.record.as_ref()?.read();
        (rec.hung != 0).then(|| rec.to_error(&self.compiled))
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

    /// Synchronises `stream`; a failure becomes [`Error::BarrierTimeout`] when a debug wait
    /// recorded a hang. After any such error the context is unusable: start a fresh process.
    pub fn synchronize(&self, stream: &CudaStream) -> Result<(), Error> {
        stream
            .synchronize()
            .map_err(|e| self.explain_failure("<stream>", e))
    }
}

/// Errors after which the context cannot be used again.
fn is_sticky(r: CuResult) -> bool {
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

impl Compiler {
    /// Compiles (cached) and loads (cached per context) `source` into `ctx`.
    pub fn load(
        &self,
        ctx: &Arc<CudaContext>,
        source: &Source,
        options: &CompileOptions,
    ) -> Result<Arc<Module>, Error> {
        let compiled = self.compile_source(source, options)?;
        let key = (compiled.key.clone(), ctx.cu_ctx() as usize);
        if let Some(m) = self
            .modules
            .map
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(m);
        }
        let module = Module::load(ctx, compiled)?;
        if let Ok(mut m) = self.modules.map.lock() {
            m.entry(key).or_insert_with(|| module.clone());
        }
        Ok(module)
    }
}

/// Grid, block, shared memory, cluster and stream of one launch.
#[derive(Clone, Debug)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    /// Bytes of dynamic shared memory; above 48 KB the kernel is opted in automatically.
    pub dynamic_smem_bytes: u32,
    /// Thread-block cluster shape; each grid dim must be a multiple of it.
    pub cluster: Option<(u32, u32, u32)>,
    pub stream: Arc<CudaStream>,
}

impl LaunchConfig {
    /// `grid` x `block` on `stream`, no dynamic shared memory, no cluster.
    pub fn new(stream: &Arc<CudaStream>, grid: (u32, u32, u32), block: (u32, u32, u32)) -> Self {
        LaunchConfig {
            grid,
            block,
            dynamic_smem_bytes: 0,
            cluster: None,
            stream: stream.clone(),
        }
    }
    pub fn dynamic_smem(mut self, bytes: u32) -> Self {
        self.dynamic_smem_bytes = bytes;
        self
    }
    pub fn cluster(mut self, dims: (u32, u32, u32)) -> Self {
        self.cluster = Some(dims);
        self
    }

    /// Checks the shape (no device needed): non-zero dims, at most 1024 threads per block,
    /// grid divisible by the cluster, cluster at most 16 blocks.
    pub fn check(&self, kernel: &str) -> Result<(), Error> {
        let bad = |reason: String| {
            Err(Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason,
            })
        };
        let (g, b) = (self.grid, self.block);
        if [g.0, g.1, g.2, b.0, b.1, b.2].contains(&0) {
            return bad(format!("grid {g:?} and block {b:?} must have no zero dim"));
        }
        let threads = u64::from(b.0) * u64::from(b.1) * u64::from(b.2);
        if threads > 1024 {
            return bad(format!("block {b:?} has {threads} threads; at most 1024"));
        }
        if let Some(c) = self.cluster {
            if [c.0, c.1, c.2].contains(&0) {
                return bad(format!("cluster {c:?} must have no zero dim"));
            }
            if g.0 % c.0 != 0 || g.1 % c.1 != 0 || g.2 % c.2 != 0 {
                return bad(format!("grid {g:?} is not a multiple of cluster {c:?}"));
            }
            let n = c.0 * c.1 * c.2;
            if n > 16 {
                return bad(format!(
                    "cluster {c:?} has {n} blocks; at most 16 (8 portable)"
                ));
            }
        }
        Ok(())
    }
}

/// A kernel of a loaded module.
#[derive(Debug)]
pub struct Kernel {
    func: CudaFunction,
    name: String,
    module: Arc<Module>,
    static_smem: u32,
    dynamic_smem_opted: AtomicU32,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }
    pub fn function(&self) -> &CudaFunction {
        &self.func
    }

    /// Starts a launch: push arguments with [`Launch::arg`], then [`Launch::launch`].
    pub fn launch_builder<'a>(&'a self, cfg: &'a LaunchConfig) -> Launch<'a> {
        Launch {
            kernel: self,
            cfg,
            slots: Vec::new(),
            guards: Vec::new(),
        }
    }

    fn prepare(&self, cfg: &LaunchConfig) -> Result<(), Error> {
        cfg.check(&self.name)?;
        let ctx = &self.module.ctx;
        ctx.bind_to_thread()
            .map_err(Error::driver("cuCtxSetCurrent"))?;
        let want = cfg.dynamic_smem_bytes;
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
        if let Some(c) = cfg.cluster {
            if c.0 * c.1 * c.2 > MAX_PORTABLE_CLUSTER {
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
        if let Some(rec) = &self.module.record {
            rec.reset();
        }
        Ok(())
    }
}

/// One kernel argument slot: a pointer to a by-value argument, or a device pointer stored here.
enum Slot {
    Ref(*const c_void),
    Ptr(u64),
}

/// A launch being built. Arguments borrow for `'a`, so they outlive the launch call.
pub struct Launch<'a> {
    kernel: &'a Kernel,
    cfg: &'a LaunchConfig,
    slots: Vec<Slot>,
    guards: Vec<SyncOnDrop<'a>>,
}

/// Something that can be a kernel argument. By value: scalars, [`TensorMap`] (128 bytes,
/// `const __grid_constant__ CUtensorMap`), [`ByValue`]; by device pointer: `CudaSlice`,
/// `CudaView`, `CudaViewMut` (shared or exclusive borrows, with cudarc's stream ordering).
pub trait KernelArg<'a> {
    fn push(self, launch: &mut Launch<'a>);
}

/// Passes any `DeviceRepr` struct by value (the kernel declares the same layout).
pub struct ByValue<'a, T: DeviceRepr>(pub &'a T);

impl<'a, T: DeviceRepr> KernelArg<'a> for ByValue<'a, T> {
    fn push(self, l: &mut Launch<'a>) {
        l.slots.push(Slot::Ref((self.0 as *const T).cast()));
    }
}

macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl<'a> KernelArg<'a> for &'a $t {
            fn push(self, l: &mut Launch<'a>) {
                l.slots.push(Slot::Ref((self as *const $t).cast()));
            }
        }
    )*};
}
by_value!(
    bool,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    usize,
    isize,
    f32,
    f64,
    half::f16,
    half::bf16,
    TensorMap
);

impl<'a, T> KernelArg<'a> for &'a CudaSlice<T> {
    fn push(self, l: &mut Launch<'a>) {
        let (ptr, guard) = self.device_ptr(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}
impl<'a, T> KernelArg<'a> for &'a mut CudaSlice<T> {
    fn push(self, l: &mut Launch<'a>) {
        let (ptr, guard) = self.device_ptr_mut(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}
impl<'a, 'b: 'a, T> KernelArg<'a> for &'a CudaView<'b, T> {
    fn push(self, l: &mut Launch<'a>) {
        let (ptr, guard) = self.device_ptr(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}
impl<'a, 'b: 'a, T> KernelArg<'a> for &'a mut CudaViewMut<'b, T> {
    fn push(self, l: &mut Launch<'a>) {
        let (ptr, guard) = self.device_ptr_mut(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}

impl<'a> Launch<'a> {
    /// Pushes the next argument (in the kernel's parameter order).
    pub fn arg(&mut self, a: impl KernelArg<'a>) -> &mut Self {
        a.push(self);
        self
    }

    /// Launches with `cuLaunchKernelEx`, consuming the pushed arguments (push them again
    /// for another launch). A failure becomes [`Error::BarrierTimeout`] when a
    /// debug wait recorded a hang, else [`Error::Launch`].
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in number, order and type, and the
    /// kernel must stay within the memory it is given (the same contract as cudarc's
    /// `LaunchArgs::launch`).
    pub unsafe fn launch(&mut self) -> Result<(), Error> {
        let (kernel, cfg) = (self.kernel, self.cfg);
        let slots = std::mem::take(&mut self.slots);
        let guards = std::mem::take(&mut self.guards);
        kernel.prepare(cfg)?;
        let mut params: Vec<*mut c_void> = slots
            .iter()
            .map(|s| match s {
                Slot::Ref(p) => p.cast_mut(),
                Slot::Ptr(p) => (p as *const u64).cast::<c_void>().cast_mut(),
            })
            .collect();
        let mut attrs: Vec<sys::CUlaunchAttribute> = Vec::new();
        if let Some((x, y, z)) = cfg.cluster {
            // SAFETY: an all-zero attribute is a valid starting value (plain C struct/union).
            let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            a.value.clusterDim.x = x;
            a.value.clusterDim.y = y;
            a.value.clusterDim.z = z;
            attrs.push(a);
        }
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid.0,
            gridDimY: cfg.grid.1,
            gridDimZ: cfg.grid.2,
            blockDimX: cfg.block.0,
            blockDimY: cfg.block.1,
            blockDimZ: cfg.block.2,
            sharedMemBytes: cfg.dynamic_smem_bytes,
            hStream: cfg.stream.cu_stream(),
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        // SAFETY: `params` points into `slots` (device pointers) and at borrowed by-value
        // arguments, all alive until after this call; the caller vouches they match the
        // kernel; `attrs` outlives the call.
        let r = unsafe {
            sys::cuLaunchKernelEx(
                &config,
                kernel.func.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        // Record the arguments' use on the stream (cudarc's ordering) after the launch.
        drop(guards);
        drop(slots);
        r.result()
            .map_err(|e| kernel.module.explain_failure(&kernel.name, e))
    }

    /// [`Launch::launch`], then synchronise the stream: the way to turn a hang in a
    /// debug-wait build into [`Error::BarrierTimeout`].
    ///
    /// # Safety
    /// As [`Launch::launch`].
    pub unsafe fn launch_and_sync(&mut self) -> Result<(), Error> {
        let (module, stream) = (self.kernel.module.clone(), self.cfg.stream.clone());
        let name = self.kernel.name.clone();
        // SAFETY: forwarded from the caller.
        unsafe { self.launch() }?;
        stream
            .synchronize()
            .map_err(|e| module.explain_failure(&name, e))
    }
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hang_record_becomes_a_named_error() {
        let compiled = Compiled {
            ptx: String::new(),
            cubin: Vec::new(),
            log: String::new(),
            arch: Arch::Sm90a,
            debug_waits: true,
            tiles: crate::compile::tile_names("// tma-tile 0 q\n// tma-tile 1 kv_tile\n"),
            args: Vec::new(),
            key: "k".into(),
        };
        let rec = HangRecord {
            hung: 1,
            block_x: 3,
            block_y: 1,
            block_z: 0,
            thread: 32,
            barrier: 0x400,
            phase: 1,
            expected_tx: 16384,
            tile_id: 1,
            pad: 0,
            waited_ns: 1_000_000_123,
        };
        match rec.to_error(&compiled) {
            e @ Error::BarrierTimeout { .. } => {
                let s = e.to_string();
                assert!(s.contains("tile `kv_tile`"), "{s}");
                assert!(s.contains("block [3, 1, 0] thread 32"), "{s}");
                assert!(s.contains("expecting 16384 tx bytes"), "{s}");
                assert!(s.contains("fresh process"), "{s}");
            }
            other => panic!("{other:?}"),
        }
        let unknown = HangRecord {
            tile_id: u32::MAX,
            ..rec
        };
        assert!(
            matches!(unknown.to_error(&compiled), Error::BarrierTimeout { tile, .. } if tile == "<unknown tile>")
        );
    }

    #[test]
    fn record_layout_matches_the_contract() {
        assert_eq!(std::mem::size_of::<HangRecord>(), 48);
        assert_eq!(std::mem::offset_of!(HangRecord, tile_id), 32);
        assert_eq!(std::mem::offset_of!(HangRecord, waited_ns), 40);
    }

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
