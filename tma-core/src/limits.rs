//! Hardware limits of TMA, each with its source. Validation checks against these before
//! the driver is ever called.

/// Largest tensor rank (`cuTensorMapEncodeTiled`: "tensorRank must be non-zero and less
/// than or equal to the maximum supported dimensionality of 5").
pub const MAX_RANK: usize = crate::spec::MAX_RANK;

/// Smallest rank with interleave ("If interleave is not CU_TENSOR_MAP_INTERLEAVE_NONE,
/// then tensorRank must additionally be greater than or equal to 3").
pub const MIN_RANK_INTERLEAVED: usize = 3;

/// Largest global dim ("Each globalDim must be non-zero and less than or equal to 2^32").
pub const MAX_GLOBAL_DIM: u64 = 1 << 32;

/// Global byte strides must be multiples of this ("Each globalStrides must be a multiple
/// of 16 and less than 2^40").
pub const STRIDE_ALIGN: u64 = 16;

/// ... and of this with 32-byte interleave ("Additionally, the stride must be a multiple
/// of 32 when interleave is CU_TENSOR_MAP_INTERLEAVE_32B").
pub const STRIDE_ALIGN_INTERLEAVE_32B: u64 = 32;

/// Global byte strides must be below this (2^40).
pub const MAX_STRIDE_BYTES: u64 = 1 << 40;

/// Global base address alignment ("globalAddress ... must be 16 byte aligned when
/// interleave is CU_TENSOR_MAP_INTERLEAVE_NONE or CU_TENSOR_MAP_INTERLEAVE_16B").
pub const GLOBAL_ADDRESS_ALIGN: u64 = 16;

/// ... "and 32 byte aligned when interleave is CU_TENSOR_MAP_INTERLEAVE_32B".
pub const GLOBAL_ADDRESS_ALIGN_INTERLEAVE_32B: u64 = 32;

/// Largest box dim ("Elements in boxDim must be non-zero and less than or equal to 256").
pub const MAX_BOX_DIM: u32 = 256;

/// Without interleave, the inner box extent in bytes must be a multiple of this
/// ("When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE, `{ boxDim[0] * elementSizeInBytes(
/// tensorDataType) }` must be a multiple of 16 bytes").
pub const INNER_BOX_BYTES_ALIGN: u64 = 16;

/// Largest element (traversal) stride ("`elementStrides[i]` must be non-zero and less than
/// or equal to 8").
pub const MAX_ELEMENT_STRIDE: u32 = 8;

/// Shared-memory destination/source alignment of `cp.async.bulk.tensor` (PTX ISA,
/// "Tensor copy": the shared memory address must be aligned to 128 bytes). Swizzled boxes
/// need the swizzle period on top (see [`crate::Swizzle::period_bytes`]).
pub const SMEM_ALIGN: u64 = 128;

/// Alignment a block's dynamic shared memory is guaranteed to start at: NVCC and NVRTC
/// declare an `extern __shared__` array `.extern .shared .align 16` (more only when the
/// source asks, and a launch promises nothing beyond the declaration's minimum: the base
/// follows the block's static shared memory). A tile that needs more alignment is aligned by
/// the kernel, so a launch must give it up to `align - 16` bytes of slack (an H100 showed
/// `CUDA_ERROR_MISALIGNED_ADDRESS` for a 128B-swizzled tile launched without it).
pub const DYNAMIC_SMEM_BASE_ALIGN: u64 = 16;

/// Largest transaction count one mbarrier phase can expect: the tx-count range is
/// [-(2^20 - 1), 2^20 - 1] (PTX ISA, "mbarrier: tx-count").
pub const MAX_TX_BYTES: u64 = (1 << 20) - 1;

/// Alignment of the global base address and strides for the packed ALIGN16B types and the
/// multiple their inner global dim must be (CUDA 12.8+ driver docs for
/// `CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B` / `16U6_ALIGN16B`; not checked on hardware here:
/// they exist only on Blackwell).
pub const PACKED_ALIGN16B_ADDRESS_ALIGN: u64 = 32;
pub const PACKED_INNER_DIM_MULTIPLE: u64 = 128;

/// The innermost coordinate of a tiled copy, in bytes, must be a multiple of this: on an
/// H100 (driver 580) `cp.async.bulk.tensor` with an inner coordinate of 20 B traps with
/// `CUDA_ERROR_ILLEGAL_INSTRUCTION`, while 0, 16, -16, 160 B work (tests/gpu_model.rs and
/// tests/gpu/standalone_sanity.cu show it). Not in the driver's documentation.
pub const INNER_COORD_ALIGN: u64 = 16;

/// Size of a `CUtensorMap` in bytes (cuda.h: `cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS]`,
/// 16 words). The generated prelude declares the device type with it and `static_assert`s it;
/// tma-runtime asserts at compile time that cudarc's host type has it.
pub const TENSOR_MAP_BYTES: usize = 128;

