// Multi-scale deformable attention, backward: the band design (MSDA_BWD 4, after msda_fast.cu
// and msda_bwd.cu, whose types, geometry (MsdaPoint) and sums it uses). Deterministic by
// construction, no f32 buffer, no floating-point atomics anywhere:
//
//   Each level of each (batch, head) is cut into bands of msda_band_rows(l) whole rows. A point
//   belongs to the band of its upper corner row (max(h0, 0)); when its lower corner row h0 + 1
//   starts the next band, that band also takes the point, for its two lower corners only (a
//   "lower" entry). So a band's block sees every term of its rows' grad_value, and computes each
//   point's grad_loc and grad_attn exactly once.
//
//   msda_band_count  a warp a (batch, query, head), four in turn: the point's band, its term bound
//                    |a| max|g|; per band the count of entries (and of its own points'), the
//                    largest bound and the box of corners (shared-memory histograms a block, one
//                    global atomic a band and block); each (batch, head)'s entries. With the
//                    fused softmax it writes the weights (wts) once.
//   msda_band_fill   the same warps: each point's entries at its band's places, its own points'
//                    first (the order within each part is the atomics' and does not matter: the
//                    sums are integers); each block scans its (batch, head)'s counts itself and
//                    writes its entries through shared memory, a band's part in consecutive words.
//   msda_bwd_bands   a block a band: one TMA box brings the band's value rows (and the row
//                    below) into shared memory; each entry's point is evaluated from them (the
//                    forward's bilinear gathers, from shared memory), its grad_loc and grad_attn
//                    written, and its terms weight * grad_out added into the band's plane of
//                    32-bit fixed-point sums by shared-memory integer atomics (the only native
//                    shared atomic add on sm_90; f32 ones are compare-and-swap loops). Integer
//                    sums are exact, so every order gives the same bits. The scale 2^S is the
//                    band's: each term below 2^22 units (the fma rounding trick's range) and the
//                    band's count times the largest term below 2^30. A hot band (clustered
//                    points: every corner in a window of at most 32 pixels) adds into a copy of
//                    the window a point of a warp's step, so that a step's points never share a
//                    bank, and the copies are added up at the end. The plane is converted
//                    to the storage type over the value rows' shared memory and written by one
//                    TMA store (clipped at the level's last row). Heavy bands go first (the
//                    grid's first blocks take msda_band_fill's list of them; the rest follow the
//                    levels, the last one's first): a level whose points cluster in one band
//                    (clustered locations) would otherwise start that band's long walk last.
//   msda_band_logits (MSDA_SOFTMAX) the logits' gradient from grad_attn and the weights.
//
// Rendered by bwd.rs before msda_fast.cu: msda_band_rows(l), msda_band_first(l) (a (batch,
// head)'s first band of level l; l = L: its band count), msda_band_in<l>::type (level l's value
// box: rows + 1 rows, the whole width) and msda_band_out<l>::type (its grad_value box: rows
// rows), and the maps' parameters (MSDA_BAND_MAP_PARAMS: in maps, then out maps).

#if MSDA_BANDS
typedef tma_plan_msda_band_count MsdaBandCountPlan;
typedef tma_plan_msda_bwd_bands MsdaBandsPlan;
constexpr int MSDA_BPH = msda_band_first(MSDA_L);  // bands a (batch, head)
// bwd.rs renders MSDA_QPW ((query, head)s a warp of msda_band_count and msda_band_fill) and
// MSDA_ACC (msda_band_count's words a band, see there: the host allocates them).
#if !defined(MSDA_QPW) || !defined(MSDA_ACC)
#error "MSDA_QPW, MSDA_ACC: bwd.rs renders them"
#endif
static_assert(MSDA_ACC == 9, "msda_band_count's words a band: count, bound, own count, the box's four; "
                             "msda_band_fill's two cursors");
constexpr int MSDA_CQ = MsdaBandCountPlan::BLOCK_THREADS / 32 * MSDA_QPW;  // and a block
typedef tma_plan_msda_band_fill MsdaBandFillPlan;
constexpr int MSDA_SEG = 2 * MSDA_CQ * MSDA_LP;  // a block's entries: its points, twice at most
static_assert(MsdaBandFillPlan::BYTES_stage == 2 * MSDA_SEG * 4, "msda_band_fill stages its entries and places");
#ifndef MSDA_BAND_HEAVY
#error "MSDA_BAND_HEAVY (a heavy band's entries, msda_bwd_bands' order): bwd.rs renders it"
#endif
// msda_bwd_bands' work (msda_band_fill writes it): a record of MSDA_WORK words a band (its first
// entry, one past its last, its largest term bound (f32 bits), whether it is listed, and its
// box's four words: acc's, see msda_band_count), then the list of heavy bands that go first
// (`room` of them at most: msda_bwd_bands' first blocks) and its count (msda_band_count sets it
// to zero; it may pass `room`: the rest go in their turn).
#ifndef MSDA_WORK
#error "MSDA_WORK (a band's words of msda_bwd_bands' work, BAND_WORK): bwd.rs renders it"
#endif
static_assert(MSDA_WORK == 8, "a record is two uint4: entries, bound and flag, then the box");
struct MsdaWork {
  unsigned *records, *list, *listed, room;
  __device__ __forceinline__ MsdaWork(unsigned* work, int bands, int room)
      : records(work), list(work + MSDA_WORK * bands), listed(work + MSDA_WORK * bands + room), room(room) {}
};
constexpr int MSDA_BT = MsdaBandsPlan::BLOCK_THREADS;
constexpr int MSDA_PPS = MSDA_BT / MSDA_TPQ;  // points a step of msda_bwd_bands
static_assert(MSDA_BT % 32 == 0 && MSDA_BT <= 1024, "whole warps");
constexpr unsigned MSDA_LOWER = 0x80000000u;  // an entry's flag: the point's lower corners only
constexpr int MSDA_NEXT_TOO = 1 << 30;        // a point's band code's flag: the next band takes it too
constexpr unsigned MSDA_BOX_BIG = 1u << 30;   // a box's minima are kept as BIG - value
// The fma rounding trick: fmaf(x, 1, 1.5 * 2^23) has the integer nearest x in its low bits while
// |x| <= 2^22.
constexpr float MSDA_FIX_MAGIC = 12582912.f;
constexpr int MSDA_FIX_MAGIC_BITS = 0x4B400000;
// MSDA_FIX_WIDE (bwd.rs's band_planes: f32 storage, or bands of many entries): a second plane
// keeps each term's next bits (its remainder at 2^K more), so that the sums keep f32's
// precision whatever the band's count.
#ifndef MSDA_FIX_WIDE
#error "MSDA_FIX_WIDE: bwd.rs renders it (band_planes)"
#endif

