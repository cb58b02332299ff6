//! A ring of pipeline stages in one block's shared memory: where each stage's tiles go,
//! where the full and empty mbarrier arrays sit, and how many stages fit beside the rest of
//! the kernel ([`StageLayout`]). Both levels are [`SmemLayout`]s: one stage's tiles
//! ([`StageLayout::stage`]), and the ring's three regions, the stages, the full barriers and
//! the empty barriers ([`StageLayout::ring`]).
//!
//! ```text
//! base (aligned to align_bytes)
//! | stage 0: tile 0 @ stage.offsets[0], tile 1 @ stage.offsets[1], ... | pad to stage_stride
//! | stage 1 ...                                                         |
//! | stage S-1                                                           |
//! | full[0..S]  (8 B each, at full_offset = S * stage_stride)           |
//! | empty[0..S] (8 B each, at empty_offset = full_offset + 8 S)         |
//! total_bytes = empty_offset + 8 S
//! ```
//!
//! A launch gives `dynamic_smem_bytes() = total_bytes + align_bytes` (the generated
//! `tma_align_smem` may skip up to `align_bytes - 16` of them, as for any [`SmemLayout`]).

use super::{SmemLayout, SmemLayoutOverflow, SmemPlan};
use crate::size::Size;

/// Bytes of one mbarrier (`.b64`, 8-byte aligned).
pub const MBARRIER_BYTES: u64 = 8;

/// The shared-memory layout of `stages` stages of the same tiles and their two mbarrier
/// arrays. Every stage starts at a multiple of the largest tile alignment, every tile at a
/// multiple of its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StageLayout {
    /// Stages in the ring.
    pub stages: u64,
    /// One stage's tiles, from the stage's start: each tile's offset, the bytes to the end of
    /// the last tile (`total_bytes`), the largest tile alignment.
    pub stage: SmemLayout,
    /// Bytes from one stage to the next: `stage.total_bytes` rounded up to
    /// `stage.align_bytes`.
    pub stage_stride: u64,
    /// The ring from the base: the `stages` stages (`stages * stage_stride` bytes at
    /// `stage.align_bytes`), then the full barriers (`stages` mbarriers the producer arms and
    /// the copies complete), then the empty barriers (`stages` mbarriers the consumers
    /// release), placed by [`SmemLayout::place`].
    pub ring: SmemLayout,
}

/// The sizes of a stage (before the count of stages is known).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StageShape {
    /// One stage's tiles.
    pub stage: SmemLayout,
    /// `stage.total_bytes` rounded up to `stage.align_bytes`.
    pub stride: Size,
}

impl StageShape {
    /// One stage holding one call of each of `plans`, in order.
    pub fn new<'a>(
        plans: impl IntoIterator<Item = &'a SmemPlan>,
    ) -> Result<StageShape, SmemLayoutOverflow> {
        let stage = SmemLayout::new(plans)?;
        let stride = Size::new(stage.total_bytes).next_multiple_of(stage.align_bytes);
        Ok(StageShape { stage, stride })
    }

    /// Bytes `stages` stages and their barriers span from the aligned base (what
    /// [`StageShape::layout`]'s ring spans, before it is known to fit 64 bits).
    pub fn total_bytes(&self, stages: u64) -> Size {
        self.stride * stages + Size::new(2 * MBARRIER_BYTES) * stages
    }

    /// Dynamic shared memory a launch gives for `stages` stages: the total plus the
    /// alignment slack (see the module docs).
    pub fn dynamic_smem_bytes(&self, stages: u64) -> Size {
        self.total_bytes(stages) + self.stage.align_bytes
    }

    /// The most stages whose dynamic shared memory plus `reserve` bytes fit in `limit`
    /// (0 when not even one does).
    pub fn max_stages(&self, reserve: u64, limit: u64) -> u64 {
        let per_stage = self.stride + 2 * MBARRIER_BYTES;
        let fixed = Size::new(self.stage.align_bytes) + reserve;
        match (per_stage.get(), fixed.get()) {
            (Some(per), Some(fixed)) if per > 0 && fixed <= limit => (limit - fixed) / per,
            _ => 0,
        }
    }

    /// The layout of `stages` stages; `None` when its size does not fit in 64 bits.
    pub fn layout(&self, stages: u64) -> Option<StageLayout> {
        let stage_stride = self.stride.get()?;
        let barriers = (Size::new(MBARRIER_BYTES) * stages).get()?;
        let ring = SmemLayout::place([
            ((self.stride * stages).get()?, self.stage.align_bytes),
            (barriers, MBARRIER_BYTES),
            (barriers, MBARRIER_BYTES),
        ])
        .ok()?;
        Some(StageLayout {
            stages,
            stage: self.stage.clone(),
            stage_stride,
            ring,
        })
    }
}

