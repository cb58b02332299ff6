//! The operand plan of a wgmma operand tile: from its [`SmemPlan`] (row pitch, swizzle span,
//! repeated boxes' stride: [`crate::smem`] is where those numbers live) to the descriptor's
//! fields, the step of each k-slice and of each 64-row block of A, and the instruction shape.
//!
//! How a tile TMA wrote maps onto the canonical layouts (PTX ISA 9.7.15.5.1.2.1.3; `S` the
//! swizzle span, `P` the tile's row pitch, `e` the element's bytes, `stride` the bytes
//! between repeated boxes, all from the plan):
//!
//! | major | swizzle | rows of the box | LBO | SBO | k-slice (32 B of K) |
//! |-------|---------|-----------------|-----|-----|---------------------|
//! | K  | 32/64/128 | MN, `P = S` apart | 16 (unused) | `8 P` | `+32 B` in the row; next box after `S / 32` slices |
//! | K  | none      | MN, 16 B each     | `stride` (next 16 B of K: next box) | `8 x 16 = 128` | `+2 stride` (two boxes) |
//! | MN | 32/64/128 | K, `P = S` apart  | `stride` (next atom along MN: next box) | `8 P` | `+(32/e) P` (32/e K rows) |
//! | MN | none      | K, 16 B each      | `8 x 16 = 128` (next 8 K rows) | `stride` (next 16 B of MN: next box) | `+(32/e) 16` |
//!
//! A's 64-row blocks: `64 P` apart when K-major; `64 e / (S or 16)` boxes when MN-major.
//!
//! A K-major swizzled tile may also repeat its box along MN (rule `WgmmaTileShape`): the boxes
//! hold whole 8-row groups and sit back to back, so the rows continue at pitch `P` and the
//! 8-row groups at `SBO = 8 P` across them: the plan is that of one box of all the rows.

use super::descriptor::{LayoutType, MatrixDescriptor};
use crate::error::SpecErrors;
use crate::operand::{self, Major, Operand, WgmmaOperand, WgmmaType};
use crate::smem::{self, SmemPlan, DEFAULT_INNER_ROW_LAYOUT};
use crate::swizzle::Swizzle;
use crate::validate::ValidSpec;

/// The instruction `wgmma.mma_async.sync.aligned.m<m>n<n>k<k>` an operand takes part in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InstructionShape {
    pub m: u64,
    /// B's N; for A, the N is B's (0 here: A does not fix it).
    pub n: u64,
    pub k: u64,
}

/// Everything a kernel needs to feed one operand tile to wgmma.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperandPlan {
    pub operand: WgmmaOperand,
    pub kind: WgmmaType,
    pub swizzle: Swizzle,
    pub layout: LayoutType,
    /// Leading dimension byte offset (see the table of the module docs).
    pub lbo: u64,
    /// Stride dimension byte offset.
    pub sbo: u64,
    /// M (A) or N (B) of the tile, elements.
    pub mn: u64,
    /// K of the tile, elements.
    pub k: u64,
    /// Instructions along K: `k / shape.k`.
    pub k_slices: u64,
    /// k-slices inside one box; the next box starts a new run.
    pub slices_per_box: u64,
    /// Bytes from one k-slice to the next inside a box.
    pub slice_step: u64,
    /// Bytes from the first k-slice of one box to that of the next.
    pub box_step: u64,
    /// 64-row blocks of A (1 for B).
    pub m_blocks: u64,
    /// Bytes from one 64-row block of A to the next (0 for B).
    pub m_block_step: u64,
    pub shape: InstructionShape,
}

