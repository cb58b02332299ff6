//! Hangs become errors: the hang record a bounded wait (debug, or release opted in) or a
//! debug check writes before it traps (CONTRACTS.md), in pinned host memory that survives
//! the trapped context.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaModule};

use crate::compile::Compiled;
use crate::error::{CuResult, Error};
use tma_core::render::HangTiles;
use tma_core::rules::Helper;
use tma_core::Rule;

/// The module global the bounded waits and debug checks write through (CONTRACTS.md).
pub const DEBUG_RECORD_SYMBOL: &str = "tma_debug_record";

/// The debug record of CONTRACTS.md, written by a debug wait that gave up or a debug check
/// that failed (64 bytes; the device's `tma_hang_record`, field for field).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HangRecord {
    /// 0: nothing happened; 1: a wait hung; 2: a check failed (the first one claims it);
    /// `u32::MAX`: claimed, still being written (the writer publishes its kind last).
    pub kind: u32,
    pub block_x: u32,
    pub block_y: u32,
    pub block_z: u32,
    pub thread: u32,
    /// The tile's id in its source (`TILE_ID`); `u32::MAX`: unknown.
    pub tile_id: u32,
    /// Hang: the mbarrier's shared-memory address.
    pub barrier: u32,
    /// Hang: the parity waited for.
    pub phase: u32,
    /// Hang: the tx bytes the tile expected.
    pub expected_tx: u32,
    /// Check: the helper's code ([`tma_core::rules::Helper::ALL`]).
    pub helper: u32,
    /// Check: the rule's code ([`tma_core::Rule::DEVICE_CHECKED`]).
    pub rule: u32,
    /// Check: the dim (user order); `u32::MAX`: none.
    pub dim: u32,
    /// Check: the offending value.
    pub value: i64,
    /// Hang: how long the wait waited.
    pub waited_ns: u64,
}

const _: () = assert!(std::mem::size_of::<HangRecord>() == 64);

/// `kind` of a record a wait that gave up wrote.
const KIND_HANG: u32 = 1;
/// `kind` of a record a failed check wrote.
const KIND_CHECK: u32 = 2;

impl HangRecord {
    /// Whether anything wrote this record (a hang, a failed check, or a kind this runtime
    /// does not know: [`Error::UnknownDebugRecord`]).
    pub fn is_set(&self) -> bool {
        self.kind != 0
    }

