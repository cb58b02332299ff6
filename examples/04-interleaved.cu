// Example 04's kernel: NC/8HWC8 f16 activations -> plain NCHW, through TMA.
//
// One block per (n, pair of channel slices, 8-row band, 16-pixel strip): one load() call
// brings two channel slices (16 channels) of an 8 x 16-pixel tile into shared memory, then
// the block writes those 2048 values out in NCHW order. The host replaces TILE with the
// tile's CUDA name.
//
// Where element (c, h, w) of the tile sits in shared memory (c < 16, h < 8, w < 16): slice
// c / 8 starts SMEM_STRIDE_BYTES * (c / 8) in (a repeat of the box), row h at h * ROW_PITCH
// (16 chunks of 16 bytes, packed), chunk w at w * 16, channel c % 8 at 2 * (c % 8) in the
// chunk; then the 128B swizzle XORs address bits 4-6 with bits 7-9 (the slice offsets are
// multiples of 1024, so each slice starts the pattern afresh).
#define ROW_PITCH (16 * 16)

static __device__ __forceinline__ unsigned swizzle_128b(unsigned offset) {
  return offset ^ ((offset >> 3) & 0x70u);
}

extern "C" __global__ void nc8hwc8_to_nchw(const __grid_constant__ CUtensorMap act, unsigned short* out,
                                           int C, int H, int W) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  const unsigned base = tma_smem_addr(raw);
  unsigned char* smem = raw + (((base + TILE::SMEM_ALIGN - 1) & ~(TILE::SMEM_ALIGN - 1)) - base);
  const int pairs = C / 16;
  const int n = blockIdx.z / pairs, slice0 = (blockIdx.z % pairs) * 2;
  const int h0 = blockIdx.y * 8, w0 = blockIdx.x * 16;
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    TILE::arrive_expect_tx(&bar);                // TX_BYTES: 2 slices x 8 rows x 16 chunks x 16 B
    TILE::load(&act, &bar, smem, n, slice0, h0, w0);  // user order (N, C8, H, W); W counts chunks
  }
  TILE::wait(&bar, 0);
  for (int i = threadIdx.x; i < 16 * 8 * 16; i += blockDim.x) {
    const int c = i / (8 * 16), h = (i / 16) % 8, w = i % 16;
    const unsigned offset = (c / 8) * TILE::SMEM_STRIDE_BYTES + h * ROW_PITCH + w * 16 + (c % 8) * 2;
    const unsigned short v = *reinterpret_cast<const unsigned short*>(smem + swizzle_128b(offset));
    out[((size_t)(n * C + slice0 * 8 + c) * H + h0 + h) * W + w0 + w] = v;
  }
}
