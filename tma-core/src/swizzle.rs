//! Swizzle math: where a byte of a TMA box lands in shared memory.
//!
//! # What the hardware does (sources)
//!
//! Every mode is an XOR of address bits of the shared-memory byte address, so the pattern
//! depends on the *absolute* address: it starts at its first row only when the destination is
//! aligned to the pattern's period. The PTX ISA ("Tensors: Swizzling Modes", 9.x) states the
//! period ("the starting address is 256 / 512 / 1024 bytes aligned") and, for an unaligned
//! destination, a base offset of `(dstMem / 128) % 2 / 4 / 8` for 32B / 64B / 128B: the pattern's
//! row is the 128-byte *line* of shared memory, whatever the span. The CUDA C++ programming guide
//! (TMA swizzle, "Swizzle Pattern Pointer Offset Formula and Index Relation") gives the same rule
//! as `smem[y][x] <-> smem[y][((y + offset) % N) ^ x]` with `x` the 16-byte chunk in a 128-byte
//! line `y`. CUTLASS/CuTe spell the three Hopper modes `Swizzle<1,4,3>`, `Swizzle<2,4,3>`,
//! `Swizzle<3,4,3>`: address bits `[4, 4 + B)` (the 16-byte chunk) XOR bits `[7, 7 + B)` (the line).
//!
//! | mode              | bits XOR-ed                   | period | source                    |
//! |-------------------|-------------------------------|--------|---------------------------|
//! | `B32`             | bit 4 ^= bit 7                | 256 B  | PTX table, CuTe SW32      |
//! | `B64`             | bits 4-5 ^= bits 7-8          | 512 B  | PTX table, CuTe SW64      |
//! | `B128`            | bits 4-6 ^= bits 7-9          | 1024 B | PTX table, CuTe SW128     |
//! | `B128Atom32B`     | bits 5-6 ^= bits 7-8          | 512 B  | PTX table (32B atomicity) |
//! | `B128Atom32BFlip8B` | as `B128Atom32B`, and bit 3 ^= bit 7 | 512 B | PTX text (8B flip)  |
//! | `B128Atom64B`     | bit 6 ^= bit 7                | 256 B  | PTX table (64B atomicity) |
//!
//! The Hopper rows are checked on an H100 by the GPU tests. The three Blackwell rows are read
//! off the PTX ISA's tables ("32-byte atomicity": rows `01|23|45|67`, `23|01|67|45`,
//! `45|67|01|23`, `67|45|23|01`, then the pattern repeats; "64-byte atomicity": `0123|4567`,
//! `4567|0123`, repeats) and its sentence on the flip ("a flip of adjacent 8-bytes within the
//! 16-byte data at every alternate shared memory line"). No Blackwell GPU is at hand to check
//! them, so they are **unverified**: in particular whether the flip keys on the line's bit 0
//! (taken here) and whether it applies before or after the 32-byte permutation (irrelevant
//! here: the two commute, both are XORs keyed on bit 7, which neither changes).
//!
//! # A box narrower than the swizzle span
//!
//! The programming guide says: "if the swizzle width exceeds the inner dimension, ensure that
//! the shared memory is allocated to accommodate the full swizzle width". Read literally, each
//! box row then occupies a whole span in shared memory (rows padded to the span, then the
//! address XOR). The other reading is rows packed at the inner-bytes pitch and the XOR applied
//! to those addresses (which would need no extra memory, making the guide's warning moot).
//! Common code never exercises the case: CUTLASS, ThunderKittens, Triton and DeepGEMM all choose
//! the swizzle whose span equals the box's inner bytes. We take the guide's reading
//! ([`InnerRowLayout::PadToSpan`], [`DEFAULT_INNER_ROW_LAYOUT`]); [`row_pitch_bytes`] is the one
//! function that decides, so the H100 run can settle it by switching the constant.

use crate::size::Size;
use crate::spec::{Swizzle, TileSpec};

