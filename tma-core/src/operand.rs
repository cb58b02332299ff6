//! Declaring a tile a `wgmma.mma_async` operand: which operand (A or B), which dimension is
//! contiguous (K-major or MN-major), and the facts of the PTX ISA that follow from the
//! element type. Plain data, like the rest of the spec; [`crate::validate()`] checks an
//! operand tile against the rules below ([`crate::Rule`] `Wgmma*`) and [`crate::wgmma`]
//! builds its shared-memory matrix descriptors.
//!
//! # What the PTX ISA says (9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate")
//! - 9.7.15.2 "Matrix Shape": `wgmma.mma_async` with A and B in shared memory is
//!   `.m64nNk16` for `.f16`/`.bf16`, `.m64nNk8` for `.tf32`, `.m64nNk32` for `.e4m3`/`.e5m2`:
//!   M is 64, K is always 32 bytes of elements ([`K_BYTES`]), N is a multiple of 8 from 8 to
//!   256 ([`N_MIN`], [`N_MAX`], [`N_STEP`]).
//! - 9.7.15.5.1 "Register Fragments and Shared Memory Matrix Layouts": a matrix is *K-major*
//!   when K is its contiguous dimension (A `M x K` row-major, B `N x K` row-major: cuBLAS's
//!   "TN"), *MN-major* otherwise ("Transposed" in the ISA's table).
//! - 9.7.15.5.2 `wgmma.mma_async` ("imm-trans-a, imm-trans-b"): the transpose immediates exist
//!   only for `.f16`/`.bf16` with matrices in shared memory; `.tf32`, `.e4m3` and `.e5m2`
//!   operands are K-major only ([`WgmmaType::allows_mn_major`]).
//!
//! # The tile's dims
//! An operand tile has rank 2 or more; its last two dims (user order, outer -> inner) are the
//! matrix: `[MN][K]` when K-major (the innermost dim is K), `[K][MN]` when MN-major. Outer dims
//! (a batch) hold a box of 1. M is the row count of A, N the row count of B.

use crate::dtype::DType;
use std::fmt;

/// Rows of A (and of D) one instruction covers: `.m64` (9.7.15.2).
pub const M: u64 = 64;
/// Bytes of K one instruction covers, for every operand type: k16 x 2 B, k8 x 4 B, k32 x 1 B.
pub const K_BYTES: u64 = 32;
/// The smallest N of an instruction.
pub const N_MIN: u64 = 8;
/// The largest N of an instruction.
pub const N_MAX: u64 = 256;
/// N moves in steps of 8.
pub const N_STEP: u64 = 8;

/// Which operand of `D = A * B + D` a tile feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// `A`, `M x K`: 64 rows per instruction; a tile holds one or more 64-row blocks.
    A,
    /// `B`, `N x K` (K-major) or `K x N` (MN-major): the tile's N is the instruction's N.
    B,
}

/// Which dimension of the operand is contiguous in shared memory (and in the tile's box).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// K innermost: the tile is `[MN][K]` (the ISA's "non-transposed").
    K,
    /// M (for A) or N (for B) innermost: the tile is `[K][MN]` (the ISA's "transposed").
    MN,
}

/// A tile declared as a wgmma operand: `TileSpec::wgmma(Operand::A, Major::K)`, or
/// `wgmma = a_k_major` in the macros.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgmmaOperand {
    pub operand: Operand,
    pub major: Major,
}

impl WgmmaOperand {
    /// Parses `a_k_major`, `a_mn_major`, `b_k_major`, `b_mn_major` (also `a_m_major`,
    /// `b_n_major`; case-insensitive).
    pub fn parse(s: &str) -> Option<WgmmaOperand> {
        let (operand, major) = match s.to_ascii_lowercase().as_str() {
            "a_k_major" => (Operand::A, Major::K),
            "a_mn_major" | "a_m_major" => (Operand::A, Major::MN),
            "b_k_major" => (Operand::B, Major::K),
            "b_mn_major" | "b_n_major" => (Operand::B, Major::MN),
            _ => return None,
        };
        Some(WgmmaOperand { operand, major })
    }

    pub const ACCEPTED: &'static str = "a_k_major, a_mn_major, b_k_major, b_mn_major";

