//! Launching a kernel: [`LaunchConfig`] (grid, block, shared memory, cluster, stream) and a
//! typed argument builder ([`Launch`]).
//!
//! cudarc 0.19's launch builder keeps its argument list private and has no
//! `cuLaunchKernelEx`, so clusters cannot go through it; this module has its own small
//! typed builder with the same synchronisation rules (slices wait for their last write and
//! record their use, through cudarc's `DevicePtr`/`DevicePtrMut`), and one launch path:
//! `cuLaunchKernelEx`, with the cluster-dimension attribute when asked.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr, SyncOnDrop,
};

use crate::error::Error;
pub use tma_core::launch::check_launch_shape;

use super::module::Kernel;
use super::tensor_map::TensorMap;

/// Grid, block, shared memory, cluster and stream of one launch.
#[derive(Clone, Debug)]
pub struct LaunchConfig {
    /// Blocks per grid (x, y, z).
    pub grid: (u32, u32, u32),
    /// Threads per block (x, y, z); at most 1024 in all.
    pub block: (u32, u32, u32),
    /// Bytes of dynamic shared memory; above 48 KB the kernel is opted in automatically.
    pub dynamic_smem_bytes: u32,
    /// Thread-block cluster shape; each grid dim must be a multiple of it.
    pub cluster: Option<(u32, u32, u32)>,
    /// The stream the launch is queued on, and the arguments' uses recorded on.
    pub stream: Arc<CudaStream>,
    /// Whether a kernel without a plan must be given at least [`Kernel::min_dynamic_smem`]
    /// (true by default; 0 unless its source was given with its description). Off for a
    /// kernel that keeps no tile of its source there (only scratch, or static shared memory):
    /// [`LaunchConfig::unchecked_dynamic_smem`].
    pub check_dynamic_smem: bool,
    /// Whether a kernel without a plan is checked against [`Kernel::pipelines`] (true by
    /// default; none unless its source was given with its description): the cluster shape
    /// must be one pipeline's, the dynamic shared memory at least its `DYNAMIC_SMEM_BYTES`
    /// (unless `check_dynamic_smem` is off). Off for a kernel of the source that uses none of
    /// them: [`LaunchConfig::unchecked_pipelines`].
    pub check_pipelines: bool,
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
            check_dynamic_smem: true,
            check_pipelines: true,
        }
    }
    /// Sets [`LaunchConfig::dynamic_smem_bytes`].
    pub fn dynamic_smem(mut self, bytes: u32) -> Self {
        self.dynamic_smem_bytes = bytes;
        self
    }
    /// Sets [`LaunchConfig::cluster`].
    pub fn cluster(mut self, dims: (u32, u32, u32)) -> Self {
        self.cluster = Some(dims);
        self
    }
    /// Skips the host check of the dynamic shared memory against the source's largest tile
    /// ([`LaunchConfig::check_dynamic_smem`] off): for a kernel whose dynamic shared memory
    /// holds no tile of its source (only scratch, or none: tiles in static shared memory, a
    /// helper kernel). The debug mode still checks each copy on the device.
    pub fn unchecked_dynamic_smem(mut self) -> Self {
        self.check_dynamic_smem = false;
        self
    }

    /// Skips the host check of the cluster shape and dynamic shared memory against the
    /// pipelines of the kernel's source ([`LaunchConfig::check_pipelines`] off): for a kernel
    /// that uses none of them. The debug mode still checks each pipeline's `init()` on the
    /// device.
    pub fn unchecked_pipelines(mut self) -> Self {
        self.check_pipelines = false;
        self
    }

    /// Checks the shape (no device needed) with [`check_launch_shape`]: each grid and block
    /// extent within the hardware's limits, at most 1024 threads per block, the grid a
    /// multiple of the cluster, the cluster 1 to 16 blocks; every finding in
    /// [`Error::LaunchShape`].
    pub fn check(&self, kernel: &str) -> Result<(), Error> {
        check_launch_shape(self.grid, self.block, self.cluster).map_err(|errors| {
            Error::LaunchShape {
                kernel: kernel.to_string(),
                errors,
            }
        })
    }
}

impl Kernel {
    /// Starts a launch: push arguments with [`Launch::arg`], then [`Launch::launch`].
    /// (Here rather than beside [`Kernel`], as cudarc keeps `CudaStream::launch_builder` in
    /// its launch module: loading a module needs nothing of launching.)
    pub fn launch_builder<'a>(&'a self, cfg: &'a LaunchConfig) -> Launch<'a> {
        Launch {
            kernel: self,
            cfg,
            slots: Vec::new(),
            guards: Vec::new(),
            tracked: None,
        }
    }
}

/// One kernel argument slot: a pointer to a by-value argument and its size, or a device
/// pointer stored here (8 bytes).
enum Slot {
    Ref(*const c_void, usize),
    Ptr(u64),
}

