//! The swizzle: one type for the mode and everything it implies (span, period, pattern,
//! XOR terms, Mirage MPK's class, the driver's enum value and name, the arch it needs).
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
//!
//! Rows of a box narrower than the span are padded to it: see [`crate::smem`].

/// Shared-memory swizzle mode (`CUtensorMapSwizzle`). Discriminants are the driver's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Swizzle {
    #[default]
    None = 0,
    /// 16-byte chunks permuted within a 32-byte span (pattern repeats every 256 B).
    B32 = 1,
    /// 16-byte chunks permuted within a 64-byte span (pattern repeats every 512 B).
    B64 = 2,
    /// 16-byte chunks permuted within a 128-byte span (pattern repeats every 1024 B).
    B128 = 3,
    /// Blackwell: 32-byte chunks within a 128-byte span.
    B128Atom32B = 4,
    /// Blackwell: 32-byte chunks within 128 B, lower/upper 8 B of each 16 B swapped on alternate rows.
    B128Atom32BFlip8B = 5,
    /// Blackwell: 64-byte chunks within a 128-byte span.
    B128Atom64B = 6,
}

impl Swizzle {
    pub const ALL: [Swizzle; 7] = [
        Swizzle::None,
        Swizzle::B32,
        Swizzle::B64,
        Swizzle::B128,
        Swizzle::B128Atom32B,
        Swizzle::B128Atom32BFlip8B,
        Swizzle::B128Atom64B,
    ];

    /// Mirage MPK's swizzle class `B`: 0 = none, 1 = 32B, 2 = 64B, 3 = 128B.
    pub fn from_mpk_class(b: u32) -> Option<Swizzle> {
        match b {
            0 => Some(Swizzle::None),
            1 => Some(Swizzle::B32),
            2 => Some(Swizzle::B64),
            3 => Some(Swizzle::B128),
            _ => None,
        }
    }

    /// Parses `none`, `32`, `64`, `128`, `32b`, `128b_atom_32b`, ... (case-insensitive).
    pub fn parse(s: &str) -> Option<Swizzle> {
        let lower = s.to_ascii_lowercase();
        Some(match lower.trim_start_matches("swizzle_") {
            "none" | "0" => Swizzle::None,
            "32" | "32b" => Swizzle::B32,
            "64" | "64b" => Swizzle::B64,
            "128" | "128b" => Swizzle::B128,
            "128b_atom_32b" => Swizzle::B128Atom32B,
            "128b_atom_32b_flip_8b" => Swizzle::B128Atom32BFlip8B,
            "128b_atom_64b" => Swizzle::B128Atom64B,
            _ => return None,
        })
    }

    pub const ACCEPTED: &'static str =
        "none, 32, 64, 128, 128b_atom_32b, 128b_atom_32b_flip_8b, 128b_atom_64b (or mpk_b = 0..3)";

