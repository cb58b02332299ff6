// D[M][N] = A[M][K] * B[N][K]^T, fp32 accumulation (examples/05-gemm). Appended after tma's
// generated helpers (tiles, pipeline `tma_pipe_ring`, warp roles `tma_roles_gemm`, and the
// kernel plan `tma_plan_gemm`: where the ring and D's staging sit in shared memory, and the
// launch's block, cluster and dynamic shared memory); the GEMM_* macros before it say which
// configuration this source is (kernel.rs renders them). Everything that touches a
// descriptor, an mbarrier, a TMA copy or a shared-memory offset is a tma helper: the operand
// tiles' desc(), the pipeline's acquire/load/wait/release, the plan's regions, the D tile's
// offset() and store().

#ifndef GEMM_GROUPED
#define GEMM_GROUPED 0  // examples/08-grouped-gemm's schedule (gemm_groups)
#endif
#ifndef GEMM_CONV
#define GEMM_CONV 0  // examples/07-conv: A from im2col loads (gemm_conv)
#endif
#ifndef GEMM_WGRAD
#define GEMM_WGRAD 0  // examples/08-grouped-gemm's weight gradient (gemm_wgrad_groups)
#endif
#ifndef GEMM_PINGPONG
#define GEMM_PINGPONG 0  // ping-pong: each consumer warpgroup owns whole tiles, in turn
#endif

typedef tma_plan_gemm P;
typedef tma_pipe_ring Pipe;
typedef Pipe::tile_a TA;
typedef Pipe::tile_b TB;

#if GEMM_CONV
constexpr int GEMM_BK = TA::CHANNELS_PER_PIXEL;     // K of one stage: one tap's 64-channel chunk
#else
constexpr int GEMM_BK = TA::BOX_k;                 // K of one stage
#endif
// CTAs of a cluster: a macro, since `#if GEMM_CL == 1` picks the weight gradient's claims (a
// constexpr there would read as 0 to the preprocessor, which is how they once never ran).
#define GEMM_CL (GEMM_CM * GEMM_CN)
static_assert(P::CLUSTER_X == GEMM_CL && P::CLUSTER_Y == 1u && P::CLUSTER_Z == 1u, "the plan's cluster");
// Rows one consumer warpgroup multiplies: its share of the tile, or (ping-pong) the whole tile.
constexpr int GEMM_SHARES = GEMM_PINGPONG ? 1 : GEMM_NC;
constexpr int GEMM_MI = GEMM_BM / (64 * GEMM_SHARES);  // 64-row blocks per consumer warpgroup
static_assert(GEMM_MI >= 1 && GEMM_MI * 64 * GEMM_SHARES == GEMM_BM, "BM is whole 64-row blocks per consumer");
// Ping-pong: each stage is taken by the one consumer warpgroup whose tile it loads (the ring
// is declared in_turn, released by that warpgroup's 4 warps); otherwise by all of them.
static_assert(Pipe::IN_TURN == (GEMM_PINGPONG != 0), "the ring is taken in turn exactly in the ping-pong kernel");
#if GEMM_PINGPONG
static_assert(GEMM_WS && GEMM_NC == 2 && GEMM_PERSIST && !GEMM_RELEASE_ONE,
              "ping-pong: two consumer warpgroups over a persistent walk");
static_assert(Pipe::CONSUMER_THREADS == 128u && Pipe::CONSUMER_ARRIVALS == 4u,
              "ping-pong: each stage released by the 4 warps of the warpgroup that took it");
#endif
static_assert(TB::WGMMA_N == GEMM_BN, "B's tile is the instruction's N");
static_assert(TA::M_BLOCKS * 64 == GEMM_BM, "A's tile is BM rows");

#if GEMM_OUT == 2
typedef float gemm_out_t;
#else
typedef unsigned short gemm_out_t;
#endif

