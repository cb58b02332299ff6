//! Element types: every `CUtensorMapDataType` of CUDA 13, the two 8-bit floats that wgmma
//! reads (TMA moves them as `UINT8`), plus friendly aliases.

use crate::size::Size;
use std::fmt;

/// One `CUtensorMapDataType`, or an 8-bit float the driver moves as `UINT8`. The
/// discriminants of the driver's types are its enum values (`cuda.h`, CUDA 13.0);
/// [`DType::cu_value`] is what `cuTensorMapEncodeTiled` takes (`UINT8` for [`DType::E4M3`]
/// and [`DType::E5M2`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    U8 = 0,
    U16 = 1,
    U32 = 2,
    I32 = 3,
    U64 = 4,
    I64 = 5,
    F16 = 6,
    F32 = 7,
    F64 = 8,
    BF16 = 9,
    F32Ftz = 10,
    TF32 = 11,
    TF32Ftz = 12,
    /// 16 packed 4-bit values in 8 bytes, no gaps (Blackwell only).
    U4x16Align8B = 13,
    /// 16 packed 4-bit values per 16 bytes of shared memory: 8-byte gaps (Blackwell only).
    U4x16Align16B = 14,
    /// 16 packed 6-bit values per 16 bytes of shared memory: 4-byte gaps (Blackwell only).
    U6x16Align16B = 15,
    /// 8-bit float, 4 exponent and 3 mantissa bits (`.e4m3` in PTX): moved as `UINT8`
    /// (TMA never converts); a wgmma operand type.
    E4M3 = 16,
    /// 8-bit float, 5 exponent and 2 mantissa bits (`.e5m2` in PTX): moved as `UINT8`.
    E5M2 = 17,
}

impl DType {
    /// Every data type: the driver's in its enum order, then the 8-bit floats.
    pub const ALL: [DType; 18] = [
        DType::U8,
        DType::U16,
        DType::U32,
        DType::I32,
        DType::U64,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::BF16,
        DType::F32Ftz,
        DType::TF32,
        DType::TF32Ftz,
        DType::U4x16Align8B,
        DType::U4x16Align16B,
        DType::U6x16Align16B,
        DType::E4M3,
        DType::E5M2,
    ];

    /// Parses a user-facing name. The 8-bit floats have their own types ([`DType::E4M3`],
    /// [`DType::E5M2`]: TMA moves them as bytes, wgmma reads them as floats); `fp8` and the
    /// 8-bit integers are `u8`.
    pub fn parse(name: &str) -> Option<DType> {
        let lower = name.to_ascii_lowercase();
        Some(match lower.as_str() {
            "u8" | "uint8" | "i8" | "int8" | "fp8" | "byte" => DType::U8,
            "e4m3" | "fp8_e4m3" | "f8e4m3" | "float8_e4m3" => DType::E4M3,
            "e5m2" | "fp8_e5m2" | "f8e5m2" | "float8_e5m2" => DType::E5M2,
            "u16" | "uint16" | "i16" | "int16" => DType::U16,
            "u32" | "uint32" => DType::U32,
            "i32" | "int32" => DType::I32,
            "u64" | "uint64" => DType::U64,
            "i64" | "int64" => DType::I64,
            "f16" | "fp16" | "half" | "float16" => DType::F16,
            "f32" | "fp32" | "float" | "float32" => DType::F32,
            "f64" | "fp64" | "double" | "float64" => DType::F64,
            "bf16" | "bfloat16" => DType::BF16,
            "f32_ftz" | "float32_ftz" => DType::F32Ftz,
            "tf32" => DType::TF32,
            "tf32_ftz" => DType::TF32Ftz,
            "u4x16_align8b" | "16u4_align8b" => DType::U4x16Align8B,
            "u4x16_align16b" | "16u4_align16b" => DType::U4x16Align16B,
            "u6x16_align16b" | "16u6_align16b" => DType::U6x16Align16B,
            _ => return None,
        })
    }

    /// Names accepted by [`DType::parse`], for error messages.
    pub const ACCEPTED: &'static str = "u8, u16, u32, i32, u64, i64, f16, f32, f64, bf16, f32_ftz, tf32, tf32_ftz, \
         u4x16_align8b, u4x16_align16b, u6x16_align16b, e4m3, e5m2 (aliases: fp8/i8 -> u8, fp8_e4m3 -> e4m3, \
         fp8_e5m2 -> e5m2, half -> f16)";

