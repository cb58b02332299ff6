//! A CPU model of what `wgmma.mma_async` reads from shared memory: given a descriptor word,
//! the operand's role, major-ness, type and instruction shape, the shared-memory address of
//! each element it fetches.
//!
//! Written from the PTX ISA alone, independent of [`super::OperandPlan`] (which builds the
//! descriptors) and of [`crate::Swizzle`] (which the TMA model writes with): the property test
//! (tma-core/tests/wgmma_props.rs) composes TMA's model writing a tile with this model reading
//! it, so a wrong field on either side shows up as a wrong element.
//!
//! PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout": a matrix is made of *core matrices*
//! of 8 rows x 16 bytes; in CuTe's notation (9.7.15.5.1.2.1.3, "Canonical Layouts"), with
//! `T` the elements in 16 bytes and the swizzle `Swizzle<B,4,3>` (B = 0, 1, 2, 3 for none,
//! 32B, 64B, 128B) applied to the address:
//!
//! | major | swizzle | layout ((MN), (K)) : strides, in units of elements |
//! |-------|---------|-----------------------------------------------------|
//! | MN | none    | `((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))` |
//! | MN | 32/64/128 B | `((T,S/16,m),(8,k)) : ((1,T,LBO),(S/16 T,SBO))` |
//! | K  | none    | `((8,m),(T,2k)) : ((1T,SBO),(1,LBO))` |
//! | K  | 32/64/128 B | `((8,m),(T,2k)) : ((S/16 T,SBO),(1,T))` |
//!
//! `Swizzle<B,4,3>` XORs address bits `[4, 4+B)` with bits `[7, 7+B)`: the *absolute*
//! shared-memory address, whose pattern repeats every `2^B x 128` bytes (9.7.15.5.1.2.2: the
//! base offset is 0 when the pattern starts on that boundary). A descriptor whose base offset
//! is not 0 is refused: the ISA gives the formula of the field but not its effect on
//! addresses, and the generator never needs one.

use super::descriptor::{LayoutType, MatrixDescriptor};
use crate::operand::{Major, Operand, WgmmaType, N_MAX, N_MIN, N_STEP};

/// What one instruction reads for one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadShape {
    pub operand: Operand,
    pub major: Major,
    pub kind: WgmmaType,
    /// The instruction's N (B's rows); A always has 64 rows.
    pub n: u64,
}

impl ReadShape {
    /// Rows of the operand: 64 for A, N for B.
    pub fn rows(&self) -> u64 {
        match self.operand {
            Operand::A => 64,
            Operand::B => self.n,
        }
    }
    /// K of one instruction, elements: 32 bytes' worth.
    pub fn k(&self) -> u64 {
        32 / self.kind.bytes()
    }
}

/// Why the model cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("the descriptor's base offset is {0}: the model reads only descriptors whose swizzle pattern starts on its boundary (base offset 0)")]
    BaseOffset(u8),
    #[error("element (row {row}, k {k}) is at shared-memory address {addr:#x}, outside the {len} bytes at {base:#x}")]
    OutOfRange {
        row: u64,
        k: u64,
        addr: u64,
        base: u64,
        len: u64,
    },
    /// B's N is no instruction's: a multiple of 8 from 8 to 256 (PTX ISA 9.7.15.2).
    #[error(
        "the shape's n = {0}: an instruction's N is a multiple of {N_STEP} from {N_MIN} to {N_MAX}"
    )]
    Shape(u64),
    /// An element the instruction does not read: row from `rows`, or k from `ks`, on.
    #[error("element (row {row}, k {k}) is outside the instruction's {rows} rows x {ks} k")]
    Element {
        row: u64,
        k: u64,
        rows: u64,
        ks: u64,
    },
}

impl ReadShape {
    /// Refuses a B shape whose N no instruction has ([`ReadError::Shape`]); A's `n` is unused.
    pub fn check(&self) -> Result<(), ReadError> {
        let n_ok = (N_MIN..=N_MAX).contains(&self.n) && self.n % N_STEP == 0;
        match self.operand {
            Operand::B if !n_ok => Err(ReadError::Shape(self.n)),
            _ => Ok(()),
        }
    }
}

