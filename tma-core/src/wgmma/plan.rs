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
use crate::error::{Field, Severity, SpecError, SpecErrors};
use crate::operand::{self, Major, Operand, WgmmaOperand, WgmmaType};
use crate::rules::Rule;
use crate::size::Size;
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
        // Every number through `Size`: a valid tile's are bounded by one SM's shared memory,
        // and a plan that still overflowed is no plan (`None`), never a wrapped one.
        let pitch = smem::row_pitch_bytes(spec, DEFAULT_INNER_ROW_LAYOUT);
        let stride = Size::new(plan.stride_bytes);
        let repeat = u64::from(spec.repeat[inner].max(1));
        let outer_repeat = u64::from(spec.repeat[outer].max(1));
        let inner_elems = Size::new(plan.box_elems[inner]);
        let outer_elems = Size::new(plan.box_elems[outer]);
        // A k-slice is 32 bytes of K; `core` the bytes of one core-matrix row (16 without
        // swizzle, the span with it: the row of a swizzle atom).
        let core = layout.span_bytes().unwrap_or(16);
        let k_rows = operand::K_BYTES / e;
        let (mn, k, lbo, sbo, slices_per_box, slice_step, box_step, m_block_step);
        match (w.major, layout.span_bytes()) {
            (Major::K, Some(_)) => {
                // Boxes repeated along MN sit back to back (WgmmaTileShape): one taller matrix.
                (mn, k) = (outer_elems * outer_repeat, inner_elems * repeat);
                (lbo, sbo) = (Size::new(16), pitch * 8u64);
                slices_per_box = (inner_elems * e).div_floor(operand::K_BYTES);
                (slice_step, box_step) = (Size::new(operand::K_BYTES), stride);
                m_block_step = pitch * operand::M;
            }
            (Major::K, None) => {
                (mn, k) = (outer_elems, inner_elems * repeat);
                (lbo, sbo) = (stride, pitch * 8u64);
                slices_per_box = Size::new(1);
                (slice_step, box_step) = (Size::ZERO, stride * 2u64);
                m_block_step = pitch * operand::M;
            }
            (Major::MN, Some(_)) => {
                (mn, k) = (inner_elems * repeat, outer_elems);
                (lbo, sbo) = (stride, pitch * 8u64);
                slices_per_box = outer_elems.div_floor(k_rows);
                (slice_step, box_step) = (pitch * k_rows, Size::ZERO);
                m_block_step = (Size::new(operand::M) * e).div_floor(core) * stride;
            }
            (Major::MN, None) => {
                (mn, k) = (inner_elems * repeat, outer_elems);
                (lbo, sbo) = (pitch * 8u64, stride);
                slices_per_box = outer_elems.div_floor(k_rows);
                (slice_step, box_step) = (pitch * k_rows, Size::ZERO);
                m_block_step = (Size::new(operand::M) * e).div_floor(core) * stride;
            }
        }
        let (mn, k) = (mn.get()?, k.get()?);
        let (m_blocks, m_block_step, n) = match w.operand {
            Operand::A => (mn / operand::M, m_block_step.get()?, 0),
            Operand::B => (1, 0, mn),
        };
        Some(OperandPlan {
            operand: w,
            kind,
            swizzle: spec.swizzle,
            layout,
            lbo: lbo.get()?,
            sbo: sbo.get()?,
            mn,
            k,
            k_slices: k / kind.k(),
            slices_per_box: slices_per_box.get()?.max(1),
            slice_step: slice_step.get()?,
            box_step: box_step.get()?,
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
    /// A k-slice from `k_slices` on, or a block from `m_blocks` on, lies past the tile: refused
    /// ([`Rule::WgmmaSliceRange`], the field and value named), never an address past it.
    pub fn offset(&self, k_slice: u64, m_block: u64) -> Result<u64, SpecError> {
        let past = |field: Field, value: u64, what: &str, limit: u64, name: &str| {
            SpecError {
            field,
            value: value.to_string(),
            rule: Rule::WgmmaSliceRange,
            message: format!(
                "the tile holds {limit} {what} ({name} = {limit}): {what} {value} would address shared memory past it"
            ),
            severity: Severity::Error,
        }
        };
        if k_slice >= self.k_slices {
            return Err(past(
                Field::KSlice,
                k_slice,
                "k-slice(s)",
                self.k_slices,
                "K_SLICES",
            ));
        }
        if m_block >= self.m_blocks {
            return Err(past(
                Field::MBlock,
                m_block,
                "64-row block(s)",
                self.m_blocks,
                "M_BLOCKS",
            ));
        }
        // In range, each term is below the tile's footprint; summed through `Size` all the same.
        let offset = Size::new(k_slice / self.slices_per_box) * self.box_step
            + Size::new(k_slice % self.slices_per_box) * self.slice_step
            + Size::new(m_block) * self.m_block_step;
        offset.get().ok_or_else(|| SpecError {
            field: Field::KSlice,
            value: k_slice.to_string(),
            rule: Rule::SizeOverflow,
            message: format!("the offset of k-slice {k_slice}, block {m_block} is {offset} bytes"),
            severity: Severity::Error,
        })
    }

    /// The descriptor of k-slice `k_slice` (and 64-row block `m_block` of A) of a tile whose
    /// shared memory starts at `smem_addr`. The address must be aligned as the tile demands
    /// ([`ValidSpec::check_smem_address`]: the swizzle period), so the pattern starts on its
    /// boundary and the base offset is 0; the k-slice and block must lie in the tile
    /// ([`OperandPlan::offset`]). Every finding at once.
    pub fn descriptor(
        &self,
        valid: &ValidSpec,
        smem_addr: u64,
        k_slice: u64,
        m_block: u64,
    ) -> Result<MatrixDescriptor, SpecErrors> {
        let mut errors = valid
            .check_smem_address(smem_addr)
            .err()
            .map_or_else(Vec::new, |e| e.errors);
        let start = match self.offset(k_slice, m_block) {
            Ok(offset) => {
                let start = Size::new(smem_addr) + offset;
                if start.get().is_none() {
                    errors.push(SpecError {
                        field: Field::SmemAddress,
                        value: format!("{smem_addr:#x}"),
                        rule: Rule::SizeOverflow,
                        message: format!(
                            "the address plus the k-slice's offset, {offset} bytes, is {start}"
                        ),
                        severity: Severity::Error,
                    });
                }
                start.get()
            }
            Err(e) => {
                errors.push(e);
                None
            }
        };
        match start {
            Some(start_address) if errors.is_empty() => Ok(MatrixDescriptor {
                start_address,
                leading_byte_offset: self.lbo,
                stride_byte_offset: self.sbo,
                base_offset: 0,
                layout: self.layout,
            }),
            _ => Err(SpecErrors {
                tile: valid.spec().name.clone(),
                errors,
            }),
        }
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
