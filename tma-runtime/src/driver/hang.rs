//! Hangs become errors: the hang record a debug wait writes before it traps (CONTRACTS.md),
//! in pinned host memory that survives the trapped context.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaModule};

use crate::compile::Compiled;
use crate::error::{CuResult, Error};

/// The module global the debug waits write through (CONTRACTS.md).
pub const DEBUG_RECORD_SYMBOL: &str = "tma_debug_record";

/// The hang record of CONTRACTS.md, written by a debug wait that gave up (48 bytes; the
/// device's `tma_hang_record`, field for field).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HangRecord {
    /// Non-zero once a wait gave up (the first waiter to give up claims the record).
    pub hung: u32,
    pub block_x: u32,
    pub block_y: u32,
    pub block_z: u32,
    pub thread: u32,
    /// The mbarrier's shared-memory address.
    pub barrier: u32,
    /// The parity waited for.
    pub phase: u32,
    pub expected_tx: u32,
    /// The `// tma-tile <id>` of the tile waited for; `u32::MAX`: unknown.
    pub tile_id: u32,
    pub pad: u32,
    pub waited_ns: u64,
}

const _: () = assert!(std::mem::size_of::<HangRecord>() == 48);

impl HangRecord {
    /// The error this record describes, naming the tile from the source's tile lines.
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
pub(super) struct MappedRecord {
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
    /// A fresh record that `module`'s `tma_debug_record` global points at.
    pub(super) fn attach(
        ctx: &Arc<CudaContext>,
        module: &Arc<CudaModule>,
    ) -> Result<MappedRecord, Error> {
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
        Ok(rec)
    }
    /// Clears the record before a launch, so a hang read afterwards is this launch's.
    pub(super) fn reset(&self) {
        // SAFETY: `host` points to a live, aligned HangRecord-sized pinned allocation.
        unsafe { std::ptr::write_volatile(self.host, HangRecord::default()) };
    }
    pub(super) fn read(&self) -> HangRecord {
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

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;
    use tma_core::Arch;

    #[test]
    fn hang_record_becomes_a_named_error() {
        let compiled = Compiled {
            ptx: String::new(),
            cubin: Vec::new(),
            log: String::new(),
            arch: Arch::Sm90a,
            debug_waits: true,
            tiles: crate::compile::declared_tiles("// tma-tile 0 q\n// tma-tile 1 kv_tile\n"),
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
}