/// Alignment of a `CUtensorMap` in bytes: cuda.h of CUDA 13 declares it `alignas(128)`
/// (CUDA 12's was 64), and so does the cudarc binding the runtime uses (`cuda-13000`).
/// Host and device must agree: a struct holding maps, or an array of them, has the same
/// layout on both sides only if the alignment is the same. Used like [`TENSOR_MAP_BYTES`].
pub const TENSOR_MAP_ALIGN: usize = 128;

// ---- threads, blocks and launches (CUDA C++ Programming Guide, "Compute Capabilities",
// table "Technical Specifications per Compute Capability", column 9.0; the same for 10.0) ----

/// Most threads of one block ("Maximum number of threads per block": 1024).
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// Most threads of a block along x, y and z ("Maximum x- or y-dimensionality of a block":
/// 1024; "Maximum z-dimension of a block": 64). The product is bounded by
/// [`MAX_BLOCK_THREADS`] too.
pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];

/// Most blocks of a grid along x, y and z ("Maximum x-dimension of a grid of thread blocks":
/// 2^31 - 1; "Maximum y- or z-dimension of a grid of thread blocks": 65535).
pub const MAX_GRID_DIM: [u32; 3] = [(1 << 31) - 1, 65535, 65535];

/// Most threads resident on one SM ("Maximum number of resident threads per SM": 2048 on
/// sm_90): a `__launch_bounds__(threads, blocks)` asking for more than this many threads
/// per SM cannot be met.
pub const MAX_THREADS_PER_SM: u32 = 2048;

/// Most blocks resident on one SM ("Maximum number of resident blocks per SM": 32 on sm_90).
pub const MAX_BLOCKS_PER_SM: u32 = 32;

/// Most CTAs of a thread-block cluster: 16 (non-portable, opted in with
/// `cudaFuncAttributeNonPortableClusterSizeAllowed`; 8 portably: "Thread Block Clusters"),
/// and the multicast CTA mask of `cp.async.bulk.tensor` has 16 bits.
pub const MAX_CLUSTER_CTAS: u32 = 16;

// ---- im2col mode (`cuTensorMapEncodeIm2col`, `cp.async.bulk.tensor ... .im2col`) ----

/// Largest `pixelsPerColumn` (CUDA 13.0 `cuda.h`, `cuTensorMapEncodeIm2col`: "pixelsPerColumn
/// ... must be less than or equal to 1024"; older documentation and CubeCL's say 256: the
/// GPU validator test probes both sides of each).
pub const MAX_PIXELS_PER_COLUMN: u32 = 1024;

/// Largest spatial global dim (D, H, W) of an im2col map, and of its bounding box: 2^31 - 1.
/// Found on the H100 (CUDA 13.0 driver): `cuTensorMapEncodeIm2col` computes `dim + upper -
/// lower` in 32-bit signed arithmetic and refuses it below 1, so 2^31 with corners 0 is
/// refused and 2^32 with `upper - lower = 3` accepted (by wrap-around), while N and C take
/// 2^32 as in tiled mode (tests/gpu_im2col_validator.rs probes both sides); no documentation
/// states it.
pub const MAX_IM2COL_SPATIAL_DIM: u64 = (1 << 31) - 1;

/// Largest `channelsPerPixel` ("channelsPerPixel ... must be less than or equal to 256"):
/// the box of C, the same limit as a tiled box dim.
pub const MAX_CHANNELS_PER_PIXEL: u32 = MAX_BOX_DIM;

/// The bits of one bounding-box corner coordinate for a tensor of `spatial` spatial dims: the
/// corners of all spatial dims share 16 bits. `cuTensorMapEncodeIm2col`: rank 3 "[-32768,
/// 32767]", rank 4 "[-128, 127]", rank 5 "[-16, 15]"; CUTLASS's `can_implement` (sm90 implicit
/// GEMM): `corner_limit = 1 << (16 / NumSpatialDimensions - 1)`, the range
/// `[-corner_limit, corner_limit - 1]`. 0 for a rank without im2col.
pub const fn im2col_corner_bits(spatial: usize) -> u32 {
    match spatial {
        1..=3 => 16 / spatial as u32,
        _ => 0,
    }
}

/// The range of a corner coordinate (see [`im2col_corner_bits`]): signed, that many bits.
pub const fn im2col_corner_range(spatial: usize) -> (i32, i32) {
    let bits = im2col_corner_bits(spatial);
    if bits == 0 {
        return (0, -1);
    }
    (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
}

/// The largest im2col offset (the filter tap, `im2colOffsets` of `cp.async.bulk.tensor`) per
/// spatial dim: unsigned, the same bits as a corner (PTX passes 16-bit operands, the map keeps
/// `16 / spatial` bits of each). CUTLASS's `can_implement`: `offset_limit = 1 << (16 /
/// NumSpatialDimensions)`, offsets in `[0, offset_limit - 1]`: 65535 (NWC), 255 (NHWC), 31
/// (NDHWC).
pub const fn im2col_offset_max(spatial: usize) -> u32 {
    let bits = im2col_corner_bits(spatial);
    if bits == 0 {
        return 0;
    }
    (1u32 << bits) - 1
}