/// How rows of a box whose inner extent is narrower than the swizzle span are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InnerRowLayout {
    /// Each row starts a new span (pitch = span bytes); the tail of the span stays unwritten.
    PadToSpan,
    /// Rows packed at the inner-bytes pitch; the XOR then applies to those addresses.
    Dense,
}

/// The layout the model uses unless told otherwise (see the module docs for why).
pub const DEFAULT_INNER_ROW_LAYOUT: InnerRowLayout = InnerRowLayout::PadToSpan;

/// Shared-memory byte offset of a byte at unswizzled offset `offset`, both relative to a
/// base aligned to [`Swizzle::period_bytes`] (or any 1024-byte boundary).
/// Every mode is an involution, so [`unswizzle`] is the same map.
pub fn swizzle(mode: Swizzle, offset: u64) -> u64 {
    let o = offset;
    match mode {
        Swizzle::None => o,
        Swizzle::B32 => o ^ ((o >> 3) & 0x10),
        Swizzle::B64 => o ^ ((o >> 3) & 0x30),
        Swizzle::B128 => o ^ ((o >> 3) & 0x70),
        Swizzle::B128Atom32B => o ^ ((o >> 2) & 0x60),
        Swizzle::B128Atom32BFlip8B => o ^ ((o >> 2) & 0x60) ^ ((o >> 4) & 0x08),
        Swizzle::B128Atom64B => o ^ ((o >> 1) & 0x40),
    }
}

/// The unswizzled offset of the byte stored at shared-memory offset `physical`.
pub fn unswizzle(mode: Swizzle, physical: u64) -> u64 {
    // Each mode XORs low bits with higher bits it leaves unchanged: applying it twice is
    // the identity.
    swizzle(mode, physical)
}

/// Bytes after which the pattern repeats (the XOR keys cycle). Distinct from
/// [`Swizzle::period_bytes`] (the alignment the toolkit demands, 8 lines of the span) only for
/// the Blackwell atom modes, whose keys repeat sooner.
pub fn pattern_bytes(mode: Swizzle) -> u64 {
    match mode {
        Swizzle::None => 16,
        Swizzle::B32 | Swizzle::B128Atom64B => 256,
        Swizzle::B64 | Swizzle::B128Atom32B | Swizzle::B128Atom32BFlip8B => 512,
        Swizzle::B128 => 1024,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hopper_tables_match_the_ptx_isa() {
        // 128B: line y, chunk x -> chunk x ^ y.
        for y in 0..8u64 {
            for x in 0..8u64 {
                assert_eq!(
                    swizzle(Swizzle::B128, y * 128 + x * 16),
                    y * 128 + (x ^ y) * 16
                );
                assert_eq!(
                    swizzle(Swizzle::B64, y * 128 + x * 16),
                    y * 128 + (x ^ (y % 4)) * 16
                );
                assert_eq!(
                    swizzle(Swizzle::B32, y * 128 + x * 16),
                    y * 128 + (x ^ (y % 2)) * 16
                );
            }
        }
    }

    #[test]
    fn blackwell_tables_match_the_ptx_isa() {
        // 32B atoms: line y, granule g -> g ^ (y % 4).
        for y in 0..8u64 {
            for g in 0..4u64 {
                let want = y * 128 + (g ^ (y % 4)) * 32;
                assert_eq!(swizzle(Swizzle::B128Atom32B, y * 128 + g * 32), want);
                let flip = if y % 2 == 1 { 8 } else { 0 };
                assert_eq!(
                    swizzle(Swizzle::B128Atom32BFlip8B, y * 128 + g * 32),
                    want + flip
                );
            }
            for h in 0..2u64 {
                assert_eq!(
                    swizzle(Swizzle::B128Atom64B, y * 128 + h * 64),
                    y * 128 + (h ^ (y % 2)) * 64
                );
            }
        }
    }
}
