//! Shared memory: where one helper call's boxes land ([`SmemPlan`]), and where regions sit in
//! one block's shared memory ([`SmemLayout`]): a tile set's tiles, a pipeline's stages and
//! barriers ([`StageLayout`]), a kernel plan's regions.
//!
//! One vocabulary. A *plan* ([`SmemPlan`]) is what one helper call needs: its boxes, their
//! stride, the bytes it spans and the alignment it wants. A *layout* ([`SmemLayout`]) places
//! spans of `(bytes, align)` in order, each at the next multiple of its alignment after the
//! previous one, from a base aligned to the largest of them; a kernel launches with
//! `total_bytes + align_bytes` of dynamic shared memory, the slack that aligning the base
//! may skip ([`SmemLayout::dynamic_smem_bytes`]). Every level from a block's tiles up places
//! its regions with a [`SmemLayout`]; none computes an offset of its own:
//!
//! | level | type | what it holds |
//! | --- | --- | --- |
//! | one helper call | [`SmemPlan`] (its rows under a row layout: [`CallRows`]) | no layout: box bytes, repeats and their stride, the footprint and alignment a layout places; `copies(n)`, `n` calls side by side (a plan's staging region) |
//! | tiles in one block | [`SmemLayout`] ([`SmemLayout::new`]) | one call of each tile: each tile's offset, `total_bytes`, `align_bytes`. A tile set's (`struct tma_<set>`, `render::TileSetCode::layout`) and a `#[derive(TmaTiles)]` struct's (`smem_layout()`; its `TILES`' `smem_offset`, `SMEM_BYTES` and `SMEM_ALIGN` are the same numbers as constants) |
//! | a pipeline's ring | [`StageLayout`] ([`StageShape`] before the count of stages is known) | `stage`: one stage's tiles, a [`SmemLayout`]; `stage_stride`; `ring`: the stages, the full barriers and the empty barriers, a [`SmemLayout`] of three regions |
//! | a kernel plan | `plan::PlanLayout` | `layout`: its regions (rings, tile sets, staging, scratch) placed by [`SmemLayout::place`] from a base aligned to at least 16, a [`SmemLayout`]; `regions`: each one's name, role, offset and size |
//!
//! The least dynamic shared memory any placement of some tiles needs (what a launch of a
//! kernel without a plan is checked against) is [`SmemLayout::min_dynamic_smem`].
//!
//! This module is the one place that computes a shared-memory size or offset: validation (the
//! stage after this one: this module names no proof type) checks these numbers, the model
//! writes bytes where they say ([`crate::model`]), the renderer prints them into CUDA, the
//! derive lays its fields out with [`SmemLayout`]. (`plan::consts` is the `const fn` copy of
//! the plan's placement that `tma_kernel!` evaluates at compile time; tests hold it to this.)
//!
//! # Rows narrower than the swizzle span
//!
//! The CUDA programming guide says: "if the swizzle width exceeds the inner dimension, ensure
//! that the shared memory is allocated to accommodate the full swizzle width". The hardware
//! does exactly that: each row of such a box starts a new span ([`InnerRowLayout::PadToSpan`]),
//! and the address XOR then applies. An H100 showed it bit for bit on thousands of random
//! specs (tests/gpu_model.rs, BENCHMARKS.md); [`InnerRowLayout::Dense`], the other reading of
//! the guide, stays only so that the model's tests can show the two differ. Interleaved rows
//! are always packed (an H200 showed it, docs/INTERLEAVE.md).

use crate::limits::SMEM_ALIGN;
use crate::size::Size;
use crate::spec::{Interleave, TileSpec};
use crate::swizzle::Swizzle;

mod block;
mod stages;
#[allow(deprecated)]
pub use block::{min_dynamic_smem, TileSet, TileSetOverflow};
pub use block::{SmemLayout, SmemLayoutOverflow};
pub use stages::{StageLayout, StageShape, MBARRIER_BYTES};

