// Example 04's kernel: NC/8HWC8 f16 activations -> plain NCHW, through TMA.
//
// One block per (n, pair of channel slices, 8-row band, 16-pixel strip): one load() call
// brings two channel slices (16 channels) of an 8 x 16-pixel tile into shared memory, then
// the block writes those 2048 values out in NCHW order. `Act` is the tile's name for this
// kernel and `tma_plan_nc8hwc8_to_nchw` its plan (04-interleaved.rs: KernelPlan): shared
// memory and launch bounds come from the plan.
//
// Element (c, h, w) of the tile (c < 16, h < 8, w < 16) is channel c % 8 of the chunk at
// position {.N = 0, .C8 = c / 8, .H = h, .W = w}: Act::at finds it where TMA wrote it (the
// second slice is a repeat of the box; rows of 16 chunks, packed; then the 128B swizzle).
extern "C" __global__ void TMA_PLAN_NC8HWC8_TO_NCHW_LAUNCH_BOUNDS
nc8hwc8_to_nchw(const __grid_constant__ CUtensorMap act, unsigned short* out, int C, int H, int W) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  typedef tma_plan_nc8hwc8_to_nchw Plan;
  unsigned char* smem = Plan::act(Plan::base(raw), 0);  // the plan's one staging copy
  // One call: EXTENT_C8 = 2 slices of CHUNK_ELEMENTS = 8 channels, EXTENT_H x EXTENT_W pixels.
  const int channels = Act::EXTENT_C8 * Act::CHUNK_ELEMENTS;
  const int pairs = C / channels;
  const int n = blockIdx.z / pairs, slice0 = (blockIdx.z % pairs) * Act::EXTENT_C8;
  const int h0 = blockIdx.y * Act::EXTENT_H, w0 = blockIdx.x * Act::EXTENT_W;
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Act::arrive_expect_tx(&bar);  // TX_BYTES: 2 slices x 8 rows x 16 chunks x 16 B
    Act::load(&act, &bar, smem, {.N = n, .C8 = slice0, .H = h0, .W = w0});  // W counts chunks
  }
  Act::wait(&bar, 0);
  for (int i = threadIdx.x; i < channels * Act::EXTENT_H * Act::EXTENT_W; i += blockDim.x) {
    const int c = i / (Act::EXTENT_H * Act::EXTENT_W), h = (i / Act::EXTENT_W) % Act::EXTENT_H,
              w = i % Act::EXTENT_W;
    const unsigned short v =
        Act::at(smem, {.N = 0, .C8 = c / Act::CHUNK_ELEMENTS, .H = h, .W = w}, c % Act::CHUNK_ELEMENTS).bits;
    out[((size_t)(n * C + slice0 * Act::CHUNK_ELEMENTS + c) * H + h0 + h) * W + w0 + w] = v;
  }
}
