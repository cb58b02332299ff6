// tests/gpu_work_queue.rs: each block's producer thread claims items from a global counter and
// pushes them through its plan's work queue `tiles` until one is past `total` (pushed too);
// every reader (each warp but warp 0; the Threads plan: each thread of them) pops every item
// in order until that one. Everyone logs what it pushed or popped; readers stall now and then
// (a hash of the item, the reader and `seed`), so the ring fills and wraps under them.
// `readers_stop` < 0: every reader pops to the end; else readers stop after that many pops
// (the producer's push then waits for them: the hang test).
template <class Plan, class Queue, bool PER_THREAD>
__device__ __forceinline__ void queue_walk_body(const Queue& q, int* counter, int total, int* log, int cap,
                                                int* lengths, unsigned seed, int readers_stop) {
  const unsigned warp = threadIdx.x / 32u;
  // One log a warp (PER_THREAD: a thread's, for thread 0 and the readers), `cap` items each.
  const unsigned who = PER_THREAD ? threadIdx.x : warp;
  const unsigned per_block = PER_THREAD ? Plan::BLOCK_THREADS : Plan::BLOCK_THREADS / 32u;
  int* mine = log + ((size_t)blockIdx.x * per_block + who) * cap;
  const bool writes = PER_THREAD || tma_lane_id() == 0u;
  typename Queue::state s;
  int k = 0;
  if (warp == 0u) {
    if (threadIdx.x != 0u) return;
    for (;;) {
      const int t = Queue::claim(counter);
      q.push(s, t);
      if (k < cap) mine[k] = t;
      ++k;
      if (t >= total) break;
    }
  } else {
    for (;;) {
      if (readers_stop >= 0 && k >= readers_stop) break;
      const int t = q.pop(s);
      if (writes && k < cap) mine[k] = t;
      ++k;
      if ((((unsigned)t * 2654435761u) ^ seed ^ (who * 40503u)) % 7u == 0u) __nanosleep(1000u);
      if (t >= total) break;
    }
  }
  if (writes) lengths[(size_t)blockIdx.x * per_block + who] = k;
}

extern "C" __global__ void TMA_PLAN_QUEUE_WALK_LAUNCH_BOUNDS queue_walk(int* counter, int total, int* log, int cap,
                                                                        int* lengths, unsigned seed, int readers_stop) {
  extern __shared__ __align__(16) unsigned char raw[];
  typedef tma_plan_queue_walk P;
  const P::queue_tiles q = P::tiles(P::base(raw));
  q.init();
  queue_walk_body<P, P::queue_tiles, false>(q, counter, total, log, cap, lengths, seed, readers_stop);
}

extern "C" __global__ void TMA_PLAN_QUEUE_WALK_THREADS_LAUNCH_BOUNDS queue_walk_threads(
    int* counter, int total, int* log, int cap, int* lengths, unsigned seed, int readers_stop) {
  extern __shared__ __align__(16) unsigned char raw[];
  typedef tma_plan_queue_walk_threads P;
  const P::queue_items q = P::items(P::base(raw));
  q.init();
  queue_walk_body<P, P::queue_items, true>(q, counter, total, log, cap, lengths, seed, readers_stop);
}