/// How rows of a box whose inner extent is narrower than the swizzle span are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InnerRowLayout {
    /// Each row starts a new span (pitch = span bytes); the tail of the span stays unwritten.
    /// What the hardware does.
    PadToSpan,
    /// Rows packed at the inner-bytes pitch; the XOR then applies to those addresses.
    /// Refuted by the H100; kept for the model's tests.
    Dense,
}

/// The layout the hardware uses (see the module docs).
pub const DEFAULT_INNER_ROW_LAYOUT: InnerRowLayout = InnerRowLayout::PadToSpan;

/// The shared-memory plan of one helper call: sizes, alignment and where each repeated
/// box lands. Built by validation only; every number is proven to fit in 64 bits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmemPlan {
    /// Elements per dim that one box writes (user order): ceil(box / element_stride). With
    /// interleave the innermost counts chunks, and dim 1 is 1 (the hardware takes one
    /// position there).
    pub box_elems: Vec<u64>,
    /// Bytes of data one box delivers: its elements times their size. What the mbarrier
    /// counts.
    pub box_data_bytes: u64,
    /// Bytes one box spans in shared memory: rows at the hardware's pitch (a row narrower
    /// than the swizzle span is padded to it), swizzled boxes rounded up to 128-byte lines.
    pub box_bytes: u64,
    /// Boxes one helper call moves (product of repeats).
    pub boxes: u64,
    /// Bytes between consecutive repeated boxes.
    pub stride_bytes: u64,
    /// Bytes the mbarrier must expect per helper call: `box_data_bytes * boxes`.
    pub tx_bytes: u64,
    /// Bytes of shared memory one helper call spans: `(boxes - 1) * stride_bytes + box_bytes`.
    pub footprint_bytes: u64,
    /// Required alignment of the shared-memory destination.
    pub align_bytes: u64,
}

impl SmemPlan {
    /// `copies` calls side by side, each at a multiple of the alignment (a kernel plan's
    /// staging region): the bytes from one call to the next (the footprint rounded up to the
    /// alignment) and the bytes all of them span (one call's footprint when `copies` is 0 or
    /// 1). Where [`SmemLayout::new`] puts `copies` calls of this plan, before the sizes are
    /// known to fit 64 bits.
    pub fn copies(&self, copies: u32) -> (Size, Size) {
        let stride = Size::new(self.footprint_bytes).next_multiple_of(self.align_bytes);
        let bytes = stride * u64::from(copies.saturating_sub(1)) + self.footprint_bytes;
        (stride, bytes)
    }
}

#[cfg(test)]
impl SmemPlan {
    /// For the layout tests: one box of `footprint_bytes`, all of it data, aligned to
    /// `align_bytes`.
    pub(crate) fn one_box(footprint_bytes: u64, align_bytes: u64) -> SmemPlan {
        SmemPlan {
            box_elems: vec![1],
            box_data_bytes: footprint_bytes,
            box_bytes: footprint_bytes,
            boxes: 1,
            stride_bytes: footprint_bytes,
            tx_bytes: footprint_bytes,
            footprint_bytes,
            align_bytes,
        }
    }
}

/// Where one repeated box of a helper call goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RepeatPlacement {
    /// The repeat index (user order).
    pub index: Vec<u32>,
    /// Added to the call's coordinates (user order, elements).
    pub global_offset: Vec<i64>,
    /// Byte offset from the call's shared-memory pointer.
    pub smem_offset: u64,
}

/// The sizes of a plan before they are proven to fit: each [`Size`] may have overflowed.
/// Validation checks the rules on them, then [`PlanSizes::fit`] makes the [`SmemPlan`].
pub(crate) struct PlanSizes {
    pub box_elems: Vec<u64>,
    pub box_data_bytes: Size,
    pub box_bytes: Size,
    pub boxes: Size,
    pub stride_bytes: Size,
    pub tx_bytes: Size,
    pub footprint_bytes: Size,
    pub align_bytes: u64,
    /// What the driver compares with an SM's shared memory (see [`driver_box_bytes`]).
    pub driver_box_bytes: Size,
}

