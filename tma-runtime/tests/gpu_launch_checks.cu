// Kernels of tma-runtime/tests/gpu_launch_checks.rs, after the prelude and one tile's helpers
// (KernelSource::body_at: NVRTC's messages point here). TMA in raw PTX: they need nothing of
// the generated tile API but the prelude's mbarrier and bulk-group helpers.
extern "C" __global__ void read_ptr(const unsigned long long* p, unsigned long long* out) {
  if (threadIdx.x == 0) out[0] = p[0] + 1ull;
}

extern "C" __global__ void copy_map(const __grid_constant__ CUtensorMap map, unsigned long long* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = map.opaque[threadIdx.x];
}

// The 64 x 64 box at (r0, c0) of `src` through shared memory to the same place of `dst`.
__device__ __forceinline__ void roundtrip_box(const CUtensorMap* src, const CUtensorMap* dst,
                                              unsigned char* smem, tma_mbarrier* bar,
                                              unsigned tx_bytes, int r0, int c0) {
  if (threadIdx.x == 0) {
    tma_mbarrier_init(bar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_mbarrier_arrive_expect_tx(bar, tx_bytes);
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, { %2, %3 }], [%4];"
        :: "r"(tma_smem_addr(smem)), "l"(src), "r"(c0), "r"(r0), "r"(tma_smem_addr(bar))
        : "memory");
  }
  tma_mbarrier_wait(bar, 0);
  if (threadIdx.x == 0) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, { %1, %2 }], [%3];"
        :: "l"(dst), "r"(c0), "r"(r0), "r"(tma_smem_addr(smem))
        : "memory");
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}

// The tile in dynamic shared memory, aligned by the kernel: needs its footprint plus slack.
extern "C" __global__ void dynamic_roundtrip(const __grid_constant__ CUtensorMap src,
                                             const __grid_constant__ CUtensorMap dst,
                                             unsigned align, unsigned tx_bytes, int r0, int c0) {
  extern __shared__ unsigned char raw[];
  __shared__ alignas(8) tma_mbarrier bar;
  const unsigned base = tma_smem_addr(raw);
  unsigned char* smem = raw + (((base + align - 1u) & ~(align - 1u)) - base);
  roundtrip_box(&src, &dst, smem, &bar, tx_bytes, r0, c0);
}

// The tile in static shared memory: no dynamic shared memory needed, whatever the source declares.
extern "C" __global__ void static_roundtrip(const __grid_constant__ CUtensorMap src,
                                            const __grid_constant__ CUtensorMap dst,
                                            unsigned tx_bytes, int r0, int c0) {
  __shared__ alignas(1024) unsigned char smem[8192];
  __shared__ alignas(8) tma_mbarrier bar;
  roundtrip_box(&src, &dst, smem, &bar, tx_bytes, r0, c0);
}

// The tile in static shared memory beside a dynamic scratch array: the kernel uses dynamic
// shared memory, but none of it holds a tile, so its launch opts out of the host check.
extern "C" __global__ void static_tile_dynamic_scratch(const __grid_constant__ CUtensorMap src,
                                                       const __grid_constant__ CUtensorMap dst,
                                                       unsigned tx_bytes, int r0, int c0) {
  extern __shared__ unsigned scratch[];
  __shared__ alignas(1024) unsigned char smem[8192];
  __shared__ alignas(8) tma_mbarrier bar;
  scratch[threadIdx.x] = threadIdx.x * 3u;
  __syncthreads();
  // The scratch must read back, or nothing is copied (and the test sees poison).
  if (scratch[blockDim.x - 1u - threadIdx.x] != (blockDim.x - 1u - threadIdx.x) * 3u) return;
  roundtrip_box(&src, &dst, smem, &bar, tx_bytes, r0, c0);
}

// The parameter lists the runtime counts from the PTX (gpu_the_ptx_parameter_count_is_the_drivers):
// none, a struct by value, and a C++ (mangled) name.
struct launch_checks_big {
  float v[40];
};
extern "C" __global__ void no_params() {}
extern "C" __global__ void by_value(launch_checks_big b, float* out) { out[0] = b.v[3]; }
__global__ void mangled(int* p, int n) {
  if (n) p[0] = n;
}
