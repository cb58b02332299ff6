//! The per-role timeline: where a warp-specialized kernel waits.
//!
//! Compiled with [`CompileOptions::timeline`](crate::CompileOptions::timeline)
//! (`-DTMA_TIMELINE`), each pipeline helper records one event per warp and pass through a
//! stage (`tma_core::timeline::TimelineKind`): the producer's `acquire` (its wait on the empty
//! barrier) and `load` (the issue), a consumer's `wait` (on the full barrier) and `release`.
//! A [`Timeline`] gives the module a buffer of slots (its `__constant__ tma_timeline`, set
//! through `cuModuleGetGlobal`: the kernel's signature does not change); after the launch,
//! [`Timeline::read`] returns the [`Trace`], which writes Chrome trace / Perfetto JSON
//! ([`Trace::chrome_json`]) and an SVG picture ([`Trace::svg`]), and sums where the time went
//! ([`Trace::stats`]). Without the option nothing is recorded and the SASS is the one of a
//! build without this feature (`tests/gpu_timeline.rs` compares it).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use tma_runtime::{LaunchConfig, Module};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let (module, cfg): (Arc<Module>, LaunchConfig) = todo!();
//! use tma_runtime::timeline::{SvgOptions, Timeline};
//! // `module` compiled with CompileOptions::timeline(true); 64 passes per warp and pipeline.
//! let timeline = Timeline::attach(&module, &cfg, 64)?;
//! // ... launch the kernel with `cfg` ...
//! let trace = timeline.read()?;
//! println!("{}", trace.stats());
//! std::fs::write("gemm.json", trace.filter_blocks(|b| b < 8).chrome_json())?;
//! std::fs::write("gemm.svg", trace.svg(&SvgOptions::default()))?;
//! # Ok(()) }
//! ```
//!
//! One timeline per module at a time (it owns the module's `tma_timeline`); dropping it sets
//! the global back to no buffer. Slots are overwritten by each launch, not appended:
//! [`Timeline::clear`] between launches whose events should not mix.

mod chrome;
mod svg;
mod trace;

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use tma_core::timeline::CONFIG_BYTES;

use crate::driver::{LaunchConfig, Module};
use crate::error::{CuResult, Error};

pub use svg::SvgOptions;
pub use tma_core::timeline::TimelineKind;
pub use trace::{Held, TimelineEvent, TimelineShape, TimelineStats, Trace};

/// The module global the recording sites read their buffer from (`__constant__`).
pub const TIMELINE_SYMBOL: &str = "tma_timeline";