    pub fn name(self) -> &'static str {
        match self {
            Swizzle::None => "none",
            Swizzle::B32 => "32B",
            Swizzle::B64 => "64B",
            Swizzle::B128 => "128B",
            Swizzle::B128Atom32B => "128B_ATOM_32B",
            Swizzle::B128Atom32BFlip8B => "128B_ATOM_32B_FLIP_8B",
            Swizzle::B128Atom64B => "128B_ATOM_64B",
        }
    }

    pub fn cu_name(self) -> &'static str {
        match self {
            Swizzle::None => "CU_TENSOR_MAP_SWIZZLE_NONE",
            Swizzle::B32 => "CU_TENSOR_MAP_SWIZZLE_32B",
            Swizzle::B64 => "CU_TENSOR_MAP_SWIZZLE_64B",
            Swizzle::B128 => "CU_TENSOR_MAP_SWIZZLE_128B",
            Swizzle::B128Atom32B => "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B",
            Swizzle::B128Atom32BFlip8B => "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B",
            Swizzle::B128Atom64B => "CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B",
        }
    }

    /// The swizzle span in bytes: the largest inner box extent the mode allows
    /// (`cuTensorMapEncodeTiled`: "the bounding box inner dimension ... must be less than
    /// or equal to the swizzle size"). `None` for no swizzle.
    pub fn span_bytes(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            _ => Some(128),
        }
    }

    /// Bytes after which the swizzle pattern repeats: 8 rows of the span
    /// (CUDA programming guide, TMA swizzle: 256 / 512 / 1024 B). Shared-memory
    /// destinations must be aligned to this for the pattern to start at row 0.
    pub fn period_bytes(self) -> u64 {
        match self.span_bytes() {
            None => 16,
            Some(span) => span * 8,
        }
    }

    /// Blackwell-only modes.
    pub fn is_blackwell_only(self) -> bool {
        matches!(
            self,
            Swizzle::B128Atom32B | Swizzle::B128Atom32BFlip8B | Swizzle::B128Atom64B
        )
    }

    /// The XOR terms of the mode, CuTe's `Swizzle<B, M, S>` spelled out: each
    /// `(mask, shift)` XORs `(offset >> shift) & mask` into the offset. Every term reads
    /// bits at or above bit 7 (the 128-byte line) and writes bits below it, so the map is
    /// an involution.
    pub fn xor_terms(self) -> &'static [(u64, u32)] {
        match self {
            Swizzle::None => &[],
            Swizzle::B32 => &[(0x10, 3)],
            Swizzle::B64 => &[(0x30, 3)],
            Swizzle::B128 => &[(0x70, 3)],
            Swizzle::B128Atom32B => &[(0x60, 2)],
            Swizzle::B128Atom32BFlip8B => &[(0x60, 2), (0x08, 4)],
            Swizzle::B128Atom64B => &[(0x40, 1)],
        }
    }

    /// Shared-memory byte offset of the byte at unswizzled offset `offset`, both relative to a
    /// base aligned to [`Swizzle::period_bytes`]. An involution: applied to a swizzled offset
    /// it gives the unswizzled one.
    pub fn apply(self, offset: u64) -> u64 {
        self.xor_terms()
            .iter()
            .fold(offset, |o, &(mask, shift)| o ^ ((offset >> shift) & mask))
    }

    /// Bytes after which the pattern repeats (the XOR keys cycle). Distinct from
    /// [`Swizzle::period_bytes`] (the alignment the toolkit demands, 8 lines of the span) only
    /// for the Blackwell atom modes, whose keys repeat sooner.
    pub fn pattern_bytes(self) -> u64 {
        match self {
            Swizzle::None => 16,
            Swizzle::B32 | Swizzle::B128Atom64B => 256,
            Swizzle::B64 | Swizzle::B128Atom32B | Swizzle::B128Atom32BFlip8B => 512,
            Swizzle::B128 => 1024,
        }
    }

    /// Mirage MPK's swizzle class `B` of a Hopper mode (inverse of
    /// [`Swizzle::from_mpk_class`]); `None` for the Blackwell modes, which MPK lacks.
    pub fn mpk_class(self) -> Option<u32> {
        match self {
            Swizzle::None => Some(0),
            Swizzle::B32 => Some(1),
            Swizzle::B64 => Some(2),
            Swizzle::B128 => Some(3),
            _ => None,
        }
    }

    /// The driver's enum value (`CUtensorMapSwizzle`).
    pub fn cu_value(self) -> u32 {
        self as u32
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
                    Swizzle::B128.apply(y * 128 + x * 16),
                    y * 128 + (x ^ y) * 16
                );
                assert_eq!(
                    Swizzle::B64.apply(y * 128 + x * 16),
                    y * 128 + (x ^ (y % 4)) * 16
                );
                assert_eq!(
                    Swizzle::B32.apply(y * 128 + x * 16),
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
                assert_eq!(Swizzle::B128Atom32B.apply(y * 128 + g * 32), want);
                let flip = if y % 2 == 1 { 8 } else { 0 };
                assert_eq!(
                    Swizzle::B128Atom32BFlip8B.apply(y * 128 + g * 32),
                    want + flip
                );
            }
            for h in 0..2u64 {
                assert_eq!(
                    Swizzle::B128Atom64B.apply(y * 128 + h * 64),
                    y * 128 + (h ^ (y % 2)) * 64
                );
            }
        }
    }

    #[test]
    fn xor_terms_are_the_table_of_the_module_docs() {
        // The pre-refactor expressions, written out once more as the reference.
        for o in 0..4096u64 {
            assert_eq!(Swizzle::B128.apply(o), o ^ ((o >> 3) & 0x70));
            assert_eq!(
                Swizzle::B128Atom32BFlip8B.apply(o),
                o ^ ((o >> 2) & 0x60) ^ ((o >> 4) & 0x08)
            );
            for mode in Swizzle::ALL {
                assert_eq!(mode.apply(mode.apply(o)), o, "{mode:?} is an involution");
            }
        }
        for mode in Swizzle::ALL {
            if let Some(b) = mode.mpk_class() {
                assert_eq!(Swizzle::from_mpk_class(b), Some(mode));
            }
        }
    }
}