    /// The canonical short name, as [`DType::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::F32Ftz => "f32_ftz",
            DType::TF32 => "tf32",
            DType::TF32Ftz => "tf32_ftz",
            DType::U4x16Align8B => "u4x16_align8b",
            DType::U4x16Align16B => "u4x16_align16b",
            DType::U6x16Align16B => "u6x16_align16b",
            DType::E4M3 => "e4m3",
            DType::E5M2 => "e5m2",
        }
    }

    /// The driver's enumerator name.
    pub fn cu_name(self) -> &'static str {
        match self {
            DType::U8 | DType::E4M3 | DType::E5M2 => "CU_TENSOR_MAP_DATA_TYPE_UINT8",
            DType::U16 => "CU_TENSOR_MAP_DATA_TYPE_UINT16",
            DType::U32 => "CU_TENSOR_MAP_DATA_TYPE_UINT32",
            DType::I32 => "CU_TENSOR_MAP_DATA_TYPE_INT32",
            DType::U64 => "CU_TENSOR_MAP_DATA_TYPE_UINT64",
            DType::I64 => "CU_TENSOR_MAP_DATA_TYPE_INT64",
            DType::F16 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
            DType::F32 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
            DType::F64 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
            DType::BF16 => "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
            DType::F32Ftz => "CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ",
            DType::TF32 => "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32",
            DType::TF32Ftz => "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ",
            DType::U4x16Align8B => "CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B",
            DType::U4x16Align16B => "CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B",
            DType::U6x16Align16B => "CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B",
        }
    }

    /// The driver's enum value (`UINT8`, 0, for the 8-bit floats).
    pub fn cu_value(self) -> u32 {
        match self {
            DType::E4M3 | DType::E5M2 => DType::U8 as u32,
            d => d as u32,
        }
    }

    /// Bits one element occupies in global memory.
    pub fn global_bits(self) -> u32 {
        match self {
            DType::U8 | DType::E4M3 | DType::E5M2 => 8,
            DType::U16 | DType::F16 | DType::BF16 => 16,
            DType::U32 | DType::I32 | DType::F32 | DType::F32Ftz | DType::TF32 | DType::TF32Ftz => {
                32
            }
            DType::U64 | DType::I64 | DType::F64 => 64,
            DType::U4x16Align8B | DType::U4x16Align16B => 4,
            DType::U6x16Align16B => 6,
        }
    }

    /// Bytes per element for the whole-byte types; `None` for the packed sub-byte types,
    /// whose sizes are stated per group of 16 elements.
    pub fn size_bytes(self) -> Option<u64> {
        match self.global_bits() {
            b if b % 8 == 0 => Some(u64::from(b / 8)),
            _ => None,
        }
    }

    /// Bytes that `elements` elements occupy in global memory (rounded up to whole bytes;
    /// see [`DType::is_whole_bytes`]). Overflows instead of wrapping.
    pub fn global_bytes(self, elements: impl Into<Size>) -> Size {
        (elements.into() * u64::from(self.global_bits())).div_ceil(8)
    }

    /// The fewest elements (at least 1) whose bits fill a whole multiple of `bytes` bytes:
    /// `8 * bytes / gcd(8 * bytes, bits)`. Any element count that spans a multiple of
    /// `bytes` bytes is a multiple of it. 16 bytes: 8 bf16, 32 4-bit values, 64 6-bit values
    /// (21 of them are 126 bits, not 16 bytes). `bytes` 0 counts as 1.
    pub fn elements_per_whole(self, bytes: u64) -> u64 {
        let bits = 8 * bytes.max(1);
        bits / gcd(bits, u64::from(self.global_bits()))
    }

    /// True when `elements` elements end on a byte boundary: always for the whole-byte
    /// types; for the packed sub-byte types only for some counts (two 6-bit values do not).
    pub fn is_whole_bytes(self, elements: u64) -> bool {
        (u128::from(elements) * u128::from(self.global_bits())) % 8 == 0
    }

    /// Bytes that `elements` elements occupy in shared memory after a TMA load
    /// (the ALIGN16B packed types leave gaps: 16 values per 16 bytes).
    pub fn smem_bytes(self, elements: impl Into<Size>) -> Size {
        match self {
            DType::U4x16Align16B | DType::U6x16Align16B => elements.into().div_ceil(16) * 16u64,
            _ => self.global_bytes(elements),
        }
    }

    /// Floating-point types: the only ones that may request NaN out-of-bounds fill. Not the
    /// 8-bit floats: their maps are `UINT8`, which the driver fills with zeros only.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F16
                | DType::F32
                | DType::F64
                | DType::BF16
                | DType::F32Ftz
                | DType::TF32
                | DType::TF32Ftz
        )
    }

    /// The packed sub-byte types (Blackwell, sm_100 and later).
    pub fn is_packed(self) -> bool {
        matches!(
            self,
            DType::U4x16Align8B | DType::U4x16Align16B | DType::U6x16Align16B
        )
    }

    /// The CUDA C++ storage type the generated code uses for one element. 16-bit floats
    /// travel as raw 16-bit storage so the code needs no CUDA headers.
    pub fn cuda_storage(self) -> &'static str {
        match self {
            DType::U8
            | DType::E4M3
            | DType::E5M2
            | DType::U4x16Align8B
            | DType::U4x16Align16B
            | DType::U6x16Align16B => "unsigned char",
            DType::U16 => "unsigned short",
            DType::F16 => "tma_half",
            DType::BF16 => "tma_bfloat16",
            DType::U32 => "unsigned int",
            DType::I32 => "int",
            DType::F32 | DType::F32Ftz | DType::TF32 | DType::TF32Ftz => "float",
            DType::U64 => "unsigned long long",
            DType::I64 => "long long",
            DType::F64 => "double",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Greatest common divisor (`gcd(a, 0) = a`).
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_values_follow_the_driver_enum() {
        for (i, d) in DType::ALL.iter().enumerate() {
            assert_eq!(DType::parse(d.name()), Some(*d));
            if i < 16 {
                assert_eq!(d.cu_value() as usize, i);
            } else {
                assert_eq!(d.cu_value(), 0, "{d}: moved as UINT8");
                assert_eq!(d.cu_name(), DType::U8.cu_name());
                assert_eq!(d.size_bytes(), Some(1));
            }
        }
        assert_eq!(DType::parse("fp8_e4m3"), Some(DType::E4M3));
        assert_eq!(DType::parse("e5m2"), Some(DType::E5M2));
        assert_eq!(DType::parse("fp8"), Some(DType::U8));
        assert_eq!(DType::parse("BF16"), Some(DType::BF16));
        assert_eq!(DType::parse("f17"), None);
        assert_eq!(DType::BF16.cu_name(), "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16");
    }

    #[test]
    fn sizes() {
        assert_eq!(DType::F16.size_bytes(), Some(2));
        assert_eq!(DType::F64.size_bytes(), Some(8));
        assert_eq!(DType::U4x16Align8B.size_bytes(), None);
        assert_eq!(DType::U4x16Align8B.global_bytes(16u64).get(), Some(8));
        assert_eq!(DType::U4x16Align16B.smem_bytes(16u64).get(), Some(16));
        assert_eq!(DType::U6x16Align16B.global_bytes(16u64).get(), Some(12));
        assert_eq!(DType::F64.global_bytes(1u64 << 61).get(), None);
        assert!(DType::U6x16Align16B.is_whole_bytes(4) && !DType::U6x16Align16B.is_whole_bytes(2));
        assert!(DType::TF32.is_float() && !DType::I32.is_float());
        // 16 bytes of each kind: 128 / gcd(128, bits) elements.
        let per16 = |d: DType| d.elements_per_whole(16);
        assert_eq!(per16(DType::U6x16Align16B), 64);
        assert_eq!(per16(DType::U4x16Align16B), 32);
        assert_eq!(per16(DType::BF16), 8);
        assert_eq!(per16(DType::F64), 2);
        assert_eq!(DType::U6x16Align16B.elements_per_whole(1), 4);
        assert_eq!(DType::U4x16Align8B.elements_per_whole(1), 2);
        assert_eq!(DType::F32.elements_per_whole(1), 1);
    }
}