/// A buffer of timeline slots attached to a module compiled with the timeline.
pub struct Timeline {
    module: Arc<Module>,
    stream: Arc<CudaStream>,
    shape: TimelineShape,
    /// Freed on drop only once the module's `tma_timeline` no longer points at them.
    events: ManuallyDrop<CudaSlice<u8>>,
    dropped: ManuallyDrop<CudaSlice<u32>>,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl Timeline {
    /// A timeline for launches of `cfg`'s grid and block: a slot per kind for every block,
    /// warp, pipeline of the module's source (its description's; 1 for text alone) and pass
    /// up to `passes`.
    pub fn attach(
        module: &Arc<Module>,
        cfg: &LaunchConfig,
        passes: u32,
    ) -> Result<Timeline, Error> {
        let (gx, gy, gz) = cfg.grid;
        let blocks = u64::from(gx) * u64::from(gy) * u64::from(gz);
        let threads = u64::from(cfg.block.0) * u64::from(cfg.block.1) * u64::from(cfg.block.2);
        let pipelines = module.compiled().facts.as_ref().map_or(1, |f| {
            f.pipelines.iter().map(|p| p.id + 1).max().unwrap_or(1)
        });
        let shape = TimelineShape {
            blocks: u32::try_from(blocks).map_err(|_| Error::InvalidTimeline {
                field: "blocks",
                value: blocks,
                rule: "the device counts blocks in 32 bits",
            })?,
            warps: u32::try_from(threads.div_ceil(32)).unwrap_or(u32::MAX),
            pipelines,
            passes,
        };
        Timeline::with_shape(module, &cfg.stream, shape)
    }

    /// A timeline of `shape`, its slots allocated and zeroed on `stream` and the module's
    /// `tma_timeline` pointed at them ([`Error::TimelineMissing`] when the module was
    /// compiled without the timeline).
    pub fn with_shape(
        module: &Arc<Module>,
        stream: &Arc<CudaStream>,
        shape: TimelineShape,
    ) -> Result<Timeline, Error> {
        let bytes = shape.bytes()?;
        let len = usize::try_from(bytes).map_err(|_| Error::InvalidTimeline {
            field: "passes",
            value: u64::from(shape.passes),
            rule: "the slots' bytes fit the host's address space",
        })?;
        module
            .context()
            .bind_to_thread()
            .map_err(Error::driver("cuCtxSetCurrent"))?;
        // The global first: a module without it allocates nothing.
        global_len(module, stream)?;
        let events = stream
            .alloc_zeros::<u8>(len)
            .map_err(Error::driver("cuMemAlloc(timeline)"))?;
        let dropped = stream
            .alloc_zeros::<u32>(1)
            .map_err(Error::driver("cuMemAlloc(timeline dropped)"))?;
        let timeline = Timeline {
            module: module.clone(),
            stream: stream.clone(),
            shape,
            events: ManuallyDrop::new(events),
            dropped: ManuallyDrop::new(dropped),
        };
        let config = {
            let (events, _) = timeline.events.device_ptr(stream);
            let (dropped, _) = timeline.dropped.device_ptr(stream);
            config_bytes(events, dropped, shape)
        };
        timeline.set_config(&config)?;
        Ok(timeline)
    }

    /// The slots' extents.
    pub fn shape(&self) -> TimelineShape {
        self.shape
    }

    /// Zeroes every slot and the dropped count (queued on the timeline's stream).
    pub fn clear(&mut self) -> Result<(), Error> {
        self.stream
            .memset_zeros(&mut *self.events)
            .map_err(Error::driver("cuMemsetD8(timeline)"))?;
        self.stream
            .memset_zeros(&mut *self.dropped)
            .map_err(Error::driver("cuMemsetD8(timeline dropped)"))
    }

    /// Waits for the stream (the kernels that write the slots), reads the slots back and
    /// decodes them, naming the pipelines from the module's source.
    pub fn read(&self) -> Result<Trace, Error> {
        self.module.synchronize(&self.stream)?;
        let bytes = self
            .stream
            .clone_dtoh(&*self.events)
            .map_err(Error::driver("cuMemcpyDtoH(timeline)"))?;
        let dropped = self
            .stream
            .clone_dtoh(&*self.dropped)
            .map_err(Error::driver("cuMemcpyDtoH(timeline dropped)"))?
            .first()
            .copied()
            .unwrap_or(0);
        let compiled = self.module.compiled();
        let names = (0..self.shape.pipelines)
            .map(|id| {
                compiled
                    .pipeline_name(id)
                    .map_or_else(|| format!("pipeline {id}"), str::to_string)
            })
            .collect();
        Trace::decode(&bytes, self.shape, dropped, names)
    }

    /// Writes the module's `tma_timeline` and waits for the copy.
    fn set_config(&self, config: &[u8; CONFIG_BYTES]) -> Result<(), Error> {
        let mut global = self
            .module
            .cuda_module()
            .get_global(TIMELINE_SYMBOL, &self.stream)
            .map_err(|e| Error::TimelineMissing {
                expected: CONFIG_BYTES,
                result: e.into(),
            })?;
        self.stream
            .memcpy_htod(config.as_slice(), &mut global)
            .map_err(Error::driver("cuMemcpyHtoD(tma_timeline)"))?;
        self.stream
            .synchronize()
            .map_err(Error::driver("cuStreamSynchronize"))
    }
}

impl Drop for Timeline {
    /// Points the module's `tma_timeline` at no buffer before the slots are freed, so a later
    /// launch records nothing rather than write freed memory. When that fails (a capture on
    /// the stream, a context error), the slots are leaked, never freed under a config that may
    /// still point at them.
    fn drop(&mut self) {
        let _ = self.module.context().bind_to_thread();
        match self.set_config(&[0u8; CONFIG_BYTES]) {
            // SAFETY: each field is dropped once, here, and not used after.
            Ok(()) => unsafe {
                ManuallyDrop::drop(&mut self.events);
                ManuallyDrop::drop(&mut self.dropped);
            },
            Err(e) => eprintln!(
                "tma timeline: warning: could not detach the timeline from its module ({e}); \
                 its {} B of slots are leaked so that no launch writes freed memory",
                self.events.len()
            ),
        }
    }
}

/// The module's `tma_timeline` is the config's size, or [`Error::TimelineMissing`].
fn global_len(module: &Module, stream: &Arc<CudaStream>) -> Result<(), Error> {
    let missing = |result: CuResult| Error::TimelineMissing {
        expected: CONFIG_BYTES,
        result,
    };
    let global = module
        .cuda_module()
        .get_global(TIMELINE_SYMBOL, stream)
        .map_err(|e| missing(e.into()))?;
    if global.len() != CONFIG_BYTES {
        return Err(missing(CuResult(
            cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_VALUE,
        )));
    }
    Ok(())
}

/// The device's `tma_timeline_config`, little-endian: the slots' and the drop counter's
/// addresses, then blocks, warps, pipelines, passes.
fn config_bytes(events: u64, dropped: u64, s: TimelineShape) -> [u8; CONFIG_BYTES] {
    let mut c = [0u8; CONFIG_BYTES];
    c[0..8].copy_from_slice(&events.to_le_bytes());
    c[8..16].copy_from_slice(&dropped.to_le_bytes());
    for (i, v) in [s.blocks, s.warps, s.pipelines, s.passes]
        .iter()
        .enumerate()
    {
        c[16 + 4 * i..20 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_the_devices_layout() {
        let c = config_bytes(
            0x1122_3344_5566_7788,
            0x99,
            TimelineShape {
                blocks: 132,
                warps: 12,
                pipelines: 1,
                passes: 256,
            },
        );
        assert_eq!(&c[0..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&c[8..16], &0x99u64.to_le_bytes());
        assert_eq!(&c[16..20], &132u32.to_le_bytes());
        assert_eq!(&c[20..24], &12u32.to_le_bytes());
        assert_eq!(&c[24..28], &1u32.to_le_bytes());
        assert_eq!(&c[28..32], &256u32.to_le_bytes());
    }
}
