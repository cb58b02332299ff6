//! The artifact of one compile: PTX, CUBIN and what the driver layer needs to load and
//! explain it. Plain data: it can be cached, written to disk and loaded into any context.

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
    /// Tiles named by the source's `// tma-tile <id> <name>` lines, for hang reports.
    pub tiles: Vec<(u32, String)>,
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
            .find(|(i, _)| *i == id)
            .map(|(_, n)| n.as_str())
    }
}
