//! Regions in one block's shared memory: where each goes ([`SmemLayout`]), the dynamic shared
//! memory a launch gives for them ([`SmemLayout::dynamic_smem_bytes`]) and the least any
//! placement needs ([`SmemLayout::min_dynamic_smem`]).

use super::SmemPlan;
use crate::limits::DYNAMIC_SMEM_BASE_ALIGN;
use crate::size::Size;

/// Regions in one block's shared memory, in order, each at the next multiple of its alignment
/// after the previous one, from a base aligned to [`SmemLayout::align_bytes`]: the one layout
/// every level uses. The regions are a tile set's tiles or a `#[derive(TmaTiles)]` struct's
/// fields ([`SmemLayout::new`]), one pipeline stage's tiles and a ring's stages and barriers
/// ([`super::StageLayout`]), a kernel plan's regions (`plan::PlanLayout`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmemLayout {
    /// Byte offset of each region from a base aligned to [`SmemLayout::align_bytes`].
    pub offsets: Vec<u64>,
    /// Bytes from the base to the end of the last region.
    pub total_bytes: u64,
    /// The largest alignment any region needs: the base must have it.
    pub align_bytes: u64,
}

/// The regions up to index `index` span `span` bytes: more than 64 bits hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SmemLayoutOverflow {
    pub index: usize,
    pub span: Size,
}

/// The name [`SmemLayout`] had when it laid out tiles only.
#[deprecated(note = "renamed `SmemLayout`")]
pub type TileSet = SmemLayout;

/// The name [`SmemLayoutOverflow`] had (its field `tile` is `index`).
#[deprecated(note = "renamed `SmemLayoutOverflow`")]
pub type TileSetOverflow = SmemLayoutOverflow;

/// Moved: [`SmemLayout::min_dynamic_smem`].
#[deprecated(note = "use `SmemLayout::min_dynamic_smem`")]
pub fn min_dynamic_smem(tiles: &[(u64, u64)]) -> Size {
    SmemLayout::min_dynamic_smem(tiles)
}

impl SmemLayout {
    /// Dynamic shared memory a kernel launches with to hold the layout from a base it aligns
    /// itself (the generated `tma_align_smem`): `total_bytes + align_bytes`, the slack the
    /// rounding up may skip (up to `align_bytes - 16`: dynamic shared memory starts at least
    /// 16-byte aligned).
    pub fn dynamic_smem_bytes(&self) -> u64 {
        self.total_bytes.saturating_add(self.align_bytes)
    }