// Two fp32 -> one packed pair of the 16-bit output type (lo in the low half).
__device__ __forceinline__ unsigned gemm_pack(float lo, float hi) {
  unsigned r;
#if GEMM_OUT == 1
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

// Grouped raster over cluster tiles: walk `group` tile-rows (M) before the next tile-column,
// so the CTAs running together share A rows and B columns in L2.
__device__ __forceinline__ void gemm_raster(int t, int num_m, int num_n, int group, int& tm, int& tn) {
  const int width = group * num_n;
  const int g = t / width;
  const int first = g * group;
  const int gs = min(num_m - first, group);
  const int r = t - g * width;
  tm = first + r % gs;
  tn = r / gs;
}

struct gemm_sched {
  int num_cm, num_cn, total, group;
  unsigned rank;
  __device__ __forceinline__ gemm_sched(int M, int N, int g, unsigned cta_rank) {
    const int num_m = (M + GEMM_BM - 1) / GEMM_BM, num_n = (N + GEMM_BN - 1) / GEMM_BN;
    num_cm = (num_m + GEMM_CM - 1) / GEMM_CM;
    num_cn = (num_n + GEMM_CN - 1) / GEMM_CN;
    total = num_cm * num_cn;
    group = g;
    rank = cta_rank;
  }
  __device__ __forceinline__ bool has(int t) const { return t < total; }
  // This CTA's tile origin for cluster tile t. The multicast operand's origin is the same in
  // both CTAs of a cluster (B's n0 when the cluster spans M, A's m0 when it spans N): the
  // pipeline splits that call's boxes over them. A CTA whose tile lies past M or N still
  // loads (zeros) and multicasts its share, which its peer needs; its stores are clipped.
  __device__ __forceinline__ void tile(int t, int& m0, int& n0) const {
    int cm, cn;
    gemm_raster(t, num_cm, num_cn, group, cm, cn);
    m0 = (cm * GEMM_CM + (GEMM_CM > 1 ? (int)rank : 0)) * GEMM_BM;
    n0 = (cn * GEMM_CN + (GEMM_CN > 1 ? (int)rank : 0)) * GEMM_BN;
  }
};

#if GEMM_GROUPED
static_assert(GEMM_WS, "grouped: the warp-specialized kernel");
// The grouped schedule (examples/08-grouped-gemm): G groups, group g's rows[g] rows of A and D
// (contiguous, after the groups before it) times its own B (rows g * N .. of B's [G * N][K]
// view). Its tiles are ceil(ceil(rows[g] / BM) / CM) x ceil(N / BN), numbered after the groups
// before it; row counts come from the device (no group's size is known to the host), zero
// included. A cluster of CM CTAs along M (B multicast) takes CM consecutive BM-row tiles of one
// group (a CTA whose rows lie past its group loads its share of B for its peer and stores
// nothing: clipped at the group's end). Each thread that needs the schedule walks the groups
// once, forward (its tiles only grow): no shared memory, any number of groups.
static_assert(GEMM_CN == 1, "grouped: a cluster spans M only (its CTAs share a group's B)");
static_assert(GEMM_PERSIST, "grouped: persistent (a CTA walks the groups' tiles)");
struct gemm_groups {
  const int* __restrict__ rows;
  int G, num_n, raster;
  unsigned rank;
  int g = 0, tile_first = 0, row_first = 0;  // the walk: group g's first tile and row
  __device__ __forceinline__ gemm_groups(const int* __restrict__ group_rows, int groups, int N, int raster_rows,
                                         unsigned cta_rank)
      : rows(group_rows), G(groups), num_n((N + GEMM_BN - 1) / GEMM_BN), raster(max(raster_rows, 1)), rank(cta_rank) {}
  __device__ __forceinline__ int tiles_of(int r) const {
    return ((max(r, 0) + GEMM_BM - 1) / GEMM_BM + GEMM_CM - 1) / GEMM_CM * num_n;
  }
  // Walks forward to tile t's group (t at or after the last one asked): false past the last
  // group, else the group's row count in r.
  __device__ __forceinline__ bool walk(int t, int& r) {
    r = g < G ? __ldg(rows + g) : 0;
    while (g < G && t >= tile_first + tiles_of(r)) {
      tile_first += tiles_of(r);
      row_first += max(r, 0);
      ++g;
      r = g < G ? __ldg(rows + g) : 0;
    }
    return g < G;
  }
  // Whether tile t (at or after the last one asked) exists.
  __device__ __forceinline__ bool has(int t) {
    int r;
    return walk(t, r);
  }
  // Tile t (at or after the last one asked), or false past the last group: its group, first row
  // of A and D, the group's last row + 1, first column.
  __device__ __forceinline__ bool tile(int t, int& group, int& m0, int& row_end, int& n0) {
    int r;
    if (!walk(t, r)) return false;
    // Inside the group, the grouped raster (`raster` tile-rows before the next column): the
    // CTAs running together share A's rows and B's columns in L2.
    int cm, cn;
    gemm_raster(t - tile_first, tiles_of(r) / num_n, num_n, raster, cm, cn);
    group = g;
    m0 = row_first + (cm * GEMM_CM + (int)rank) * GEMM_BM;
    n0 = cn * GEMM_BN;
    row_end = row_first + max(r, 0);
    return true;
  }
};
#endif

#if GEMM_WGRAD
static_assert(GEMM_WS && GEMM_PERSIST && !GEMM_GROUPED && !GEMM_CONV && GEMM_CN == 1,
              "wgrad: the warp-specialized persistent kernel, a cluster along M at most");
// The weight-gradient grouped GEMM (examples/08-grouped-gemm): for each group g of tokens[g]
// tokens (rows tok0.. of dY [T][N] and X [T][K], after the groups before it; zero allowed),
// dW_g[N][K] = dY_g^T X_g, i.e. D[M = N][N' = K] with the tokens as the contraction. A is dY,
// B is X, both MN-major (tile dims [k][m] and [k][n], k the tokens). Every group has the same
// tiles, ceil(ceil(N / BM) / CM) x ceil(K / BN) cluster tiles, numbered group after group in
// the groups' rank order (the claims, below); the k-loop is ragged: ceil(tokens[g] / BK)
// blocks, the last one zero-filled past the group's end by its per-group maps (see the
// producer); a group's tokens (its first one is the maps' business: gemm_wgrad_maps) only set
// its k-blocks.
//
// The claims: tiles numbered by their group's rank in `order` (the groups by k-blocks, most
// first: gemm_wgrad_maps sorts them), each CTA's producer claiming its next tile from a global
// counter as it nears the end of the one before (list scheduling, longest first) and handing
// it to its consumers through the plan's work queue `tiles` (gemm_wgrad_order). A tile's work is its group's
// k-blocks: under skewed routing a walk fixed in advance left the busiest CTA 1.23-1.26x the
// mean (round-robin in group order, 128 groups x 65536 Zipf-routed tokens, by the tiles'
// k-blocks) or 1.12-1.14x (ranked and dealt in a snake); claimed, a CTA takes more tiles when
// its tiles are short (H100, 128 groups x 65536 skewed tokens: every CTA's k-blocks within
// 0.95-1.06x the mean, the kernel 15 % faster at ncu's clocks; BENCHMARKS.md).
struct gemm_wgrad_groups {
  const int* __restrict__ order;  // the groups by rank, then their tokens (gemm_wgrad_maps)
  int G, num_cm, num_n, per_group, raster;
  unsigned rank;
  __device__ __forceinline__ gemm_wgrad_groups(const int* __restrict__ group_order, int groups, int N, int K,
                                               int raster_rows, unsigned cta_rank)
      : order(group_order),
        G(groups),
        num_cm(((N + GEMM_BM - 1) / GEMM_BM + GEMM_CM - 1) / GEMM_CM),
        num_n((K + GEMM_BN - 1) / GEMM_BN),
        per_group(num_cm * num_n),
        raster(max(raster_rows, 1)),
        rank(cta_rank) {}
  __device__ __forceinline__ int total() const { return G * per_group; }
  __device__ __forceinline__ bool has(int t) const { return t < total(); }
  // The group of cluster tile t (below total()).
  __device__ __forceinline__ int group_of(int t) const { return __ldg(order + t / per_group); }
  // The k-blocks of cluster tile t (below total()): its group's tokens in BK blocks, 0 for an
  // empty group (the producer loads no stage for it). Read from the tokens in rank order (one
  // load, not the group's then its tokens: a consumer waits for it before its mainloop).
  __device__ __forceinline__ int k_blocks(int t) const {
    return (max(__ldg(order + G + t / per_group), 0) + GEMM_BK - 1) / GEMM_BK;
  }
  // Cluster tile t (below total()): its group, this CTA's first row (of N) and column (of K)
  // of dW_g.
  __device__ __forceinline__ void tile(int t, int& group, int& m0, int& n0) const {
    int cm, cn;
    group = group_of(t);
    gemm_raster(t % per_group, num_cm, num_n, raster, cm, cn);
    m0 = (cm * GEMM_CM + (GEMM_CM > 1 ? (int)rank : 0)) * GEMM_BM;
    n0 = cn * GEMM_BN;
  }
};

// One thread's view of the tiles' order (the producer thread's, or each consumer thread's).
// Without a cluster the producer claims each tile at run time (`claim`: a global counter,
// reset by gemm_wgrad_maps) and hands it on (`publish`: the plan's work queue `tiles`), and
// every consumer takes every one in order (`take`: pop). A cluster's CTAs multicast X to each
// other, so they must take the same cluster tiles: they walk a fixed order instead (the ranked
// tiles dealt to the clusters in a snake, round j left to right when j is even and right to
// left when odd), each thread computing it (`publish` does nothing).
struct gemm_wgrad_order {
#if GEMM_CL == 1
  typedef P::queue_tiles Queue;
  Queue queue;
  Queue::state s;
  int* counter;
  __device__ __forceinline__ gemm_wgrad_order(const Queue& q, int* claims, int, int) : queue(q), counter(claims) {}
  __device__ __forceinline__ int claim() { return Queue::claim(counter); }
  __device__ __forceinline__ void publish(int t) { queue.push(s, t); }
  __device__ __forceinline__ int take() { return queue.pop(s); }
  static constexpr bool CLAIMS = true;
#else
  int j = 0, cid, ncl;
  template <class Q>
  __device__ __forceinline__ gemm_wgrad_order(const Q&, int*, int cluster, int clusters) : cid(cluster), ncl(clusters) {}
  __device__ __forceinline__ int claim() { return walk(); }
  __device__ __forceinline__ void publish(int) {}
  __device__ __forceinline__ int take() { return walk(); }
  __device__ __forceinline__ int walk() {
    const int t = j * ncl + ((j & 1) != 0 ? ncl - 1 - cid : cid);
    ++j;
    return t;
  }
  static constexpr bool CLAIMS = false;
#endif
};
// The preprocessor's choice above against the plan's cluster: a test of a name the
// preprocessor cannot see (a constexpr reads as 0 there) once compiled the walk for every
// configuration, and every check passed.
static_assert(gemm_wgrad_order::CLAIMS == (P::CLUSTER_X == 1u), "the claims exactly without a cluster");

// The per-group maps of A (dY) and B (X), built once per launch by this kernel (its own plan:
// one thread a group, no shared memory), launched before `gemm` on the same stream: pair g at
// ab_maps + 2g (A, then B), the templates' fields but the base (group g's first token) and the
// tokens dim (its count), so TMA zero-fills a k-block past the group's end. An empty group gets
// no map (a TMA dim is never 0; the GEMM loads nothing for it). Each map is written with tma's
// update (replace, then fence.proxy.tensormap::generic.release.gpu); `gemm` acquires a pair
// before its first load through it (see its producer). Nothing loads through these maps while
// they are written: the previous `gemm` on the stream has completed (stream order), so the
// drain names no barrier. It also writes the claims' order of the groups (gemm_wgrad_groups)
// after the maps, at ab_maps + 2G: G ints, group g at its rank by k-blocks, most first, the
// lower index first on a tie (a permutation: every group has one rank), then G ints, each
// rank's token count, then the claims' counter (one int), set to 0: the previous `gemm` on
// the stream has completed, and this one's claims start after this kernel (stream order).
extern "C" __global__ void TMA_PLAN_GEMM_WGRAD_MAPS_LAUNCH_BOUNDS gemm_wgrad_maps(
    const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
    const int* __restrict__ group_tokens, int groups, int N, int K, const void* dY, const void* X,
    CUtensorMap* __restrict__ ab_maps) {
  const int g = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (g >= groups) return;
  const int ntok = max(__ldg(group_tokens + g), 0);
  const int kb = (ntok + GEMM_BK - 1) / GEMM_BK;
  int rank = 0;
  for (int h = 0; h < groups; ++h) {
    const int kh = (max(__ldg(group_tokens + h), 0) + GEMM_BK - 1) / GEMM_BK;
    rank += kh > kb || (kh == kb && h < g);
  }
  int* const order = reinterpret_cast<int*>(ab_maps + 2 * (size_t)groups);
  order[rank] = g;
  order[groups + rank] = ntok;
  if (g == 0) order[2 * groups] = 0;  // the claims' counter
  if (ntok == 0) return;
  int tok0 = 0;  // the groups before g (the host checks the tokens' sum is below 2^31)
  for (int i = 0; i < g; ++i) tok0 += max(__ldg(group_tokens + i), 0);
  CUtensorMap* const ma = ab_maps + 2 * (size_t)g;
  ma[0] = mapA;  // every other field (box, swizzle, type, promotion) as encoded
  ma[1] = mapB;
  const unsigned long long tokens = (unsigned long long)ntok;
  TA::update_global(&ma[0], static_cast<const TA::elem*>(dY) + (size_t)tok0 * N,
                    {.k = tokens, .m = (unsigned long long)N, .stride_k = (unsigned long long)N});
  TB::update_global(&ma[1], static_cast<const TB::elem*>(X) + (size_t)tok0 * K,
                    {.k = tokens, .n = (unsigned long long)K, .stride_k = (unsigned long long)K});
}
#endif

#if GEMM_CONV
static_assert(GEMM_WS && !GEMM_GROUPED && GEMM_CN == 1, "conv: the warp-specialized kernel, a cluster along M at most");
// The convolution as an implicit GEMM (examples/07-conv): D[M][K] with M = N*P*Q output pixels
// (NPQK), K_gemm = R*S*CB*64. A's k-block (r, s, cb) is one im2col load: the tile's first
// output pixel (n, p, q) as the start position (lo + p * stride, in the map's bounding box,
// whose traversal strides are the convolution's), the tap (r * dil_h, s * dil_w) as the
// offsets, channels cb*64 ..: TMA walks the tile's pixels, wraps rows and images, fills
// padding and the channels past C with zeros. B's is the filter's tap r*S + s, K rows
// n0.., the same channels. The map holds the problem (dims, corners, strides); these are the
// walk's numbers for the coordinates.
struct gemm_conv {
  int P, Q;           // output rows and columns
  int R, S, CB;       // filter taps and 64-channel chunks (C padded)
  int lo_h, lo_w;     // the bounding box's lower corner (-padding)
  int sh, sw;         // strides
  int dh, dw;         // dilations
};
#endif

__device__ __forceinline__ void gemm_stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// The direct epilogue: each thread stores its accumulator pairs, clipped at M and N.
__device__ __forceinline__ void gemm_store_direct(float (&acc)[GEMM_MI][GEMM_BN / 2], void* D, int M, int N, int row0,
                                                  int n0, unsigned tw) {
#pragma unroll
  for (int mi = 0; mi < GEMM_MI; ++mi)
#pragma unroll
    for (int i = 0; i < GEMM_BN / 2; i += 2) {
      const int row = row0 + mi * 64 + (int)tma_wgmma_d_row(tw, i);
      const int col = n0 + (int)tma_wgmma_d_col(tw, i);
      if (row < M && col < N) {
        const size_t at = static_cast<size_t>(row) * N + col;
#if GEMM_OUT == 2
        *reinterpret_cast<float2*>(static_cast<float*>(D) + at) = make_float2(acc[mi][i], acc[mi][i + 1]);
#else
        *reinterpret_cast<unsigned*>(static_cast<unsigned short*>(D) + at) = gemm_pack(acc[mi][i], acc[mi][i + 1]);
#endif
      }
    }
}

#if GEMM_WS
typedef tma_roles_gemm R;

#if GEMM_EPI_TMA
// D's staging: the plan's region `d`, one copy of D's call per consumer warpgroup
// (P::d(base, c)), each aligned for its 128B swizzle.
typedef P::tile_d TD;
static_assert(P::COPIES_d == GEMM_NC, "one staging copy per consumer warpgroup");
constexpr int GEMM_CHUNK_COLS = TD::BOX_n;             // 64 x 16-bit or 32 x f32: 128-byte rows
constexpr int GEMM_NB = (int)TD::BOXES;                // chunks one store() moves
constexpr int GEMM_CHUNKS_N = GEMM_BN / GEMM_CHUNK_COLS;
constexpr int GEMM_CHUNKS = GEMM_MI * GEMM_CHUNKS_N;   // per consumer and tile
static_assert(TD::BOX_m == 64 && GEMM_CHUNKS_N % GEMM_NB == 0, "D's call is NB whole chunks of one 64-row block");

// The TMA-store epilogue: per group of NB chunks (64 rows x 128 bytes each), wait until the
// previous stores have read the staging, write the fragments where D's tile puts them
// (TD::offset: its 128B swizzle), fence for the async proxy, and one thread stores the call.
// Consumer c syncs its own warpgroup on its own named barrier (`epi`, one per consumer).
__device__ __forceinline__ void gemm_store_tma(float (&acc)[GEMM_MI][GEMM_BN / 2], const CUtensorMap* mapD,
                                               unsigned char* staging, int c, int row0, int n0, unsigned tw) {
  const unsigned warp = tw / 32u, lane = tw % 32u;
#pragma unroll
  for (int c0 = 0; c0 < GEMM_CHUNKS; c0 += GEMM_NB) {
    if (tw == 0u) tma_store_async_wait<0>();
    R::sync_epi((unsigned)c);
#pragma unroll
    for (int j = 0; j < GEMM_NB; ++j) {
      const int ch = c0 + j, mi = ch / GEMM_CHUNKS_N, nc = ch % GEMM_CHUNKS_N;
#if GEMM_OUT == 2
#pragma unroll
      for (int i = 0; i < 16; i += 2) {
        const int ii = nc * 16 + i;
        const int row = (int)tma_wgmma_d_row(tw, ii);
        const int col = j * GEMM_CHUNK_COLS + (int)tma_wgmma_d_col(tw, ii) - nc * GEMM_CHUNK_COLS;
        *reinterpret_cast<float2*>(staging + TD::offset({.m = row, .n = col})) = make_float2(acc[mi][ii], acc[mi][ii + 1]);
      }
#else
      // stmatrix x4: lanes 8q..8q+7 address rows of 8x8 matrix q (rows (q % 2) * 8, columns
      // (g + q / 2) * 8); register q holds this thread's pair of it.
      const int q = (int)lane / 8, rr = (int)lane % 8;
#pragma unroll
      for (int g = 0; g < 8; g += 2) {
        const int ib = nc * 32 + g * 4;
        const int row = (int)warp * 16 + (q % 2) * 8 + rr;
        const int col = j * GEMM_CHUNK_COLS + (g + q / 2) * 8;
        gemm_stmatrix_x4(tma_smem_addr(staging) + TD::offset({.m = row, .n = col}),
                         gemm_pack(acc[mi][ib + 0], acc[mi][ib + 1]), gemm_pack(acc[mi][ib + 2], acc[mi][ib + 3]),
                         gemm_pack(acc[mi][ib + 4], acc[mi][ib + 5]), gemm_pack(acc[mi][ib + 6], acc[mi][ib + 7]));
      }
#endif
    }
    tma_async_proxy_fence();
    R::sync_epi((unsigned)c);
    if (tw == 0u) {
      const int mi = c0 / GEMM_CHUNKS_N, nc = c0 % GEMM_CHUNKS_N;
      TD::store(mapD, staging, {.m = row0 + mi * 64, .n = n0 + nc * GEMM_CHUNK_COLS});
      tma_store_commit_group();
    }
  }
}
#endif

// Warp-specialized: warpgroup 0 produces (one thread), warpgroups 1..NC consume (NC = 2 or
// 3, BM = NC x MI x 64 rows: consumer c multiplies rows c MI 64 .. of the tile).
static_assert(R::CONSUMERS == GEMM_NC && R::THREADS == 128u * (GEMM_NC + 1), "the roles: a producer and NC consumer warpgroups");
#if GEMM_PINGPONG
static_assert(R::BARRIER_turn_THREADS == 256u, "ping-pong: a turn is one consumer's 128 threads waiting, the other's arriving");
#endif
extern "C" __global__ void TMA_PLAN_GEMM_LAUNCH_BOUNDS gemm(const __grid_constant__ CUtensorMap mapA,
                                                            const __grid_constant__ CUtensorMap mapB,
                                                            const __grid_constant__ CUtensorMap mapD, void* D, int M,
                                                            int N, int K, int group
#if GEMM_GROUPED
                                                            ,
                                                            const int* __restrict__ group_rows, int groups,
                                                            CUtensorMap* __restrict__ d_maps
#endif
#if GEMM_WGRAD
                                                            ,
                                                            const int* __restrict__ group_tokens, int groups,
                                                            CUtensorMap* __restrict__ ab_maps
#endif
#if GEMM_CONV
                                                            ,
                                                            const gemm_conv conv
#endif
) {
  extern __shared__ __align__(16) unsigned char gemm_raw[];
  unsigned char* const base = P::base(gemm_raw);
  const Pipe pipe = P::ring(base);
  if (threadIdx.x == 0u) {
    tma_prefetch_tensormap(&mapA);
    tma_prefetch_tensormap(&mapB);
#if GEMM_EPI_TMA
    tma_prefetch_tensormap(&mapD);
#endif
  }
  pipe.init();
#if GEMM_GROUPED
  (void)M;
  gemm_groups sched(group_rows, groups, N, group, GEMM_CL > 1 ? tma_cluster_ctarank() : 0u);
  const int total = 0x7fffffff;  // the walk ends past the last group
#elif GEMM_WGRAD
  (void)M;
  // The claims' order of the groups and their tokens in it, after the maps (gemm_wgrad_maps
  // writes them all from group_tokens, which this kernel reads through them only).
  (void)group_tokens;
  gemm_wgrad_groups sched(reinterpret_cast<const int*>(ab_maps + 2 * (size_t)groups), groups, N, K, group,
                          GEMM_CL > 1 ? tma_cluster_ctarank() : 0u);
  const int total = sched.total();
  // The tiles' order (gemm_wgrad_order): claimed through the work queue, or (a cluster) walked.
  // Either way one tile of each CTA's sequence is total or more, its last.
#if GEMM_CL == 1
  const P::queue_tiles queue = P::tiles(base);
  queue.init();
#else
  const int queue = 0;  // no queue: the walk
#endif
  int* const claims = reinterpret_cast<int*>(ab_maps + 2 * (size_t)groups) + 2 * groups;
  gemm_wgrad_order order(queue, claims, (int)blockIdx.x / GEMM_CL, (int)gridDim.x / GEMM_CL);
#else
  const gemm_sched sched(M, N, group, GEMM_CL > 1 ? tma_cluster_ctarank() : 0u);
  const int total = sched.total;
#endif
  const int cid = (int)blockIdx.x / GEMM_CL;
  const int ncl = GEMM_PERSIST ? (int)gridDim.x / GEMM_CL : total;
  const int nk = (K + GEMM_BK - 1) / GEMM_BK;
#if GEMM_WGRAD
  (void)nk;  // the k-loop is the group's: its token count (K is dW's columns here)
  (void)cid;  // the tiles' order is gemm_wgrad_order's
  (void)ncl;
#endif
  if (R::is_producer()) {
    R::producer_setmaxnreg();
    if (threadIdx.x == 0u) {
      Pipe::state s;
#if GEMM_WGRAD
      // Group g's maps: pair g of ab_maps, built by gemm_wgrad_maps before this launch and
      // never changed by it. Stream order makes those writes happen before this kernel; the
      // writer released each map to the tensormap proxy (fence.proxy.tensormap::generic.release)
      // and this thread acquires it (fence.proxy.tensormap::generic.acquire.gpu: the generic
      // writes and TMA's tensormap-proxy reads are otherwise unordered; the CUDA programming
      // guide acquires a map written before the launch the same way) before its first load
      // through it: cheap (no replace, no drain), so it is done at every group change. The next
      // tile's pair (often another group's: the grid's claims run through a group's tiles in
      // one or two rounds) is acquired and prefetched into the descriptor cache as soon as the
      // tile is claimed.
      int acquired = -1;
      int t = order.claim();
      order.publish(t);
      while (t < total) {
        int g, m0, n0;
        sched.tile(t, g, m0, n0);
        // An empty group loads nothing (it has no maps): its consumers store zeros.
        const int nkg = sched.k_blocks(t);
        // The next tile: published with this one's load STAGES k-blocks before its last (the
        // ring's depth ahead of the consumers), so that a CTA takes a tile when it nearly needs
        // one (longest first stays so). Its claim (an atomic: a round trip to L2 under load) is
        // issued STAGES k-blocks before that and its group and k-blocks read one load before
        // it (the same load when publish_at <= 1: short tiles wait for the atomic), so the
        // producer thread, which waits for each value only where it first uses it, does not
        // stall its loads on them (claimed where it is published, the uniform weight gradient
        // lost 5-7 %). An empty group's tile (no load): at once.
        const int publish_at = max(nkg - (int)Pipe::STAGES, 0);
        const int claim_at = max(publish_at - (int)Pipe::STAGES, 0);
        const int read_at = max(publish_at - 1, claim_at);
        int t_next = total;
        int g_next = g, kb_next = 0;
        if (nkg == 0) {
          t_next = order.claim();
          order.publish(t_next);
        }
        const CUtensorMap* const ma = ab_maps + 2 * (size_t)g;
        if (nkg > 0 && acquired != g) {
          TA::acquire(ma);
          TB::acquire(ma + 1);
          acquired = g;
        }
        for (int kb = 0; kb < nkg; ++kb, ++s) {
          pipe.acquire(s);
          pipe.load(s, ma, {.k = kb * GEMM_BK, .m = m0}, ma + 1, {.k = kb * GEMM_BK, .n = n0});
          if (kb == claim_at) t_next = order.claim();
          // The claim's value is first used here, in a branch of its own (a test of it beside
          // `kb == read_at` was seen to make ptxas wait for the atomic where it was issued); a
          // claim past the last tile reads the last one's group, which nothing uses.
          if (kb == read_at) {
            const int tn = min(t_next, total - 1);
            g_next = sched.group_of(tn);
            kb_next = sched.k_blocks(tn);
          }
          if (kb == publish_at) {
            order.publish(t_next);
            if (t_next < total && g_next != g && kb_next > 0) {
              const CUtensorMap* const mn = ab_maps + 2 * (size_t)g_next;
              TA::acquire(mn);
              TB::acquire(mn + 1);
              tma_prefetch_tensormap(mn);
              tma_prefetch_tensormap(mn + 1);
              acquired = g_next;
            }
          }
        }
        t = t_next;
      }
#else
      for (int t = cid; t < total; t += ncl) {
        int m0, n0;
#if GEMM_GROUPED
        int g, row_end;
        if (!sched.tile(t, g, m0, row_end, n0)) break;
        const int bn0 = g * N + n0;  // B's rows of group g
#else
        sched.tile(t, m0, n0);
        const int bn0 = n0;
#endif
#if GEMM_CONV
        (void)nk;
        const int pq = conv.P * conv.Q;
        const int img = m0 / pq, p = m0 % pq / conv.Q, q = m0 % conv.Q;
        const int h0 = conv.lo_h + p * conv.sh, w0 = conv.lo_w + q * conv.sw;
        for (int r = 0; r < conv.R; ++r)
          for (int t = 0; t < conv.S; ++t)
            for (int cb = 0; cb < conv.CB; ++cb, ++s) {
              pipe.acquire(s);
              pipe.load(s, &mapA, {.N = img, .H = h0, .W = w0, .C = cb * GEMM_BK},
                        {.H = r * conv.dh, .W = t * conv.dw}, &mapB,
                        {.rs = r * conv.S + t, .n = bn0, .k = cb * GEMM_BK});
            }
#else
        for (int kb = 0; kb < nk; ++kb, ++s) {
          pipe.acquire(s);
          pipe.load(s, &mapA, {.m = m0, .k = kb * GEMM_BK}, &mapB, {.n = bn0, .k = kb * GEMM_BK});
        }
#endif
      }
#endif  // GEMM_WGRAD
    }
  } else {
    R::consumer_setmaxnreg();
    const int c = (int)R::consumer_index_sync();
    const unsigned tw = threadIdx.x % 128u;
    // The consumer's first 64-row block of the tile: its share, or (ping-pong) the whole tile.
    const int mb0 = GEMM_PINGPONG ? 0 : c * GEMM_MI;
    Pipe::state s;
    float acc[GEMM_MI][GEMM_BN / 2];
#if GEMM_GROUPED && GEMM_EPI_TMA
    // This consumer's own copy of D's map (global workspace, one per CTA and consumer): its
    // rows dim is moved to each new group's end, so the stores of a tile that runs past the
    // group are clipped there (tma's update protocol: drain, replace, release; acquire).
    CUtensorMap* my_map = d_maps + (blockIdx.x * GEMM_NC + c);
    if (tw == 0u) *my_map = mapD;
    int my_group = -1;
#endif
#if GEMM_PINGPONG
    // Ping-pong: consumer c takes tiles c, c + 2, .. of the CTA's walk (t = cid + j ncl, or the
    // weight gradient's claims, every one popped by both consumers in order), the producer
    // loads every tile's stages in walk order: c's state starts past tile 0's stages when c = 1
    // and skips the other consumer's tile after each of its own. Consumer c's mainloop of walk
    // tile j > 0 waits for its turn (`turn`, c's barrier), which the other consumer gives once
    // it has issued tile j - 1's mainloop (and only when a tile j follows: each sync has one
    // arrive). The stages of walk tile u: its group's k-blocks for the weight gradient (0 past
    // the last tile: nothing follows), nk otherwise.
#if GEMM_WGRAD
    auto stages_of = [&](int u) { return u < total ? (unsigned)sched.k_blocks(u) : 0u; };
    int t = order.take();
    if (c == 1) {
      s.advance(stages_of(t));
      if (t < total) t = order.take();
    }
    for (int j = c; t < total; j += 2) {
#else
    auto stages_of = [&](int) { return (unsigned)nk; };
    if (c == 1) s.advance(stages_of(cid));
    for (int t = cid + c * ncl, j = c; t < total; t += 2 * ncl, j += 2) {
#endif
#elif GEMM_WGRAD
    for (int t = order.take(); t < total; t = order.take()) {
#else
    for (int t = cid; t < total; t += ncl) {
#endif
      int m0, n0;
#if GEMM_GROUPED
      int g, row_end;
      if (!sched.tile(t, g, m0, row_end, n0)) break;
#elif GEMM_WGRAD
      int g;
      sched.tile(t, g, m0, n0);
      const int nk = sched.k_blocks(t);  // this group's k-blocks (0: dW_g = 0)
#else
      sched.tile(t, m0, n0);
#endif
      Pipe::state prev;
#if GEMM_PINGPONG
      // The walk's tile after this one (the other consumer's, which waits for this one's turn),
      // and whether there is one: asked before this tile's wait, so the walk is not on the
      // turn's path (the weight gradient pops it after the mainloop, below).
#if !GEMM_WGRAD
      const int t_after = t + ncl;
      const bool next = sched.has(t_after);
#endif
      if (j > 0) R::sync_turn((unsigned)c);
#endif
      for (int kb = 0; kb < nk; ++kb) {
        pipe.wait(s);
        const unsigned char* a = pipe.smem_a(s);
        const unsigned char* b = pipe.smem_b(s);
        tma_wgmma_fence();
#pragma unroll
        for (int k = 0; k < (int)TA::K_SLICES; ++k)
#pragma unroll
          for (int mi = 0; mi < GEMM_MI; ++mi)
            tma_wgmma<TA, TB>(acc[mi], TA::desc(a, k, mb0 + mi), TB::desc(b, k), (kb | k) != 0);
        tma_wgmma_commit_group();
        if (kb > 0) {
          tma_wgmma_wait_group<1>();  // the previous k-block's wgmmas are done with its stage
          if (!GEMM_RELEASE_ONE || tw == 0u) pipe.release(prev);
        }
        prev = s;
        ++s;
      }
#if GEMM_PINGPONG
#if GEMM_WGRAD
      // The claims' next tile (the other consumer's): popped once this one's mainloop has waited
      // for every stage, by when the producer has published it (it does so with this tile's
      // loads); popped earlier, it would wait on a tile published STAGES blocks before this
      // tile's end, which these stages' releases let the producer reach.
      const int t_after = order.take();
      const bool next = sched.has(t_after);
#endif
      // The mainloop is issued: the other consumer's next tile may start its wgmmas while this
      // one's last k-block finishes and its epilogue runs.
      if (next) R::arrive_turn((unsigned)(1 - c));
#endif
      tma_wgmma_wait_group<0>();
      if ((!GEMM_RELEASE_ONE || tw == 0u) && (!GEMM_WGRAD || nk > 0)) pipe.release(prev);
#if GEMM_WGRAD
      if (nk == 0) {  // an empty group: no stage was waited or released
#pragma unroll
        for (int mi = 0; mi < GEMM_MI; ++mi)
#pragma unroll
          for (int i = 0; i < GEMM_BN / 2; ++i) acc[mi][i] = 0.0f;
      }
#endif
      const int row0 = m0 + mb0 * 64;
#if GEMM_GROUPED && GEMM_EPI_TMA
      if (g != my_group) {
        if (tw == 0u) {
          TD::update_global(my_map, D, {.m = (unsigned long long)row_end, .n = (unsigned long long)N,
                                        .stride_m = (unsigned long long)N});
          TD::acquire(my_map);
        }
        my_group = g;
      }
      gemm_store_tma(acc, my_map, P::d(base, c), c, row0, n0, tw);
#elif GEMM_GROUPED
      gemm_store_direct(acc, D, row_end, N, row0, n0, tw);
#elif GEMM_WGRAD && GEMM_EPI_TMA
      // D is dW as [G * N][K] (K clipped by the map); the host asks N a multiple of this
      // consumer's 64 * MI rows, so a consumer's rows lie in group g or past it (skipped).
      if (row0 < N) gemm_store_tma(acc, &mapD, P::d(base, c), c, g * N + row0, n0, tw);
#elif GEMM_WGRAD
      gemm_store_direct(acc, static_cast<gemm_out_t*>(D) + (size_t)g * N * K, N, K, row0, n0, tw);
#elif GEMM_EPI_TMA
      gemm_store_tma(acc, &mapD, P::d(base, c), c, row0, n0, tw);
#else
      gemm_store_direct(acc, D, M, N, row0, n0, tw);
#endif
#if GEMM_PINGPONG
      s.advance(stages_of(t_after));  // the other consumer's next tile
#if GEMM_WGRAD
      if (t_after >= total) break;  // the last item: both consumers have popped it
      t = order.take();
#endif
#endif
    }
#if GEMM_EPI_TMA
    if (tw == 0u) tma_store_async_wait_complete<0>();
#endif
  }
  pipe.finish();
}

#elif !GEMM_CONV
// One warpgroup: thread 0 keeps STAGES - 1 loads ahead, all 128 threads run wgmma and wait
// for it (wait_group 0) every k-block; one tile per CTA, direct stores.
extern "C" __global__ void TMA_PLAN_GEMM_LAUNCH_BOUNDS gemm(const __grid_constant__ CUtensorMap mapA,
                                                         const __grid_constant__ CUtensorMap mapB,
                                                         const __grid_constant__ CUtensorMap mapD, void* D, int M,
                                                         int N, int K, int group) {
  extern __shared__ __align__(16) unsigned char gemm_raw[];
  const Pipe pipe = P::ring(P::base(gemm_raw));
  (void)mapD;
  pipe.init();
  const gemm_sched sched(M, N, group, 0u);
  const int nk = (K + GEMM_BK - 1) / GEMM_BK;
  int m0, n0;
  sched.tile((int)blockIdx.x, m0, n0);
  Pipe::state ps, cs;
  if (threadIdx.x == 0u) {
    for (int kb = 0; kb < (int)Pipe::STAGES - 1 && kb < nk; ++kb, ++ps) {
      pipe.acquire(ps);
      pipe.load(ps, &mapA, {.m = m0, .k = kb * GEMM_BK}, &mapB, {.n = n0, .k = kb * GEMM_BK});
    }
  }
  float acc[GEMM_MI][GEMM_BN / 2];
  for (int kb = 0; kb < nk; ++kb, ++cs) {
    const int next = kb + (int)Pipe::STAGES - 1;
    if (threadIdx.x == 0u && next < nk) {
      pipe.acquire(ps);
      pipe.load(ps, &mapA, {.m = m0, .k = next * GEMM_BK}, &mapB, {.n = n0, .k = next * GEMM_BK});
      ++ps;
    }
    pipe.wait(cs);
    const unsigned char* a = pipe.smem_a(cs);
    const unsigned char* b = pipe.smem_b(cs);
    tma_wgmma_fence();
#pragma unroll
    for (int k = 0; k < (int)TA::K_SLICES; ++k)
#pragma unroll
      for (int mi = 0; mi < GEMM_MI; ++mi)
        tma_wgmma<TA, TB>(acc[mi], TA::desc(a, k, mi), TB::desc(b, k), (kb | k) != 0);
    tma_wgmma_commit_group();
    tma_wgmma_wait_group<0>();
    pipe.release(cs);
  }
  gemm_store_direct(acc, D, M, N, m0, n0, threadIdx.x);
  pipe.finish();
}
#endif
