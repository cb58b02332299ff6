// The quickstart's kernel: one block per call loads two 64 x 64 bf16 boxes with TMA, dumps
// block (0, 0)'s raw shared memory, and stores the boxes back at the same coordinates.
// The host replaces the tile placeholder with the tile's CUDA name (tma_mpk_tile). Shared with benches/jit.rs.
extern "C" __global__ void quickstart_roundtrip(const __grid_constant__ CUtensorMap in,
                                                const __grid_constant__ CUtensorMap out,
                                                unsigned char* smem_dump) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  const unsigned base = tma_smem_addr(raw);
  unsigned char* smem = raw + (((base + TILE::SMEM_ALIGN - 1) & ~(TILE::SMEM_ALIGN - 1)) - base);
  const int m0 = blockIdx.y * 64, k0 = blockIdx.x * 128;  // user order: (M, K)
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    TILE::arrive_expect_tx(&bar);          // TX_BYTES = 16384: both boxes
    TILE::load(&in, &bar, smem, m0, k0);
  }
  TILE::wait(&bar, 0);
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (unsigned i = threadIdx.x; i < TILE::SMEM_BYTES; i += blockDim.x) smem_dump[i] = smem[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    TILE::store(&out, smem, m0, k0);
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}
