// Persistent, multi-stage TMA copy and a swizzled transpose, written with the generated tile
// helpers. Shared by examples/02-tile-copy (main.rs) and benches/tile_copy.rs.
//
// One file, three translation units; the host starts each with one #define picking a section,
// and names the section's tile (KernelSource::tile_as):
//   COPY_SECTION_RING       tile CopyTile:      tile_copy_s2 .. tile_copy_s6 (STAGES = 2 .. 6)
//   COPY_SECTION_TRANSPOSE  tile TransposeTile: tile_transpose (32 x 32 f32, 128B swizzle)
//   COPY_SECTION_UTILS      no tile:            tile_fill_u16, tile_random_u16, tile_count_diff_u16
//
// tile_copy: thread 0 of each block drives a ring of STAGES shared-memory slots, one mbarrier
// each. It keeps the ring full of tile loads, stores each tile as soon as it has landed, and
// refills a slot only once the store that reads it has finished reading shared memory
// (cp.async.bulk.wait_group.read). Blocks stride over the tiles (grid = SMs x blocks per SM).
// The same tile spec (box, swizzle, repeats) serves both maps: the load swizzles into shared
// memory and the store un-swizzles, so the copy is the identity for every swizzle mode.
//
// tile_transpose: one 32 x 32 f32 tile is loaded with the 128B swizzle; 64 threads each move
// a 4 x 4 block (four 16-byte loads, a register transpose, four 16-byte stores) into a second
// swizzled tile, which one thread then stores with TMA at the transposed coordinates. The
// thread -> block mapping makes both the loads and the stores free of bank conflicts.

// Bytes of dynamic shared memory this launch got.
static __device__ __forceinline__ unsigned copy_dynamic_smem_bytes() {
  unsigned n;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
}

#if defined(COPY_SECTION_RING)
// ---- the multi-stage copy ------------------------------------------------------------------

// The ring's slots are the plan's staging region `slots` (common.rs, CopyTile::plan): Plan::slots(base, s)
// is slot s, each aligned for the tile's swizzle, Plan::DYNAMIC_SMEM_BYTES what the launch gives.

// Tile k (0-based) of this block: linear tile index blockIdx.x + k * gridDim.x, row-major
// over tiles_outer x tiles_inner; one tile is call_rows x call_cols elements (box x repeats).
// Coordinates are in elements, user order (outer, inner). Edge tiles may reach past the
// tensor: loads fill zeros there, stores skip it.
template <int STAGES, class Plan>
static __device__ __forceinline__ void tile_copy_run(const CUtensorMap* src, const CUtensorMap* dst,
                                                     int tiles_outer, int tiles_inner,
                                                     int call_rows, int call_cols) {
  static_assert(STAGES >= 2 && STAGES <= 8, "2 to 8 stages");
  static_assert(Plan::COPIES_slots == STAGES, "one slot per stage");
  extern __shared__ unsigned char copy_smem_raw[];
  __shared__ __align__(8) tma_mbarrier full[STAGES];
  if (threadIdx.x != 0) return;  // one thread issues everything; the others have nothing to do

  unsigned char* base = Plan::base(copy_smem_raw);
  // The ring must fit in what the host gave: a short allocation would let TMA write past it.
  if (Plan::DYNAMIC_SMEM_BYTES > copy_dynamic_smem_bytes()) __trap();

  tma_prefetch_tensormap(src);
  tma_prefetch_tensormap(dst);
  for (int s = 0; s < STAGES; ++s) tma_mbarrier_init(&full[s], 1);
  tma_fence_mbarrier_init();  // the inits, visible to the async proxy before the first load
  tma_async_proxy_fence();

  const int block = static_cast<int>(blockIdx.x), grid = static_cast<int>(gridDim.x);
  const int total = tiles_outer * tiles_inner;
  const int mine = block < total ? (total - 1 - block) / grid + 1 : 0;  // tiles of this block

  auto issue = [&](int k) {  // load tile k into slot k % STAGES
    const int t = block + k * grid;
    const int s = k % STAGES;
    CopyTile::arrive_expect_tx(&full[s]);  // TX_BYTES: every repeated box
    CopyTile::load(src, &full[s], Plan::slots(base, s),
                   {.M = (t / tiles_inner) * call_rows, .K = (t % tiles_inner) * call_cols});
  };

  for (int k = 0; k < STAGES && k < mine; ++k) issue(k);
  for (int k = 0; k < mine; ++k) {
    const int t = block + k * grid;
    const int s = k % STAGES;
    // The (k / STAGES)-th use of slot s completes phase k / STAGES of its mbarrier.
    CopyTile::wait(&full[s], static_cast<unsigned>(k / STAGES) & 1u);
    // The data was written by the async proxy and is read by it; the fence is cheap insurance.
    tma_async_proxy_fence();
    CopyTile::store(dst, Plan::slots(base, s),
                    {.M = (t / tiles_inner) * call_rows, .K = (t % tiles_inner) * call_cols});
    tma_store_commit_group();  // one bulk group per tile
    // Slot (k - 1) % STAGES is free once the store of tile k - 1 has read it: at most one
    // group (tile k's) may still be reading. Refill it with tile k - 1 + STAGES.
    const int next = k - 1 + STAGES;
    if (k >= 1 && next < mine) {
      tma_store_async_wait<1>();  // .read
      issue(next);
    }
  }
  // Shared memory must outlive the stores' reads; wait for the writes too, so the kernel
  // ends with its output in global memory.
  tma_store_async_wait_complete<0>();
}