// Point `i` of a (query, head)'s L * P: its level.
__device__ __forceinline__ int msda_level_of(int i) { return i / MSDA_P; }

// A point's band within its (batch, head) (-1: every corner outside its level) and whether the
// next band takes its lower corners (h0 + 1 starts it).
struct MsdaBandOf {
  int band;
  bool lower;
  int h0, w0;  // the upper left corner (-1 .. H - 1, -1 .. W - 1)
  __device__ __forceinline__ MsdaBandOf(float2 c, int l, const MsdaShapes& sh) {
    const int H = sh.h(l), W = sh.w(l);
    float hf, wf, fh, fw;
    const float h_im = msda_coord(c.y, H, hf, fh);
    const float w_im = msda_coord(c.x, W, wf, fw);
    const bool inside = h_im > -1.f && w_im > -1.f && h_im < static_cast<float>(H) && w_im < static_cast<float>(W);
    h0 = static_cast<int>(hf);
    w0 = static_cast<int>(wf);
    const int rows = msda_band_rows(l);
    band = inside ? msda_band_first(l) + max(h0, 0) / rows : -1;
    lower = inside && h0 >= 0 && h0 + 1 < H && (h0 + 1) % rows == 0;
  }
};

// The weight of point i of a (query, head) (every lane of the warp calls it; lane i holds point
// i, and i + 32, ... in the loop of the caller): the input, or its softmax over L * P.
__device__ __forceinline__ float msda_band_weight(const float* __restrict__ attn, int i) {
#if MSDA_SOFTMAX
  float m = -__int_as_float(0x7f800000);
  for (int j = threadIdx.x % 32; j < MSDA_LP; j += 32) m = fmaxf(m, __ldg(attn + j));
#pragma unroll
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
  for (int j = threadIdx.x % 32; j < MSDA_LP; j += 32) s += MSDA_EXP(__ldg(attn + j) - m);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  return i < MSDA_LP ? MSDA_EXP(__ldg(attn + i) - m) / s : 0.f;
#else
  return i < MSDA_LP ? __ldg(attn + i) : 0.f;
#endif
}

// The largest |grad_out| of a (query, head)'s row (every lane of the warp gets it).
__device__ __forceinline__ float msda_row_max(const msda_t* __restrict__ row) {
  float g = 0.f;
  for (int c = threadIdx.x % 32; c < MSDA_D; c += 32) g = fmaxf(g, fabsf(msda_scalar(row[c])));
#pragma unroll
  for (int o = 16; o > 0; o /= 2) g = fmaxf(g, __shfl_xor_sync(0xffffffffu, g, o));
  return g;
}

// Grid: N * M * ceil(Q / MSDA_CQ) blocks, block b = (n * M + head) * chunks + chunk; warp w owns
// queries chunk * MSDA_CQ + w * MSDA_QPW + j. acc holds MSDA_ACC words a band of the `bands`:
// its entries (acc[band]), its largest term bound (acc[bands + band]: f32 bits of a non-negative
// float, ordered as unsigned), its own points' entries (acc[2 bands + band]; the rest are lower
// entries) and the box of its entries' upper left corners (h0 + 1, w0 + 1): their maxima and
// MSDA_BOX_BIG - their minima (acc[(3 + k) bands + band], k = 0 .. 3); msda_band_fill's cursors
// (acc[7 bands + band], acc[8 bands + band]); then each (batch, head)'s entries
// (acc[MSDA_ACC bands + nh]). Every word starts at zero. pband[point] = band | MSDA_NEXT_TOO (the
// next band too) or -1.
extern "C" __global__ void TMA_PLAN_MSDA_BAND_COUNT_LAUNCH_BOUNDS
msda_band_count(const float* __restrict__ loc, const float* __restrict__ attn, const msda_t* __restrict__ grad_out,
                unsigned* __restrict__ acc, int bands, int* __restrict__ pband, float* __restrict__ wts,
                float* __restrict__ grad_loc, float* __restrict__ grad_attn, const __grid_constant__ MsdaShapes sh,
                int queries, unsigned* __restrict__ work, int room) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *MsdaWork(work, bands, room).listed = 0u;  // (msda_band_fill counts)
  __shared__ unsigned hown[MSDA_BPH], hlow[MSDA_BPH], hmax[MSDA_BPH], hbox[4][MSDA_BPH];
  for (int i = threadIdx.x; i < MSDA_BPH; i += blockDim.x) {
    hown[i] = 0u, hlow[i] = 0u, hmax[i] = 0u;
#pragma unroll
    for (int k = 0; k < 4; ++k) hbox[k][i] = 0u;
  }
  __syncthreads();
  const int chunks = (queries + MSDA_CQ - 1) / MSDA_CQ;
  const int nh = blockIdx.x / chunks, q0 = blockIdx.x % chunks * MSDA_CQ + threadIdx.x / 32 * MSDA_QPW;
  const int n = nh / MSDA_M, head = nh % MSDA_M, lane = threadIdx.x % 32;
  constexpr int STEPS = (MSDA_LP + 31) / 32;
  // Every load of the warp's queries first (they are independent: one wait, not one a query).
  float g[MSDA_QPW], a[MSDA_QPW][STEPS];
  float2 c[MSDA_QPW][STEPS];
