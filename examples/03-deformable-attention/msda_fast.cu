// Multi-scale deformable attention, forward: the fast kernels (msda.cu keeps the two
// baselines). The standard operator's contract:
//   value  [N][S][M][D]       f16, bf16 or f32 (msda_t: raw bits for the 16-bit types)
//   shapes (H, W) and the first row of each level (MsdaShapes, by value)
//   loc    [N][Q][M][L][P][2] f32, (x along W, y along H), in [0, 1] (outside: zero padding)
//   attn   [N][Q][M][L][P]    f32: weights, or logits with MSDA_SOFTMAX (softmax over L * P)
//   out    [N][Q][M * D]      msda_t, accumulated in f32
//
//   msda_vec   plain loads: each thread owns MSDA_VEC channels (16 bytes) of one (query, head),
//              gathers each bilinear corner with one 16-byte load, MSDA_QPB queries per block.
//   msda_stage TMA: each block owns one (batch, head) and MSDA_QPB * MSDA_ROUNDS queries; the
//              levels the host staged (the small ones) are copied whole into shared memory by
//              one box per level (a 5-D map [N][H][W][M][C] per level, box [1][H][W][1][D]) while
//              the threads gather the other levels with plain loads; then they gather the
//              staged levels from shared memory through the tile's accessor (T::at).
//
// Configuration (defines from the host): MSDA_DTYPE (0 f16, 1 bf16, 2 f32), MSDA_M, MSDA_D,
// MSDA_L, MSDA_P, MSDA_QPB, MSDA_MAP (msda_vec: 0 = a block is one (batch, head), 1 = a block
// is all heads of its queries), MSDA_ROUNDS and MSDA_CLUSTER (msda_stage: blocks of a cluster
// share one (batch, head) and each loads part of the staged levels, multicast to all),
// MSDA_SOFTMAX, MSDA_UNROLL, MSDA_MINB (blocks per SM the registers must allow). With
// MSDA_STAGED > 0 the host renders the staged levels' tiles (set msda_stage) and msda_slot<l>.
// Each build holds one kernel, msda_vec (MSDA_STAGED == 0) or msda_stage, and its kernel plan
// (fast.rs): tma_plan_msda_vec / tma_plan_msda_stage give the launch's block (and cluster and
// the staged levels' place in shared memory), and the kernel's __launch_bounds__.

#if MSDA_DTYPE == 2
typedef float msda_t;
#else
typedef unsigned short msda_t;
#endif

constexpr int MSDA_VEC = 16 / static_cast<int>(sizeof(msda_t));  // channels per 16 bytes
constexpr int MSDA_TPQ = MSDA_D / MSDA_VEC;                       // threads per (query, head)
constexpr int MSDA_LP = MSDA_L * MSDA_P;
static_assert(MSDA_D % MSDA_VEC == 0, "D * element size is a multiple of 16 bytes");
static_assert(MSDA_TPQ <= 32 && (MSDA_TPQ & (MSDA_TPQ - 1)) == 0,
              "the threads of one (query, head) are a power of two within a warp");

// Per level l: hws[l] = H, hws[L + l] = W, hws[2 L + l] = first row; the host's struct is
// MSDA_MAX_LEVELS long whatever L (one parameter size for every build).
#define MSDA_MAX_LEVELS 16
static_assert(MSDA_L >= 1 && MSDA_L <= MSDA_MAX_LEVELS, "1 to 16 levels");
struct MsdaShapes {
  int hws[3 * MSDA_MAX_LEVELS];
  __device__ __forceinline__ int h(int l) const { return hws[l]; }
  __device__ __forceinline__ int w(int l) const { return hws[MSDA_L + l]; }
  __device__ __forceinline__ int start(int l) const { return hws[2 * MSDA_L + l]; }
};

template <int V>
struct msda_int {
  static constexpr int value = V;
};
// f(msda_int<I>{}), ..., f(msda_int<N - 1>{}): a loop over levels with a constant level.
template <int I, int N, class F>
__device__ __forceinline__ void msda_for(const F& f) {
  if constexpr (I < N) {
    f(msda_int<I>{});
    msda_for<I + 1, N>(f);
  }
}

