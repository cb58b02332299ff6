//! Work queues: a ring of `int` slots that one producer thread fills and the block's readers
//! each take in order ([`WorkQueue`] -> [`WorkQueue::validate`] -> [`ValidWorkQueue`]), kept in
//! a kernel plan's region ([`crate::plan::KernelPlan::work_queue`]) and rendered as the
//! prelude's `tma_work_queue<..>`.
//!
//! What it is for: a persistent kernel whose tiles differ in work (a grouped GEMM's weight
//! gradient, where a tile's work is its group's tokens) balances best when each CTA claims its
//! next tile when it gets there (`atomicAdd` on a global counter, in an order of decreasing
//! work: list scheduling), rather than from a walk fixed in advance. Only the producer thread
//! claims; the tile's index reaches the consumer warpgroups, which must all agree on it,
//! through this ring. A slot is handed over as a pipeline's stage is, with mbarriers and no
//! block-wide barrier:
//!
//! ```text
//! producer (one thread)                         every reader (Consumers: each warp or thread)
//! push(s, v): wait empty[i] (parity ^ 1)        v = pop(s): wait full[i] (parity)
//!             items[i] = v                                  read items[i]
//!             arrive full[i] (release.cta)                  arrive empty[i] (warp: lane 0
//!             s.advance()                                   after __syncwarp); s.advance()
//! ```
//!
//! `full[i]` counts 1 arrival (the producer's), `empty[i]` [`ValidWorkQueue::empty_arrivals`]
//! (every reader of the CTA reads every slot). The producer's store is ordered before the
//! readers' loads by the arrive's release and the wait's acquire (PTX ISA, mbarrier: both are
//! `.cta`-scoped by default), and every reader's load before the slot's next store by the
//! same pair on the empty barrier: a slot is never overwritten before each reader has read it,
//! and the producer runs at most `slots` items ahead of the slowest reader. A bounded wait
//! (`TMA_DEBUG`, `TMA_BOUNDED_WAITS`) names the queue, the slot, the parity and the side
//! (`Helper::QueuePush`, `Helper::QueuePop`): `tma_runtime::Error::QueueTimeout`.
//!
//! Shared memory, from an 8-byte-aligned base:
//!
//! ```text
//! +0            full barriers, 8 B each (slots)
//! +8 slots      empty barriers, 8 B each (slots)
//! +16 slots     items, 4 B each (slots), then padding to a multiple of 8
//! ```

use super::{finding, Consumers, PipelineErrors, MAX_BLOCK_THREADS};
use crate::error::Field;
use crate::rules::Rule;
use crate::size::Size;

/// The most slots a work queue has: 32 (a producer far ahead of its readers gains nothing;
/// items past what the pipeline behind them holds are claimed too early).
pub const MAX_QUEUE_SLOTS: u32 = 32;

/// A work queue declaration: plain data, checked by [`WorkQueue::validate`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkQueue {
    /// Slots in the ring: how many items the producer may run ahead of the slowest reader.
    pub slots: u32,
    /// Who reads every slot in each CTA (one arrival a warp for warps and warpgroups, one a
    /// thread for threads), as a pipeline's [`Consumers`]: every thread that pops, exactly (a
    /// ping-pong kernel's two consumer warpgroups both pop: `Warpgroups(2)`, not the ring's
    /// `Warpgroups(1)`). Too many and the producer waits forever (a bounded wait names the
    /// queue); too few and a slot is refilled before the slowest reader read it, which nothing
    /// can detect. Counted in warps, all 32 lanes of each reader warp pop together.
    pub readers: Consumers,
}