#pragma unroll
  for (int j = 0; j < MSDA_QPW; ++j) {
    const long long nqh = (static_cast<long long>(n) * queries + min(q0 + j, queries - 1)) * MSDA_M + head;
    g[j] = msda_row_max(grad_out + nqh * MSDA_D);
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      const int i = s * 32 + lane;
      a[j][s] = msda_band_weight(attn + nqh * MSDA_LP, i);
      c[j][s] = i < MSDA_LP ? __ldg(reinterpret_cast<const float2*>(loc) + nqh * MSDA_LP + i) : make_float2(0.f, 0.f);
    }
  }
#pragma unroll
  for (int j = 0; j < MSDA_QPW; ++j) {
    if (q0 + j >= queries) break;  // (a whole warp)
    const long long nqh = (static_cast<long long>(n) * queries + q0 + j) * MSDA_M + head;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      const int i = s * 32 + lane;
      if (i >= MSDA_LP) continue;
      const long long p = nqh * MSDA_LP + i;
#if MSDA_SOFTMAX
      wts[p] = a[j][s];
#endif
      const MsdaBandOf b(c[j][s], msda_level_of(i), sh);
      pband[p] = b.band < 0 ? -1 : b.band | (b.lower ? MSDA_NEXT_TOO : 0);
      if (b.band < 0) {
        // Every corner outside: no entry; its gradients are zero (msda_bwd_bands never sees it).
        grad_attn[p] = 0.f;
        reinterpret_cast<float2*>(grad_loc)[p] = make_float2(0.f, 0.f);
        continue;
      }
      // (NaN above inf above every finite bound as unsigned bits: a non-finite input shows.)
      const unsigned bound = __float_as_uint(fabsf(a[j][s]) * g[j]);
      // The band's box of upper left corners, as four maxima (zero is "none").
      const unsigned box[4] = {static_cast<unsigned>(b.h0 + 1), MSDA_BOX_BIG - static_cast<unsigned>(b.h0 + 1),
                               static_cast<unsigned>(b.w0 + 1), MSDA_BOX_BIG - static_cast<unsigned>(b.w0 + 1)};
      atomicAdd(&hown[b.band], 1u);
      atomicMax(&hmax[b.band], bound);
#pragma unroll
      for (int k = 0; k < 4; ++k) atomicMax(&hbox[k][b.band], box[k]);
      if (b.lower) {
        atomicAdd(&hlow[b.band + 1], 1u);
        atomicMax(&hmax[b.band + 1], bound);
#pragma unroll
        for (int k = 0; k < 4; ++k) atomicMax(&hbox[k][b.band + 1], box[k]);
      }
    }
  }
  (void)wts;
  __syncthreads();
  unsigned mine = 0u;  // this block's entries
  for (int i = threadIdx.x; i < MSDA_BPH; i += blockDim.x) {
    const unsigned entries = hown[i] + hlow[i];
    if (entries == 0u) continue;
    mine += entries;
    atomicAdd(acc + nh * MSDA_BPH + i, entries);
    atomicMax(acc + bands + nh * MSDA_BPH + i, hmax[i]);
    if (hown[i] != 0u) atomicAdd(acc + 2 * bands + nh * MSDA_BPH + i, hown[i]);
#pragma unroll
    for (int k = 0; k < 4; ++k) atomicMax(acc + (3 + k) * bands + nh * MSDA_BPH + i, hbox[k][i]);
  }
  mine = __reduce_add_sync(0xffffffffu, mine);
  if (threadIdx.x % 32 == 0 && mine != 0u) atomicAdd(acc + MSDA_ACC * bands + nh, mine);
}

