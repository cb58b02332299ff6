//! CUDA graphs: tma launches recorded by stream capture ([`Capture`]), and what a capture
//! cannot take refused on the host, by name, before the driver (whose error would come later
//! and also invalidate the capture).
//!
//! What a capture records and what breaks it, operation by operation:
//!
//! | tma operation | during a capture | what tma does |
//! | --- | --- | --- |
//! | [`Launch::launch`](super::Launch::launch) | recorded as a kernel node: the arguments' bytes (maps by value, `__grid_constant__`) are copied into it then | allowed; the launch's checks run as always |
//! | the large dynamic shared memory opt-in and cluster attribute of a first launch | `cuFuncSetAttribute` is no stream work | allowed |
//! | NVRTC compile | host only (no driver), but seconds of it inside a capture | [`Module::compile_and_load`](super::Module::compile_and_load) refuses a compile and load it does not already hold ([`CaptureOp::CompileAndLoad`]) |
//! | [`Module::load`](super::Module::load) | a module load may allocate, and the debug hang record is pinned memory (`cuMemHostAlloc`) written by a synchronous copy: calls a capture forbids on its thread | refused ([`CaptureOp::ModuleLoad`]) |
//! | [`TensorMap::new`](super::TensorMap::new) | `cuTensorMapEncodeTiled` is host only: legal | allowed, unless cudarc's event tracking is on: then getting the buffer's address waits on an event recorded before the capture, which the driver refuses ([`CaptureOp::EventTracking`]) |
//! | a launch's buffer arguments with event tracking on | the same wait | refused ([`CaptureOp::EventTracking`]) |
//! | [`Launch::launch_and_sync`](super::Launch::launch_and_sync), [`Module::synchronize`](super::Module::synchronize) | a capturing stream cannot be synchronised (its work has not run) | refused ([`CaptureOp::Synchronize`]); the launch is not recorded |
//! | [`TensorMapArray::upload`](super::TensorMapArray::upload) / `set` | allocates and copies host memory the graph would read again at each replay (`set`'s from the stack) | refused ([`CaptureOp::MapUpload`]) |
//!
//! Compile and load refusals cover captures begun with [`Capture::begin`] on the calling
//! thread (a module load takes a context, not a stream: only tma's own captures are known);
//! the others ask the driver about the stream they are given (`cuStreamIsCapturing`), so they
//! cover any capture.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::{CudaGraph, CudaStream};

use crate::error::Error;

thread_local! {
    /// Captures begun with [`Capture::begin`] on this thread and not yet ended.
    static CAPTURING: Cell<u32> = const { Cell::new(0) };
}

/// What a capture refuses, with why and what to do instead: every such message comes from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureOp {
    /// [`Module::compile_and_load`](super::Module::compile_and_load) of a module not loaded yet.
    CompileAndLoad,
    /// [`Module::load`](super::Module::load).
    ModuleLoad,
    /// [`Launch::launch_and_sync`](super::Launch::launch_and_sync) or
    /// [`Module::synchronize`](super::Module::synchronize).
    Synchronize,
    /// [`TensorMapArray::upload`](super::TensorMapArray::upload) or `set`.
    MapUpload,
    /// A buffer's address taken (a launch argument, a map's encode) with cudarc's event
    /// tracking on.
    EventTracking,
    /// [`Capture::begin`] on the legacy default stream.
    DefaultStream,
    /// [`Capture::begin`] in a context whose cudarc event tracking is on.
    TrackedBegin,
}

/// Compiling and loading before a capture: the warm-up every refusal of a load points to.
const WARM_FIRST: &str = "compile and load every module before the capture (warm first: \
    Compiler::precompile, then Module::compile_and_load and Module::kernel, and hold them); during \
    the capture, only launch";
const TRACKING_OFF: &str = "call `unsafe { ctx.disable_event_tracking() }` before the capture \
    (the graph's work is ordered by its one stream, and its replays by the stream they are \
    launched on)";