impl PlanSizes {
    pub fn fit(&self) -> Option<SmemPlan> {
        Some(SmemPlan {
            box_elems: self.box_elems.clone(),
            box_data_bytes: self.box_data_bytes.get()?,
            box_bytes: self.box_bytes.get()?,
            boxes: self.boxes.get()?,
            stride_bytes: self.stride_bytes.get()?,
            tx_bytes: self.tx_bytes.get()?,
            footprint_bytes: self.footprint_bytes.get()?,
            align_bytes: self.align_bytes,
        })
    }
}

/// The plan of one call of `spec`. Needs the per-dim lists to have the spec's rank.
pub(crate) fn plan(spec: &TileSpec) -> PlanSizes {
    let interleaved = spec.interleave != Interleave::None;
    let box_elems = box_elems(spec);
    let rows = rows(&box_elems);
    let data_bytes = if interleaved {
        rows * row_bytes(spec)
    } else {
        spec.dtype
            .smem_bytes(box_elems.iter().copied().product::<Size>())
    };
    let box_bytes = box_span(spec, rows, DEFAULT_INNER_ROW_LAYOUT);
    let boxes: Size = spec.repeat.iter().map(|&r| r.max(1)).product();
    let align_bytes = spec.swizzle.period_bytes().max(SMEM_ALIGN);
    // One box repeats nothing: its stride is never used, so a given one is ignored (it may
    // be any size, even past 64 bits) and the default kept.
    let stride_bytes = match spec.smem_stride {
        Some(elems) if boxes.get() != Some(1) => spec.dtype.smem_bytes(elems),
        _ => box_bytes.next_multiple_of(align_bytes),
    };
    PlanSizes {
        box_elems,
        box_data_bytes: data_bytes,
        box_bytes,
        boxes,
        stride_bytes,
        tx_bytes: data_bytes * boxes,
        footprint_bytes: (boxes - 1u64) * stride_bytes + box_bytes,
        align_bytes,
        driver_box_bytes: driver_box_bytes(spec),
    }
}

/// Per dim (user order), the positions one box writes: `ceil(box / element_stride)`; with
/// interleave, one along dim 1 (the hardware takes one position there).
fn box_elems(spec: &TileSpec) -> Vec<u64> {
    let mut elems: Vec<u64> = spec
        .boxed
        .iter()
        .zip(&spec.element_strides)
        .map(|(&b, &e)| u64::from(b).div_ceil(u64::from(e.max(1))))
        .collect();
    if spec.interleave != Interleave::None && spec.rank() >= crate::limits::MIN_RANK_INTERLEAVED {
        elems[1] = 1;
    }
    elems
}

/// Rows of a box: the product of every dim but the innermost.
fn rows(box_elems: &[u64]) -> Size {
    box_elems[..box_elems.len().saturating_sub(1)]
        .iter()
        .copied()
        .product()
}

/// Bytes one box spans: its rows at their pitch; a swizzled box fills whole 128-byte lines,
/// since the swizzle moves 16-byte chunks anywhere within a line.
fn box_span(spec: &TileSpec, rows: Size, layout: InnerRowLayout) -> Size {
    let bytes = rows * row_pitch_bytes(spec, layout);
    match spec.swizzle {
        Swizzle::None => bytes,
        _ => bytes.next_multiple_of(128),
    }
}

/// The box bytes the driver compares with an SM's shared memory: per dim
/// `floor(box / element_stride)` elements, times the element size. That is not what the
/// copy moves (`ceil` per dim; chunks with interleave, where dim 1 is one position), but an
/// H100 showed it is what the driver checks: box 57 with element stride 2 counts 28.
fn driver_box_bytes(spec: &TileSpec) -> Size {
    let counted = spec
        .boxed
        .iter()
        .zip(&spec.element_strides)
        .map(|(&b, &e)| u64::from(b) / u64::from(e.max(1)));
    spec.dtype.smem_bytes(counted.product::<Size>())
}