// 16 bytes of value -> MSDA_VEC floats (exact).
__device__ __forceinline__ void msda_unpack(const uint4& v, float (&f)[MSDA_VEC]) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
#if MSDA_DTYPE == 2
#pragma unroll
  for (int i = 0; i < 4; ++i) f[i] = __uint_as_float(u[i]);
#elif MSDA_DTYPE == 1
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
#else
#pragma unroll
  for (int i = 0; i < 4; ++i)
    asm("{ .reg .f16 lo, hi;\n\t mov.b32 {lo, hi}, %2;\n\t cvt.f32.f16 %0, lo;\n\t cvt.f32.f16 %1, hi; }"
        : "=f"(f[2 * i]), "=f"(f[2 * i + 1])
        : "r"(u[i]));
#endif
}

// MSDA_VEC floats -> 16 bytes of msda_t, rounded to nearest even.
__device__ __forceinline__ uint4 msda_pack(const float (&f)[MSDA_VEC]) {
  unsigned u[4];
#if MSDA_DTYPE == 2
#pragma unroll
  for (int i = 0; i < 4; ++i) u[i] = __float_as_uint(f[i]);
#else
#pragma unroll
  for (int i = 0; i < 4; ++i)  // cvt.rn.{f16,bf16}x2.f32 d, hi, lo
#if MSDA_DTYPE == 1
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u[i]) : "f"(f[2 * i + 1]), "f"(f[2 * i]));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u[i]) : "f"(f[2 * i + 1]), "f"(f[2 * i]));
#endif
#endif
  return make_uint4(u[0], u[1], u[2], u[3]);
}

// The attention weight of point i of this (query, head): the input, or its softmax over the
// L * P logits (max and sum reduced over the MSDA_TPQ threads of the query, in f32).
#if MSDA_DTYPE == 2
#define MSDA_EXP expf  // f32 output: the accurate exp
#else
#define MSDA_EXP __expf
#endif
struct MsdaWeights {
  const float* __restrict__ a;
  float max, inv_sum;
  __device__ __forceinline__ float operator()(int i) const {
#if MSDA_SOFTMAX
    return MSDA_EXP(__ldg(a + i) - max) * inv_sum;
#else
    return __ldg(a + i);
#endif
  }
};

// Every thread of the warp calls this (the shuffles span the MSDA_TPQ threads of a query).
__device__ __forceinline__ MsdaWeights msda_weights(const float* __restrict__ a, int sub) {
  MsdaWeights w{a, 0.f, 1.f};
#if MSDA_SOFTMAX
  float m = -__int_as_float(0x7f800000);  // -inf
  for (int i = sub; i < MSDA_LP; i += MSDA_TPQ) m = fmaxf(m, __ldg(a + i));
#pragma unroll
  for (int o = MSDA_TPQ / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o, MSDA_TPQ));
  float s = 0.f;
  for (int i = sub; i < MSDA_LP; i += MSDA_TPQ) s += MSDA_EXP(__ldg(a + i) - m);
#pragma unroll
  for (int o = MSDA_TPQ / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o, MSDA_TPQ);
  w.max = m;
  w.inv_sum = 1.f / s;
#else
  (void)sub;
#endif
  return w;
}

// x * n - 0.5 (the pixel coordinate, align_corners = false), its floor and its fraction. f16
// and bf16: in f32, as the standard op. f32 (MSDA_EXACT): the fraction of the exact product
// (x * n = p + e, both floats, by an fma), so that it is within f32 rounding of the f64 value
// (the plain f32 product loses up to half an ulp of n, ~4e-6 at n = 160).
#ifndef MSDA_EXACT
#define MSDA_EXACT (MSDA_DTYPE == 2)
#endif
__device__ __forceinline__ float msda_coord(float x, int n, float& fl, float& frac) {
  const float nf = static_cast<float>(n);
  const float p = x * nf;
  const float im = p - 0.5f;
  fl = floorf(im);
#if MSDA_EXACT
  const float e = fmaf(x, nf, -p);  // p + e == x * n exactly
  frac = (im - fl) + e;
  if (frac < 0.f) {
    fl -= 1.f;
    frac += 1.f;
  } else if (frac >= 1.f) {
    fl += 1.f;
    frac -= 1.f;
  }
#else
  frac = im - fl;
#endif
  return im;
}