impl CaptureOp {
    /// The error: the operation, why the capture cannot take it, what to do.
    pub fn error(self) -> Error {
        let (operation, problem, fix) = match self {
            CaptureOp::CompileAndLoad => (
                "Module::compile_and_load during a CUDA graph capture",
                "this module is not loaded yet, and a capture cannot take an NVRTC compile and a \
                 module load",
                WARM_FIRST,
            ),
            CaptureOp::ModuleLoad => (
                "Module::load during a CUDA graph capture",
                "loading a module allocates and copies (its debug hang record is pinned host \
                 memory written by a synchronous copy), which a capture forbids on its thread",
                WARM_FIRST,
            ),
            CaptureOp::Synchronize => (
                "synchronising a stream that is being captured",
                "its work is being recorded into a graph, not run (launch_and_sync and \
                 Module::synchronize wait for it)",
                "during the capture launch with Launch::launch; after it, launch the graph and \
                 synchronise (Module::synchronize turns a hang into its named error)",
            ),
            CaptureOp::MapUpload => (
                "TensorMapArray upload or set during a CUDA graph capture",
                "it allocates device memory and copies host memory that the graph would read \
                 again at every replay",
                "upload map arrays before the capture; a map passed by value (a \
                 `__grid_constant__` parameter) may be encoded during it",
            ),
            CaptureOp::EventTracking => (
                "a buffer used on a stream that is being captured",
                "cudarc's event tracking is on, so taking the buffer's address waits on an event \
                 recorded before the capture, which the driver refuses (and which invalidates \
                 the capture)",
                TRACKING_OFF,
            ),
            CaptureOp::DefaultStream => (
                "Capture::begin on the context's default stream",
                "the legacy default stream cannot be captured",
                "capture a stream of its own: ctx.new_stream()",
            ),
            CaptureOp::TrackedBegin => (
                "Capture::begin with cudarc's event tracking on",
                "each buffer's first use in the capture would wait on an event recorded before \
                 it, which the driver refuses (and which invalidates the capture)",
                TRACKING_OFF,
            ),
        };
        Error::Capture {
            operation,
            problem,
            fix,
        }
    }
}