/// Where each repeated box of a call of `spec` goes (what the valid spec's
/// `repeat_placements` returns): `linear(i) * stride_bytes`, `linear` row-major over the
/// repeat shape, last dim fastest.
pub(crate) fn placements(spec: &TileSpec, plan: &SmemPlan) -> Vec<RepeatPlacement> {
    let rank = spec.rank();
    let mut out = Vec::new();
    for linear in 0..plan.boxes {
        let mut rest = linear;
        let mut index = vec![0u32; rank];
        for d in (0..rank).rev() {
            let r = u64::from(spec.repeat[d].max(1));
            index[d] = u32::try_from(rest % r).unwrap_or(u32::MAX);
            rest /= r;
        }
        let global_offset = (0..rank)
            .map(|d| i64::from(index[d]) * i64::from(spec.boxed[d]))
            .collect();
        out.push(RepeatPlacement {
            index,
            global_offset,
            smem_offset: linear * plan.stride_bytes,
        });
    }
    out
}

/// Bytes one box row (the innermost dim) carries: `ceil(box / estride)` elements, or
/// chunks with interleave (the innermost dim counts chunks then: see [`crate::Interleave`]).
pub fn row_bytes(spec: &TileSpec) -> Size {
    let inner = spec.rank().saturating_sub(1);
    let steps = match (spec.boxed.get(inner), spec.element_strides.get(inner)) {
        (Some(&b), Some(&e)) => u64::from(b).div_ceil(u64::from(e.max(1))),
        _ => 0,
    };
    match spec.interleave.chunk_bytes() {
        Some(chunk) => Size::new(steps) * chunk,
        None => spec.dtype.smem_bytes(steps),
    }
}

/// Bytes from one box row to the next in shared memory (before swizzling), using `layout`
/// for rows narrower than the swizzle span. Interleaved rows are always packed: an H200
/// puts a 32-byte row under the 128B swizzle 32 bytes after the previous one (the XOR then
/// applies to those addresses), whatever `layout` says.
pub fn row_pitch_bytes(spec: &TileSpec, layout: InnerRowLayout) -> Size {
    let row = row_bytes(spec);
    if spec.interleave.chunk_bytes().is_some() {
        return row;
    }
    match (layout, spec.swizzle.span_bytes()) {
        (InnerRowLayout::PadToSpan, Some(span)) if row.is_below(span) => Size::new(span),
        _ => row,
    }
}

/// The rows of one call's boxes in shared memory under a row layout: what the model writes.
/// (Once named `SmemLayout`: that name is the layout of a block's regions, [`SmemLayout`].)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallRows {
    /// Bytes of data in one box row (innermost dim).
    pub row_bytes: u64,
    /// Bytes from one row to the next, before swizzling.
    pub row_pitch: u64,
    /// Rows per box (product of the outer box dims, after element strides).
    pub rows: u64,
    /// Bytes one box spans: `rows * row_pitch`, rounded up to whole 128-byte lines when
    /// swizzled (the plan's `box_bytes` under [`DEFAULT_INNER_ROW_LAYOUT`]).
    pub box_extent: u64,
    /// Bytes between repeated boxes (the plan's).
    pub stride: u64,
    /// Boxes per call.
    pub boxes: u64,
    /// Bytes one call spans: `(boxes - 1) * stride + box_extent`.
    pub len: u64,
}

/// Why a call cannot be laid out in one SM's shared memory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// One call spans more shared memory than an SM has: no kernel can run it (validation
    /// refuses such a plan, `Rule::SmemFootprintTooLarge`; a row layout other than the
    /// hardware's may still span more).
    #[error("one call spans {len} B of shared memory; an SM on the target has {limit} B")]
    TooLarge { len: Size, limit: u64 },
    /// With rows padded to the swizzle span a box takes more shared memory than its data.
    #[error("repeated boxes are {stride} B apart but each spans {extent} B of shared memory (rows padded to the swizzle span): give a larger smem_stride")]
    BoxesOverlap { stride: u64, extent: u64 },
}