impl StageLayout {
    /// Offset of the full barriers from the base: right after the last stage.
    pub fn full_offset(&self) -> u64 {
        self.ring.offsets.get(1).copied().unwrap_or_default()
    }

    /// Offset of the empty barriers from the base: right after the full barriers.
    pub fn empty_offset(&self) -> u64 {
        self.ring.offsets.get(2).copied().unwrap_or_default()
    }

    /// Bytes from the base to the end of the empty barriers.
    pub fn total_bytes(&self) -> u64 {
        self.ring.total_bytes
    }

    /// The alignment the base must have: the largest tile alignment (the barriers' 8 bytes are
    /// less).
    pub fn align_bytes(&self) -> u64 {
        self.ring.align_bytes
    }

    /// Dynamic shared memory a launch gives: `total_bytes + align_bytes`.
    pub fn dynamic_smem_bytes(&self) -> u64 {
        self.ring.dynamic_smem_bytes()
    }

    /// Byte offset from the base of tile `tile` in stage `stage`.
    pub fn tile_offset(&self, stage: u64, tile: usize) -> Option<u64> {
        let t = *self.stage.offsets.get(tile)?;
        (Size::new(self.stage_stride) * stage + t).get()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_aligned_and_barriers_follow() {
        // A 16 KB 1024-aligned tile and a 2 KB 128-aligned one: stage 18 KB, stride 18 KB.
        let shape =
            StageShape::new(&[SmemPlan::one_box(16384, 1024), SmemPlan::one_box(2000, 128)])
                .unwrap();
        let l = shape.layout(4).unwrap();
        assert_eq!(l.stage.offsets, vec![0, 16384]);
        assert_eq!((l.stage.total_bytes, l.stage_stride), (18384, 18432));
        assert_eq!(
            (l.full_offset(), l.empty_offset()),
            (4 * 18432, 4 * 18432 + 32)
        );
        assert_eq!(l.total_bytes(), 4 * 18432 + 64);
        assert_eq!(l.align_bytes(), 1024);
        assert_eq!(l.dynamic_smem_bytes(), 4 * 18432 + 64 + 1024);
        assert_eq!(l.tile_offset(2, 1), Some(2 * 18432 + 16384));
        // 227 KB, 1 KB reserved: (232448 - 1024 - 1024) / (18432 + 16) = 12.
        assert_eq!(shape.max_stages(1024, 227 * 1024), 12);
        assert!(shape.dynamic_smem_bytes(12).get().unwrap() + 1024 <= 227 * 1024);
        assert!(shape.dynamic_smem_bytes(13).get().unwrap() + 1024 > 227 * 1024);
        assert_eq!(shape.max_stages(u64::MAX, 227 * 1024), 0);
        // The budget's sizes are the ring layout's, for every count of stages.
        for stages in 0..16 {
            let l = shape.layout(stages).unwrap();
            assert_eq!(shape.total_bytes(stages).get(), Some(l.total_bytes()));
            assert_eq!(
                shape.dynamic_smem_bytes(stages).get(),
                Some(l.dynamic_smem_bytes())
            );
            assert_eq!(l.ring.offsets, vec![0, l.full_offset(), l.empty_offset()]);
        }
        assert_eq!(shape.layout(u64::MAX), None);
    }
}