// The same grid and warps as msda_band_count: each point's entries at their band's places, own
// entries first, then lower ones. The places: a band's entries follow every earlier (batch,
// head)'s and the earlier bands of its own (an exclusive scan of the counts that each block does
// for its (batch, head), no kernel of its own; the first block of each writes its bands' work
// records and lists the heavy ones for msda_bwd_bands); within a band, each block's part follows
// the parts of the blocks before it (a global atomic a band, kind and block on acc's cursors) and
// its points' shared-memory ranks. The entries go out through shared memory in
// order, so that a part's writes are consecutive words (4-byte writes all over made this
// kernel slower than the count). The order within each part does not matter: the sums are
// integers.
extern "C" __global__ void TMA_PLAN_MSDA_BAND_FILL_LAUNCH_BOUNDS
msda_band_fill(const int* __restrict__ pband, unsigned* __restrict__ acc, unsigned* __restrict__ entries,
               int queries, int bands, unsigned* __restrict__ work, int room) {
  extern __shared__ unsigned char msda_raw[];
  unsigned* stage = reinterpret_cast<unsigned*>(MsdaBandFillPlan::stage(MsdaBandFillPlan::base(msda_raw)));
  unsigned* dest = stage + MSDA_SEG;
  // hist: this block's own and lower entries of each band, then where each part sits in `stage`;
  // at: where it goes in `entries`.
  __shared__ unsigned hist[2][MSDA_BPH], at[2][MSDA_BPH];
  __shared__ int sums[2][32];
  for (int i = threadIdx.x; i < MSDA_BPH; i += blockDim.x) hist[0][i] = 0u, hist[1][i] = 0u;
  __syncthreads();
  const int chunks = (queries + MSDA_CQ - 1) / MSDA_CQ;
  const int nh = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int q0 = chunk * MSDA_CQ + threadIdx.x / 32 * MSDA_QPW;
  const int n = nh / MSDA_M, head = nh % MSDA_M, lane = threadIdx.x % 32;
  // This (batch, head)'s counts and every earlier one's entries, loaded first (the scan waits on
  // them, not on the ranks).
  constexpr int ROUNDS = (MSDA_BPH + MsdaBandFillPlan::BLOCK_THREADS - 1) / MsdaBandFillPlan::BLOCK_THREADS;
  unsigned count[ROUNDS], own[ROUNDS];
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    const int b = r * MsdaBandFillPlan::BLOCK_THREADS + threadIdx.x;
    count[r] = b < MSDA_BPH ? __ldg(acc + nh * MSDA_BPH + b) : 0u;
    own[r] = b < MSDA_BPH ? __ldg(acc + 2 * bands + nh * MSDA_BPH + b) : 0u;
  }
  int before = 0;
  for (int i = lane; i < nh; i += 32) before += static_cast<int>(__ldg(acc + MSDA_ACC * bands + i));
  constexpr int STEPS = (MSDA_LP + 31) / 32;
  int code[MSDA_QPW][STEPS];
  unsigned rank[MSDA_QPW][STEPS], rank_lower[MSDA_QPW][STEPS];
#pragma unroll
  for (int j = 0; j < MSDA_QPW; ++j) {
    const int q = q0 + j;
    const long long nqh = (static_cast<long long>(n) * queries + min(q, queries - 1)) * MSDA_M + head;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      const int i = s * 32 + lane;
      code[j][s] = q < queries && i < MSDA_LP ? __ldg(pband + nqh * MSDA_LP + i) : -1;
      rank[j][s] = rank_lower[j][s] = 0u;
      if (code[j][s] >= 0) {
        const int b = code[j][s] & ~MSDA_NEXT_TOO;
        rank[j][s] = atomicAdd(&hist[0][b], 1u);
        if (code[j][s] & MSDA_NEXT_TOO) rank_lower[j][s] = atomicAdd(&hist[1][b + 1], 1u);
      }
    }
  }
  before = __reduce_add_sync(0xffffffffu, before);
  __syncthreads();
  // Each band's first entry; each part's place in entries (after the parts of the blocks before
  // this one), and its place in stage (an exclusive scan of hist, in place).
  static_assert(MsdaBandFillPlan::BLOCK_THREADS % 32 == 0, "whole warps");
  int round = 0, staged = 0;
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r, ++round) {
    const int b = r * MsdaBandFillPlan::BLOCK_THREADS + threadIdx.x;
    int total;
    const unsigned at0 = static_cast<unsigned>(before + msda_round_scan(static_cast<int>(count[r]), &total, sums[round % 2]));
    if (b < MSDA_BPH && chunk == 0) {
      // msda_bwd_bands' work: the band's record (all its block needs to start, one load), and a
      // heavy band (MSDA_BAND_HEAVY entries or more) in the list of those that go first, while
      // it has room, so that a band whose level's points cluster in it does not start last.
      const unsigned band = static_cast<unsigned>(nh * MSDA_BPH + b);
      const MsdaWork w(work, bands, room);
      unsigned listed = 0u;
      if (count[r] >= MSDA_BAND_HEAVY) {
        const unsigned slot = atomicAdd(w.listed, 1u);
        if (slot < w.room) w.list[slot] = band, listed = 1u;
      }
      uint4* rec = reinterpret_cast<uint4*>(w.records + band * MSDA_WORK);
      rec[0] = make_uint4(at0, at0 + count[r], __ldg(acc + bands + band), listed);
      rec[1] = make_uint4(__ldg(acc + 3 * bands + band), __ldg(acc + 4 * bands + band), __ldg(acc + 5 * bands + band),
                          __ldg(acc + 6 * bands + band));
    }
    if (b < MSDA_BPH) {
#pragma unroll
      for (int kind = 0; kind < 2; ++kind) {
        if (hist[kind][b] != 0u)
          at[kind][b] = at0 + (kind ? own[r] : 0u) + atomicAdd(acc + (7 + kind) * bands + nh * MSDA_BPH + b, hist[kind][b]);
      }
    }
    before += total;
  }
  for (int b0 = 0; b0 < 2 * MSDA_BPH; b0 += blockDim.x, ++round) {
    const int b = b0 + threadIdx.x;
    unsigned* h = &hist[0][0] + b;
    int total;
    const int place = staged + msda_round_scan(b < 2 * MSDA_BPH ? static_cast<int>(*h) : 0, &total, sums[round % 2]);
    if (b < 2 * MSDA_BPH) *h = static_cast<unsigned>(place);
    staged += total;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < MSDA_QPW; ++j) {
    const long long nqh = (static_cast<long long>(n) * queries + min(q0 + j, queries - 1)) * MSDA_M + head;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      if (code[j][s] < 0) continue;
      const int b = code[j][s] & ~MSDA_NEXT_TOO;
      const unsigned p = static_cast<unsigned>(nqh * MSDA_LP + s * 32 + lane);
      stage[hist[0][b] + rank[j][s]] = p;
      dest[hist[0][b] + rank[j][s]] = at[0][b] + rank[j][s];
      if (code[j][s] & MSDA_NEXT_TOO) {
        stage[hist[1][b + 1] + rank_lower[j][s]] = p | MSDA_LOWER;
        dest[hist[1][b + 1] + rank_lower[j][s]] = at[1][b + 1] + rank_lower[j][s];
      }
    }
  }
  __syncthreads();
  for (int k = threadIdx.x; k < staged; k += blockDim.x) entries[dest[k]] = stage[k];
}