/// The layout of one call of a valid `spec` with `plan`, rows laid out as `layout`.
pub fn layout(
    spec: &TileSpec,
    plan: &SmemPlan,
    layout: InnerRowLayout,
) -> Result<CallRows, LayoutError> {
    let rows = self::rows(&plan.box_elems);
    let row_pitch = row_pitch_bytes(spec, layout);
    let box_extent = box_span(spec, rows, layout);
    let len = (Size::new(plan.boxes) - 1u64) * plan.stride_bytes + box_extent;
    let limit = spec.target.smem_per_sm();
    let (Some(rows), Some(row_pitch), Some(box_extent), Some(len)) =
        (rows.get(), row_pitch.get(), box_extent.get(), len.get())
    else {
        return Err(LayoutError::TooLarge { len, limit });
    };
    if len > limit {
        return Err(LayoutError::TooLarge {
            len: Size::new(len),
            limit,
        });
    }
    if plan.boxes > 1 && plan.stride_bytes < box_extent {
        return Err(LayoutError::BoxesOverlap {
            stride: plan.stride_bytes,
            extent: box_extent,
        });
    }
    Ok(CallRows {
        row_bytes: row_bytes(spec).get().unwrap_or(row_pitch),
        row_pitch,
        rows,
        box_extent,
        stride: plan.stride_bytes,
        boxes: plan.boxes,
        len,
    })
}

/// Where each element of one call sits in shared memory, as TMA writes it: the arithmetic the
/// generated `T::offset` / `T::at` evaluate, from the same plan, row pitch and swizzle terms
/// the CPU model writes bytes by ([`crate::model::elements`] places every element there; the
/// tests compare the two, and the generated C++ with both).
///
/// An element is named by its *position*: per dim (user order) an index in
/// `[0, extent[d])`, `extent[d] = repeat[d] * ceil(box[d] / element_stride[d])`, the repeated
/// boxes side by side (position `p` is element `p % box_elems[d]` of repeated box
/// `p / box_elems[d]`). With interleave the innermost position is a chunk, and an element
/// inside it is named by its index in the chunk.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElementOffsets {
    /// Positions per dim one call holds (user order): `repeat * box_elems`.
    pub extent: Vec<u64>,
    /// Elements (chunks along an interleaved innermost dim) of one box per dim: the plan's.
    pub box_elems: Vec<u64>,
    /// Boxes per call along each dim (the spec's `repeat`).
    pub repeat: Vec<u64>,
    /// Bytes one step inside a box moves along each dim: the row pitch times the rows inside
    /// it for outer dims, the element (or chunk) size for the innermost.
    pub step_bytes: Vec<u64>,
    /// Bytes one step from a repeated box to the next moves along each dim: the plan's
    /// `stride_bytes` times the boxes inside it (row-major over the repeat shape).
    pub box_step_bytes: Vec<u64>,
    /// Bytes of one element.
    pub elem_bytes: u64,
    /// Elements of one innermost position: a chunk's worth with interleave, else 1.
    pub chunk_elems: u64,
    /// The swizzle applied to the whole (unswizzled) offset last.
    pub swizzle: Swizzle,
}

impl ElementOffsets {
    /// The offsets of one call of `spec` with its `plan`, under the hardware's row layout
    /// ([`DEFAULT_INNER_ROW_LAYOUT`]): what `ElementOffsets::new` (beside the proof type, so
    /// this module names none) gives for a valid spec. `None` for packed
    /// sub-byte types (no whole bytes per element), when `plan` is not `spec`'s (another
    /// rank) or a size passes 64 bits.
    pub(crate) fn of(spec: &TileSpec, plan: &SmemPlan) -> Option<ElementOffsets> {
        let rank = spec.rank();
        if plan.box_elems.len() != rank || spec.repeat.len() != rank {
            return None;
        }
        let elem_bytes = spec.dtype.size_bytes()?;
        let unit = spec.inner_unit_bytes()?;
        let pitch = row_pitch_bytes(spec, DEFAULT_INNER_ROW_LAYOUT).get()?;
        let inner = rank.checked_sub(1)?;
        let box_elems = plan.box_elems.clone();
        let repeat: Vec<u64> = spec.repeat.iter().map(|&r| u64::from(r.max(1))).collect();
        let mut step_bytes = vec![0u64; rank];
        let mut box_step_bytes = vec![0u64; rank];
        let (mut rows_inside, mut boxes_inside) = (Size::new(1), Size::new(1));
        for d in (0..rank).rev() {
            step_bytes[d] = if d == inner {
                unit
            } else {
                let s = (rows_inside * pitch).get()?;
                rows_inside = rows_inside * box_elems[d];
                s
            };
            box_step_bytes[d] = (boxes_inside * plan.stride_bytes).get()?;
            boxes_inside = boxes_inside * repeat[d];
        }
        let extent = (0..rank)
            .map(|d| (Size::new(repeat[d]) * box_elems[d]).get())
            .collect::<Option<Vec<u64>>>()?;
        Some(ElementOffsets {
            extent,
            box_elems,
            repeat,
            step_bytes,
            box_step_bytes,
            elem_bytes,
            chunk_elems: unit / elem_bytes,
            swizzle: spec.swizzle,
        })
    }