impl Slot {
    /// Bytes the argument occupies in the kernel's parameter space.
    fn bytes(&self) -> usize {
        match self {
            Slot::Ref(_, n) => *n,
            Slot::Ptr(_) => std::mem::size_of::<u64>(),
        }
    }
}

/// A launch being built. Arguments borrow for `'a`, so they outlive the launch call.
pub struct Launch<'a> {
    kernel: &'a Kernel,
    cfg: &'a LaunchConfig,
    slots: Vec<Slot>,
    guards: Vec<SyncOnDrop<'a>>,
    /// Whether a buffer argument may be pushed through cudarc's tracking (asked once, at the
    /// first): `Err` when the stream is being captured with event tracking on, which
    /// [`Launch::launch`] returns instead of launching.
    tracked: Option<Result<(), Error>>,
}

/// Something that can be a kernel argument. By value: scalars, [`TensorMap`] (128 bytes,
/// `const __grid_constant__ CUtensorMap`), [`ByValue`]; by device pointer: `CudaSlice`,
/// `CudaView`, `CudaViewMut` (shared or exclusive borrows, with cudarc's stream ordering).
pub trait KernelArg<'a> {
    /// Appends this argument to `launch` (the next parameter, in order).
    fn push(self, launch: &mut Launch<'a>);
}

/// Passes any `DeviceRepr` struct by value (the kernel declares the same layout).
pub struct ByValue<'a, T: DeviceRepr>(pub &'a T);

impl<'a, T: DeviceRepr> KernelArg<'a> for ByValue<'a, T> {
    fn push(self, l: &mut Launch<'a>) {
        l.slots.push(Slot::Ref(
            (self.0 as *const T).cast(),
            std::mem::size_of::<T>(),
        ));
    }
}

macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl<'a> KernelArg<'a> for &'a $t {
            fn push(self, l: &mut Launch<'a>) {
                l.slots.push(Slot::Ref((self as *const $t).cast(), std::mem::size_of::<$t>()));
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
        if !l.may_track() {
            return l.slots.push(Slot::Ptr(0));
        }
        let (ptr, guard) = self.device_ptr(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}
impl<'a, T> KernelArg<'a> for &'a mut CudaSlice<T> {
    fn push(self, l: &mut Launch<'a>) {
        if !l.may_track() {
            return l.slots.push(Slot::Ptr(0));
        }
        let (ptr, guard) = self.device_ptr_mut(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}
impl<'a, 'b: 'a, T> KernelArg<'a> for &'a CudaView<'b, T> {
    fn push(self, l: &mut Launch<'a>) {
        if !l.may_track() {
            return l.slots.push(Slot::Ptr(0));
        }
        let (ptr, guard) = self.device_ptr(&l.cfg.stream);
        l.slots.push(Slot::Ptr(ptr));
        l.guards.push(guard);
    }
}
impl<'a, 'b: 'a, T> KernelArg<'a> for &'a mut CudaViewMut<'b, T> {
    fn push(self, l: &mut Launch<'a>) {
        if !l.may_track() {
            return l.slots.push(Slot::Ptr(0));
        }
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

    /// Whether a buffer argument may take its address through cudarc (which, with event
    /// tracking on, waits on the buffer's last events: refused on a stream being captured,
    /// where those waits are illegal). Asked once per launch, and of the driver only when
    /// tracking is on.
    fn may_track(&mut self) -> bool {
        let stream = &self.cfg.stream;
        self.tracked
            .get_or_insert_with(|| super::capture::refuse_tracked_use(stream))
            .is_ok()
    }

    /// Launches with `cuLaunchKernelEx`, consuming the pushed arguments (push them again
    /// for another launch). Refused before the driver: arguments whose number or sizes differ
    /// from the kernel's parameters ([`Error::ArgumentCount`], [`Error::ArgumentSize`]), a
    /// plan kernel's launch off its plan's block, cluster or dynamic shared memory
    /// ([`Error::PlanLaunch`]; a plan kernel is checked against nothing else of its source),
    /// dynamic shared memory below [`Kernel::min_dynamic_smem`]
    /// ([`Error::DynamicSmemTooSmall`], unless [`LaunchConfig::unchecked_dynamic_smem`]), a
    /// cluster shape or dynamic shared memory that none of [`Kernel::pipelines`] can run under
    /// ([`Error::PipelineLaunch`], unless [`LaunchConfig::unchecked_pipelines`]), and
    /// any launch of a module whose debug record an earlier launch set (that record's error,
    /// [`Error::BarrierTimeout`] or [`Error::DeviceCheck`]: the context is lost), and buffer
    /// arguments on a stream being captured with cudarc's event tracking on ([`Error::Capture`];
    /// during a [`Capture`](super::Capture) the launch is recorded into its graph). A failure
    /// becomes the error of the debug record when one was written, else [`Error::Launch`].
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in type (number and sizes are
    /// checked), and the kernel must stay within the memory it is given (the same contract as
    /// cudarc's `LaunchArgs::launch`).
    pub unsafe fn launch(&mut self) -> Result<(), Error> {
        let (kernel, cfg) = (self.kernel, self.cfg);
        let slots = std::mem::take(&mut self.slots);
        let guards = std::mem::take(&mut self.guards);
        if let Some(Err(e)) = self.tracked.take() {
            // A sticky failure of an earlier launch (a debug check's trap) surfaces in the
            // first driver call after it, here the capture query `arg` made: name it as the
            // launch would (the debug record), not as that query.
            return Err(match e {
                Error::Driver { result, .. } if super::module::is_sticky(result) => {
                    kernel.module().explain_failure(kernel.name(), result)
                }
                e => e,
            });
        }
        cfg.check(kernel.name())?;
        if let Some(plan) = kernel.plan() {
            let name = kernel.name();
            super::plan::check_plan_launch(
                name,
                plan,
                cfg.block,
                cfg.cluster,
                cfg.dynamic_smem_bytes,
            )?;
        }
        let arg_bytes: Vec<usize> = slots.iter().map(Slot::bytes).collect();
        let smem_checked = cfg.check_dynamic_smem.then_some(cfg.dynamic_smem_bytes);
        kernel.check_launch(&arg_bytes, smem_checked, cfg.cluster, cfg.check_pipelines)?;
        kernel.prepare(cfg.dynamic_smem_bytes, cfg.cluster)?;
        let mut params: Vec<*mut c_void> = slots
            .iter()
            .map(|s| match s {
                Slot::Ref(p, _) => p.cast_mut(),
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
                kernel.function().cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        // Record the arguments' use on the stream (cudarc's ordering) after the launch.
        drop(guards);
        drop(slots);
        r.result()
            .map_err(|e| kernel.module().explain_failure(kernel.name(), e))
    }

    /// [`Launch::launch`], then synchronise the stream: the way to turn a hang in a
    /// debug-wait build into [`Error::BarrierTimeout`]. On a stream being captured it is
    /// refused, and nothing is launched ([`CaptureOp::Synchronize`](super::CaptureOp)).
    ///
    /// # Safety
    /// As [`Launch::launch`].
    pub unsafe fn launch_and_sync(&mut self) -> Result<(), Error> {
        let (module, stream) = (self.kernel.module().clone(), self.cfg.stream.clone());
        let name = self.kernel.name().to_string();
        // The capture query is the first driver call after an earlier launch's trap: its
        // sticky failure is that launch's, named from the debug record as the launch would.
        super::capture::refuse_if_capturing(&stream, super::CaptureOp::Synchronize).map_err(
            |e| match e {
                Error::Driver { result, .. } if super::module::is_sticky(result) => {
                    module.explain_failure(&name, result)
                }
                e => e,
            },
        )?;
        // SAFETY: forwarded from the caller.
        unsafe { self.launch() }?;
        stream
            .synchronize()
            .map_err(|e| module.explain_failure(&name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Dims = (u32, u32, u32);

    #[test]
    fn launch_shapes_are_checked_before_the_driver() {
        let ok = |g, b, c| check_launch_shape(g, b, c).is_ok();
        // (grid, block, cluster, accepted)
        let rows: [(Dims, Dims, Option<Dims>, bool); 13] = [
            ((132, 1, 1), (384, 1, 1), None, true),
            ((8, 1, 1), (128, 1, 1), Some((4, 1, 1)), true),
            ((16, 1, 1), (128, 1, 1), Some((16, 1, 1)), true),
            ((0, 1, 1), (128, 1, 1), None, false),
            ((1, 1, 1), (32, 32, 2), None, false),
            ((6, 1, 1), (128, 1, 1), Some((4, 1, 1)), false),
            ((8, 1, 1), (128, 1, 1), Some((0, 1, 1)), false),
            ((32, 1, 1), (128, 1, 1), Some((32, 1, 1)), false),
            // 65536^2 blocks: refused, not a u32 overflow.
            ((65536, 65536, 1), (1, 1, 1), Some((65536, 65536, 1)), false),
            // 2^64 threads wrapped to 0 in the u64 product, which passed in release builds.
            ((1, 1, 1), (1 << 22, 1 << 21, 1 << 21), None, false),
            // Per-axis limits: z of a block at most 64, y of a grid at most 65535.
            ((1, 1, 1), (1, 1, 65), None, false),
            ((1, 65536, 1), (1, 1, 1), None, false),
            (((1 << 31) - 1, 65535, 65535), (1024, 1, 1), None, true),
        ];
        for (g, b, c, want) in rows {
            assert_eq!(ok(g, b, c), want, "grid {g:?} block {b:?} cluster {c:?}");
        }
    }
}