    /// The error this record describes, naming the tile, its dim and the pipeline from the
    /// source's description ([`Compiled::facts`]; ids when the source was text alone).
    pub fn to_error(&self, compiled: &Compiled) -> Error {
        let name = |id: u32| match compiled.tile_name(id) {
            Some(n) => n.to_string(),
            None => format!("<tile {id}>"),
        };
        // One tile, a group of tiles sharing the barrier (`tma_group`), or none.
        let tile = match HangTiles::decode(self.tile_id) {
            HangTiles::Unknown => "<unknown tile>".to_string(),
            HangTiles::Tile(id) => name(id),
            HangTiles::Group { tiles, more } => {
                let mut names: Vec<String> = tiles.into_iter().map(name).collect();
                if more {
                    names.push("tiles with ids of 30 or more".to_string());
                }
                names.join(" + ")
            }
        };
        let block = [self.block_x, self.block_y, self.block_z];
        // A work queue's wait names the queue (value), the slot (dim) and its side.
        if let (KIND_HANG, Some(helper @ (Helper::QueuePush | Helper::QueuePop))) =
            (self.kind, Helper::from_device_code(self.helper))
        {
            let id = u32::try_from(self.value).unwrap_or(u32::MAX);
            let queue = compiled.queue(id);
            return Error::QueueTimeout {
                queue: queue.map_or_else(|| format!("<queue {id}>"), |q| q.name.clone()),
                kernel: queue.map_or_else(|| "<unknown>".to_string(), |q| q.kernel.clone()),
                helper: helper.name(),
                slot: self.dim,
                parity: self.phase,
                barrier: self.barrier,
                block,
                thread: self.thread,
                waited_ns: self.waited_ns,
            };
        }
        // A pipeline's wait names the pipeline (value), the stage (dim) and its helper.
        if let (KIND_HANG, Some(helper @ (Helper::PipelineWait | Helper::PipelineAcquire))) =
            (self.kind, Helper::from_device_code(self.helper))
        {
            let id = u32::try_from(self.value).unwrap_or(u32::MAX);
            return Error::PipelineTimeout {
                pipeline: compiled
                    .pipeline_name(id)
                    .map_or_else(|| format!("<pipeline {id}>"), str::to_string),
                helper: helper.name(),
                stage: self.dim,
                parity: self.phase,
                tiles: tile,
                expected_tx: self.expected_tx,
                barrier: self.barrier,
                block,
                thread: self.thread,
                waited_ns: self.waited_ns,
            };
        }
        match (
            self.kind,
            Rule::from_device_code(self.rule),
            Helper::from_device_code(self.helper),
        ) {
            (KIND_HANG, _, _) => Error::BarrierTimeout {
                tile,
                block,
                thread: self.thread,
                barrier: self.barrier,
                phase: self.phase,
                expected_tx: self.expected_tx,
                waited_ns: self.waited_ns,
            },
            (KIND_CHECK, Some(rule), Some(helper)) => Error::DeviceCheck {
                // A tile's dim (user order, as the record holds it) by its declared name; a
                // pipeline's launch check uses `dim` for a cluster axis.
                dim_name: match (rule, HangTiles::decode(self.tile_id)) {
                    (Rule::PipelineLaunchShape, _) => None,
                    (_, HangTiles::Tile(id)) => (compiled.tile(id))
                        .and_then(|t| t.dim_name(self.dim))
                        .map(str::to_string),
                    _ => None,
                },
                // A pipeline's launch check names the pipeline (value bits 56 and up).
                tile: if rule == Rule::PipelineLaunchShape {
                    let id = u32::try_from(self.value >> 56).unwrap_or(u32::MAX);
                    let pipeline = compiled
                        .pipeline_name(id)
                        .map_or_else(|| format!("<pipeline {id}>"), str::to_string);
                    format!("{tile}` of pipeline `{pipeline}")
                } else {
                    tile
                },
                helper: helper.name(),
                rule,
                dim: (self.dim != u32::MAX).then_some(self.dim),
                value: self.value,
                block,
                thread: self.thread,
            },
            // A check with a code this runtime does not know, or another kind: say so with
            // the raw codes rather than call it a hang.
            _ => Error::UnknownDebugRecord {
                tile,
                kind: self.kind,
                helper_code: self.helper,
                rule_code: self.rule,
                dim: self.dim,
                value: self.value,
                block,
                thread: self.thread,
            },
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
    /// A fresh record that `module`'s `tma_debug_record` global points at;
    /// [`Error::DebugRecordMissing`] (before allocating anything) when the module has no such
    /// global of a pointer's size.
    pub(super) fn attach(
        ctx: &Arc<CudaContext>,
        module: &Arc<CudaModule>,
    ) -> Result<MappedRecord, Error> {
        ctx.bind_to_thread()
            .map_err(Error::driver("cuCtxSetCurrent"))?;
        let stream = ctx.default_stream();
        let mut global = module
            .get_global(DEBUG_RECORD_SYMBOL, &stream)
            .map_err(|e| Error::DebugRecordMissing { result: e.into() })?;
        if global.len() != 8 {
            return Err(Error::DebugRecordMissing {
                result: CuResult(sys::CUresult::CUDA_ERROR_INVALID_VALUE),
            });
        }
        let rec = MappedRecord::new(ctx)?;
        stream
            .memcpy_htod(&rec.device.to_le_bytes(), &mut global)
            .map_err(Error::driver("cuMemcpyHtoD(tma_debug_record)"))?;
        stream
            .synchronize()
            .map_err(Error::driver("cuStreamSynchronize"))?;
        Ok(rec)
    }
    /// Clears the record, once, when it is allocated. Never before a launch: a record an
    /// earlier launch set is the first failure of the context, reported by every later
    /// launch and synchronisation (a trap loses the context, so nothing runs after it).
    fn reset(&self) {
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
    use tma_core::facts::{PipelineFacts, QueueFacts, SourceFacts, TileFacts};
    use tma_core::Arch;

    #[test]
    fn hang_record_becomes_a_named_error() {
        let compiled = compiled_with(&[("q", &[]), ("kv_tile", &[])], &[]);
        let rec = HangRecord {
            kind: KIND_HANG,
            block_x: 3,
            block_y: 1,
            block_z: 0,
            thread: 32,
            barrier: 0x400,
            phase: 1,
            expected_tx: 16384,
            tile_id: 1,
            waited_ns: 1_000_000_123,
            ..HangRecord::default()
        };
        match rec.to_error(&compiled) {
            e @ Error::BarrierTimeout { .. } => {
                let s = e.to_string();
                assert!(s.contains("tile `kv_tile`"), "{s}");
                assert!(s.contains("block [3, 1, 0] thread 32"), "{s}");
                assert!(s.contains("expecting 16384 tx bytes"), "{s}");
                assert!(s.contains("waited 1000000123 ns"), "{s}");
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
    fn a_failed_check_becomes_a_named_error() {
        let compiled = compiled_with(&[("q", &["M", "K"])], &[]);
        let rec = HangRecord {
            kind: KIND_CHECK,
            block_x: 2,
            thread: 0,
            tile_id: 0,
            helper: 3,
            rule: 2,
            dim: 1,
            value: -8,
            ..HangRecord::default()
        };
        let e = rec.to_error(&compiled);
        match &e {
            Error::DeviceCheck {
                tile,
                helper,
                rule,
                dim,
                dim_name,
                value,
                ..
            } => {
                assert_eq!(
                    (
                        tile.as_str(),
                        *helper,
                        *rule,
                        *dim,
                        dim_name.as_deref(),
                        *value
                    ),
                    (
                        "q",
                        "store",
                        Rule::StoreCoordinateNegative,
                        Some(1),
                        Some("K"),
                        -8
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        let s = e.to_string();
        assert!(
            s.contains("tile `q`: store() in block [2, 0, 0] thread 0 breaks StoreCoordinateNegative: dim 1 (K) coordinate -8 is negative"),
            "{s}"
        );
        // The record's dim is in the user's order: dim 0 is the outer one, `M`.
        let outer = HangRecord { dim: 0, ..rec };
        assert!(outer
            .to_error(&compiled)
            .to_string()
            .contains("dim 0 (M) coordinate -8"));
        // A dim without a name, or text without a description: the index alone.
        let unnamed = compiled_with(&[("q", &[])], &[]);
        assert!(rec
            .to_error(&unnamed)
            .to_string()
            .contains(": dim 1 coordinate -8 is negative"));
        let s = rec.to_error(&text_only()).to_string();
        assert!(
            s.contains("tile `<tile 0>`: store() in block [2, 0, 0] thread 0 breaks StoreCoordinateNegative: dim 1 coordinate -8"),
            "{s}"
        );
        // A pipeline's launch check uses `dim` for a cluster axis, not a tile dim.
        let launch = HangRecord {
            helper: 9, // Helper::PipelineInit
            rule: 9,   // Rule::PipelineLaunchShape
            dim: 1,
            value: (2 << 28) | 1,
            ..rec
        };
        match launch.to_error(&compiled) {
            Error::DeviceCheck {
                dim_name: None,
                dim: Some(1),
                ..
            } => {}
            other => panic!("{other:?}"),
        }
    }

    /// A record with a rule or helper code (or kind) the runtime does not know is reported
    /// as what it is, with its raw codes, not as a hang.
    #[test]
    fn an_unknown_check_record_is_not_a_hang() {
        let compiled = compiled_with(&[("q", &[])], &[]);
        let check = HangRecord {
            kind: KIND_CHECK,
            block_x: 1,
            thread: 5,
            tile_id: 0,
            helper: 1,
            rule: 999,
            dim: u32::MAX,
            value: 77,
            ..HangRecord::default()
        };
        for (rec, kind, helper_code, rule_code) in [
            (check, KIND_CHECK, 1, 999),
            (
                HangRecord {
                    helper: 4242,
                    rule: 1,
                    ..check
                },
                KIND_CHECK,
                4242,
                1,
            ),
            (
                HangRecord {
                    kind: 9,
                    rule: 1,
                    ..check
                },
                9,
                1,
                1,
            ),
        ] {
            assert!(rec.is_set());
            match rec.to_error(&compiled) {
                e @ Error::UnknownDebugRecord { .. } => {
                    assert!(
                        matches!(&e, Error::UnknownDebugRecord { tile, kind: k, helper_code: h, rule_code: r, value: 77, block: [1, 0, 0], thread: 5, .. }
                            if tile == "q" && (*k, *h, *r) == (kind, helper_code, rule_code)),
                        "{e:?}"
                    );
                    let s = e.to_string();
                    assert!(
                        s.contains(&format!(
                            "kind {kind}, helper code {helper_code}, rule code {rule_code}"
                        )),
                        "{s}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(!HangRecord::default().is_set());
    }

    #[test]
    fn a_group_hang_names_every_tile() {
        let compiled = compiled_with(&[("q", &[]), ("k", &[]), ("v", &[])], &[]);
        let rec = HangRecord {
            kind: KIND_HANG,
            tile_id: 0x8000_0005,
            ..HangRecord::default()
        };
        match rec.to_error(&compiled) {
            Error::BarrierTimeout { tile, .. } => assert_eq!(tile, "q + v"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_pipeline_hang_names_the_pipeline_stage_phase_and_tiles() {
        let compiled = compiled_with(&[("a", &[]), ("b", &[])], &["other", "ring"]);
        let rec = HangRecord {
            kind: KIND_HANG,
            block_x: 5,
            thread: 160,
            tile_id: 0x8000_0003,
            barrier: 0x9000,
            phase: 1,
            expected_tx: 10240,
            helper: 7,
            dim: 3,
            value: 1,
            waited_ns: 1_000_000_500,
            ..HangRecord::default()
        };
        let e = rec.to_error(&compiled);
        match &e {
            Error::PipelineTimeout {
                pipeline,
                helper,
                stage,
                parity,
                tiles,
                ..
            } => assert_eq!(
                (pipeline.as_str(), *helper, *stage, *parity, tiles.as_str()),
                ("ring", "wait", 3, 1, "a + b")
            ),
            other => panic!("{other:?}"),
        }
        let s = e.to_string();
        assert!(
            s.contains("pipeline `ring`: wait() in block [5, 0, 0] thread 160 waited 1000000500 ns for stage 3 (parity 1, tiles a + b, expecting 10240 tx bytes)"),
            "{s}"
        );
        let acquire = HangRecord { helper: 8, ..rec };
        let s = acquire.to_error(&compiled).to_string();
        assert!(
            s.contains("acquire() in block") && s.contains("released by its consumers"),
            "{s}"
        );
        // A tile's own wait (helper 0) stays a BarrierTimeout.
        let tile = HangRecord { helper: 0, ..rec };
        assert!(matches!(
            tile.to_error(&compiled),
            Error::BarrierTimeout { .. }
        ));
    }

    /// A work queue's wait names the queue, its kernel, the slot, the parity and the side.
    #[test]
    fn a_queue_hang_names_the_queue_slot_and_side() {
        let compiled = compiled_with(&[], &["ring"]);
        let rec = HangRecord {
            kind: KIND_HANG,
            block_x: 2,
            thread: 128,
            tile_id: u32::MAX,
            barrier: 0x40,
            phase: 0,
            helper: 17,
            dim: 2,
            value: 0,
            waited_ns: 2_000_000_000,
            ..HangRecord::default()
        };
        let e = rec.to_error(&compiled);
        match &e {
            Error::QueueTimeout {
                queue,
                kernel,
                helper,
                slot,
                parity,
                ..
            } => assert_eq!(
                (queue.as_str(), kernel.as_str(), *helper, *slot, *parity),
                ("tiles", "gemm", "pop", 2, 0)
            ),
            other => panic!("{other:?}"),
        }
        let s = e.to_string();
        assert!(
            s.contains("work queue `tiles` of kernel `gemm`: pop() in block [2, 0, 0] thread 128")
                && s.contains("slot 2 (parity 0)")
                && s.contains("no item was pushed there"),
            "{s}"
        );
        let push = HangRecord {
            helper: 16,
            value: 5,
            ..rec
        }
        .to_error(&compiled)
        .to_string();
        assert!(
            push.contains("work queue `<queue 5>`")
                && push.contains("push()")
                && push.contains("did not all pop"),
            "{push}"
        );
    }

    /// A compiled module of a source described with `tiles` (id order; dim names where
    /// given) and `pipelines`.
    fn compiled_with(tiles: &[(&str, &[&str])], pipelines: &[&str]) -> Compiled {
        let facts = SourceFacts {
            tiles: (0u32..)
                .zip(tiles)
                .map(|(id, (name, dims))| TileFacts {
                    id,
                    name: name.to_string(),
                    dim_names: dims.iter().map(|d| Some(d.to_string())).collect(),
                    smem_bytes: 8192,
                    align_bytes: 1024,
                    target: Arch::Sm90a,
                    outside_plans: true,
                })
                .collect(),
            pipelines: (0u32..)
                .zip(pipelines)
                .map(|(id, name)| PipelineFacts {
                    id,
                    name: name.to_string(),
                    stages: 2,
                    cluster: [1, 1, 1],
                    dynamic_smem_bytes: 20000,
                    tiles: vec![0, 1],
                    outside_plans: true,
                })
                .collect(),
            queues: vec![QueueFacts {
                id: 0,
                kernel: "gemm".to_string(),
                name: "tiles".to_string(),
            }],
            plans: Vec::new(),
        };
        Compiled {
            facts: Some(Arc::new(facts)),
            ..text_only()
        }
    }

    /// A compiled module of text alone (no description).
    fn text_only() -> Compiled {
        Compiled {
            ptx: String::new(),
            cubin: Vec::new(),
            log: String::new(),
            arch: Arch::Sm90a,
            debug_waits: true,
            facts: None,
            args: Vec::new(),
            key: "k".into(),
            kernel_resources: Vec::new(),
        }
    }

    /// A record another thread's fault cut short while it was written (kind still
    /// `u32::MAX`: the writer publishes its kind last) is no hang that waited 0 ns: it is
    /// reported as what it is, with the raw codes.
    #[test]
    fn a_record_still_being_written_is_no_hang() {
        let compiled = compiled_with(&[("q", &[])], &[]);
        let cut = HangRecord {
            kind: u32::MAX,
            tile_id: 0,
            ..HangRecord::default()
        };
        assert!(cut.is_set());
        match cut.to_error(&compiled) {
            e @ Error::UnknownDebugRecord { kind: u32::MAX, .. } => {
                let s = e.to_string();
                assert!(
                    s.contains("kind 4294967295") && s.contains("still being written"),
                    "{s}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn record_layout_matches_the_contract() {
        assert_eq!(std::mem::size_of::<HangRecord>(), 64);
        assert_eq!(std::mem::offset_of!(HangRecord, tile_id), 20);
        assert_eq!(std::mem::offset_of!(HangRecord, helper), 36);
        assert_eq!(std::mem::offset_of!(HangRecord, value), 48);
        assert_eq!(std::mem::offset_of!(HangRecord, waited_ns), 56);
    }
}