    /// Positions one call holds in all: the product of [`ElementOffsets::extent`].
    pub fn positions(&self) -> u64 {
        self.extent.iter().product()
    }

    /// Position `n` of the call, row-major over the extents (last dim fastest): what the
    /// generated `T::position(n)` returns.
    pub fn position(&self, n: u64) -> Vec<u64> {
        let mut rest = n;
        let mut p = vec![0u64; self.extent.len()];
        for d in (0..self.extent.len()).rev() {
            p[d] = rest % self.extent[d].max(1);
            rest /= self.extent[d].max(1);
        }
        p
    }

    /// Byte offset from the call's shared-memory base (aligned as the plan demands) of element
    /// `in_chunk` of position `position` (user order). `None` outside the call.
    pub fn offset(&self, position: &[u64], in_chunk: u64) -> Option<u64> {
        if position.len() != self.extent.len() || in_chunk >= self.chunk_elems {
            return None;
        }
        let mut u = in_chunk * self.elem_bytes;
        for (d, &p) in position.iter().enumerate() {
            if p >= self.extent[d] {
                return None;
            }
            u += (p % self.box_elems[d]) * self.step_bytes[d]
                + (p / self.box_elems[d]) * self.box_step_bytes[d];
        }
        Some(self.swizzle.apply(u))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::DType;

    /// Copies of a call side by side are where the layout puts that many calls.
    #[test]
    fn copies_are_the_layout_of_that_many_calls() {
        for (footprint, align) in [(4608, 1024), (8192, 1024), (100, 128), (16, 16)] {
            let plan = SmemPlan::one_box(footprint, align);
            for copies in 1..6u32 {
                let (stride, bytes) = plan.copies(copies);
                let layout = SmemLayout::new(vec![&plan; copies as usize]).unwrap();
                let stride = stride.get().unwrap();
                let at: Vec<u64> = (0..u64::from(copies)).map(|k| k * stride).collect();
                assert_eq!(layout.offsets, at);
                assert_eq!(bytes.get(), Some(layout.total_bytes));
            }
        }
        let (_, bytes) = SmemPlan::one_box(u64::MAX / 2, 1024).copies(4);
        assert_eq!(bytes.get(), None);
    }

    /// The parts the offsets are built from refuse a plan of another rank instead of indexing
    /// past it (`ElementOffsets::new` takes a valid spec, whose plan is its own).
    #[test]
    fn element_offsets_refuse_another_specs_plan() {
        let rank2 = TileSpec::new("a", DType::F16, [64, 64], [8, 8]);
        let rank3 = TileSpec::new("b", DType::F16, [4, 64, 64], [2, 8, 8]);
        let (plan2, plan3) = (plan(&rank2).fit().unwrap(), plan(&rank3).fit().unwrap());
        let o = ElementOffsets::of(&rank3, &plan3).unwrap();
        assert_eq!(o.extent, vec![2, 8, 8]);
        assert_eq!(o.offset(&[1, 0, 0], 0), Some(128));
        assert_eq!(ElementOffsets::of(&rank3, &plan2), None);
        assert_eq!(ElementOffsets::of(&rank2, &plan3), None);
    }
}