// Every level's boxes fit the plan: the value rows (rows + 1) in `vband`, the sums (rows, a pixel
// D + 1 words apart) in `plane`, and the output (rows) over `vband`.
template <int L>
constexpr bool msda_bands_fit() {
  if constexpr (L == MSDA_L) {
    return true;
  } else {
    typedef typename msda_band_in<L>::type I;
    typedef typename msda_band_out<L>::type O;
    return I::EXTENT_N == 1 && I::EXTENT_M == 1 && I::EXTENT_C == MSDA_D && O::EXTENT_N == 1 && O::EXTENT_M == 1 &&
           O::EXTENT_C == MSDA_D && I::EXTENT_W == O::EXTENT_W && I::EXTENT_H == O::EXTENT_H + 1 &&
           I::SMEM_BYTES == I::EXTENT_H * I::EXTENT_W * MSDA_D * sizeof(msda_t) &&
           O::SMEM_BYTES == O::EXTENT_H * O::EXTENT_W * MSDA_D * sizeof(msda_t) &&
           I::SMEM_BYTES <= MsdaBandsPlan::BYTES_vband &&
           O::EXTENT_H * O::EXTENT_W * (MSDA_D + 1) * 4 * (1 + MSDA_FIX_WIDE) <= MsdaBandsPlan::BYTES_plane &&
           msda_bands_fit<L + 1>();
  }
}
static_assert(msda_bands_fit<0>(), "every level's boxes fit the plan's shared memory");

// The main loop addresses shared memory by 32-bit offsets held in registers: with generic
// pointers ptxas rebuilt each access's address from the CTA's window base and the plan's 128-byte
// alignment (8 instructions, at every gather and every corner: a tenth of the loop, ncu).
__device__ __forceinline__ uint4 msda_lds128(unsigned a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ void msda_red_add(unsigned a, unsigned v) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}

// VEC channels (part `sub`) of pixel (row hh of the band's value rows, column ww): the value box
// is dense, [rows + 1][W][D] (msda_bands_fit checks its bytes); `vband` its shared address.
__device__ __forceinline__ uint4 msda_band_value(unsigned vband, int hh, int ww, int W, int sub) {
  return msda_lds128(vband + ((hh * W + ww) * MSDA_TPQ + sub) * 16);
}

// Hot bands' copies (see msda_bwd_bands): one a point of a warp's step, each MSDA_HOT_STRIDE
// words (1 mod 8, so that the copies of one pixel's channel fall in 8 different banks), as many
// window pixels as the plane holds (at most 32; 0: no hot mode), for bands of MSDA_HOT_MIN
// entries or more.
constexpr int MSDA_REPS = 32 / MSDA_TPQ;
constexpr int msda_hot_px() {
  const int words = static_cast<int>(MsdaBandsPlan::BYTES_plane / 4 / (1 + MSDA_FIX_WIDE)) / MSDA_REPS - 8;
  const int px = words / (MSDA_D + 1);
  return px < 4 ? 0 : px < 32 ? px : 32;
}
constexpr int MSDA_HOT_PX = msda_hot_px();
constexpr int MSDA_HOT_STRIDE = MSDA_HOT_PX * (MSDA_D + 1) + ((1 - MSDA_HOT_PX * (MSDA_D + 1)) & 7);
constexpr int MSDA_HOT_MIN = 512;
static_assert(MSDA_HOT_PX == 0 || MSDA_HOT_STRIDE % 8 == 1, "the copies 1 mod 8 words apart");
static_assert(MSDA_REPS * MSDA_HOT_STRIDE * (1 + MSDA_FIX_WIDE) * 4 <= MsdaBandsPlan::BYTES_plane ||
                  MSDA_HOT_PX == 0,
              "the copies fit the plane");