/// The address of the first byte of element (`row`, `k`) of the operand (`row` is m of A or
/// n of B; `k` the index along the instruction's K), read through descriptor `desc`.
///
/// The shape is checked ([`ReadShape::check`]) and the element must be one the instruction
/// reads (`row < rows()`, `k < k()`): then every term below is bounded (a decoded address or
/// offset is below 2^18, `row` below 256, `k` below 32), so no sum can wrap.
pub fn element_address(desc: u64, shape: &ReadShape, row: u64, k: u64) -> Result<u64, ReadError> {
    shape.check()?;
    if row >= shape.rows() || k >= shape.k() {
        return Err(ReadError::Element {
            row,
            k,
            rows: shape.rows(),
            ks: shape.k(),
        });
    }
    let d = MatrixDescriptor::decode(desc);
    if d.base_offset != 0 {
        return Err(ReadError::BaseOffset(d.base_offset));
    }
    let e = shape.kind.bytes();
    let (start, lbo, sbo) = (d.start_address, d.leading_byte_offset, d.stride_byte_offset);
    let linear = match (shape.major, d.layout.span_bytes()) {
        // ((8,m),(T,2k)):((1T,SBO),(1,LBO)): rows 16 B apart in a core matrix, 8-row groups
        // SBO apart; along K, 16-byte core-matrix columns LBO apart.
        (Major::K, None) => {
            let kb = k * e;
            start + row / 8 * sbo + row % 8 * 16 + kb / 16 * lbo + kb % 16
        }
        // ((8,m),(T,2k)):((S/16 T,SBO),(1,T)): rows S apart, 8-row groups SBO apart; K
        // contiguous inside the row.
        (Major::K, Some(span)) => start + row / 8 * sbo + row % 8 * span + k * e,
        // ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)): 16 bytes of MN contiguous, the next 16 SBO
        // on; K rows 16 B apart, 8-row groups LBO apart.
        (Major::MN, None) => {
            let mb = row * e;
            start + mb / 16 * sbo + mb % 16 + k % 8 * 16 + k / 8 * lbo
        }
        // ((T,S/16,m),(8,k)):((1,T,LBO),(S/16 T,SBO)): S bytes of MN contiguous (one atom
        // row), the next atom LBO on; K rows S apart, 8-row groups SBO apart.
        (Major::MN, Some(span)) => {
            let mb = row * e;
            start + mb / span * lbo + mb % span + k % 8 * span + k / 8 * sbo
        }
    };
    Ok(swizzle(d.layout, linear))
}

/// `Swizzle<B,4,3>` on an absolute address: bits `[4, 4+B)` ^= bits `[7, 7+B)`.
fn swizzle(layout: LayoutType, addr: u64) -> u64 {
    let b = match layout {
        LayoutType::Interleave => 0,
        LayoutType::B32 => 1,
        LayoutType::B64 => 2,
        LayoutType::B128 => 3,
    };
    let mask = (1u64 << b) - 1;
    addr ^ (((addr >> 7) & mask) << 4)
}

/// Every element one instruction reads, row-major (`[row][k]`): the bytes of each, taken from
/// `smem` (shared memory from address `base`).
pub fn read_operand(
    desc: u64,
    shape: &ReadShape,
    smem: &[u8],
    base: u64,
) -> Result<Vec<Vec<u8>>, ReadError> {
    shape.check()?;
    let e = shape.kind.bytes();
    let len = smem.len() as u64;
    // At most 256 rows x 32 k once the shape is checked.
    let mut out = Vec::with_capacity((shape.rows() * shape.k()) as usize);
    for row in 0..shape.rows() {
        for k in 0..shape.k() {
            let addr = element_address(desc, shape, row, k)?;
            let at = addr
                .checked_sub(base)
                .filter(|o| o.checked_add(e).is_some_and(|end| end <= len));
            let Some(at) = at else {
                return Err(ReadError::OutOfRange {
                    row,
                    k,
                    addr,
                    base,
                    len,
                });
            };
            out.push(smem[at as usize..(at + e) as usize].to_vec());
        }
    }
    Ok(out)
}