impl WorkQueue {
    /// A queue of `slots` slots read by `readers`.
    pub fn new(slots: u32, readers: Consumers) -> WorkQueue {
        WorkQueue { slots, readers }
    }
    /// Checks the slots (1 to [`MAX_QUEUE_SLOTS`]) and the readers (1 to 1024 threads), every
    /// finding at once.
    pub fn validate(&self) -> Result<ValidWorkQueue, PipelineErrors> {
        let mut errors = Vec::new();
        if !(1..=MAX_QUEUE_SLOTS).contains(&self.slots) {
            errors.push(finding(
                Field::Slots,
                self.slots,
                Rule::PipelineStageCount,
                format!("a work queue has 1 to {MAX_QUEUE_SLOTS} slots (two or more let the producer claim ahead)"),
            ));
        }
        let threads = self.readers.threads();
        if self.readers.count() == 0 || !threads.is_below(u64::from(MAX_BLOCK_THREADS) + 1) {
            errors.push(finding(
                Field::Consumers,
                self.readers,
                Rule::PipelineConsumers,
                format!(
                    "a work queue's slots are read by 1 to {MAX_BLOCK_THREADS} threads of a block (32 warps, 8 warpgroups); this is {threads} threads"
                ),
            ));
        }
        let arrivals = u32::try_from(self.readers.arrivals().get().unwrap_or(u64::MAX)).ok();
        match arrivals {
            Some(empty_arrivals) if errors.is_empty() => Ok(ValidWorkQueue {
                queue: self.clone(),
                empty_arrivals,
            }),
            _ => Err(PipelineErrors {
                what: "work queue".to_string(),
                errors,
            }),
        }
    }
}

/// A checked work queue: its layout's numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValidWorkQueue {
    queue: WorkQueue,
    empty_arrivals: u32,
}

impl ValidWorkQueue {
    /// The declaration.
    pub fn queue(&self) -> &WorkQueue {
        &self.queue
    }
    /// Slots in the ring.
    pub fn slots(&self) -> u32 {
        self.queue.slots
    }
    /// What each slot's empty barrier counts per pass: one arrival per reader warp (warps,
    /// warpgroups) or thread (threads).
    pub fn empty_arrivals(&self) -> u32 {
        self.empty_arrivals
    }
    /// Whether a reader warp arrives once (lane 0, after `__syncwarp()`) rather than each
    /// thread.
    pub fn per_warp(&self) -> bool {
        !matches!(self.queue.readers, Consumers::Threads(_))
    }
    /// Bytes of shared memory: two barriers and an item a slot, rounded up to 8.
    pub fn smem_bytes(&self) -> u64 {
        let raw = Size::from(self.queue.slots) * 20u64;
        raw.get().map_or(u64::MAX, |b| b.div_ceil(8) * 8)
    }
    /// The alignment its base needs: 8 (the mbarriers').
    pub fn align_bytes(&self) -> u64 {
        8
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_arrivals() {
        let q = WorkQueue::new(4, Consumers::Warpgroups(2))
            .validate()
            .expect("valid");
        assert_eq!((q.slots(), q.empty_arrivals(), q.per_warp()), (4, 8, true));
        assert_eq!((q.smem_bytes(), q.align_bytes()), (80, 8));
        let t = WorkQueue::new(3, Consumers::Threads(256))
            .validate()
            .expect("valid");
        assert_eq!(
            (t.empty_arrivals(), t.per_warp(), t.smem_bytes()),
            (256, false, 64)
        );
    }

    #[test]
    fn refuses_slots_and_readers() {
        let e = WorkQueue::new(0, Consumers::Warps(0))
            .validate()
            .expect_err("refused");
        let rules: Vec<Rule> = e.errors.iter().map(|f| f.rule).collect();
        assert_eq!(rules, [Rule::PipelineStageCount, Rule::PipelineConsumers]);
        assert!(e.errors[0].message.contains("1 to 32 slots"), "{e}");
        assert_eq!(
            (&e.errors[0].field, &e.errors[1].field),
            (&Field::Slots, &Field::Consumers)
        );
        assert!(e.to_string().contains("slots"), "{e}");
        let e = WorkQueue::new(33, Consumers::Warpgroups(9))
            .validate()
            .expect_err("refused");
        assert_eq!(e.errors.len(), 2, "{e}");
        assert!(e.errors[1].message.contains("1152 threads"), "{e}");
    }
}