#define TMA_COPY_KERNEL(S)                                                                        \
  extern "C" __global__ void TMA_PLAN_TILE_COPY_S##S##_LAUNCH_BOUNDS                            \
      tile_copy_s##S(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst, \
                     int tiles_outer, int tiles_inner, int call_rows, int call_cols) {          \
    tile_copy_run<S, tma_plan_tile_copy_s##S>(&src, &dst, tiles_outer, tiles_inner, call_rows, call_cols); \
  }
TMA_COPY_KERNEL(2)
TMA_COPY_KERNEL(3)
TMA_COPY_KERNEL(4)
TMA_COPY_KERNEL(5)
TMA_COPY_KERNEL(6)
#undef TMA_COPY_KERNEL
#endif  // COPY_SECTION_RING

#if defined(COPY_SECTION_TRANSPOSE)
// ---- the swizzled transpose ------------------------------------------------------------------

static_assert(TransposeTile::BOXES == 1u, "one box per call");
static_assert(TransposeTile::SMEM_BYTES == 32u * 32u * 4u, "a 32 x 32 f32 box, 128-byte rows");
static_assert(TransposeTile::SMEM_ALIGN == 1024u, "the 128B swizzle: 1024-byte aligned tiles");

// The 16-byte chunk of a tile holding elements (row, col .. col + 3), col a multiple of 4, where
// TMA swizzled it: the 128B swizzle moves whole chunks (it XORs the chunk index, bits 4..6,
// with the row mod 8, bits 7..9), so the four floats stay together, at TransposeTile::at.
static __device__ __forceinline__ float4* chunk_at(unsigned char* tile, unsigned row, unsigned col) {
  return reinterpret_cast<float4*>(&TransposeTile::at(tile, {.R = static_cast<int>(row), .C = static_cast<int>(col)}));
}