// Adds the P points of one level to acc. `corner(h, w)` returns the 16 bytes of this thread's
// channels at pixel (h, w), which is inside the level. Points outside the map (h_im or w_im
// at or beyond -1 / H / W, or NaN) add nothing; corners outside add nothing (zero padding).
template <class Corner>
__device__ __forceinline__ void msda_level(float (&acc)[MSDA_VEC], const Corner& corner, int H, int W,
                                           const float2* __restrict__ xy, const MsdaWeights& weight, int i0) {
#pragma unroll MSDA_UNROLL
  for (int p = 0; p < MSDA_P; ++p) {
    const float2 c = __ldg(xy + p);
    // Coordinates in f32, as the standard op (align_corners = false).
    float hf, wf, fh, fw;
    const float h_im = msda_coord(c.y, H, hf, fh);
    const float w_im = msda_coord(c.x, W, wf, fw);
    const bool inside = h_im > -1.f && w_im > -1.f && h_im < static_cast<float>(H) && w_im < static_cast<float>(W);
    const int h0 = inside ? static_cast<int>(hf) : -2;  // -2: every corner outside
    const int w0 = inside ? static_cast<int>(wf) : -2;
    const float lh = inside ? fh : 0.f, lw = inside ? fw : 0.f;
    const float a = inside ? weight(i0 + p) : 0.f;
    const bool r0 = h0 >= 0, r1 = h0 + 1 >= 0 && h0 + 1 < H;
    const bool c0 = w0 >= 0, c1 = w0 + 1 >= 0 && w0 + 1 < W;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const uint4 v00 = r0 && c0 ? corner(h0, w0) : zero;
    const uint4 v01 = r0 && c1 ? corner(h0, w0 + 1) : zero;
    const uint4 v10 = r1 && c0 ? corner(h0 + 1, w0) : zero;
    const uint4 v11 = r1 && c1 ? corner(h0 + 1, w0 + 1) : zero;
    const float wt[4] = {a * (1.f - lh) * (1.f - lw), a * (1.f - lh) * lw, a * lh * (1.f - lw), a * lh * lw};
    const uint4 v[4] = {v00, v01, v10, v11};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float f[MSDA_VEC];
      msda_unpack(v[k], f);
#pragma unroll
      for (int j = 0; j < MSDA_VEC; ++j) acc[j] = fmaf(wt[k], f[j], acc[j]);
    }
  }
}

// Level l of (n, head) from global memory: this thread's channels start at `base`.
__device__ __forceinline__ void msda_global_level(float (&acc)[MSDA_VEC], const msda_t* __restrict__ value,
                                                  const MsdaShapes& sh, int l, int n, int spatial, int head,
                                                  int sub, const float2* __restrict__ xy,
                                                  const MsdaWeights& weight) {
  const int H = sh.h(l), W = sh.w(l);
  const msda_t* base =
      value + ((static_cast<long long>(n) * spatial + sh.start(l)) * MSDA_M + head) * MSDA_D + sub * MSDA_VEC;
  const auto corner = [base, W](int h, int w) {
    return __ldg(reinterpret_cast<const uint4*>(base + (h * W + w) * (MSDA_M * MSDA_D)));
  };
  msda_level(acc, corner, H, W, xy + l * MSDA_P, weight, l * MSDA_P);
}

__device__ __forceinline__ void msda_store(msda_t* __restrict__ out, long long nqh, int sub,
                                           const float (&acc)[MSDA_VEC]) {
  *reinterpret_cast<uint4*>(out + nqh * MSDA_D + sub * MSDA_VEC) = msda_pack(acc);
}

