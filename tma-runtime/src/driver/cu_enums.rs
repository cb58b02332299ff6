//! The driver's enums for the encode arguments, mapped from tma-core's in one place each.

use cudarc::driver::sys::{
    CUtensorMapDataType as CuDType, CUtensorMapFloatOOBfill as CuOob,
    CUtensorMapInterleave as CuInterleave, CUtensorMapL2promotion as CuL2,
    CUtensorMapSwizzle as CuSwizzle,
};
use tma_core::{DType, Interleave, L2Promotion, OobFill, Swizzle};

/// The driver enums of the encode arguments, in one place.
pub(super) fn cu_dtype(d: DType) -> CuDType {
    use CuDType::*;
    match d {
        // TMA moves the 8-bit floats as bytes.
        DType::U8 | DType::E4M3 | DType::E5M2 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
        DType::U16 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
        DType::U32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        DType::I32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        DType::U64 => CU_TENSOR_MAP_DATA_TYPE_UINT64,
        DType::I64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
        DType::F16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        DType::F64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        DType::BF16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F32Ftz => CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
        DType::TF32 => CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
        DType::TF32Ftz => CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
        DType::U4x16Align8B => CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,
        DType::U4x16Align16B => CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B,
        DType::U6x16Align16B => CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B,
    }
}
pub(super) fn cu_interleave(i: Interleave) -> CuInterleave {
    match i {
        Interleave::None => CuInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
        Interleave::B16 => CuInterleave::CU_TENSOR_MAP_INTERLEAVE_16B,
        Interleave::B32 => CuInterleave::CU_TENSOR_MAP_INTERLEAVE_32B,
    }
}
pub(super) fn cu_swizzle(s: Swizzle) -> CuSwizzle {
    use CuSwizzle::*;
    match s {
        Swizzle::None => CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => CU_TENSOR_MAP_SWIZZLE_128B,
        Swizzle::B128Atom32B => CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
        Swizzle::B128Atom32BFlip8B => CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
        Swizzle::B128Atom64B => CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B,
    }
}
pub(super) fn cu_l2(l: L2Promotion) -> CuL2 {
    match l {
        L2Promotion::None => CuL2::CU_TENSOR_MAP_L2_PROMOTION_NONE,
        L2Promotion::B64 => CuL2::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        L2Promotion::B128 => CuL2::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        L2Promotion::B256 => CuL2::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    }
}
pub(super) fn cu_oob(o: OobFill) -> CuOob {
    match o {
        OobFill::Zero => CuOob::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        OobFill::NanRequestZeroFma => CuOob::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_enums_match_core_values() {
        for d in DType::ALL {
            assert_eq!(cu_dtype(d) as u32, d.cu_value());
        }
        for s in Swizzle::ALL {
            assert_eq!(cu_swizzle(s) as u32, s as u32);
        }
        for i in [Interleave::None, Interleave::B16, Interleave::B32] {
            assert_eq!(cu_interleave(i) as u32, i as u32);
        }
        for l in [
            L2Promotion::None,
            L2Promotion::B64,
            L2Promotion::B128,
            L2Promotion::B256,
        ] {
            assert_eq!(cu_l2(l) as u32, l as u32);
        }
        assert_eq!(cu_oob(OobFill::NanRequestZeroFma) as u32, 1);
    }
}