// Blocks: the listed heavy bands first, then every band (see the start).
// In: a map a level over value ([N][H][W][M][D] from the level's first row), then a map a level
// over grad_value (the same view, the storage type).
extern "C" __global__ void TMA_PLAN_MSDA_BWD_BANDS_LAUNCH_BOUNDS
msda_bwd_bands(const unsigned* __restrict__ entries, const unsigned* __restrict__ work, int room,
               unsigned* __restrict__ acc, const float* __restrict__ loc, const float* __restrict__ wts,
               const msda_t* __restrict__ grad_out, float* __restrict__ grad_loc, float* __restrict__ grad_attn,
               const __grid_constant__ MsdaShapes sh, int batch, MSDA_BAND_MAP_PARAMS) {
  extern __shared__ unsigned char msda_raw[];
  unsigned char* sbase = MsdaBandsPlan::base(msda_raw);
  unsigned char* vband = MsdaBandsPlan::vband(sbase);
  int* plane = reinterpret_cast<int*>(MsdaBandsPlan::plane(sbase));
  __shared__ __align__(8) tma_mbarrier bar;

  // This block's band: the listed heavy bands first (msda_band_fill's list: `room` blocks, some
  // idle), then every band in turn, the heaviest levels' first (a listed one is done already).
  const int bands = batch * MSDA_M * MSDA_BPH;
  const MsdaWork work_of(const_cast<unsigned*>(work), bands, room);
  int l = MSDA_L - 1, nh, k;
  if (static_cast<int>(blockIdx.x) < room) {
    if (blockIdx.x >= __ldg(work_of.listed)) return;  // (idle: fewer heavy bands than room)
    const int band = static_cast<int>(__ldg(work_of.list + blockIdx.x)), local = band % MSDA_BPH;
    nh = band / MSDA_BPH;
    while (local < msda_band_first(l)) --l;
    k = local - msda_band_first(l);
  } else {
    int b = static_cast<int>(blockIdx.x) - room;
    for (;; --l) {
      const int blocks = batch * MSDA_M * (msda_band_first(l + 1) - msda_band_first(l));
      if (b < blocks || l == 0) break;
      b -= blocks;
    }
    const int per_level = msda_band_first(l + 1) - msda_band_first(l);
    nh = b / per_level, k = b % per_level;
  }
  const int band = nh * MSDA_BPH + msda_band_first(l) + k;
  const uint4* rec = reinterpret_cast<const uint4*>(work_of.records + band * MSDA_WORK);
  const uint4 w0 = __ldg(rec), w1 = __ldg(rec + 1);
  if (static_cast<int>(blockIdx.x) >= room && w0.w != 0u) return;  // (listed: a first block's)
  const int n = nh / MSDA_M, head = nh % MSDA_M;
  const int H = sh.h(l), W = sh.w(l), R = msda_band_rows(l), r0 = k * R;
  const int t = threadIdx.x;
  const CUtensorMap* in_maps[MSDA_L] = {MSDA_BAND_IN_PTRS};
  const CUtensorMap* out_maps[MSDA_L] = {MSDA_BAND_OUT_PTRS};
  if (t == 0) {
    tma_mbarrier_init(&bar, 1);
    tma_fence_mbarrier_init();
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int L = decltype(lc)::value;
      typedef typename msda_band_in<L>::type I;
      if (l == L) {
        I::arrive_expect_tx(&bar);
        I::load(in_maps[L], &bar, vband, {.N = n, .H = r0, .W = 0, .M = head, .C = 0});
      }
    });
  }
#if defined(TMA_DEBUG)
  // The rendered boxes are this problem's levels: the whole width, rows + 1 rows in.
  msda_for<0, MSDA_L>([&](auto lc) {
    constexpr int L = decltype(lc)::value;
    typedef typename msda_band_in<L>::type I;
    if (l == L && (I::EXTENT_W != W || I::EXTENT_H != R + 1 || n >= batch || r0 >= H)) {
      if (t == 0)
        printf("msda_bwd_bands: block %d: level %d of [%d][%d] has a value box of [%d][%d] for bands of %d rows, band "
               "%d, batch %d of %d\n",
               blockIdx.x, l, H, W, I::EXTENT_H, I::EXTENT_W, R, k, n, batch);
      __trap();
    }
  });
