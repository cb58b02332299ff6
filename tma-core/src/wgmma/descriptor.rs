//! The 64-bit shared-memory matrix descriptor of `wgmma.mma_async` (sm_90a): a type with
//! named fields and one encoder, tested field by field against the PTX ISA's table.
//!
//! PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format":
//!
//! | bits  | size | field |
//! |-------|------|-------|
//! | 13-0  | 14   | matrix-descriptor-encode(matrix start address) |
//! | 29-16 | 14   | matrix-descriptor-encode(leading dimension byte offset) |
//! | 45-32 | 14   | matrix-descriptor-encode(stride dimension byte offset) |
//! | 51-49 | 3    | matrix base offset (every swizzle mode but none) |
//! | 63-62 | 2    | swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte |
//!
//! with `matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4`. The other bits are 0. The base
//! offset is 0 when the swizzle's repeating pattern starts on its boundary (1024 / 512 /
//! 256 bytes for 128B / 64B / 32B), else `(pattern start addr >> 7) & 7`.

use crate::swizzle::Swizzle;
use std::fmt;

/// The descriptor's swizzle field (its "layout type" in CuTe). sm_90a values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutType {
    /// No swizzle: core matrices of 8 rows x 16 contiguous bytes ("interleave" in CuTe).
    Interleave = 0,
    B128 = 1,
    B64 = 2,
    B32 = 3,
}

impl LayoutType {
    /// The layout type wgmma must use to read what TMA wrote with `swizzle`: the same
    /// address XOR (`Swizzle<B,4,3>`). `None` for the Blackwell-only modes.
    pub fn of(swizzle: Swizzle) -> Option<LayoutType> {
        match swizzle {
            Swizzle::None => Some(LayoutType::Interleave),
            Swizzle::B32 => Some(LayoutType::B32),
            Swizzle::B64 => Some(LayoutType::B64),
            Swizzle::B128 => Some(LayoutType::B128),
            _ => None,
        }
    }

    /// The field's value.
    pub fn bits(self) -> u64 {
        self as u64
    }

    /// The layout type a field value names (every 2-bit value names one).
    pub fn from_bits(bits: u64) -> LayoutType {
        match bits & 3 {
            1 => LayoutType::B128,
            2 => LayoutType::B64,
            3 => LayoutType::B32,
            _ => LayoutType::Interleave,
        }
    }

    /// The swizzle span in bytes (the row of a swizzle atom); `None` without swizzle.
    pub fn span_bytes(self) -> Option<u64> {
        match self {
            LayoutType::Interleave => None,
            LayoutType::B32 => Some(32),
            LayoutType::B64 => Some(64),
            LayoutType::B128 => Some(128),
        }
    }

    /// The CUDA spelling the generated code comments use.
    pub fn name(self) -> &'static str {
        match self {
            LayoutType::Interleave => "none",
            LayoutType::B128 => "128B",
            LayoutType::B64 => "64B",
            LayoutType::B32 => "32B",
        }
    }
}

/// One field of the descriptor: its name, lowest bit and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorField {
    pub name: &'static str,
    pub lsb: u32,
    pub bits: u32,
}

/// The table of the module docs: the one statement of where each field sits.
pub const FIELDS: [DescriptorField; 5] = [
    DescriptorField {
        name: "start_address",
        lsb: 0,
        bits: 14,
    },
    DescriptorField {
        name: "leading_byte_offset",
        lsb: 16,
        bits: 14,
    },
    DescriptorField {
        name: "stride_byte_offset",
        lsb: 32,
        bits: 14,
    },
    DescriptorField {
        name: "base_offset",
        lsb: 49,
        bits: 3,
    },
    DescriptorField {
        name: "layout_type",
        lsb: 62,
        bits: 2,
    },
];

/// Largest byte value (exclusive) an address or offset field holds: 14 bits of `x >> 4`.
pub const ADDRESS_LIMIT: u64 = 1 << 18;

/// A `wgmma.mma_async` shared-memory matrix descriptor, fields in bytes (as the PTX ISA
/// defines them, before the `>> 4` of the encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDescriptor {
    /// Shared-memory address of the matrix's first element (before swizzling).
    pub start_address: u64,
    /// Leading dimension byte offset (9.7.15.5.1.2.1.1): K-major without swizzle, from one
    /// core matrix to the next along K; MN-major, from one group of 8 K-rows to the next
    /// (no swizzle) or one swizzle atom to the next along MN (swizzled). K-major swizzled:
    /// unused, "assumed to be 1" (16 bytes).
    pub leading_byte_offset: u64,
    /// Stride dimension byte offset (9.7.15.5.1.2.1.2): K-major, from one group of 8 MN rows
    /// to the next; MN-major, from one 16-byte group of MN to the next (no swizzle) or one
    /// group of 8 K-rows to the next (swizzled).
    pub stride_byte_offset: u64,
    /// 3 bits: 0 when the swizzle pattern starts on its boundary.
    pub base_offset: u8,
    pub layout: LayoutType,
}

/// Why a descriptor cannot be encoded: a value the field cannot hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("descriptor field {field} = {value:#x}: {why}")]
pub struct EncodeError {
    pub field: &'static str,
    pub value: u64,
    pub why: &'static str,
}