// The forward kernels (msda_bwd.cu, the backward, follows this file with MSDA_BACKWARD set
// and reuses what is above).
#ifndef MSDA_BACKWARD
#if MSDA_STAGED == 0
#if MSDA_MAP == 0
#define MSDA_VEC_BLOCK (MSDA_QPB * MSDA_TPQ)
#else
#define MSDA_VEC_BLOCK (MSDA_QPB * MSDA_M * MSDA_TPQ)
#endif
static_assert(tma_plan_msda_vec::BLOCK_THREADS == MSDA_VEC_BLOCK && tma_plan_msda_vec::BLOCKS_PER_SM == MSDA_MINB,
              "the plan's block is the kernel's");

// Grid: MSDA_MAP 0: N * M * ceil(Q / QPB) blocks, block b = ((n * M + head) * chunks + chunk);
//       MSDA_MAP 1: N * ceil(Q / QPB) blocks, block b = n * chunks + chunk, all heads.
extern "C" __global__ void TMA_PLAN_MSDA_VEC_LAUNCH_BOUNDS
msda_vec(const msda_t* __restrict__ value, const float* __restrict__ loc, const float* __restrict__ attn,
         msda_t* __restrict__ out, const __grid_constant__ MsdaShapes sh, int queries, int spatial) {
  const int chunks = (queries + MSDA_QPB - 1) / MSDA_QPB;
  const int t = threadIdx.x, sub = t % MSDA_TPQ;
#if MSDA_MAP == 0
  const int chunk = blockIdx.x % chunks, nh = blockIdx.x / chunks;
  const int n = nh / MSDA_M, head = nh % MSDA_M;
  int q = chunk * MSDA_QPB + t / MSDA_TPQ;
#else
  const int chunk = blockIdx.x % chunks, n = blockIdx.x / chunks;
  const int head = (t / MSDA_TPQ) % MSDA_M;
  int q = chunk * MSDA_QPB + t / (MSDA_TPQ * MSDA_M);
#endif
  const bool live = q < queries;  // the others compute a copy of the last query (shuffles)
  q = live ? q : queries - 1;
  const long long nqh = (static_cast<long long>(n) * queries + q) * MSDA_M + head;
  const float2* xy = reinterpret_cast<const float2*>(loc) + nqh * MSDA_LP;
  const MsdaWeights weight = msda_weights(attn + nqh * MSDA_LP, sub);
  float acc[MSDA_VEC];
#pragma unroll
  for (int j = 0; j < MSDA_VEC; ++j) acc[j] = 0.f;
#pragma unroll
  for (int l = 0; l < MSDA_L; ++l) msda_global_level(acc, value, sh, l, n, spatial, head, sub, xy, weight);
  if (live) msda_store(out, nqh, sub, acc);
}

#else
// Rendered by the host before this file: the tile set `msda_stage` (one member s<k> per
// staged level: a [1][H][W][1][D] box of the level's [N][H][W][M][C] view), msda_slot<l>
// (staged, the member's tile type, offset and index), MSDA_STAGE_MAP_PTRS (&s0_map, ...) and
// msda_stage_group (tma_group of the members).
typedef tma_msda_stage MsdaStage;
typedef tma_plan_msda_stage MsdaStagePlan;  // the set is its region `msda_stage`
static_assert(MsdaStagePlan::BLOCK_THREADS == MSDA_QPB * MSDA_TPQ && MsdaStagePlan::BLOCKS_PER_SM == MSDA_MINB &&
                  MsdaStagePlan::CLUSTER_X == MSDA_CLUSTER,
              "the plan's launch is the kernel's");