    /// The name [`WgmmaOperand::parse`] reads.
    pub fn name(self) -> &'static str {
        match (self.operand, self.major) {
            (Operand::A, Major::K) => "a_k_major",
            (Operand::A, Major::MN) => "a_mn_major",
            (Operand::B, Major::K) => "b_k_major",
            (Operand::B, Major::MN) => "b_mn_major",
        }
    }

    /// The user dims (counted from the innermost: 0 innermost) of MN and K.
    /// `(mn, k)`: `(1, 0)` K-major, `(0, 1)` MN-major.
    pub fn dims_from_inner(self) -> (usize, usize) {
        match self.major {
            Major::K => (1, 0),
            Major::MN => (0, 1),
        }
    }
}

impl fmt::Display for WgmmaOperand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The element types `wgmma.mma_async` reads from shared memory with an f32 accumulator
/// (9.7.15.2, "Matrix Data-types": `.f16`, `.bf16`, `.tf32`, `.e4m3`, `.e5m2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WgmmaType {
    F16,
    BF16,
    TF32,
    E4M3,
    E5M2,
}

impl WgmmaType {
    pub const ALL: [WgmmaType; 5] = [
        WgmmaType::F16,
        WgmmaType::BF16,
        WgmmaType::TF32,
        WgmmaType::E4M3,
        WgmmaType::E5M2,
    ];

    /// The wgmma type a tile of `dtype` feeds, if any: f16, bf16, tf32 (a `TF32` map rounds
    /// f32 to tf32 on the way in; `TF32_FTZ` too), e4m3, e5m2.
    pub fn of(dtype: DType) -> Option<WgmmaType> {
        Some(match dtype {
            DType::F16 => WgmmaType::F16,
            DType::BF16 => WgmmaType::BF16,
            DType::TF32 | DType::TF32Ftz => WgmmaType::TF32,
            DType::E4M3 => WgmmaType::E4M3,
            DType::E5M2 => WgmmaType::E5M2,
            _ => return None,
        })
    }

    /// The PTX type name (`.bf16`, ...).
    pub fn ptx_name(self) -> &'static str {
        match self {
            WgmmaType::F16 => "f16",
            WgmmaType::BF16 => "bf16",
            WgmmaType::TF32 => "tf32",
            WgmmaType::E4M3 => "e4m3",
            WgmmaType::E5M2 => "e5m2",
        }
    }

    /// Bytes of one element.
    pub fn bytes(self) -> u64 {
        match self {
            WgmmaType::F16 | WgmmaType::BF16 => 2,
            WgmmaType::TF32 => 4,
            WgmmaType::E4M3 | WgmmaType::E5M2 => 1,
        }
    }

    /// The instruction's K: [`K_BYTES`] of elements (16, 8 or 32).
    pub fn k(self) -> u64 {
        K_BYTES / self.bytes()
    }

    /// Only `.f16`/`.bf16` have the transpose immediates (9.7.15.5.2): the other types are
    /// K-major only.
    pub fn allows_mn_major(self) -> bool {
        matches!(self, WgmmaType::F16 | WgmmaType::BF16)
    }

    /// True when an instruction takes A of type `self` and B of type `b`: the same 16-bit or
    /// tf32 type on both sides, or any two 8-bit floats (9.7.15.2).
    pub fn pairs_with(self, b: WgmmaType) -> bool {
        let fp8 = |t: WgmmaType| matches!(t, WgmmaType::E4M3 | WgmmaType::E5M2);
        self == b || (fp8(self) && fp8(b))
    }
}

impl fmt::Display for WgmmaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ptx_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for operand in [Operand::A, Operand::B] {
            for major in [Major::K, Major::MN] {
                let w = WgmmaOperand { operand, major };
                assert_eq!(WgmmaOperand::parse(w.name()), Some(w));
            }
        }
        assert_eq!(WgmmaOperand::parse("c_k_major"), None);
    }

    #[test]
    fn k_is_32_bytes() {
        assert_eq!(WgmmaType::BF16.k(), 16);
        assert_eq!(WgmmaType::TF32.k(), 8);
        assert_eq!(WgmmaType::E5M2.k(), 32);
        assert!(WgmmaType::E4M3.pairs_with(WgmmaType::E5M2));
        assert!(!WgmmaType::F16.pairs_with(WgmmaType::BF16));
    }
}