impl MatrixDescriptor {
    /// The one encoder. Refuses (rather than masks, as the hardware would) an address or
    /// offset that is not a multiple of 16 bytes or not below 2^18, and a base offset
    /// above 7.
    pub fn encode(&self) -> Result<u64, EncodeError> {
        let enc = |field: &'static str, x: u64| -> Result<u64, EncodeError> {
            if x % 16 != 0 {
                return Err(EncodeError {
                    field,
                    value: x,
                    why: "not a multiple of 16 bytes (the field holds x >> 4)",
                });
            }
            if x >= ADDRESS_LIMIT {
                return Err(EncodeError {
                    field,
                    value: x,
                    why: "not below 2^18 (the field holds 14 bits of x >> 4)",
                });
            }
            Ok(x >> 4)
        };
        if self.base_offset > 7 {
            return Err(EncodeError {
                field: "base_offset",
                value: u64::from(self.base_offset),
                why: "the field has 3 bits",
            });
        }
        let values = [
            enc("start_address", self.start_address)?,
            enc("leading_byte_offset", self.leading_byte_offset)?,
            enc("stride_byte_offset", self.stride_byte_offset)?,
            u64::from(self.base_offset),
            self.layout.bits(),
        ];
        Ok(FIELDS
            .iter()
            .zip(values)
            .fold(0u64, |word, (f, v)| word | (v << f.lsb)))
    }

    /// The fields of a descriptor word (bytes; every word decodes).
    pub fn decode(word: u64) -> MatrixDescriptor {
        let field = |i: usize| {
            let f = FIELDS[i];
            (word >> f.lsb) & ((1u64 << f.bits) - 1)
        };
        MatrixDescriptor {
            start_address: field(0) << 4,
            leading_byte_offset: field(1) << 4,
            stride_byte_offset: field(2) << 4,
            base_offset: field(3) as u8,
            layout: LayoutType::from_bits(field(4)),
        }
    }
}

impl fmt::Display for MatrixDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "start {:#x}, LBO {} B, SBO {} B, base offset {}, swizzle {}",
            self.start_address,
            self.leading_byte_offset,
            self.stride_byte_offset,
            self.base_offset,
            self.layout.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(start: u64, lbo: u64, sbo: u64, base: u8, layout: LayoutType) -> MatrixDescriptor {
        MatrixDescriptor {
            start_address: start,
            leading_byte_offset: lbo,
            stride_byte_offset: sbo,
            base_offset: base,
            layout,
        }
    }

    #[test]
    fn each_field_sits_where_the_ptx_table_says() {
        // One field at a time, its largest value: exactly its bits are set.
        let cases = [
            (d(0x3fff0, 0, 0, 0, LayoutType::Interleave), 0x3fffu64),
            (d(0, 0x3fff0, 0, 0, LayoutType::Interleave), 0x3fff << 16),
            (d(0, 0, 0x3fff0, 0, LayoutType::Interleave), 0x3fff << 32),
            (d(0, 0, 0, 7, LayoutType::Interleave), 7 << 49),
            (d(0, 0, 0, 0, LayoutType::B32), 3 << 62),
        ];
        for (desc, word) in cases {
            assert_eq!(desc.encode(), Ok(word), "{desc:?}");
            assert_eq!(MatrixDescriptor::decode(word), desc);
        }
        // The layout type values for sm_90: 0 none, 1 128B, 2 64B, 3 32B.
        assert_eq!(LayoutType::of(Swizzle::None).map(LayoutType::bits), Some(0));
        assert_eq!(LayoutType::of(Swizzle::B128).map(LayoutType::bits), Some(1));
        assert_eq!(LayoutType::of(Swizzle::B64).map(LayoutType::bits), Some(2));
        assert_eq!(LayoutType::of(Swizzle::B32).map(LayoutType::bits), Some(3));
        assert_eq!(LayoutType::of(Swizzle::B128Atom64B), None);
        // The fields do not overlap and stay in 64 bits.
        let mut used = 0u64;
        for f in FIELDS {
            let mask = ((1u64 << f.bits) - 1) << f.lsb;
            assert_eq!(used & mask, 0, "{}", f.name);
            used |= mask;
        }
    }

    #[test]
    fn a_deepgemm_style_128b_k_major_descriptor() {
        // bf16 K-major, 128B swizzle, tile at 0x400: SBO 1024 B (8 rows of 128 B), LBO
        // "assumed 1" (16 B). Fields: start 0x40, LBO 1, SBO 64, layout 1.
        let desc = d(0x400, 16, 1024, 0, LayoutType::B128);
        let word = (1u64 << 62) | (64 << 32) | (1 << 16) | 0x40;
        assert_eq!(desc.encode(), Ok(word));
        assert_eq!(word, 0x4000_0040_0001_0040);
        // The next k-slice: 32 bytes on, 2 in the low field.
        let next = MatrixDescriptor {
            start_address: 0x420,
            ..desc
        };
        assert_eq!(next.encode(), Ok(word + 2));
    }

    #[test]
    fn values_a_field_cannot_hold_are_refused() {
        let ok = d(0x400, 16, 1024, 0, LayoutType::B128);
        for bad in [
            MatrixDescriptor {
                start_address: 0x408,
                ..ok
            },
            MatrixDescriptor {
                start_address: ADDRESS_LIMIT,
                ..ok
            },
            MatrixDescriptor {
                leading_byte_offset: 8,
                ..ok
            },
            MatrixDescriptor {
                stride_byte_offset: ADDRESS_LIMIT + 1024,
                ..ok
            },
            MatrixDescriptor {
                base_offset: 8,
                ..ok
            },
        ] {
            assert!(bad.encode().is_err(), "{bad:?}");
        }
        // Every word decodes; unused bits are dropped.
        let all = MatrixDescriptor::decode(u64::MAX);
        assert_eq!(all.encode().map(|w| w | !all_field_bits()), Ok(u64::MAX));
    }

    fn all_field_bits() -> u64 {
        FIELDS
            .iter()
            .fold(0, |m, f| m | (((1u64 << f.bits) - 1) << f.lsb))
    }
}
