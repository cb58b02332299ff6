//! The artifact of one compile: PTX, CUBIN and what the driver layer needs to load and
//! explain it. Plain data: it can be cached, written to disk and loaded into any context.

use tma_core::manifest::{DeclaredPipeline, DeclaredTile};
use tma_core::Arch;

/// The output of one compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// The PTX (always present).
    pub ptx: String,
    /// The CUBIN for [`Compiled::arch`]; empty when this NVRTC cannot target it (PTX only:
    /// the driver JIT-compiles the PTX at load).
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings; empty when clean).
    pub log: String,
    /// The arch compiled for; a CUBIN loads only on a device of this arch.
    pub arch: Arch,
    /// Compiled with `-DTMA_DEBUG` (the module has `tma_debug_record`).
    pub debug_waits: bool,
    /// The tiles the source declares ([`tma_core::manifest`] lines): names for hang
    /// reports, footprints and alignments for launch checks.
    pub tiles: Vec<DeclaredTile>,
    /// The pipelines the source declares (`// tma-pipeline` lines): names for hang reports.
    pub pipelines: Vec<DeclaredPipeline>,
    /// The NVRTC arguments used.
    pub args: Vec<String>,
    /// The cache key (hex), also the disk-cache file stem.
    pub key: String,
}

impl Compiled {
    /// True when a CUBIN was produced (else PTX only).
    pub fn has_cubin(&self) -> bool {
        !self.cubin.is_empty()
    }
    /// The name of tile `id`, if the source listed it.
    pub fn tile_name(&self, id: u32) -> Option<&str> {
        self.tiles
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.name.as_str())
    }
    /// The name of pipeline `id`, if the source listed it.
    pub fn pipeline_name(&self, id: u32) -> Option<&str> {
        self.pipelines
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.name.as_str())
    }
    /// The ids of the pipelines kernel `name` initialises (the `%tma_pipeline_use_<id>`
    /// register their `init()` declares in its PTX; comments never count); `None` when the
    /// PTX has no such kernel.
    pub fn pipelines_used(&self, name: &str) -> Option<Vec<u32>> {
        super::ptx::pipelines_used(&self.ptx, name)
    }
    /// Whether kernel `name` uses dynamic shared memory (an `extern __shared__` array, in
    /// its body or a function it calls; read from the PTX's code, not its comments); `None`
    /// when the PTX has no such kernel.
    pub fn uses_dynamic_smem(&self, name: &str) -> Option<bool> {
        super::ptx::uses_dynamic_smem(&self.ptx, name)
    }
}
