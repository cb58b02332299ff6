// The quickstart's kernel: one block per call loads two 64 x 64 bf16 boxes with TMA, dumps
// block (0, 0)'s raw shared memory, and stores the boxes back at the same coordinates.
// `MpkTile` is the tile's name for this kernel and `tma_plan_quickstart_roundtrip` its plan
// (01-quickstart.rs: KernelPlan): shared memory and launch bounds come from the plan.
// Shared with benches/jit.rs.
extern "C" __global__ void TMA_PLAN_QUICKSTART_ROUNDTRIP_LAUNCH_BOUNDS quickstart_roundtrip(const __grid_constant__ CUtensorMap in,
                                                const __grid_constant__ CUtensorMap out,
                                                unsigned char* smem_dump) {
  extern __shared__ unsigned char raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  typedef tma_plan_quickstart_roundtrip Plan;
  unsigned char* smem = Plan::boxes(Plan::base(raw), 0);  // the plan's one staging copy
  // One call covers EXTENT_M x EXTENT_K = 64 x 128 elements (two boxes along K).
  const int m0 = blockIdx.y * MpkTile::EXTENT_M, k0 = blockIdx.x * MpkTile::EXTENT_K;
  if (threadIdx.x == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    MpkTile::arrive_expect_tx(&bar);  // TX_BYTES = 16384: both boxes
    MpkTile::load(&in, &bar, smem, {.M = m0, .K = k0});
  }
  MpkTile::wait(&bar, 0);
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (unsigned i = threadIdx.x; i < MpkTile::SMEM_BYTES; i += blockDim.x) smem_dump[i] = smem[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    MpkTile::store(&out, smem, {.M = m0, .K = k0});
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}