impl OperandPlan {
    /// The plan of a valid operand tile; `None` for a tile declared no operand. Validation
    /// checked every operand rule, so every number here is what the table says.
    pub fn new(valid: &ValidSpec) -> Option<OperandPlan> {
        let spec = valid.spec();
        let plan: &SmemPlan = valid.plan();
        let w = spec.wgmma?;
        let kind = WgmmaType::of(spec.dtype)?;
        let layout = LayoutType::of(spec.swizzle)?;
        let rank = spec.rank();
        let (inner, outer) = (rank.checked_sub(1)?, rank.checked_sub(2)?);
        let e = kind.bytes();
        let pitch = smem::row_pitch_bytes(spec, DEFAULT_INNER_ROW_LAYOUT).get()?;
        let stride = plan.stride_bytes;
        let repeat = u64::from(spec.repeat[inner].max(1));
        let outer_repeat = u64::from(spec.repeat[outer].max(1));
        let inner_elems = plan.box_elems[inner];
        let outer_elems = plan.box_elems[outer];
        // A k-slice is 32 bytes of K; `core` the bytes of one core-matrix row (16 without
        // swizzle, the span with it: the row of a swizzle atom).
        let core = layout.span_bytes().unwrap_or(16);
        let k_rows = operand::K_BYTES / e;
        let (mn, k, lbo, sbo, slices_per_box, slice_step, box_step, m_block_step);
        match (w.major, layout.span_bytes()) {
            (Major::K, Some(_)) => {
                // Boxes repeated along MN sit back to back (WgmmaTileShape): one taller matrix.
                (mn, k) = (outer_elems * outer_repeat, inner_elems * repeat);
                (lbo, sbo) = (16, 8 * pitch);
                slices_per_box = inner_elems * e / operand::K_BYTES;
                (slice_step, box_step) = (operand::K_BYTES, stride);
                m_block_step = operand::M * pitch;
            }
            (Major::K, None) => {
                (mn, k) = (outer_elems, inner_elems * repeat);
                (lbo, sbo) = (stride, 8 * pitch);
                slices_per_box = 1;
                (slice_step, box_step) = (0, 2 * stride);
                m_block_step = operand::M * pitch;
            }
            (Major::MN, Some(_)) => {
                (mn, k) = (inner_elems * repeat, outer_elems);
                (lbo, sbo) = (stride, 8 * pitch);
                slices_per_box = outer_elems / k_rows;
                (slice_step, box_step) = (k_rows * pitch, 0);
                m_block_step = operand::M * e / core * stride;
            }
            (Major::MN, None) => {
                (mn, k) = (inner_elems * repeat, outer_elems);
                (lbo, sbo) = (8 * pitch, stride);
                slices_per_box = outer_elems / k_rows;
                (slice_step, box_step) = (k_rows * pitch, 0);
                m_block_step = operand::M * e / core * stride;
            }
        }
        let (m_blocks, m_block_step, n) = match w.operand {
            Operand::A => (mn / operand::M, m_block_step, 0),
            Operand::B => (1, 0, mn),
        };
        Some(OperandPlan {
            operand: w,
            kind,
            swizzle: spec.swizzle,
            layout,
            lbo,
            sbo,
            mn,
            k,
            k_slices: k / kind.k(),
            slices_per_box: slices_per_box.max(1),
            slice_step,
            box_step,
            m_blocks,
            m_block_step,
            shape: InstructionShape {
                m: operand::M,
                n,
                k: kind.k(),
            },
        })
    }

    /// Bytes from the tile's start to k-slice `k_slice` of 64-row block `m_block` (0 for B).
    pub fn offset(&self, k_slice: u64, m_block: u64) -> u64 {
        (k_slice / self.slices_per_box) * self.box_step
            + (k_slice % self.slices_per_box) * self.slice_step
            + m_block * self.m_block_step
    }

    /// The descriptor of k-slice `k_slice` (and 64-row block `m_block` of A) of a tile whose
    /// shared memory starts at `smem_addr`. The address must be aligned as the tile demands
    /// ([`ValidSpec::check_smem_address`]: the swizzle period), so the pattern starts on its
    /// boundary and the base offset is 0.
    pub fn descriptor(
        &self,
        valid: &ValidSpec,
        smem_addr: u64,
        k_slice: u64,
        m_block: u64,
    ) -> Result<MatrixDescriptor, SpecErrors> {
        valid.check_smem_address(smem_addr)?;
        Ok(MatrixDescriptor {
            start_address: smem_addr + self.offset(k_slice, m_block),
            leading_byte_offset: self.lbo,
            stride_byte_offset: self.sbo,
            base_offset: 0,
            layout: self.layout,
        })
    }

    /// The descriptor of the tile's first k-slice at address 0 (what the generated code adds
    /// the shared-memory address to), encoded. Address 0 is aligned for every swizzle.
    pub fn base_word(&self) -> Option<u64> {
        MatrixDescriptor {
            start_address: 0,
            leading_byte_offset: self.lbo,
            stride_byte_offset: self.sbo,
            base_offset: 0,
            layout: self.layout,
        }
        .encode()
        .ok()
    }

    /// True when the instruction takes MN-major input for this operand (the transpose
    /// immediate: 1 for MN-major).
    pub fn transpose(&self) -> bool {
        self.operand.major == Major::MN
    }
}