/// Whether `stream` is being captured (`cuStreamIsCapturing`; an invalidated capture counts:
/// it is still to be ended).
pub fn is_capturing(stream: &CudaStream) -> Result<bool, Error> {
    crate::cuda_libs::libcuda_available()?;
    let status = stream
        .capture_status()
        .map_err(Error::driver("cuStreamIsCapturing"))?;
    Ok(status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// `op`'s error when `stream` is being captured.
pub(crate) fn refuse_if_capturing(stream: &CudaStream, op: CaptureOp) -> Result<(), Error> {
    if is_capturing(stream)? {
        return Err(op.error());
    }
    Ok(())
}

/// `op`'s error when `stream` is being captured with cudarc's event tracking on (taking a
/// buffer's address would wait on an event recorded outside the capture). Asks the driver
/// only when tracking is on.
pub(crate) fn refuse_tracked_use(stream: &CudaStream) -> Result<(), Error> {
    if stream.context().is_managing_stream_synchronization() {
        refuse_if_capturing(stream, CaptureOp::EventTracking)?;
    }
    Ok(())
}

/// Whether a [`Capture`] is open on this thread.
pub(crate) fn capturing_on_this_thread() -> bool {
    CAPTURING.with(|c| c.get() > 0)
}

/// A stream capture begun by tma: the launches queued on its stream until [`Capture::end`]
/// become a CUDA graph, replayed with `graph.launch()`. While it is open, this thread's module
/// loads are refused by name ([`CaptureOp`]); dropped without `end`, the capture is ended and
/// its graph discarded. Tied to its thread (the capture is `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`).
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let (ctx, kernel, cfg): (std::sync::Arc<cudarc::driver::CudaContext>, tma_runtime::Kernel, tma_runtime::LaunchConfig) = todo!();
/// # let (map_a, map_b): (tma_runtime::TensorMap, tma_runtime::TensorMap) = todo!();
/// // Before: compile, load, get kernels, allocate, encode maps (warm first).
/// unsafe { ctx.disable_event_tracking() }; // one stream orders the graph's work
/// let capture = tma_runtime::Capture::begin(&cfg.stream)?;
/// unsafe { kernel.launch_builder(&cfg).arg(&map_a).arg(&map_b).launch() }?; // recorded
/// let graph = capture.end()?;
/// graph.launch()?; // replays it
/// kernel.module().synchronize(&cfg.stream)?;
/// # Ok(()) }
/// ```
pub struct Capture {
    stream: Arc<CudaStream>,
    ended: bool,
    /// Not `Send`: the capture mode, and the count of open captures, are this thread's.
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("stream", &self.stream.cu_stream())
            .field("ended", &self.ended)
            .finish()
    }
}

impl Capture {
    /// Begins capturing `stream` (`cuStreamBeginCapture`, thread-local mode). Refused: the
    /// legacy default stream ([`CaptureOp::DefaultStream`]), and a context whose cudarc event
    /// tracking is on ([`CaptureOp::TrackedBegin`]: every buffer's first use in the capture
    /// would wait on an event recorded before it).
    pub fn begin(stream: &Arc<CudaStream>) -> Result<Capture, Error> {
        Capture::begin_checked(stream, true)
    }

    /// [`Capture::begin`] with cudarc's event tracking left as it is: for a caller whose
    /// launches under the capture take no tracked buffer (the tuner: `Bench::run` passes
    /// device addresses taken before it). The guard holds all the same: a compile or load
    /// inside it is refused by name.
    pub(crate) fn begin_tracked(stream: &Arc<CudaStream>) -> Result<Capture, Error> {
        Capture::begin_checked(stream, false)
    }

    /// The one place both begin: the default stream refused first, whatever the tracking
    /// (a review fix that checked tracking first named the default stream as tracked; seen
    /// on the H100), then the tracking when `refuse_tracking`.
    fn begin_checked(stream: &Arc<CudaStream>, refuse_tracking: bool) -> Result<Capture, Error> {
        crate::cuda_libs::libcuda_available()?;
        if stream.cu_stream().is_null() {
            return Err(CaptureOp::DefaultStream.error());
        }
        if refuse_tracking && stream.context().is_event_tracking() {
            return Err(CaptureOp::TrackedBegin.error());
        }
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(Error::driver("cuStreamBeginCapture"))?;
        CAPTURING.with(|c| c.set(c.get() + 1));
        Ok(Capture {
            stream: stream.clone(),
            ended: false,
            _thread: PhantomData,
        })
    }

    /// The stream being captured.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Ends the capture and instantiates its graph (`cuStreamEndCapture`,
    /// `cuGraphInstantiate`). The driver's `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` means
    /// something not tma's broke the capture.
    pub fn end(mut self) -> Result<CudaGraph, Error> {
        self.close();
        self.stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(Error::driver("cuStreamEndCapture / cuGraphInstantiate"))?
            .ok_or(Error::Driver {
                call: "cuStreamEndCapture",
                result: crate::error::CuResult(
                    cudarc::driver::sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                ),
            })
    }

    fn close(&mut self) {
        if !self.ended {
            self.ended = true;
            CAPTURING.with(|c| c.set(c.get().saturating_sub(1)));
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.close();
        let _ = self.stream.context().bind_to_thread();
        // SAFETY: the stream is alive (held); ending a capture this thread began returns its
        // graph (or an error for an invalidated one), destroyed once here.
        if let Ok(g) =
            unsafe { cudarc::driver::result::stream::end_capture(self.stream.cu_stream()) }
        {
            if !g.is_null() {
                // SAFETY: a graph the driver just handed over, destroyed once.
                let _ = unsafe { cudarc::driver::result::graph::destroy(g) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_names_the_operation_and_what_to_do() {
        for op in [
            CaptureOp::CompileAndLoad,
            CaptureOp::ModuleLoad,
            CaptureOp::Synchronize,
            CaptureOp::MapUpload,
            CaptureOp::EventTracking,
            CaptureOp::DefaultStream,
            CaptureOp::TrackedBegin,
        ] {
            let e = op.error();
            assert!(matches!(e, Error::Capture { .. }), "{op:?}");
            let s = e.to_string();
            assert!(!s.is_empty() && s.contains("; "), "{op:?}: {s}");
        }
        let load = CaptureOp::ModuleLoad.error().to_string();
        assert!(
            load.starts_with("Module::load during a CUDA graph capture: ")
                && load.contains("warm first: Compiler::precompile"),
            "{load}"
        );
        assert!(!capturing_on_this_thread());
    }
}