    /// Lays out one call of each of `plans` in order (a tile set's tiles, a stage's): each
    /// tile's footprint at the next multiple of its alignment after the previous one.
    pub fn new<'a>(
        plans: impl IntoIterator<Item = &'a SmemPlan>,
    ) -> Result<SmemLayout, SmemLayoutOverflow> {
        SmemLayout::place(
            plans
                .into_iter()
                .map(|p| (p.footprint_bytes, p.align_bytes)),
        )
    }

    /// Lays out spans of `(bytes, align)` in order, each at the next multiple of its alignment
    /// after the previous one: what [`SmemLayout::new`] does with tiles, a ring with its
    /// stages and barriers, a kernel plan with its regions.
    pub fn place(
        spans: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<SmemLayout, SmemLayoutOverflow> {
        let mut end = Size::ZERO;
        let mut offsets = Vec::new();
        let mut align_bytes = 1u64;
        for (index, (footprint, align)) in spans.into_iter().enumerate() {
            let offset = end.next_multiple_of(align);
            end = offset + footprint;
            align_bytes = align_bytes.max(align);
            match (offset.get(), end.get()) {
                (Some(offset), Some(_)) => offsets.push(offset),
                _ => return Err(SmemLayoutOverflow { index, span: end }),
            }
        }
        Ok(SmemLayout {
            offsets,
            total_bytes: end.get().unwrap_or_default(),
            align_bytes,
        })
    }

    /// The least dynamic shared memory a launch can give a kernel that holds one call of each
    /// tile, `(footprint_bytes, align_bytes)`, however the kernel places them: the sum of the
    /// footprints, plus the alignment slack no placement can avoid. A lower bound, so a launch
    /// below it is wrong whatever the kernel does with its shared memory:
    ///
    /// The base is only [`DYNAMIC_SMEM_BASE_ALIGN`]-aligned, so for some launch it sits 16
    /// bytes past a multiple of the largest alignment `A`, and a tile `T` of alignment `A`
    /// starts at least `A - 16` bytes above it. Only other tiles can fill that gap, so the
    /// kernel needs at least `footprint(T) + max(A - 16, footprints of the others)`; the bound
    /// takes the `T` that makes this largest. One tile: `footprint + align - 16`.
    pub fn min_dynamic_smem(tiles: &[(u64, u64)]) -> Size {
        let total: Size = tiles.iter().map(|&(f, _)| f).sum();
        let Some(&(_, align)) = tiles.iter().max_by_key(|&&(_, a)| a) else {
            return Size::ZERO;
        };
        let gap = align.saturating_sub(DYNAMIC_SMEM_BASE_ALIGN);
        let widest = tiles
            .iter()
            .filter(|&&(_, a)| a == align)
            .map(|&(f, _)| f)
            .max()
            .unwrap_or(0);
        // Bytes of the other tiles that can sit in the gap below T.
        let others = (total - widest).get().unwrap_or(u64::MAX);
        total + gap.saturating_sub(others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_aligns_each_tile_and_refuses_overflow() {
        let set = SmemLayout::new(&[
            SmemPlan::one_box(100, 128),
            SmemPlan::one_box(4096, 1024),
            SmemPlan::one_box(8, 128),
        ]);
        assert_eq!(
            set,
            Ok(SmemLayout {
                offsets: vec![0, 1024, 5120],
                total_bytes: 5128,
                align_bytes: 1024,
            })
        );
        let over = SmemLayout::new(&[
            SmemPlan::one_box(u64::MAX - 64, 128),
            SmemPlan::one_box(1, 128),
        ]);
        assert_eq!(over.map_err(|o| o.index), Err(1));
    }

    /// Dynamic shared memory the best order of `tiles` needs when each is placed at the next
    /// multiple of its alignment, over every base a launch may give (16-byte aligned).
    fn best_greedy_layout(tiles: &[(u64, u64)]) -> u64 {
        fn orders(n: usize) -> Vec<Vec<usize>> {
            if n == 0 {
                return vec![vec![]];
            }
            let mut out = Vec::new();
            for rest in orders(n - 1) {
                for at in 0..=rest.len() {
                    let mut o = rest.clone();
                    o.insert(at, n - 1);
                    out.push(o);
                }
            }
            out
        }
        let align = tiles.iter().map(|t| t.1).max().unwrap_or(16);
        orders(tiles.len())
            .iter()
            .map(|order| {
                (0..align / 16)
                    .map(|j| {
                        let base = (1 << 20) + j * 16;
                        let end = order
                            .iter()
                            .fold(base, |at, &i| at.next_multiple_of(tiles[i].1) + tiles[i].0);
                        end - base
                    })
                    .max()
                    .unwrap_or(0)
            })
            .min()
            .unwrap_or(0)
    }

    #[test]
    fn min_dynamic_smem_is_a_lower_bound_and_exact_for_one_tile() {
        assert_eq!(SmemLayout::min_dynamic_smem(&[]), Size::ZERO);
        // One 128B-swizzled 64 x 64 bf16 tile: 8 KB and up to 1008 bytes to align it.
        assert_eq!(
            SmemLayout::min_dynamic_smem(&[(8192, 1024)]),
            Size::new(8192 + 1008)
        );
        assert_eq!(SmemLayout::min_dynamic_smem(&[(256, 16)]), Size::new(256));
        // Small tiles fill the gap below the 1024-aligned one.
        assert_eq!(
            SmemLayout::min_dynamic_smem(&[(8192, 1024), (512, 128), (128, 128)]),
            Size::new(8192 + 1008)
        );
        assert_eq!(
            SmemLayout::min_dynamic_smem(&[(8192, 1024), (2048, 128)]),
            Size::new(8192 + 2048)
        );
        assert_eq!(
            SmemLayout::min_dynamic_smem(&[(u64::MAX, 128), (1, 128)]),
            Size::OVERFLOW
        );
        // Never above what the best placement needs; equal for one tile.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..2000 {
            let n = 1 + next(4) as usize;
            let tiles: Vec<(u64, u64)> = (0..n)
                .map(|_| {
                    (
                        16 * (1 + next(64)),
                        [16, 128, 256, 512, 1024][next(5) as usize],
                    )
                })
                .collect();
            let bound = SmemLayout::min_dynamic_smem(&tiles)
                .get()
                .unwrap_or(u64::MAX);
            let best = best_greedy_layout(&tiles);
            assert!(bound <= best, "{tiles:?}: bound {bound} > {best}");
            if n == 1 {
                assert_eq!(bound, best, "{tiles:?}");
            }
        }
    }
}