// Thread t = 8 q + i (t < 64) owns the 4 x 4 block (R, C) = (i, (i + q) % 8) of the input tile:
// rows 4R .. 4R+3, 16-byte chunk C. Each quarter-warp (8 threads, one 128-byte wavefront of
// 16-byte accesses) then touches 8 distinct chunks both when reading input rows 4R + j
// (chunk C ^ (4R + j) % 8) and when writing output rows 4C + j (chunk R ^ (4C + j) % 8).
extern "C" __global__ void TMA_PLAN_TILE_TRANSPOSE_LAUNCH_BOUNDS
tile_transpose(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst,
               int tiles_outer, int tiles_inner) {
  extern __shared__ unsigned char tr_smem_raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  typedef tma_plan_tile_transpose Plan;  // common.rs, transpose_plan()
  unsigned char* base = Plan::base(tr_smem_raw);
  unsigned char* in = Plan::tiles(base, 0);   // input tile, as TMA swizzled it
  unsigned char* out = Plan::tiles(base, 1);  // output tile, swizzled for the TMA store
  if (threadIdx.x == 0) {
    if (Plan::DYNAMIC_SMEM_BYTES > copy_dynamic_smem_bytes()) __trap();
    tma_prefetch_tensormap(&src);
    tma_prefetch_tensormap(&dst);
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    tma_async_proxy_fence();
  }
  __syncthreads();

  const unsigned i = threadIdx.x & 7u, q = threadIdx.x >> 3;
  const unsigned R = i, C = (i + q) & 7u;
  unsigned phase = 0;
  const int total = tiles_outer * tiles_inner;
  for (int t = blockIdx.x; t < total; t += gridDim.x) {
    const int r0 = (t / tiles_inner) * 32, c0 = (t % tiles_inner) * 32;  // input coords (row, col)
    if (threadIdx.x == 0) {
      TransposeTile::arrive_expect_tx(&bar);
      TransposeTile::load(&src, &bar, in, {.R = r0, .C = c0});
    }
    TransposeTile::wait(&bar, phase);
    phase ^= 1u;

    float4 v[4];
#pragma unroll
    for (unsigned j = 0; j < 4; ++j)  // input rows 4R + j, columns 4C .. 4C+3
      v[j] = *chunk_at(in, 4u * R + j, 4u * C);
    const float4 w[4] = {make_float4(v[0].x, v[1].x, v[2].x, v[3].x),
                         make_float4(v[0].y, v[1].y, v[2].y, v[3].y),
                         make_float4(v[0].z, v[1].z, v[2].z, v[3].z),
                         make_float4(v[0].w, v[1].w, v[2].w, v[3].w)};
#pragma unroll
    for (unsigned j = 0; j < 4; ++j)  // output rows 4C + j (input column), columns 4R .. 4R+3
      *chunk_at(out, 4u * C + j, 4u * R) = w[j];

    tma_async_proxy_fence();  // each thread's generic-proxy writes -> visible to the TMA store
    __syncthreads();          // every thread has read `in` and written `out`
    if (threadIdx.x == 0) {
      TransposeTile::store(&dst, out, {.R = c0, .C = r0});  // output tensor is [cols][rows]
      tma_store_commit_group();
      tma_store_async_wait<0>();  // .read: `out` may be rewritten after the barrier below
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) tma_store_async_wait_complete<0>();
}
#endif  // COPY_SECTION_TRANSPOSE

#if defined(COPY_SECTION_UTILS)
// ---- helpers for the benchmark: fill, random fill, compare --------------------------------------

extern "C" __global__ void tile_fill_u16(unsigned short* p, unsigned long long n, unsigned short v) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)
    p[i] = v;
}

// splitmix64 of (seed, index), masked with 0x7f7f: finite bf16 values, never 0xffff (the poison).
extern "C" __global__ void tile_random_u16(unsigned short* p, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    unsigned long long z = seed + (i + 1ull) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    p[i] = static_cast<unsigned short>(z >> 16) & 0x7f7fu;
  }
}

// *diff += number of i < n with a[i] != b[i].
extern "C" __global__ void tile_count_diff_u16(const unsigned short* a, const unsigned short* b,
                                               unsigned long long n, unsigned long long* diff) {
  unsigned long long local = 0;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)
    local += a[i] != b[i] ? 1ull : 0ull;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31u) == 0 && local != 0) atomicAdd(diff, local);
}
#endif  // COPY_SECTION_UTILS
