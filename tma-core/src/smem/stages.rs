//! A ring of pipeline stages in one block's shared memory: where each stage's tiles go,
//! where the full and empty mbarrier arrays sit, and how many stages fit beside the rest of
//! the kernel ([`StageLayout`]).
//!
//! ```text
//! base (aligned to align_bytes)
//! | stage 0: tile 0 @ tile_offsets[0], tile 1 @ tile_offsets[1], ... | pad to stage_stride
//! | stage 1 ...                                                       |
//! | stage S-1                                                         |
//! | full[0..S]  (8 B each, at full_offset = S * stage_stride)         |
//! | empty[0..S] (8 B each, at empty_offset = full_offset + 8 S)       |
//! total_bytes = empty_offset + 8 S
//! ```
//!
//! A launch gives `dynamic_smem_bytes() = total_bytes + align_bytes` (the generated
//! `tma_align_smem` may skip up to `align_bytes - 16` of them, as for a [`super::TileSet`]).

use super::{SmemPlan, TileSet, TileSetOverflow};
use crate::size::Size;

/// Bytes of one mbarrier (`.b64`, 8-byte aligned).
pub const MBARRIER_BYTES: u64 = 8;

/// The shared-memory layout of `stages` stages of the same tiles and their two mbarrier
/// arrays. Every stage starts at a multiple of the largest tile alignment, every tile at a
/// multiple of its own ([`TileSet`] within a stage).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StageLayout {
    /// Stages in the ring.
    pub stages: u64,
    /// Byte offset of each tile from the start of its stage.
    pub tile_offsets: Vec<u64>,
    /// Bytes from a stage's start to the end of its last tile.
    pub stage_bytes: u64,
    /// Bytes from one stage to the next: `stage_bytes` rounded up to `align_bytes`.
    pub stage_stride: u64,
    /// The largest tile alignment: the base must have it.
    pub align_bytes: u64,
    /// Offset of the full barriers (`stages` mbarriers the producer arms and the copies
    /// complete).
    pub full_offset: u64,
    /// Offset of the empty barriers (`stages` mbarriers the consumers release).
    pub empty_offset: u64,
    /// Bytes from the base to the end of the empty barriers.
    pub total_bytes: u64,
}

/// The sizes of a stage (before the count of stages is known).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StageShape {
    pub tiles: TileSet,
    /// `tiles.total_bytes` rounded up to `tiles.align_bytes`.
    pub stride: Size,
}

impl StageShape {
    /// One stage holding one call of each of `plans`, in order.
    pub fn new<'a>(
        plans: impl IntoIterator<Item = &'a SmemPlan>,
    ) -> Result<StageShape, TileSetOverflow> {
        let tiles = TileSet::new(plans)?;
        let stride = Size::new(tiles.total_bytes).next_multiple_of(tiles.align_bytes);
        Ok(StageShape { tiles, stride })
    }

    /// Bytes `stages` stages and their barriers span from the aligned base.
    pub fn total_bytes(&self, stages: u64) -> Size {
        self.stride * stages + Size::new(2 * MBARRIER_BYTES) * stages
    }

    /// Dynamic shared memory a launch gives for `stages` stages: the total plus the
    /// alignment slack (see the module docs).
    pub fn dynamic_smem_bytes(&self, stages: u64) -> Size {
        self.total_bytes(stages) + self.tiles.align_bytes
    }

    /// The most stages whose dynamic shared memory plus `reserve` bytes fit in `limit`
    /// (0 when not even one does).
    pub fn max_stages(&self, reserve: u64, limit: u64) -> u64 {
        let per_stage = self.stride + 2 * MBARRIER_BYTES;
        let fixed = Size::new(self.tiles.align_bytes) + reserve;
        match (per_stage.get(), fixed.get()) {
            (Some(per), Some(fixed)) if per > 0 && fixed <= limit => (limit - fixed) / per,
            _ => 0,
        }
    }

    /// The layout of `stages` stages; `None` when its size does not fit in 64 bits.
    pub fn layout(&self, stages: u64) -> Option<StageLayout> {
        let stage_stride = self.stride.get()?;
        let full_offset = (self.stride * stages).get()?;
        let empty_offset = (Size::new(full_offset) + Size::new(MBARRIER_BYTES) * stages).get()?;
        let total_bytes = (Size::new(empty_offset) + Size::new(MBARRIER_BYTES) * stages).get()?;
        Some(StageLayout {
            stages,
            tile_offsets: self.tiles.offsets.clone(),
            stage_bytes: self.tiles.total_bytes,
            stage_stride,
            align_bytes: self.tiles.align_bytes,
            full_offset,
            empty_offset,
            total_bytes,
        })
    }
}

impl StageLayout {
    /// Dynamic shared memory a launch gives: `total_bytes + align_bytes`.
    pub fn dynamic_smem_bytes(&self) -> u64 {
        self.total_bytes.saturating_add(self.align_bytes)
    }

    /// Byte offset from the base of tile `tile` in stage `stage`.
    pub fn tile_offset(&self, stage: u64, tile: usize) -> Option<u64> {
        let t = *self.tile_offsets.get(tile)?;
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
        assert_eq!(l.tile_offsets, vec![0, 16384]);
        assert_eq!((l.stage_bytes, l.stage_stride), (18384, 18432));
        assert_eq!((l.full_offset, l.empty_offset), (4 * 18432, 4 * 18432 + 32));
        assert_eq!(l.total_bytes, 4 * 18432 + 64);
        assert_eq!(l.dynamic_smem_bytes(), 4 * 18432 + 64 + 1024);
        assert_eq!(l.tile_offset(2, 1), Some(2 * 18432 + 16384));
        // 227 KB, 1 KB reserved: (232448 - 1024 - 1024) / (18432 + 16) = 12.
        assert_eq!(shape.max_stages(1024, 227 * 1024), 12);
        assert!(shape.dynamic_smem_bytes(12).get().unwrap() + 1024 <= 227 * 1024);
        assert!(shape.dynamic_smem_bytes(13).get().unwrap() + 1024 > 227 * 1024);
        assert_eq!(shape.max_stages(u64::MAX, 227 * 1024), 0);
    }
}