#endif
  const int plane_words = R * W * (MSDA_D + 1);
  const unsigned e0 = w0.x, e1 = w0.y;  // the band's entries
  // A hot band (every corner in a window of at most MSDA_HOT_PX pixels: clustered points) adds
  // into MSDA_REPS copies of its window, one a point of a warp's step, so that a warp's points on
  // one pixel hit different banks (copies MSDA_HOT_STRIDE words apart: 1 mod 8) instead of one
  // address; the copies are added up (in order) at the end.
  // The window: corner rows h0 .. h0 + 1 and columns w0 .. w0 + 1 of every entry, within the band.
  const int wr0 = max(static_cast<int>(MSDA_BOX_BIG - w1.y) - 1, r0);
  const int wr1 = min(static_cast<int>(w1.x), r0 + R - 1);
  const int wc0 = max(static_cast<int>(MSDA_BOX_BIG - w1.w) - 1, 0);
  const int wc1 = min(static_cast<int>(w1.z), W - 1);
  const int wcols = wc1 - wc0 + 1, wpx = (wr1 - wr0 + 1) * wcols;
  const bool hot = MSDA_HOT_PX > 0 && e1 - e0 >= MSDA_HOT_MIN && wr1 >= wr0 && wc1 >= wc0 && wpx <= MSDA_HOT_PX;
  const float tm = __uint_as_float(w0.z);
  const int lo_off = hot ? MSDA_REPS * MSDA_HOT_STRIDE : plane_words;  // (MSDA_FIX_WIDE: the low sums)
  for (int i = t; i < MsdaBandsPlan::BYTES_plane / 4; i += MSDA_BT) plane[i] = 0;

  // The band's fixed-point scale 2^S: terms below 2^22 units, count * the largest below 2^30.
  const bool finite = tm <= 3.0e38f;  // (NaN and inf are not)
  int S = 0;
  const int ec = 32 - __clz(static_cast<int>(e1 - e0));  // count < 2^ec
  if (tm > 0.f && finite) {
    int et;
    frexpf(tm, &et);  // tm < 2^et
    S = min(22 - et, 30 - et - ec);
    S = max(min(S, 100), -100);
  }
  const float scale = ldexpf(1.f, S);
#if MSDA_FIX_WIDE
  // The remainders (|r| <= 1/2 unit) at 2^K: count * 2^(K - 1) below 2^30.
  const int K = min(16, 31 - ec);
  const float scale_lo = ldexpf(1.f, K);
#endif
  __syncthreads();  // the plane is zero
  // This band's words of acc are read (msda_band_fill copied them): leave them zero for the next
  // launch, as the first band of each (batch, head) does its entries' word, so that no memset
  // comes before msda_band_count (the host keeps one for a launch that did not get this far).
  if (t < MSDA_ACC) acc[t * bands + band] = 0u;
  if (t == MSDA_ACC && msda_band_first(l) + k == 0) acc[MSDA_ACC * bands + nh] = 0u;
  tma_mbarrier_wait(&bar, 0);

  // The entries, MSDA_PPS points a step; thread `sub` of a point owns channels sub * VEC ...
  const int sub = t % MSDA_TPQ, slot = t / MSDA_TPQ;
  const unsigned vband_s = static_cast<unsigned>(__cvta_generic_to_shared(vband));
  // This lane's sums: the plane (rows from r0, W pixels a row), or in a hot band its copy of the
  // window (rows from wr0, wcols pixels a row); its channels from sub * VEC.
  const unsigned sums_s = static_cast<unsigned>(__cvta_generic_to_shared(plane)) +
                          4u * ((hot ? (slot % MSDA_REPS) * MSDA_HOT_STRIDE : 0) + sub * MSDA_VEC);
  const int orow = hot ? wr0 : r0, ocol = hot ? wc0 : 0, pitch = hot ? wcols : W;
  const float2* xy = reinterpret_cast<const float2*>(loc);
  // The points ahead: the entry two steps ahead, and the next step's point (its entry, location,
  // weight and grad_out part), so that no step waits on an entry's load and then on the loads
  // that depend on it (ncu: a tenth of the loop's stalls were on the entry's load).
  struct Ahead {
    unsigned e;
    float2 c;
    float a;
    uint4 g;
  };
  const auto entry_at = [&](unsigned i) {
    const unsigned j = i < e1 ? i : (e1 > e0 ? e1 - 1 : e0);
    return e1 > e0 ? __ldg(entries + j) : 0u;
  };
  const auto fetch = [&](unsigned e) {
    Ahead x;
    x.e = e;
    const unsigned p = e & ~MSDA_LOWER;
    x.c = __ldg(xy + p);
    x.a = __ldg(wts + p);
    const long long nqh = p / MSDA_LP;
    x.g = __ldg(reinterpret_cast<const uint4*>(grad_out + nqh * MSDA_D + sub * MSDA_VEC));
    return x;
  };
  Ahead next = fetch(entry_at(e0 + slot));
  unsigned after = entry_at(e0 + MSDA_PPS + slot);
  // (a warp whose points of a step are all past the band's last entry is done)
  for (unsigned s0 = e0; s0 + t / 32 * (32 / MSDA_TPQ) < e1; s0 += MSDA_PPS) {
    const Ahead cur = next;
    const bool live = s0 + slot < e1;
    next = fetch(after);
    after = entry_at(s0 + 2 * MSDA_PPS + slot);
    const bool lower = (cur.e & MSDA_LOWER) != 0u;
    const unsigned p = cur.e & ~MSDA_LOWER;
    const MsdaPoint pt(cur.c, H, W, cur.a, live);
    float g[MSDA_VEC];
    msda_unpack(cur.g, g);
    // grad_attn and grad_loc: the point's own band only (from the value rows in shared memory).
    // A band's own entries come first, so that most warps' steps are all own or all lower: a
    // warp of lower entries skips this part.
    const bool own = live && !lower;
    if (__any_sync(0xffffffffu, own)) {
      float dot[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int hh = pt.h0 + pt.dh(c) - r0, ww = pt.w0 + pt.dw(c);
        float v[MSDA_VEC];
        msda_unpack(own && pt.in[c] ? msda_band_value(vband_s, hh, ww, W, sub) : make_uint4(0u, 0u, 0u, 0u), v);
        float d = 0.f;
#pragma unroll
        for (int j = 0; j < MSDA_VEC; ++j) d = fmaf(g[j], v[j], d);
        dot[c] = d;
      }
      float d_a;
      float2 g_loc;
      pt.grads<MSDA_TPQ>(dot, H, W, &d_a, &g_loc);
      if (own && sub == 0) {
        grad_attn[p] = pt.h0 > -2 ? d_a : 0.f;
        reinterpret_cast<float2*>(grad_loc)[p] = g_loc;
      }
    }
    // grad_value: the corners in this band's rows (a lower entry: its lower corners, row r0).
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int row = pt.h0 + pt.dh(c);
      const bool mine = live && pt.in[c] && (lower ? pt.dh(c) == 1 : row < r0 + R);
      if (!mine) continue;
      const float aw = pt.a * pt.wt(c) * scale;
      const unsigned dst = sums_s + (((row - orow) * pitch + pt.w0 + pt.dw(c) - ocol) * (MSDA_D + 1)) * 4u;
#pragma unroll
      for (int j = 0; j < MSDA_VEC; ++j) {
        const float hi = fmaf(aw, g[j], MSDA_FIX_MAGIC);
        msda_red_add(dst + 4u * j, __float_as_uint(hi) - MSDA_FIX_MAGIC_BITS);
#if MSDA_FIX_WIDE
        const float rem = fmaf(aw, g[j], MSDA_FIX_MAGIC - hi);  // (exact: hi - MAGIC is an integer)
        msda_red_add(dst + 4u * (lo_off + j),
                     __float_as_uint(fmaf(rem, scale_lo, MSDA_FIX_MAGIC)) - MSDA_FIX_MAGIC_BITS);
#endif
      }
    }
  }
  __syncthreads();  // every sum is in, and every read of the value rows done

  // The plane in the storage type over the value rows' shared memory (the output box's layout),
  // VEC channels a thread; NaN everywhere if a term bound was not finite.
