// Threads 0..127 consume (and store), thread 128 produces; the plan says 160 threads.
extern "C" __global__ void TMA_PLAN_PLAN_COPY_LAUNCH_BOUNDS
plan_copy(const __grid_constant__ CUtensorMap in, const __grid_constant__ CUtensorMap out,
          int tiles_r, int tiles_c, unsigned* counts) {
  typedef tma_plan_plan_copy P;
  static_assert(P::BLOCK_THREADS == 160u && P::CLUSTER_X == 2u, "the plan's launch");
  extern __shared__ __align__(16) unsigned char raw[];
  unsigned char* base = P::base(raw);
  const tma_pipe_ring pipe = P::ring(base);
  unsigned* count = reinterpret_cast<unsigned*>(P::count(base));
  if (threadIdx.x == 0u) *count = 0u;
  pipe.init();
  const int total = tiles_r * tiles_c;
  tma_pipe_ring::state s;
  if (threadIdx.x >= 128u) {
    if (threadIdx.x == 128u) {
      for (int t = blockIdx.x; t < total; t += gridDim.x, ++s) {
        pipe.acquire(s);
        pipe.load(s, &in, {.r = (t / tiles_c) * 32, .c = (t % tiles_c) * 32});
      }
    }
  } else {
    int k = 0;
    for (int t = blockIdx.x; t < total; t += gridDim.x, ++s, ++k) {
      unsigned* dst = reinterpret_cast<unsigned*>(P::staged(base, static_cast<unsigned>(k) % P::COPIES_staged));
      if (threadIdx.x == 0u) tma_store_async_wait<P::COPIES_staged - 1>();  // the copy's last store has read it
      tma_named_barrier_sync<1u, 128u>();
      pipe.wait(s);
      const unsigned* src = reinterpret_cast<const unsigned*>(pipe.smem_a(s));
      for (unsigned i = threadIdx.x; i < 32u * 32u; i += 128u) dst[i] = src[i] + 1u;
      pipe.release(s);
      tma_async_proxy_fence();
      tma_named_barrier_sync<1u, 128u>();
      if (threadIdx.x == 0u) {
        PT::store(&out, dst, {.r = (t / tiles_c) * 32, .c = (t % tiles_c) * 32});
        tma_store_commit_group();
        *count += 1u;
      }
    }
    if (threadIdx.x == 0u) {
      tma_store_async_wait_complete<0>();
      counts[blockIdx.x] = *count;
    }
  }
  pipe.finish();
}