// Grid: N * M * chunks blocks, chunks = ceil(Q / (QPB * ROUNDS)) rounded up to a multiple of
// MSDA_CLUSTER, block b = ((n * M + head) * chunks + chunk), clusters of MSDA_CLUSTER along x;
// the plan's block, cluster and dynamic shared memory.
extern "C" __global__ void TMA_PLAN_MSDA_STAGE_LAUNCH_BOUNDS
msda_stage(const msda_t* __restrict__ value, const float* __restrict__ loc, const float* __restrict__ attn,
           msda_t* __restrict__ out, const __grid_constant__ MsdaShapes sh, int queries, int spatial,
           TMA_MSDA_STAGE_PARAMS) {
  extern __shared__ unsigned char msda_raw[];
  __shared__ __align__(8) tma_mbarrier bar;
  unsigned char* smem = MsdaStagePlan::msda_stage(MsdaStagePlan::base(msda_raw));
  constexpr int per_block = MSDA_QPB * MSDA_ROUNDS;
  // Chunks per (batch, head), a multiple of the cluster: the blocks of a cluster share it.
  const int chunks = ((queries + per_block - 1) / per_block + MSDA_CLUSTER - 1) / MSDA_CLUSTER * MSDA_CLUSTER;
  const int chunk = blockIdx.x % chunks, nh = blockIdx.x / chunks;
  const int n = nh / MSDA_M, head = nh % MSDA_M;
  const int t = threadIdx.x, sub = t % MSDA_TPQ;
  if (t == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    // Each block's barrier counts every staged byte, whoever's load brings it.
    msda_stage_group::arrive_expect_tx(&bar);
  }
#if MSDA_CLUSTER > 1
  // Every barrier of the cluster is initialised and armed before any multicast signals it.
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  unsigned rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#else
  __syncthreads();  // the barrier is initialised before anyone waits on it
  const unsigned rank = 0;
#endif
  if (t == 0) {
    const CUtensorMap* maps[MsdaStage::TILES] = {MSDA_STAGE_MAP_PTRS};
    // One box per staged level: the whole [H][W][D] plane of (n, head); with a cluster,
    // block `rank` loads the levels whose index % MSDA_CLUSTER is its rank, multicast to all.
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int l = decltype(lc)::value;
      if constexpr (msda_slot<l>::staged) {
        typedef typename msda_slot<l>::tile T;
        void* dst = smem + msda_slot<l>::offset;
        const CUtensorMap* map = maps[msda_slot<l>::index];
#if MSDA_CLUSTER > 1
        if (msda_slot<l>::index % MSDA_CLUSTER == static_cast<int>(rank))
          T::load_multicast(map, &bar, dst, static_cast<unsigned short>((1u << MSDA_CLUSTER) - 1u),
                            {.N = n, .H = 0, .W = 0, .M = head, .C = 0});
#else
        T::load(map, &bar, dst, {.N = n, .H = 0, .W = 0, .M = head, .C = 0});
#endif
      }
    });
  }
  (void)rank;
  for (int r = 0; r < MSDA_ROUNDS; ++r) {
    int q = chunk * per_block + r * MSDA_QPB + t / MSDA_TPQ;
    const bool live = q < queries;
    q = live ? q : queries - 1;
    const long long nqh = (static_cast<long long>(n) * queries + q) * MSDA_M + head;
    const float2* xy = reinterpret_cast<const float2*>(loc) + nqh * MSDA_LP;
    const MsdaWeights weight = msda_weights(attn + nqh * MSDA_LP, sub);
    float acc[MSDA_VEC];
#pragma unroll
    for (int j = 0; j < MSDA_VEC; ++j) acc[j] = 0.f;
    // The levels in global memory first, while the copy engine stages the others.
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int l = decltype(lc)::value;
      if constexpr (!msda_slot<l>::staged) msda_global_level(acc, value, sh, l, n, spatial, head, sub, xy, weight);
    });
    if (r == 0) msda_stage_group::wait(&bar, 0);
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int l = decltype(lc)::value;
      if constexpr (msda_slot<l>::staged) {
        typedef typename msda_slot<l>::tile T;
        const unsigned char* tile = smem + msda_slot<l>::offset;
        const int c = sub * MSDA_VEC;
        // The swizzle-aware accessor: 16 bytes from channel c (a 16-byte chunk stays whole
        // under every swizzle).
        const auto corner = [tile, c](int h, int w) {
          return *reinterpret_cast<const uint4*>(&T::at(tile, {.N = 0, .H = h, .W = w, .M = 0, .C = c}));
        };
        msda_level(acc, corner, sh.h(l), sh.w(l), xy + l * MSDA_P, weight, l * MSDA_P);
      }
    });
    if (live) msda_store(out, nqh, sub, acc);
  }
#if MSDA_CLUSTER > 1
  // No block leaves while a multicast it issued may still be writing its peers' memory.
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
#endif
#endif  // MSDA_BACKWARD