#if MSDA_FIX_WIDE
  const float inv = finite ? ldexpf(1.f, -S - K) : __int_as_float(0x7fc00000);
#else
  const float inv = finite ? ldexpf(1.f, -S) : __int_as_float(0x7fc00000);
#endif
  for (int v = t; v < R * W * MSDA_TPQ; v += MSDA_BT) {
    const int px = v / MSDA_TPQ, part = v % MSDA_TPQ;
    int hi[MSDA_VEC], lo[MSDA_VEC];
#pragma unroll
    for (int j = 0; j < MSDA_VEC; ++j) hi[j] = lo[j] = 0;
    if (!hot) {
#pragma unroll
      for (int j = 0; j < MSDA_VEC; ++j) {
        const int w = px * (MSDA_D + 1) + part * MSDA_VEC + j;
        hi[j] = plane[w];
        lo[j] = MSDA_FIX_WIDE ? plane[lo_off + w] : 0;
      }
    } else {
      const int y = r0 + px / W - wr0, x = px % W - wc0;
      if (y >= 0 && y < wpx / wcols && x >= 0 && x < wcols) {
        for (int r = 0; r < MSDA_REPS; ++r) {
#pragma unroll
          for (int j = 0; j < MSDA_VEC; ++j) {
            const int w = r * MSDA_HOT_STRIDE + (y * wcols + x) * (MSDA_D + 1) + part * MSDA_VEC + j;
            hi[j] += plane[w];
            if (MSDA_FIX_WIDE) lo[j] += plane[lo_off + w];
          }
        }
      }
    }
    float f[MSDA_VEC];
#pragma unroll
    for (int j = 0; j < MSDA_VEC; ++j) {
#if MSDA_FIX_WIDE
      f[j] = __ll2float_rn(static_cast<long long>(hi[j]) * (1ll << K) + lo[j]) * inv;
#else
      f[j] = __int2float_rn(hi[j]) * inv;
      (void)lo[j];
#endif
    }
    reinterpret_cast<uint4*>(vband)[v] = msda_pack(f);
  }
  tma_async_proxy_fence();
  __syncthreads();
  if (t == 0) {
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int L = decltype(lc)::value;
      if (l == L) msda_band_out<L>::type::store(out_maps[L], vband, {.N = n, .H = r0, .W = 0, .M = head, .C = 0});
    });
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}

#if MSDA_SOFTMAX
// The logits' gradient a_i (g_i - sum_j a_j g_j) over a (query, head)'s L * P points, in place: a
// warp a (batch, query, head), the plan's warps a block.
extern "C" __global__ void TMA_PLAN_MSDA_BAND_LOGITS_LAUNCH_BOUNDS
msda_band_logits(const float* __restrict__ wts, float* __restrict__ grad_attn, long long pairs) {
  constexpr int WARPS = tma_plan_msda_band_logits::BLOCK_THREADS / 32;
  const long long nqh = static_cast<long long>(blockIdx.x) * WARPS + threadIdx.x / 32;
  if (nqh >= pairs) return;  // (a whole warp)
  const int lane = threadIdx.x % 32;
  float* ga = grad_attn + nqh * MSDA_LP;
  const float* a = wts + nqh * MSDA_LP;
  float dot = 0.f;
  for (int i = lane; i < MSDA_LP; i += 32) dot += a[i] * ga[i];
  dot = msda_sum<32>(dot);
  for (int i = lane; i < MSDA_LP; i += 32) ga[i] = a[i] * (ga[i] - dot);
}
#endif
#endif  // MSDA_BANDS
