// Multi-scale deformable attention, backward (after msda_fast.cu, built with MSDA_BACKWARD: its
// types, unpacking, coordinates and weights are this file's too). Given grad_out [N][Q][M * D]
// (msda_t), it writes
//   grad_value [N][S][M][D]       gv_t: f32 (MSDA_GRAD16 0: cast to msda_t afterwards by
//                                 msda_bwd_cast) or msda_t itself (MSDA_GRAD16 1), zeroed first
//   grad_loc   [N][Q][M][L][P][2] f32, every element
//   grad_attn  [N][Q][M][L][P]    f32: the weights' gradient, or the logits' (MSDA_SOFTMAX)
// with fp32 arithmetic throughout.
//
//   msda_bwd_atomic (MSDA_BWD 0) the standard op's design: a warp per (query, head), a lane per
//                   channel, one scalar f32 atomic per channel per corner on grad_value.
//   msda_bwd        (MSDA_BWD 1) msda_vec's mapping (MSDA_TPQ threads per (query, head), 16 bytes
//                   of channels each); a block owns one (batch, head) and MSDA_QPB queries. The
//                   levels the host staged (MSDA_STAGED of them, the small ones) accumulate their
//                   grad_value plane in shared memory (f32, tile set msda_acc: one [1][H][W][1][D]
//                   tile of the level's [N][H][W][M][C] view per level), written back at the end
//                   with one TMA bulk reduce-add per level (MSDA_GRAD16: converted to msda_t in
//                   the tile set msda_out first, and reduced in that type); the other levels
//                   through vectorised global reductions (red.global.v4.f32 / v4.f16x2 / v4.bf16x2).
//   msda_bwd_cast   f32 -> msda_t, 8 elements a thread.
//   tiles           (MSDA_BWD 2) no floating-point atomics on global memory. msda_bwd (msda_vec's
//                   mapping, MSDA_QPB queries of one (batch, head) a block) writes grad_loc and
//                   grad_attn and files every inside corner (query << 10 | pixel, weight) under
//                   its tile of msda_tile_pixels(l) pixels of level l: ranks from shared-memory
//                   integer atomics (one a warp and tile), one global range a tile and block
//                   (desc[(n, head, tile)][block] = (start, count)). msda_bwd_tiles, a block a
//                   tile, reads the tile's entries in chunks, sorts each chunk by pixel in shared
//                   memory (count, scan, fill), and each pixel's msda_tile_split(l) threads sum
//                   its entries' weight * grad_out (every split-th each, then added up by
//                   shuffles; a warp a pixel of many entries); the row is written once in the
//                   storage type: no f32 buffer, no zeroing, no cast. MSDA_DETERMINISTIC: the sums
//                   in 64-bit fixed point, scaled from a bound on any pixel's sum (exact: every
//                   order gives the same bits).
//   planes          (MSDA_BWD 3) no floating-point atomics, and (but with MSDA_PLANE_ROWS, below)
//                   no sort. msda_bwd writes grad_loc and
//                   grad_attn, and each point's key (its corner (h0 + 1, w0 + 1), or -1 outside
//                   the level) and its 4 corners' weights, level by level (pkey, pw).
//                   msda_bwd_planes, a block a tile of one (batch, head, level) (a box of the
//                   level's [N][H][W][M][D] view of grad_value: its plane of f32 sums in shared
//                   memory), reads the level's keys in rounds of MSDA_ROUND a thread, keeps the
//                   points with a corner in its tile (a block scan: the hits in a fixed order),
//                   and adds each hit's weight * grad_out row into the plane (fmaf), 8 lanes a
//                   corner's row: each pixel has one owning warp (a grid of cells), which alone
//                   adds into it (no atomics), hits in the list's order; when a round's corners
//                   lie in a few pixels (clustered points: one warp would own them all), each
//                   warp adds a share of the hits into its own copy of those pixels and the
//                   copies are summed in warp order. The plane is written once, in the storage
//                   type, by one TMA store. Every order is fixed: the same bits on every run of
//                   a build (a build of another block or budget groups the terms otherwise).
//                   MSDA_PLANE_ROWS: msda_bwd_rows first sorts each (batch, head, level)'s points
//                   by row (stably: its counts from shared-memory integer atomics, every place
//                   in point order), and a box reads the points of its rows only.
//   bands           (MSDA_BWD 4) msda_bwd_bands.cu: bands of whole rows, each point evaluated in its
//                   band from the band's value rows (one TMA box), its terms added in 32-bit
//                   fixed point by shared-memory integer atomics; one TMA store a band.

#define MSDA_TILES (MSDA_BWD == 2)
#define MSDA_PLANES (MSDA_BWD == 3)
#define MSDA_BANDS (MSDA_BWD == 4)  // msda_bwd_bands.cu
// The plane design's point key keeps its corner (h0 + 1, w0 + 1) in 14 bits each (bwd.rs refuses
// larger levels), and msda_bwd_planes adds the corners' in-tile mask above them (bits 28-31).
constexpr int MSDA_HIT_BITS = 14;
#if MSDA_GRAD16 || MSDA_TILES || MSDA_PLANES || MSDA_BANDS
typedef msda_t gv_t;
#else
typedef float gv_t;
#endif

__device__ __forceinline__ float msda_scalar(msda_t v) {
#if MSDA_DTYPE == 2
  return v;
#elif MSDA_DTYPE == 1
  return __uint_as_float(static_cast<unsigned>(v) << 16);
#else
  float f;
  asm("{ .reg .f16 h;\n\t mov.b16 h, %1;\n\t cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(v));
  return f;
#endif
}

// Sum over the `width` threads of a (query, head) (a power of two within the warp).
template <int WIDTH>
__device__ __forceinline__ float msda_sum(float x) {
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o, WIDTH);
  return x;
}

// With the fused softmax: grad_attn holds d out / d weight of this (query, head)'s L * P points
// (written by this warp); rewrite it as the logits' gradient a_i (g_i - sum_j a_j g_j). Every
// thread of the (query, head) calls it; `live` ones write.
template <int WIDTH>
__device__ __forceinline__ void msda_softmax_grad(float* __restrict__ ga, const MsdaWeights& weight, int sub,
                                                  bool live) {
#if MSDA_SOFTMAX
  __syncwarp();
  float dot = 0.f;
  for (int i = sub; i < MSDA_LP; i += WIDTH) dot += weight(i) * ga[i];
  dot = msda_sum<WIDTH>(dot);
  float g[(MSDA_LP + WIDTH - 1) / WIDTH];
#pragma unroll
  for (int k = 0; k < (MSDA_LP + WIDTH - 1) / WIDTH; ++k) {
    const int i = sub + k * WIDTH;
    g[k] = i < MSDA_LP ? weight(i) * (ga[i] - dot) : 0.f;
  }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < (MSDA_LP + WIDTH - 1) / WIDTH; ++k) {
    const int i = sub + k * WIDTH;
    if (live && i < MSDA_LP) ga[i] = g[k];
  }
#else
  (void)ga, (void)weight, (void)sub, (void)live;
#endif
}

// One point's bilinear geometry (the forward's msda_level, with the derivatives): corners
// (h0, w0) .. (h0 + 1, w0 + 1), which of them lie inside, their weights, and a = 0 outside.
struct MsdaPoint {
  int h0, w0;
  float lh, lw, a;
  bool in[4];
  __device__ __forceinline__ MsdaPoint(float2 c, int H, int W, float weight_if_inside, bool live) {
    float hf, wf, fh, fw;
    const float h_im = msda_coord(c.y, H, hf, fh);
    const float w_im = msda_coord(c.x, W, wf, fw);
    const bool inside =
        live && h_im > -1.f && w_im > -1.f && h_im < static_cast<float>(H) && w_im < static_cast<float>(W);
    h0 = inside ? static_cast<int>(hf) : -2;
    w0 = inside ? static_cast<int>(wf) : -2;
    lh = inside ? fh : 0.f;
    lw = inside ? fw : 0.f;
    a = inside ? weight_if_inside : 0.f;
    const bool r0 = h0 >= 0, r1 = h0 + 1 >= 0 && h0 + 1 < H;
    const bool c0 = w0 >= 0, c1 = w0 + 1 >= 0 && w0 + 1 < W;
    in[0] = r0 && c0;
    in[1] = r0 && c1;
    in[2] = r1 && c0;
    in[3] = r1 && c1;
  }
  __device__ __forceinline__ int dh(int k) const { return k >> 1; }
  __device__ __forceinline__ int dw(int k) const { return k & 1; }
  // Bilinear weight of corner k (without a).
  __device__ __forceinline__ float wt(int k) const {
    return (k & 2 ? lh : 1.f - lh) * (k & 1 ? lw : 1.f - lw);
  }
  // The point's gradients from dot[k] (this thread's share of grad_out . value at corner k),
  // summed over the WIDTH threads of its (query, head): d out / d weight (*d_a) and d out / d
  // (x, y) (*gl: the location's gradient, in [0, 1] units). Every thread of the WIDTH calls it.
  template <int WIDTH>
  __device__ __forceinline__ void grads(const float (&dot)[4], int H, int W, float* d_a, float2* gl) const {
    float da = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) da += wt(k) * dot[k];
    const float d_fw = (1.f - lh) * (dot[1] - dot[0]) + lh * (dot[3] - dot[2]);
    const float d_fh = (1.f - lw) * (dot[2] - dot[0]) + lw * (dot[3] - dot[1]);
    *d_a = msda_sum<WIDTH>(da);
    const float gx = msda_sum<WIDTH>(a * d_fw) * static_cast<float>(W);
    const float gy = msda_sum<WIDTH>(a * d_fh) * static_cast<float>(H);
    *gl = make_float2(gx, gy);
  }
};

#if MSDA_TILES || MSDA_PLANES || MSDA_BANDS
// Exclusive prefix of x over the block and the block's sum (*total), with one barrier: the warps'
// sums go to `sums` (32 ints; alternate two arrays between calls, so that a call's writes cannot
// race the previous call's reads) and each warp scans them itself. Every thread calls it.
__device__ __forceinline__ int msda_round_scan(int x, int* total, int* sums) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int inc = x;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) sums[warp] = inc;
  __syncthreads();
  int w = lane < warps ? sums[lane] : 0;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, w, o);
    if (lane >= o) w += y;
  }
  const int before = warp > 0 ? __shfl_sync(0xffffffffu, w, warp - 1) : 0;
  *total = __shfl_sync(0xffffffffu, w, 31);
  return before + inc - x;
}

// msda_round_scan with its own warps' sums, and a barrier before it returns so that the next
// call may reuse them (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ int msda_block_scan(int x, int* total) {
  __shared__ int warp_sums[32];
  const int before = msda_round_scan(x, total, warp_sums);
  __syncthreads();  // warp_sums is reused by the next call
  return before;
}
#endif

#if MSDA_BWD == 0
// ---------------------------------------------------------------------------------------------
// The baseline: a warp per (batch, query, head), lane c (and c + 32, ...) owns channel c.
static_assert(tma_plan_msda_bwd_atomic::BLOCK_THREADS == MSDA_QPB * 32, "the plan's block is the kernel's");

extern "C" __global__ void TMA_PLAN_MSDA_BWD_ATOMIC_LAUNCH_BOUNDS
msda_bwd_atomic(const msda_t* __restrict__ value, const float* __restrict__ loc, const float* __restrict__ attn,
                const msda_t* __restrict__ grad_out, float* __restrict__ grad_value, float* __restrict__ grad_loc,
                float* __restrict__ grad_attn, const __grid_constant__ MsdaShapes sh, int queries, int spatial,
                int batch) {
  constexpr int CPL = (MSDA_D + 31) / 32;  // channels per lane
  const int lane = threadIdx.x % 32;
  const long long nqh = static_cast<long long>(blockIdx.x) * MSDA_QPB + threadIdx.x / 32;
  if (nqh >= static_cast<long long>(batch) * queries * MSDA_M) return;  // a whole warp
  const int head = static_cast<int>(nqh % MSDA_M);
  const int n = static_cast<int>(nqh / MSDA_M / queries);
  const float2* xy = reinterpret_cast<const float2*>(loc) + nqh * MSDA_LP;
  // Groups of MSDA_TPQ lanes each reduce the softmax over all L * P logits.
  const MsdaWeights weight = msda_weights(attn + nqh * MSDA_LP, lane % MSDA_TPQ);
  float g[CPL];
#pragma unroll
  for (int k = 0; k < CPL; ++k) {
    const int c = lane + 32 * k;
    g[k] = c < MSDA_D ? msda_scalar(grad_out[nqh * MSDA_D + c]) : 0.f;
  }
  float* ga = grad_attn + nqh * MSDA_LP;
  float2* gl = reinterpret_cast<float2*>(grad_loc) + nqh * MSDA_LP;
  for (int l = 0; l < MSDA_L; ++l) {
    const int H = sh.h(l), W = sh.w(l);
    const long long row0 = static_cast<long long>(n) * spatial + sh.start(l);
    for (int p = 0; p < MSDA_P; ++p) {
      const int i = l * MSDA_P + p;
      const MsdaPoint pt(__ldg(xy + i), H, W, weight(i), true);
      float dot[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (!pt.in[k]) continue;
        const long long base = ((row0 + (pt.h0 + pt.dh(k)) * W + pt.w0 + pt.dw(k)) * MSDA_M + head) * MSDA_D;
        const float scale = pt.a * pt.wt(k);
#pragma unroll
        for (int j = 0; j < CPL; ++j) {
          const int c = lane + 32 * j;
          if (c >= MSDA_D) continue;
          dot[k] += g[j] * msda_scalar(__ldg(value + base + c));
          atomicAdd(grad_value + base + c, scale * g[j]);
        }
      }
      float d_a;
      float2 g_loc;
      pt.grads<32>(dot, H, W, &d_a, &g_loc);
      if (lane == 0) {
        ga[i] = pt.a != 0.f ? d_a : 0.f;
        gl[i] = g_loc;
      }
    }
  }
  msda_softmax_grad<32>(ga, weight, lane, true);
}

#elif !MSDA_BANDS
// ---------------------------------------------------------------------------------------------
// The TMA design. Rendered by the host before this file (MSDA_STAGED > 0): the tile set
// msda_acc (member a<k>: level k's f32 plane), with MSDA_GRAD16 the set msda_out (member o<k>:
// the same plane in msda_t), msda_slot<l> (staged, index, acc / out tile types and offsets) and
// MSDA_BWD_MAP_PARAMS (the maps of the set the reduce goes through).
typedef tma_plan_msda_bwd MsdaBwdPlan;
static_assert(MsdaBwdPlan::BLOCK_THREADS == MSDA_QPB * MSDA_TPQ && MsdaBwdPlan::BLOCKS_PER_SM == MSDA_MINB,
              "the plan's launch is the kernel's");

// The channel of element j of a thread's reduction registers (thread `sub` of its (query, head)):
// f32 reductions go 4 channels a thread, so that each red.v4.f32 of the TPQ threads covers
// contiguous full sectors (16-bit storage: channels sub * 4 and TPQ * 4 + sub * 4, not
// sub * 8 .. sub * 8 + 7, which touched twice the sectors half-filled); 16-bit reductions keep
// the load layout (one 16-byte packed reduction covers the thread's own 8 channels).
__device__ __forceinline__ int msda_red_channel(int sub, int j) {
#if MSDA_GRAD16
  return sub * MSDA_VEC + j;
#else
  return (j / 4) * (MSDA_TPQ * 4) + sub * 4 + j % 4;
#endif
}

// VEC values into grad_value at row + msda_red_channel(sub, j): f32 as v4 reductions, 16-bit as
// one v4 packed-pair reduction (rounded to the type first).
__device__ __forceinline__ void msda_red(gv_t* row, int sub, const float (&v)[MSDA_VEC]) {
#if MSDA_GRAD16
  gv_t* p = row + sub * MSDA_VEC;
  const uint4 u = msda_pack(v);
#if MSDA_DTYPE == 1
  asm volatile("red.global.v4.bf16x2.add.noftz [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z),
               "r"(u.w)
               : "memory");
#else
  asm volatile("red.global.v4.f16x2.add.noftz [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z),
               "r"(u.w)
               : "memory");
#endif
#else
#pragma unroll
  for (int i = 0; i < MSDA_VEC; i += 4)
    asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};" ::"l"(row + msda_red_channel(sub, i)), "f"(v[i]),
                 "f"(v[i + 1]),
                 "f"(v[i + 2]), "f"(v[i + 3])
                 : "memory");
#endif
}


#if MSDA_TILES
static_assert(!MSDA_STAGED, "the tile design stages nothing");
#ifndef MSDA_DETERMINISTIC
#define MSDA_DETERMINISTIC 0
#endif
// stats[MSDA_STAT_TERM]: the largest |weight| * max |grad_out| of any (query, head), as f32 bits
// (NaN above inf above finite): the deterministic sums' scale.
#define MSDA_STAT_TERM 0
#define MSDA_STAT_FILED 1  // entries handed out so far (msda_bwd's ranges)
#define MSDA_STATS 4
// msda_bwd_tiles' shape: a thread per 32 channels (CPT) of a pixel, TPP threads a pixel's
// channels, and msda_tile_split(l) (rendered by bwd.rs: a power of two, TPP * split <= 32) such
// groups share the pixel's entries in level l; a tile of msda_tile_pixels(l) pixels a block; the
// tiles of (n, head) level by level.
constexpr int MSDA_TILE_THREADS = tma_plan_msda_bwd_tiles::BLOCK_THREADS;
constexpr int MSDA_CPT = MSDA_D < 32 ? MSDA_D : 32;
constexpr int MSDA_TPP = MSDA_D / MSDA_CPT;
constexpr int MSDA_TILE_PIXELS = MSDA_TILE_THREADS / MSDA_TPP;  // the most pixels a tile (split 1)
static_assert(MSDA_TILE_PIXELS <= 1024, "an entry keeps its pixel in 10 bits");
__device__ __forceinline__ int msda_tile_pixels(int l) { return MSDA_TILE_PIXELS / msda_tile_split(l); }
__device__ __forceinline__ int msda_tile_first(const MsdaShapes& sh, int level) {
  int first = 0;
  for (int l = 0; l < level; ++l) first += (sh.h(l) * sh.w(l) + msda_tile_pixels(l) - 1) / msda_tile_pixels(l);
  return first;
}
__device__ __forceinline__ int msda_tiles_per_head(const MsdaShapes& sh) { return msda_tile_first(sh, MSDA_L); }
#ifndef MSDA_FILE_ONE_STEP
#define MSDA_FILE_ONE_STEP 0
#endif
#ifndef MSDA_FILE_BY_LEVEL
#define MSDA_FILE_BY_LEVEL 0
#endif
// MSDA_PACKED (the point pass): a record's slot is (point, query, corner) with the corner
// innermost, not (point, corner, query). One-step filing has the 4 lanes of a query file its 4
// corners at once: (point, corner, query) put them 4 * QPB words apart, one bank (4-way
// conflicts on every record store); corner-innermost puts a warp's 32 lanes on 32 consecutive
// words. The flush reads slots in order, so a warp of the flush then writes one point-pass
// warp step's records, whose ranks in a tile are consecutive (a query's corners, then the next
// query's): runs of 8-byte entries instead of one sector each. The entries are the same. And
// grad_attn / grad_loc are held in registers (point j * TPQ + sub of a level by thread sub) and
// written at the level's end, consecutive points by consecutive threads, instead of each point
// by thread 0 (a 4- and an 8-byte store, each to its own sector, per point).
#ifndef MSDA_PACKED
#define MSDA_PACKED 0
#endif
// The point pass's records a block holds at once: every corner of its queries, or (by level)
// those of one level, written out after each level (a quarter of the shared memory at L = 4).
constexpr int MSDA_REC_N = MSDA_QPB * (MSDA_FILE_BY_LEVEL ? MSDA_P : MSDA_LP) * 4;

// The point pass files corner k of point i of its query (pixel (hh, ww) of level l, `in`: inside
// the level, weight w) when `mine`: its record (tile << 16 | rank in the tile, query << 10 |
// pixel in the tile, weight) in three arrays at a fixed slot, (point i, corner k, query) with the
// query innermost (filing a corner a step, a warp's stores hit distinct banks; MSDA_PACKED:
// (point, query, corner)); the warp's corners of one tile take
// their ranks with one shared-memory atomic (the same few tiles take most corners). Every lane
// of the warp calls it.
__device__ __forceinline__ void msda_file(unsigned* rec, int* tcount, const MsdaShapes& sh, int l, int i, int k,
                                          bool mine, int hh, int ww, bool in, float w, int q, int qloc, int lane) {
  const int pix = hh * sh.w(l) + ww, tile = msda_tile_first(sh, l) + pix / msda_tile_pixels(l);
  const int key = mine && in ? tile : -1;
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  const int leader = __ffs(peers) - 1;
  int first = 0;
  if (key >= 0 && lane == leader) first = atomicAdd(tcount + tile, __popc(peers));
  first = __shfl_sync(0xffffffffu, first, leader);
  if (mine) {
    const int pi = MSDA_FILE_BY_LEVEL ? i - l * MSDA_P : i;
    const int slot = MSDA_PACKED ? (pi * MSDA_QPB + qloc) * 4 + k : (pi * 4 + k) * MSDA_QPB + qloc;
    rec[slot] = 0xffffffffu;
    if (in) {
      rec[slot] =
          (static_cast<unsigned>(tile) << 16) | static_cast<unsigned>(first + __popc(peers & ((1u << lane) - 1u)));
      rec[MSDA_REC_N + slot] = (static_cast<unsigned>(q) << 10) | static_cast<unsigned>(pix % msda_tile_pixels(l));
      rec[2 * MSDA_REC_N + slot] = __float_as_uint(w);
    }
  }
}

// Tiles [tile_lo, tile_hi)'s records of this block (point block `chunk` of `chunks` of (batch,
// head) nh, of `tiles` tiles a head) into `entries`: each tile's in one range (one atomic a
// tile), described at desc[(nh, tile)][chunk] as (start, count); then every record to its place.
// Every thread calls it; rec and tcount may be reused when it returns.
__device__ __forceinline__ void msda_flush(const unsigned* rec, int* tcount, int tile_lo, int tile_hi,
                                           unsigned* __restrict__ stats, uint2* __restrict__ entries,
                                           uint2* __restrict__ desc, int nh, int tiles, int chunks, int chunk) {
  const int t = threadIdx.x;
  uint2* my_desc = desc + static_cast<long long>(nh) * tiles * chunks;
  __syncthreads();
  for (int i = tile_lo + t; i < tile_hi; i += blockDim.x) {
    const int count = tcount[i];
    const unsigned start = count > 0 ? atomicAdd(stats + MSDA_STAT_FILED, static_cast<unsigned>(count)) : 0u;
    my_desc[static_cast<long long>(i) * chunks + chunk] = make_uint2(start, static_cast<unsigned>(count));
    tcount[i] = static_cast<int>(start);
  }
  __syncthreads();
  for (int slot = t; slot < MSDA_REC_N; slot += blockDim.x) {
    const unsigned key = rec[slot];
    if (key != 0xffffffffu)
      entries[tcount[key >> 16] + (key & 0xffffu)] = make_uint2(rec[MSDA_REC_N + slot], rec[2 * MSDA_REC_N + slot]);
  }
  __syncthreads();
}
#endif

// Grid: N * M * chunks blocks, chunks = ceil(Q / QPB), block b = (n * M + head) * chunks + chunk.
extern "C" __global__ void TMA_PLAN_MSDA_BWD_LAUNCH_BOUNDS
msda_bwd(const msda_t* __restrict__ value, const float* __restrict__ loc, const float* __restrict__ attn,
         const msda_t* __restrict__ grad_out,
#if MSDA_TILES
         uint2* __restrict__ entries, uint2* __restrict__ desc, unsigned* __restrict__ stats,
#elif MSDA_PLANES
         int* __restrict__ pkey, float4* __restrict__ pw,
#else
         gv_t* __restrict__ grad_value,
#endif
         float* __restrict__ grad_loc, float* __restrict__ grad_attn, const __grid_constant__ MsdaShapes sh,
         int queries, int spatial
#if MSDA_STAGED
         ,
         MSDA_BWD_MAP_PARAMS
#endif
) {
  const int chunks = (queries + MSDA_QPB - 1) / MSDA_QPB;
  const int chunk = blockIdx.x % chunks, nh = blockIdx.x / chunks;
  const int n = nh / MSDA_M, head = nh % MSDA_M;
  const int t = threadIdx.x, sub = t % MSDA_TPQ;
  int q = chunk * MSDA_QPB + t / MSDA_TPQ;
  const bool live = q < queries;  // the others follow the last query (shuffles), write nothing
  q = live ? q : queries - 1;
  const long long nqh = (static_cast<long long>(n) * queries + q) * MSDA_M + head;
#if MSDA_STAGED
  extern __shared__ unsigned char msda_raw[];
  unsigned char* acc = MsdaBwdPlan::msda_acc(MsdaBwdPlan::base(msda_raw));
  // The staged planes start at zero.
  for (unsigned i = t; i < tma_msda_acc::SMEM_BYTES / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(acc)[i] = make_uint4(0u, 0u, 0u, 0u);
  __syncthreads();
#endif
  const float2* xy = reinterpret_cast<const float2*>(loc) + nqh * MSDA_LP;
  const MsdaWeights weight = msda_weights(attn + nqh * MSDA_LP, sub);
  float g[MSDA_VEC];
  msda_unpack(__ldg(reinterpret_cast<const uint4*>(grad_out + nqh * MSDA_D + sub * MSDA_VEC)), g);
  // grad_out in the global reductions' channel order (msda_red_channel).
#if MSDA_BWD == 1
  float gr[MSDA_VEC];
#pragma unroll
  for (int j = 0; j < MSDA_VEC; ++j) gr[j] = msda_scalar(grad_out[nqh * MSDA_D + msda_red_channel(sub, j)]);
#endif
#if MSDA_STAGED
  // The shared-memory atomics of a warp's queries would all hit the same banks (a pixel's row is
  // 32 banks and every query's thread `sub` adds channels c .. c + VEC - 1 in the same order):
  // step k adds channel c + (k + r) % VEC, r the query's index in the warp: conflict-free.
  // gs[k] = g[(k + rot) % VEC] by a barrel shifter (static indices: a select chain on a dynamic
  // index went to local memory).
  const int rot = (t / MSDA_TPQ) % MSDA_VEC;
  float gs[MSDA_VEC];
#pragma unroll
  for (int k = 0; k < MSDA_VEC; ++k) gs[k] = g[k];
#pragma unroll
  for (int b = 1; b < MSDA_VEC; b *= 2) {
    float r[MSDA_VEC];
    const bool on = (rot & b) != 0;
#pragma unroll
    for (int k = 0; k < MSDA_VEC; ++k) r[k] = on ? gs[(k + b) % MSDA_VEC] : gs[k];
#pragma unroll
    for (int k = 0; k < MSDA_VEC; ++k) gs[k] = r[k];
  }
#if defined(TMA_DEBUG)
  // Each staged plane's extents are the level's (the host rendered the tiles for this problem).
  msda_for<0, MSDA_L>([&](auto lc) {
    constexpr int l = decltype(lc)::value;
    if constexpr (msda_slot<l>::staged) {
      typedef typename msda_slot<l>::acc_tile A;
      if (A::EXTENT_H != sh.h(l) || A::EXTENT_W != sh.w(l) || A::EXTENT_M != 1 || A::EXTENT_C != MSDA_D ||
          msda_slot<l>::acc_offset + A::SMEM_BYTES > tma_msda_acc::SMEM_BYTES) {
        if (t == 0)
          printf("msda_bwd: staged plane of level %d is [%d][%d][%d][%d] at +%u, the level [%d][%d][1][%d]\n", l,
                 A::EXTENT_H, A::EXTENT_W, A::EXTENT_M, A::EXTENT_C, msda_slot<l>::acc_offset, sh.h(l), sh.w(l),
                 MSDA_D);
        __trap();
      }
    }
  });
#endif
#endif
#if MSDA_TILES
  // Each corner's filing record (msda_file) and a count a tile of (n, head).
  extern __shared__ unsigned char msda_raw[];
  unsigned char* pbase = MsdaBwdPlan::base(msda_raw);
  unsigned* rec = reinterpret_cast<unsigned*>(MsdaBwdPlan::rec(pbase));
  int* tcount = reinterpret_cast<int*>(MsdaBwdPlan::tcount(pbase));
  const int tiles = msda_tiles_per_head(sh);
  for (int i = t; i < tiles; i += blockDim.x) tcount[i] = 0;
  __syncthreads();
  const int qloc = t / MSDA_TPQ;
  // The largest |weight| * max |grad_out| of this thread's points (as bits: NaN above inf).
  unsigned gmax = 0u, term_max = 0u;
#pragma unroll
  for (int j = 0; j < MSDA_VEC; ++j) gmax = max(gmax, __float_as_uint(fabsf(g[j])));
#pragma unroll
  for (int o = MSDA_TPQ / 2; o > 0; o /= 2) gmax = max(gmax, __shfl_xor_sync(0xffffffffu, gmax, o, MSDA_TPQ));
#endif
  float* ga = grad_attn + nqh * MSDA_LP;
  float2* gl = reinterpret_cast<float2*>(grad_loc) + nqh * MSDA_LP;
  const int c = sub * MSDA_VEC;
  msda_for<0, MSDA_L>([&](auto lc) {
    constexpr int l = decltype(lc)::value;
    const int H = sh.h(l), W = sh.w(l);
    const long long row0 = static_cast<long long>(n) * spatial + sh.start(l);
#if MSDA_PACKED
    // This level's grad_attn and grad_loc of points j * TPQ + sub (see MSDA_PACKED).
    constexpr int PPT = (MSDA_P + MSDA_TPQ - 1) / MSDA_TPQ;
    float held_a[PPT];
    float2 held_l[PPT];
#pragma unroll
    for (int j = 0; j < PPT; ++j) held_a[j] = 0.f, held_l[j] = make_float2(0.f, 0.f);
#endif
#pragma unroll MSDA_UNROLL
    for (int p = 0; p < MSDA_P; ++p) {
      const int i = l * MSDA_P + p;
      const MsdaPoint pt(__ldg(xy + i), H, W, weight(i), live);
      float dot[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int hh = pt.h0 + pt.dh(k), ww = pt.w0 + pt.dw(k);
        const long long off = ((row0 + hh * W + ww) * MSDA_M + head) * MSDA_D + c;
        float v[MSDA_VEC];
        msda_unpack(pt.in[k] ? __ldg(reinterpret_cast<const uint4*>(value + off)) : make_uint4(0u, 0u, 0u, 0u), v);
        float d = 0.f;
#pragma unroll
        for (int j = 0; j < MSDA_VEC; ++j) d = fmaf(g[j], v[j], d);
        dot[k] = d;
#if MSDA_TILES && !MSDA_FILE_ONE_STEP
        msda_file(rec, tcount, sh, l, i, k, sub == k % MSDA_TPQ, hh, ww, pt.in[k], pt.a * pt.wt(k), q, qloc, t % 32);
#endif
        if (!pt.in[k]) continue;
        const float scale = pt.a * pt.wt(k);
#if MSDA_STAGED
        if constexpr (msda_slot<l>::staged) {
          typedef typename msda_slot<l>::acc_tile A;
          float* plane = &A::at(acc + msda_slot<l>::acc_offset, {.N = 0, .H = hh, .W = ww, .M = 0, .C = c});
#pragma unroll
          for (int j = 0; j < MSDA_VEC; ++j) atomicAdd(plane + (j + rot) % MSDA_VEC, scale * gs[j]);
        } else
#endif
#if MSDA_BWD == 1
        {
          float s[MSDA_VEC];
#pragma unroll
          for (int j = 0; j < MSDA_VEC; ++j) s[j] = scale * gr[j];
          msda_red(grad_value + (off - c), sub, s);
        }
#else
        (void)scale;  // filed above (tiles), or summed by msda_bwd_planes
#endif
      }
#if MSDA_TILES && MSDA_FILE_ONE_STEP
      // Thread `sub` of the (query, head) files corner `sub` (and sub + TPQ, ...): one filing
      // step a point for the whole warp instead of one a corner (a match and an atomic each).
#pragma unroll
      for (int k0 = 0; k0 < 4; k0 += MSDA_TPQ) {
        const int k = k0 + sub;
        const int hh = pt.h0 + (k >> 1), ww = pt.w0 + (k & 1);
        const bool in = k < 4 && hh >= 0 && hh < H && ww >= 0 && ww < W;  // pt.in[k] (h0 = -2 outside)
        msda_file(rec, tcount, sh, l, i, k, k < 4, hh, ww, in, pt.a * pt.wt(k), q, qloc, t % 32);
      }
#endif
      float d_a;
      float2 g_loc;
      pt.grads<MSDA_TPQ>(dot, H, W, &d_a, &g_loc);
#if MSDA_PACKED
      // (every thread has the sums: the butterfly; a static index, so registers)
#pragma unroll
      for (int j = 0; j < PPT; ++j)
        if (p == j * MSDA_TPQ + sub) {
          held_a[j] = pt.a != 0.f ? d_a : 0.f;
          held_l[j] = g_loc;
        }
#else
      if (live && sub == 0) {
        ga[i] = pt.a != 0.f ? d_a : 0.f;
        gl[i] = g_loc;
      }
#endif
#if MSDA_PLANES
      // msda_bwd_planes' inputs: the point's key and its corners' weights (0 outside the level),
      // (batch, head, level) by (batch, head, level).
      if (live && sub == p % MSDA_TPQ) {
        const long long o = ((static_cast<long long>(nh) * MSDA_L + l) * queries + q) * MSDA_P + p;
        pkey[o] = pt.h0 < -1 ? -1 : (pt.h0 + 1) << MSDA_HIT_BITS | (pt.w0 + 1);
        pw[o] = make_float4(pt.in[0] ? pt.a * pt.wt(0) : 0.f, pt.in[1] ? pt.a * pt.wt(1) : 0.f,
                            pt.in[2] ? pt.a * pt.wt(2) : 0.f, pt.in[3] ? pt.a * pt.wt(3) : 0.f);
      }
#endif
#if MSDA_TILES
      const float w = weight(i);
      if (live) term_max = max(term_max, __float_as_uint(fabsf(w) * __uint_as_float(gmax)));
#endif
    }
#if MSDA_PACKED
    // The level's gradients, TPQ consecutive points a step of a (query, head)'s threads.
#pragma unroll
    for (int j = 0; j < PPT; ++j) {
      const int p = j * MSDA_TPQ + sub;
      if (live && p < MSDA_P) {
        ga[l * MSDA_P + p] = held_a[j];
        gl[l * MSDA_P + p] = held_l[j];
      }
    }
#endif
#if MSDA_TILES && MSDA_FILE_BY_LEVEL
    // This level's tiles' entries (the next level reuses rec).
    msda_flush(rec, tcount, msda_tile_first(sh, l), msda_tile_first(sh, l + 1), stats, entries, desc, nh, tiles,
               chunks, chunk);
#endif
  });
  msda_softmax_grad<MSDA_TPQ>(ga, weight, sub, live);
#if MSDA_TILES && MSDA_DETERMINISTIC
  // One atomic a warp: the fixed-point scale's largest term.
#pragma unroll
  for (int o = 16; o > 0; o /= 2) term_max = max(term_max, __shfl_xor_sync(0xffffffffu, term_max, o));
  if (t % 32 == 0) atomicMax(stats + MSDA_STAT_TERM, term_max);
#endif
#if MSDA_TILES && !MSDA_FILE_BY_LEVEL
  // Every tile's entries of this block (desc[(n, head, tile)][chunk]).
  msda_flush(rec, tcount, 0, tiles, stats, entries, desc, nh, tiles, chunks, chunk);
#endif
#if MSDA_STAGED
  __syncthreads();  // every shared-memory atomic is done
#if MSDA_GRAD16
  // The f32 planes into msda_t (the tile set msda_out), 8 elements a step.
  unsigned char* out = MsdaBwdPlan::msda_out(MsdaBwdPlan::base(msda_raw));
  msda_for<0, MSDA_L>([&](auto lc) {
    constexpr int l = decltype(lc)::value;
    if constexpr (msda_slot<l>::staged) {
      typedef typename msda_slot<l>::acc_tile A;
      const float* src = reinterpret_cast<const float*>(acc + msda_slot<l>::acc_offset);
      msda_t* dst = reinterpret_cast<msda_t*>(out + msda_slot<l>::out_offset);
      for (unsigned i = t; i < A::TX_BYTES / 4 / 8; i += blockDim.x) {
        float f[8];
        const float4 x = reinterpret_cast<const float4*>(src)[2 * i];
        const float4 y = reinterpret_cast<const float4*>(src)[2 * i + 1];
        f[0] = x.x, f[1] = x.y, f[2] = x.z, f[3] = x.w, f[4] = y.x, f[5] = y.y, f[6] = y.z, f[7] = y.w;
        reinterpret_cast<uint4*>(dst)[i] = msda_pack(f);
      }
    }
  });
#endif
  // Every writer's shared memory is visible to the async proxy, then one thread reduces each
  // staged plane into grad_value with one box and waits until the boxes are read.
  tma_async_proxy_fence();
  __syncthreads();
  if (t == 0) {
    const CUtensorMap* maps[MSDA_STAGED] = {MSDA_BWD_MAP_PTRS};
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int l = decltype(lc)::value;
      if constexpr (msda_slot<l>::staged) {
#if MSDA_GRAD16
        typedef typename msda_slot<l>::out_tile T;
        const unsigned char* src = out + msda_slot<l>::out_offset;
#else
        typedef typename msda_slot<l>::acc_tile T;
        const unsigned char* src = acc + msda_slot<l>::acc_offset;
#endif
        T::reduce_add(maps[msda_slot<l>::index], src, {.N = n, .H = 0, .W = 0, .M = head, .C = 0});
      }
    });
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
#endif
}
#if MSDA_TILES
// ---------------------------------------------------------------------------------------------
// msda_bwd_tiles: grad_value as a gather (see the top of the file). The block's shared memory is
// its kernel plan's scratch regions (bwd.rs sizes them from the same numbers).
constexpr int MSDA_CHUNK_ENTRIES = 4 * MSDA_TILE_THREADS;  // entries a chunk: 4 a thread
constexpr int MSDA_NV = MSDA_CPT / MSDA_VEC;                // 16-byte loads an entry
#ifndef MSDA_HEAVY_BYTES
#define MSDA_HEAVY_BYTES 16384
#endif
// Pixels of more than MSDA_HEAVY entries in a chunk are summed by a warp (at most MSDA_HEAVY_CAP
// of them a chunk: their sums wait in shared memory for the pixel's thread).
constexpr int MSDA_HEAVY_CAP = MSDA_HEAVY_BYTES / (MSDA_D * 8);
constexpr int MSDA_HEAVY = MSDA_CHUNK_ENTRIES / MSDA_HEAVY_CAP > 32 ? MSDA_CHUNK_ENTRIES / MSDA_HEAVY_CAP : 32;
// MSDA_AGG: msda_bwd_tiles' shared-memory accesses without the avoidable bank conflicts.
// - A warp's entries take their ranks with one atomic a distinct pixel (__match_any_sync, as
//   the filing does), not one an entry: a warp's 32 entries of a 16- or 32-pixel tile (levels
//   2 and 3 split) are at most 32 distinct pixels, one bank each, where 32 atomics put ~2 on
//   the busiest bank (a pixel's, serialised); clustered points are 1-4 pixels a warp.
// - hist and off are indexed by msda_px(p) = p + p / 32 (a word of padding a 32): corners
//   (h, w) and (h + 1, w) are W pixels apart, the same bank when W is a multiple of 32 (the
//   seed's level 0, W = 160), 5 banks apart padded.
// - a heavy pixel's row of hsum is D + 1 elements, so that the pixels of one warp (2 at split
//   16) read channel c from different banks instead of one.
#ifndef MSDA_AGG
#define MSDA_AGG 0
#endif
__device__ __forceinline__ int msda_px(int p) { return MSDA_AGG ? p + (p >> 5) : p; }
constexpr int MSDA_PX_WORDS = MSDA_AGG ? MSDA_TILE_PIXELS + MSDA_TILE_PIXELS / 32 : MSDA_TILE_PIXELS;
constexpr int MSDA_HSTRIDE = MSDA_AGG ? MSDA_D + 1 : MSDA_D;  // hsum's row, elements
static_assert(MSDA_CPT % MSDA_VEC == 0 && MSDA_D % MSDA_CPT == 0, "a thread's channels are whole 16-byte vectors");
static_assert(MSDA_TILE_THREADS % 32 == 0, "whole warps");
static_assert(MSDA_HEAVY_CAP >= 1 && MSDA_CHUNK_ENTRIES / (MSDA_HEAVY + 1) < MSDA_HEAVY_CAP, "heavy pixels fit");
typedef tma_plan_msda_bwd_tiles MsdaTilesPlan;
static_assert(MsdaTilesPlan::BYTES_hist >= MSDA_PX_WORDS * 4 && MsdaTilesPlan::BYTES_off >= MSDA_PX_WORDS * 4 &&
                  MsdaTilesPlan::BYTES_slot >= MSDA_TILE_PIXELS * 4 && MsdaTilesPlan::BYTES_list >= MSDA_CHUNK_ENTRIES * 8 &&
                  MsdaTilesPlan::BYTES_heavy >= (MSDA_HEAVY_CAP + 1) * 4 &&
                  MsdaTilesPlan::BYTES_hsum >= MSDA_HEAVY_CAP * MSDA_HSTRIDE * 8,
              "the plan's scratch regions hold the kernel's arrays");

// The deterministic sums' fixed point: a term t becomes round(t * 2^shift) in 64 bits, shift
// such that bound = Q * P * max |weight| * max |grad_out| (no pixel of a (batch, head, level)
// takes more than Q * P terms: a point's 4 corners are 4 pixels) stays below 2^61. Integer sums
// are exact, so every order gives the same bits. A bound that is not finite: f32 sums (NaN
// and inf propagate as in the fast mode).
struct MsdaFixed {
  float scale = 1.f, inv = 1.f;
  bool exact = false;
  MsdaFixed() = default;
  __device__ __forceinline__ MsdaFixed(const unsigned* __restrict__ stats, int queries) {
    const float bound = static_cast<float>(queries) * MSDA_P * __uint_as_float(stats[MSDA_STAT_TERM]);
    exact = bound <= 3.0e38f;
    int e = 0;
    if (exact && bound > 0.f) frexpf(bound, &e);  // bound < 2^e
    const int shift = min(61 - e, 126);            // >= -67: 2^shift and 2^-shift are normal floats
    scale = __int_as_float((127 + shift) << 23);
    inv = __int_as_float((127 - shift) << 23);
  }
};

template <bool EXACT>
struct MsdaAcc {
  typedef float type;
  static __device__ __forceinline__ float term(float x, float) { return x; }
  static __device__ __forceinline__ float value(float a, float) { return a; }
};
template <>
struct MsdaAcc<true> {
  typedef long long type;
  static __device__ __forceinline__ long long term(float x, float scale) { return __float2ll_rn(x * scale); }
  static __device__ __forceinline__ float value(long long a, float inv) { return __ll2float_rn(a) * inv; }
};

// acc[j] += term(w * row[j]) over n 16-byte vectors of grad_out.
template <bool EXACT, int N>
__device__ __forceinline__ void msda_tile_add(typename MsdaAcc<EXACT>::type* acc, const msda_t* __restrict__ row,
                                              float w, float scale) {
#pragma unroll
  for (int v = 0; v < N; ++v) {
    float g[MSDA_VEC];
    msda_unpack(__ldg(reinterpret_cast<const uint4*>(row) + v), g);
#pragma unroll
    for (int j = 0; j < MSDA_VEC; ++j) acc[v * MSDA_VEC + j] += MsdaAcc<EXACT>::term(w * g[j], scale);
  }
}

template <bool EXACT>
__device__ __forceinline__ void msda_tiles_body(const uint2* __restrict__ entries, const uint2* __restrict__ desc,
                                                const msda_t* __restrict__ grad_out, gv_t* __restrict__ grad_value,
                                                const MsdaShapes& sh, int queries, int spatial, const MsdaFixed& fx) {
  typedef typename MsdaAcc<EXACT>::type acc_t;
  extern __shared__ unsigned char msda_raw[];
  unsigned char* base = MsdaTilesPlan::base(msda_raw);
  int* hist = reinterpret_cast<int*>(MsdaTilesPlan::hist(base));   // a chunk's entries a pixel
  int* off = reinterpret_cast<int*>(MsdaTilesPlan::off(base));     // their first slot in list
  int* slot = reinterpret_cast<int*>(MsdaTilesPlan::slot(base));   // a heavy pixel's row of hsum
  uint2* list = reinterpret_cast<uint2*>(MsdaTilesPlan::list(base));  // (query, weight bits)
  int* heavy = reinterpret_cast<int*>(MsdaTilesPlan::heavy(base));    // [0]: count; then pixels
  acc_t* hsum = reinterpret_cast<acc_t*>(MsdaTilesPlan::hsum(base));  // [MSDA_HEAVY_CAP][HSTRIDE]
  uint2* segs = reinterpret_cast<uint2*>(MsdaTilesPlan::segs(base));  // (start, count) a point block
  int* seg_first = reinterpret_cast<int*>(MsdaTilesPlan::seg_first(base));  // their prefix

  // This block's (batch, head) and tile (of the level `l`, first pixel tile0).
  const int tiles = msda_tiles_per_head(sh);
  const int nh = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  int l = 0;
  while (l < MSDA_L - 1 && tile >= msda_tile_first(sh, l + 1)) ++l;
  const int n = nh / MSDA_M, head = nh % MSDA_M;
  const int tile0 = (tile - msda_tile_first(sh, l)) * msda_tile_pixels(l);
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  // The pixel (of the tile) this thread sums, which of its `split` threads (every split-th of
  // the pixel's entries from `share`), and its channels. The split threads of a pixel are lanes
  // TPP apart in one warp.
  const int split = msda_tile_split(l), tpx = MSDA_TPP * split;
  const int px = t / tpx, share = (t / MSDA_TPP) % split, sub = t % MSDA_TPP;
#if defined(TMA_DEBUG)
  if (tpx > 32 || MSDA_TILE_THREADS % tpx != 0) {
    if (t == 0) printf("msda_bwd_tiles: level %d splits a pixel over %d threads (TPP %d): above a warp\n", l, tpx, MSDA_TPP);
    __trap();
  }
#endif
  const long long nq0 = static_cast<long long>(n) * queries;

  // The tile's segments: one per point block of (n, head) (msda_bwd filed them), concatenated.
  const int point_blocks = (queries + MSDA_QPB - 1) / MSDA_QPB;
  const uint2* my = desc + (static_cast<long long>(nh) * tiles + tile) * point_blocks;
  int entries_n = 0;
  for (int s0 = 0; s0 < point_blocks; s0 += MSDA_TILE_THREADS) {
    const uint2 d = s0 + t < point_blocks ? my[s0 + t] : make_uint2(0u, 0u);
    int total;
    const int before = msda_block_scan(static_cast<int>(d.y), &total);
    if (s0 + t < point_blocks) {
      segs[s0 + t] = d;
      seg_first[s0 + t] = entries_n + before;
    }
    entries_n += total;
  }
  __syncthreads();

  acc_t acc[MSDA_CPT];
#pragma unroll
  for (int c = 0; c < MSDA_CPT; ++c) acc[c] = 0;

  for (int e0 = 0; e0 < entries_n; e0 += MSDA_CHUNK_ENTRIES) {
    // 1. Four entries a thread: each one's rank among its pixel's (a count a pixel).
    if (t < MSDA_TILE_PIXELS) hist[msda_px(t)] = 0;
    if (t == 0) heavy[0] = 0;
    __syncthreads();
    uint2 en[4];
    int rank[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = e0 + j * MSDA_TILE_THREADS + t;
      rank[j] = -1;
      if (e < entries_n) {
        int lo = 0, hi = point_blocks - 1;  // the last segment starting at or before e
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (seg_first[mid] <= e) lo = mid; else hi = mid - 1;
        }
        // (an empty segment starts where the next one does: the last such start is a full one)
        en[j] = __ldg(entries + segs[lo].x + (e - seg_first[lo]));
#if !MSDA_AGG
        rank[j] = atomicAdd(hist + (en[j].x & 1023u), 1);
#endif
      }
#if MSDA_AGG
      // (every lane: the entries past the end as key -1)
      const int key = e < entries_n ? static_cast<int>(en[j].x & 1023u) : -1;
      const unsigned peers = __match_any_sync(0xffffffffu, key);
      const int leader = __ffs(peers) - 1;
      int first = 0;
      if (key >= 0 && lane == leader) first = atomicAdd(hist + msda_px(key), __popc(peers));
      first = __shfl_sync(0xffffffffu, first, leader);
      if (key >= 0) rank[j] = first + __popc(peers & ((1u << lane) - 1u));
#endif
    }
    __syncthreads();
    // 2. Offsets (one scan), and the heavy pixels listed.
    {
      const int c = t < MSDA_TILE_PIXELS ? hist[msda_px(t)] : 0;
      int total;
      const int before = msda_block_scan(c, &total);
      if (t < MSDA_TILE_PIXELS) {
        off[msda_px(t)] = before;
        if (c > MSDA_HEAVY) {
          const int h = atomicAdd(heavy, 1);
          heavy[1 + h] = t;
          slot[t] = h;
        }
      }
    }
    __syncthreads();
    // 3. The entries, sorted by pixel: (query, weight).
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (rank[j] >= 0) list[off[msda_px(en[j].x & 1023u)] + rank[j]] = make_uint2(en[j].x >> 10, en[j].y);
    __syncthreads();
    // 4. A pixel's thread sums its entries; a warp sums each heavy pixel.
    const int count = hist[msda_px(px)], first = off[msda_px(px)];
    if (count <= MSDA_HEAVY) {
      for (int e = first + share; e < first + count; e += split) {
        const uint2 q = list[e];
        const msda_t* row = grad_out + ((nq0 + q.x) * MSDA_M + head) * MSDA_D + sub * MSDA_CPT;
        msda_tile_add<EXACT, MSDA_NV>(acc, row, __uint_as_float(q.y), fx.scale);
      }
    }
    const int n_heavy = heavy[0];
    for (int hw = warp; hw < n_heavy * MSDA_TPP; hw += MSDA_TILE_THREADS / 32) {
      // Lane: 16-byte vector v = lane % NV of the channels, every (32 / NV)-th entry from lane / NV.
      const int h = hw / MSDA_TPP, hsub = hw % MSDA_TPP, hpx = heavy[1 + h];
      const int v = lane % MSDA_NV;
      acc_t part[MSDA_VEC];
#pragma unroll
      for (int j = 0; j < MSDA_VEC; ++j) part[j] = 0;
      const int hfirst = off[msda_px(hpx)], hend = hfirst + hist[msda_px(hpx)];
      for (int e = hfirst + lane / MSDA_NV; e < hend; e += 32 / MSDA_NV) {
        const uint2 q = list[e];
        const msda_t* row = grad_out + ((nq0 + q.x) * MSDA_M + head) * MSDA_D + hsub * MSDA_CPT + v * MSDA_VEC;
        msda_tile_add<EXACT, 1>(part, row, __uint_as_float(q.y), fx.scale);
      }
      // The lanes of one vector (NV apart) add up; lanes 0 .. NV - 1 hold the sums.
#pragma unroll
      for (int o = 16; o >= MSDA_NV; o /= 2)
#pragma unroll
        for (int j = 0; j < MSDA_VEC; ++j) part[j] += __shfl_xor_sync(0xffffffffu, part[j], o);
      if (lane < MSDA_NV)
#pragma unroll
        for (int j = 0; j < MSDA_VEC; ++j) hsum[h * MSDA_HSTRIDE + hsub * MSDA_CPT + v * MSDA_VEC + j] = part[j];
    }
    __syncthreads();
    if (count > MSDA_HEAVY && share == 0) {
#pragma unroll
      for (int c = 0; c < MSDA_CPT; ++c) acc[c] += hsum[slot[px] * MSDA_HSTRIDE + sub * MSDA_CPT + c];
    }
    __syncthreads();  // hist, off, heavy and hsum are the next chunk's
  }
  // 5. The split threads' sums added up (a fixed butterfly: the same order every run), and the
  // pixel's row of grad_value written once, in the storage type.
  for (int o = MSDA_TPP; o < tpx; o *= 2)
#pragma unroll
    for (int c = 0; c < MSDA_CPT; ++c) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], o);
  if (share == 0 && tile0 + px < sh.h(l) * sh.w(l)) {
    gv_t* out = grad_value + ((static_cast<long long>(n) * spatial + sh.start(l) + tile0 + px) * MSDA_M + head) * MSDA_D +
                sub * MSDA_CPT;
#pragma unroll
    for (int v = 0; v < MSDA_NV; ++v) {
      float f[MSDA_VEC];
#pragma unroll
      for (int j = 0; j < MSDA_VEC; ++j) f[j] = MsdaAcc<EXACT>::value(acc[v * MSDA_VEC + j], fx.inv);
      reinterpret_cast<uint4*>(out)[v] = msda_pack(f);
    }
  }
}

// Grid: N * M * msda_tiles_per_head blocks.
extern "C" __global__ void TMA_PLAN_MSDA_BWD_TILES_LAUNCH_BOUNDS
msda_bwd_tiles(const uint2* __restrict__ entries, const uint2* __restrict__ desc, const msda_t* __restrict__ grad_out,
               gv_t* __restrict__ grad_value, const unsigned* __restrict__ stats,
               const __grid_constant__ MsdaShapes sh, int queries, int spatial) {
#if MSDA_DETERMINISTIC
  const MsdaFixed fx(stats, queries);
  if (fx.exact) {
    msda_tiles_body<true>(entries, desc, grad_out, grad_value, sh, queries, spatial, fx);
    return;
  }
#else
  (void)stats;
  const MsdaFixed fx;
#endif
  msda_tiles_body<false>(entries, desc, grad_out, grad_value, sh, queries, spatial, fx);
}
#endif  // MSDA_TILES

#if MSDA_PLANES
#ifndef MSDA_PLANE_ROWS
#define MSDA_PLANE_ROWS 0
#endif
// MSDA_PLANE_ROWS: msda_bwd_rows sorts each (batch, head, level)'s points by their key's row
// r = h0 + 1 (in [0, H]), so that a box of msda_bwd_planes reads the points of its rows only,
// not every point of its level (a level of H rows in boxes of TH reads them H / TH times).
// A bin holds the rows r with r >> shift equal (shift the least with (H >> shift) < MSDA_ROW_BINS).
#ifndef MSDA_ROW_BINS
#error "MSDA_ROW_BINS: bwd.rs renders it (ROW_BINS)"
#endif
__device__ __forceinline__ int msda_row_shift(int H) {
  int s = 0;
  while ((H >> s) >= MSDA_ROW_BINS) ++s;
  return s;
}
// A key's bin (its row r = h0 + 1, bits 14..27), or -1 for a point outside the level.
__device__ __forceinline__ int msda_row_bin(int key, int shift) {
  return key < 0 ? -1 : ((key >> MSDA_HIT_BITS) & ((1 << MSDA_HIT_BITS) - 1)) >> shift;
}

#if MSDA_PLANE_ROWS
// A block per (batch, head, level) (nh * L + l), MSDA_ROWS_THREADS threads: the level's points
// inside it, as (key, point) pairs, sorted by bin and stably (point order within a bin):
// sorted[(nh * L + l) * Q P + k]; bins[(nh * L + l) * (MSDA_ROW_BINS + 1) + b] the first k of
// bin b, and bins[.. + (H >> shift) + 1] the count. A counting sort in which each warp takes a
// contiguous range of the points: it counts its range's bins (cnt[bin][warp], its own column),
// one block scan over (bin, warp) gives each warp its place in each bin, and the warp walks its
// range again, 32 points a step, each one's place its warp's next in its bin + the same bin's
// points in its step before it (__match_any_sync). Two barriers in all.
constexpr int MSDA_ROWS_THREADS = tma_plan_msda_bwd_rows::BLOCK_THREADS;
constexpr int MSDA_ROWS_WARPS = MSDA_ROWS_THREADS / 32;
constexpr int MSDA_ROWS_AHEAD = 8;  // steps of keys a warp loads at once
constexpr int MSDA_ROWS_CELLS = MSDA_ROWS_WARPS * MSDA_ROW_BINS / MSDA_ROWS_THREADS;  // (bin, warp) cells a thread scans
static_assert(MSDA_ROWS_THREADS % 32 == 0 && MSDA_ROWS_WARPS * MSDA_ROW_BINS % MSDA_ROWS_THREADS == 0 &&
                  MSDA_ROWS_WARPS % MSDA_ROWS_CELLS == 0,
              "whole warps; a thread's cells are one bin's");
// A warp's MSDA_ROWS_AHEAD steps of 32 keys from s0 (lane's key of step k in kb[k]; -1 past
// p1): both of msda_bwd_rows' passes read the keys so.
__device__ __forceinline__ void msda_rows_keys(const int* __restrict__ keys, int s0, int p1, int lane,
                                               int (&kb)[MSDA_ROWS_AHEAD]) {
#pragma unroll
  for (int k = 0; k < MSDA_ROWS_AHEAD; ++k) {
    const int i = s0 + k * 32 + lane;
    kb[k] = i < p1 ? __ldg(keys + i) : -1;
  }
}
extern "C" __global__ void TMA_PLAN_MSDA_BWD_ROWS_LAUNCH_BOUNDS msda_bwd_rows(const int* __restrict__ pkey,
                                                                           int2* __restrict__ sorted,
                                                                           int* __restrict__ bins,
                                                                           const __grid_constant__ MsdaShapes sh,
                                                                           int queries) {
  // (a row of cnt one int longer than the warps: a step's distinct bins on distinct banks)
  __shared__ int cnt[MSDA_ROW_BINS][MSDA_ROWS_WARPS + 1], sums[32];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int l = static_cast<int>(blockIdx.x) % MSDA_L;
  const int shift = msda_row_shift(sh.h(l)), nbins = (sh.h(l) >> shift) + 1;
  const int points = queries * MSDA_P;
  const long long first = static_cast<long long>(blockIdx.x) * points;
  const int* keys = pkey + first;
  int2* out = sorted + first;
  int* off = bins + static_cast<long long>(blockIdx.x) * (MSDA_ROW_BINS + 1);
  for (int i = t; i < MSDA_ROW_BINS * (MSDA_ROWS_WARPS + 1); i += MSDA_ROWS_THREADS) (&cnt[0][0])[i] = 0;
  // This warp's range of the points, whole steps of 32.
  const int per = (points + MSDA_ROWS_WARPS * 32 - 1) / (MSDA_ROWS_WARPS * 32) * 32;
  const int p0 = min(warp * per, points), p1 = min(p0 + per, points);
  const unsigned below = (1u << lane) - 1u;
  __syncthreads();
  // (MSDA_ROWS_AHEAD steps' keys loaded at once, then counted a step at a time)
  for (int s0 = p0; s0 < p1; s0 += MSDA_ROWS_AHEAD * 32) {
    int kb[MSDA_ROWS_AHEAD];
    msda_rows_keys(keys, s0, p1, lane, kb);
    // (a count does not depend on the order of its adds: integer atomics, native in shared memory)
#pragma unroll
    for (int k = 0; k < MSDA_ROWS_AHEAD; ++k) {
      const int b = msda_row_bin(kb[k], shift);
      if (b >= 0) atomicAdd(&cnt[b][warp], 1);
    }
  }
  __syncthreads();
  // Each thread's MSDA_ROWS_CELLS cells, (bin, warp) in order: their exclusive prefix.
  const int cb = t * MSDA_ROWS_CELLS / MSDA_ROWS_WARPS, cw = t * MSDA_ROWS_CELLS % MSDA_ROWS_WARPS;
  int mine = 0;
#pragma unroll
  for (int k = 0; k < MSDA_ROWS_CELLS; ++k) mine += cnt[cb][cw + k];
  int total;
  int at = msda_round_scan(mine, &total, sums);
  if (cw == 0 && cb < nbins) off[cb] = at;
  if (t == 0) off[nbins] = total;
#pragma unroll
  for (int k = 0; k < MSDA_ROWS_CELLS; ++k) {
    const int c = cnt[cb][cw + k];
    cnt[cb][cw + k] = at;
    at += c;
  }
  __syncthreads();
  for (int s0 = p0; s0 < p1; s0 += MSDA_ROWS_AHEAD * 32) {
    int kb[MSDA_ROWS_AHEAD];
    msda_rows_keys(keys, s0, p1, lane, kb);
    // The steps' groups first (independent), then their places a step at a time.
    int bs[MSDA_ROWS_AHEAD];
    unsigned peers[MSDA_ROWS_AHEAD];
#pragma unroll
    for (int k = 0; k < MSDA_ROWS_AHEAD; ++k) {
      bs[k] = msda_row_bin(kb[k], shift);
      peers[k] = __match_any_sync(0xffffffffu, bs[k]);
    }
#pragma unroll
    for (int k = 0; k < MSDA_ROWS_AHEAD; ++k) {
      const int b = bs[k];
      if (b >= 0) out[cnt[b][warp] + __popc(peers[k] & below)] = make_int2(kb[k], s0 + k * 32 + lane);
      __syncwarp();
      if (b >= 0 && lane == __ffs(peers[k]) - 1) cnt[b][warp] += __popc(peers[k]);
      __syncwarp();
    }
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// msda_bwd_planes: grad_value by owned planes (see the top of the file). Rendered by bwd.rs
// before this file: msda_plane_out<l>::type, level l's output tile (the level's [N][H][W][M][D]
// view of grad_value in msda_t, box [1][TH][TW][1][D]: one block's plane), and the launch's maps,
// one a level (MSDA_PLANE_MAP_PARAMS, MSDA_PLANE_MAP_PTRS). The block's shared memory is its
// kernel plan's scratch regions: `plane` (f32 sums, [TH][TW][D]; at the end the same plane in
// msda_t, in place), `priv` (the warps' private copies) and a round's hits (`hrec`).
static_assert(!MSDA_STAGED && MSDA_PACKED, "the plane design's point pass stages nothing and holds its gradients");
typedef tma_plan_msda_bwd_planes MsdaPlanesPlan;
#ifndef MSDA_ROUND
#define MSDA_ROUND 2  // points a thread reads a round
#endif
#ifndef MSDA_AHEAD
#error "MSDA_AHEAD: bwd.rs renders it (PLANES_AHEAD): hits whose loads a warp issues before adding them"
#endif
constexpr int MSDA_PT = MsdaPlanesPlan::BLOCK_THREADS;
constexpr int MSDA_PW = MSDA_PT / 32;
constexpr int MSDA_CPL = MSDA_D / 8;  // channels a lane: lane = corner * 8 + part, a corner's row in 8 parts
static_assert(MSDA_D % 32 == 0, "D is a multiple of 32: a lane adds whole float4s of a corner's row");
static_assert(MSDA_CPL * sizeof(msda_t) % 16 == 0 || MSDA_CPL * sizeof(msda_t) == 8,
              "a lane loads 8 or a multiple of 16 bytes of grad_out");
static_assert(MSDA_PT % 32 == 0 && MSDA_PT <= 1024, "whole warps, at most 1024 threads");
static_assert(MsdaPlanesPlan::BYTES_hrec >= MSDA_PT * MSDA_ROUND * 16, "a hit record a point of a round");
// Pixels of one warp's private copy.
constexpr int MSDA_PRIV_PX = MsdaPlanesPlan::BYTES_priv / (MSDA_PW * MSDA_D * 4);
constexpr int MSDA_NONE_LO = 0x7fffffff, MSDA_NONE_HI = -0x7fffffff - 1;  // an empty range's bounds
// A hit's owners: corner k's warp in bits 6k .. 6k + 5 (MSDA_NO_OWNER: not in the tile).
constexpr unsigned MSDA_NO_OWNER = 63u, MSDA_OWNER_ONES = 0x041041u, MSDA_OWNER_HIGHS = 0x820820u;

// Every level's box is one block's plane (f32 sums; the msda_t copy written over its first half).
template <int L>
constexpr bool msda_planes_fit() {
  if constexpr (L == MSDA_L) {
    return true;
  } else {
    typedef typename msda_plane_out<L>::type T;
    return T::EXTENT_N == 1 && T::EXTENT_M == 1 && T::EXTENT_C == MSDA_D &&
           T::EXTENT_H * T::EXTENT_W * MSDA_D * 4 <= MsdaPlanesPlan::BYTES_plane &&
           T::TX_BYTES == T::EXTENT_H * T::EXTENT_W * MSDA_D * sizeof(msda_t) && msda_planes_fit<L + 1>();
  }
}
static_assert(msda_planes_fit<0>(), "every level's box fits the plan's plane");

// Level l's box (th rows, tw columns).
__device__ __forceinline__ void msda_plane_box(int l, int& th, int& tw) {
  msda_for<0, MSDA_L>([&](auto lc) {
    constexpr int L = decltype(lc)::value;
    if (l == L) {
      th = msda_plane_out<L>::type::EXTENT_H;
      tw = msda_plane_out<L>::type::EXTENT_W;
    }
  });
}

// A hit, as phase 1 records it: its point (of the (batch, head, level)'s Q P), its corner 0's
// pixel in the tile (p00: corner k is p00 + (k >> 1) * tw + (k & 1)), its corners' owners, and
// its key (in-tile corners << 28 | (h0 + 1) << 14 | (w0 + 1)).
// What lane `lane` adds for one hit: its corner's weight (from the point pass's pw), its
// MSDA_CPL channels of the query's grad_out row (part lane % 8), and the hit's record.
struct MsdaHit {
  int4 rec;
  float w;
  float g[MSDA_CPL];
};
__device__ __forceinline__ MsdaHit msda_hit(const int4* hrec, int j, const float4* __restrict__ wts,
                                            const msda_t* __restrict__ go, int lane) {
  MsdaHit h;
  h.rec = hrec[j];
  h.w = __ldg(reinterpret_cast<const float*>(wts + h.rec.x) + lane / 8);
  const msda_t* row = go + (h.rec.x / MSDA_P) * (MSDA_M * MSDA_D) + (lane % 8) * MSDA_CPL;
  if constexpr (MSDA_CPL * sizeof(msda_t) % 16 == 0) {
#pragma unroll
    for (int v = 0; v < MSDA_CPL / MSDA_VEC; ++v) {
      float f[MSDA_VEC];
      msda_unpack(__ldg(reinterpret_cast<const uint4*>(row) + v), f);
#pragma unroll
      for (int e = 0; e < MSDA_VEC; ++e) h.g[v * MSDA_VEC + e] = f[e];
    }
  } else {  // 8 bytes: 4 16-bit channels
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(row));
    float f[MSDA_VEC];
    msda_unpack(make_uint4(u.x, u.y, 0u, 0u), f);
#pragma unroll
    for (int e = 0; e < MSDA_CPL; ++e) h.g[e] = f[e];
  }
  return h;
}
// The lane's part of row `row` of `plane` += w * g, when `take`.
__device__ __forceinline__ void msda_hit_add(float* plane, int row, const MsdaHit& h, int lane, bool take) {
  if (!take) return;
  float4* dst = reinterpret_cast<float4*>(plane + row * MSDA_D + (lane % 8) * MSDA_CPL);
#pragma unroll
  for (int v = 0; v < MSDA_CPL / 4; ++v) {
    float4 a = dst[v];
    a.x = fmaf(h.w, h.g[4 * v], a.x);
    a.y = fmaf(h.w, h.g[4 * v + 1], a.y);
    a.z = fmaf(h.w, h.g[4 * v + 2], a.z);
    a.w = fmaf(h.w, h.g[4 * v + 3], a.w);
    dst[v] = a;
  }
}

// Grid: for each level from the last (the densest first: they are the longest blocks), N * M *
// its tiles (ceil(H / TH) * ceil(W / TW)). pkey / pw: the point pass's keys and weights.
extern "C" __global__ void TMA_PLAN_MSDA_BWD_PLANES_LAUNCH_BOUNDS
msda_bwd_planes(const int* __restrict__ pkey, const float4* __restrict__ pw, const msda_t* __restrict__ grad_out,
                const int2* __restrict__ sorted, const int* __restrict__ bins, const __grid_constant__ MsdaShapes sh,
                int batch, int queries, MSDA_PLANE_MAP_PARAMS) {
  extern __shared__ unsigned char msda_raw[];
  unsigned char* base = MsdaPlanesPlan::base(msda_raw);
  float* plane = reinterpret_cast<float*>(MsdaPlanesPlan::plane(base));
  float* priv = reinterpret_cast<float*>(MsdaPlanesPlan::priv(base));
  int4* hrec = reinterpret_cast<int4*>(MsdaPlanesPlan::hrec(base));
  // A round's corners in the tile (least and greatest row, column) and its warps' hit counts,
  // two of each: round r uses [r % 2] (see msda_round_scan).
  __shared__ int bbox[2][4], sums[2][32];

  // This block's level, (batch, head) and tile.
  int b = blockIdx.x, l = MSDA_L - 1, th = 1, tw = 1, ntx = 1, nty = 1;
  for (;; --l) {
    msda_plane_box(l, th, tw);
    nty = (sh.h(l) + th - 1) / th;
    ntx = (sh.w(l) + tw - 1) / tw;
    const int blocks = batch * MSDA_M * nty * ntx;
    if (b < blocks || l == 0) break;
    b -= blocks;
  }
  const int nh = b / (nty * ntx), tile = b % (nty * ntx);
  const int n = nh / MSDA_M, head = nh % MSDA_M;
  const int H = sh.h(l), W = sh.w(l);
  const int ty0 = tile / ntx * th, tx0 = tile % ntx * tw;
  const int ty1 = min(ty0 + th, H), tx1 = min(tx0 + tw, W);
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
#if defined(TMA_DEBUG)
  if (n >= batch || ty0 >= H || tx0 >= W || th * tw * MSDA_D * 4 > static_cast<int>(MsdaPlanesPlan::BYTES_plane)) {
    if (t == 0)
      printf("msda_bwd_planes: block %d has tile (%d, %d) of %d x %d in level %d of [%d][%d] (batch %d of %d), %d bytes "
             "of plane for %u\n",
             blockIdx.x, ty0, tx0, th, tw, l, H, W, n, batch, th * tw * MSDA_D * 4, MsdaPlanesPlan::BYTES_plane);
    __trap();
  }
#endif
  const int pixels = th * tw;
  for (int i = t; i < pixels * MSDA_D; i += MSDA_PT) plane[i] = 0.f;
  for (int i = t; i < static_cast<int>(MsdaPlanesPlan::BYTES_priv / 4); i += MSDA_PT) priv[i] = 0.f;
  if (t < 8) bbox[t / 4][t % 4] = t % 2 == 0 ? MSDA_NONE_LO : MSDA_NONE_HI;
  // The tile's owners: a grid of gy x gx cells of pixels (gx a power of two up to the warps,
  // at most tw), warp cy * gx + cx owning cell (cy, cx); cy(y) = (y - ty0) * my >> 16 (and cx)
  // maps the rows (columns) onto [0, gy) monotonically. A hit's corners mostly share a cell.
  unsigned gx = 1;
  while (gx * 2 <= MSDA_PW && gx * 2 <= static_cast<unsigned>(tw)) gx *= 2;
  const unsigned gy = MSDA_PW / gx;
  const unsigned my = (gy << 16) / th, mx = (gx << 16) / tw;
  const int k = lane / 8;                           // this lane's corner
  const int koff = (k >> 1) * tw + (k & 1);         // its pixel from p00
  const int points = queries * MSDA_P;
  const long long first = static_cast<long long>(nh * MSDA_L + l) * points;
  const float4* wts = pw + first;
#if MSDA_PLANE_ROWS
  // The points of rows r in [ty0, ty1] (corner rows r - 1 and r meet the tile): bins
  // [ty0 >> shift, ty1 >> shift] of msda_bwd_rows' (key, point) pairs (a coarse bin may hold
  // a few more rows, which the tile test drops).
  (void)pkey;
  const int2* pairs = sorted + first;
  const int* off = bins + static_cast<long long>(nh * MSDA_L + l) * (MSDA_ROW_BINS + 1);
  const int shift = msda_row_shift(H);
  const int lo = __ldg(off + (ty0 >> shift)), hi = __ldg(off + (min(ty1, H) >> shift) + 1);
#if defined(TMA_DEBUG)
  if (lo < 0 || hi < lo || hi > points) {
    if (t == 0)
      printf("msda_bwd_planes: block %d (level %d, rows %d..%d) has sorted points [%d, %d) of %d\n", blockIdx.x, l,
             ty0, ty1, lo, hi, points);
    __trap();
  }
#endif
#else
  (void)sorted, (void)bins;
  const int* keys = pkey + first;
  const int lo = 0, hi = points;
#endif
  const msda_t* go = grad_out + (static_cast<long long>(n) * queries * MSDA_M + head) * MSDA_D;
  const unsigned my_owner = static_cast<unsigned>(warp) * MSDA_OWNER_ONES;
  for (int r0 = lo, parity = 0; r0 < hi; r0 += MSDA_PT * MSDA_ROUND, parity ^= 1) {
    int* box = bbox[parity];
    // 1. This thread's points of the round (r0 + j * PT + t): a hit when one of its corners
    // inside the level lies in the tile; the hits recorded in a fixed order (a block scan).
    int key[MSDA_ROUND], point[MSDA_ROUND];
#pragma unroll
    for (int j = 0; j < MSDA_ROUND; ++j) {
      const int i = r0 + j * MSDA_PT + t;
#if MSDA_PLANE_ROWS
      const int2 e = i < hi ? __ldg(pairs + i) : make_int2(-1, 0);
      key[j] = e.x, point[j] = e.y;
#else
      key[j] = i < hi ? __ldg(keys + i) : -1, point[j] = i;
#endif
    }
    unsigned hits = 0u, owners[MSDA_ROUND];
    int p00[MSDA_ROUND];
    int ya = MSDA_NONE_LO, yb = MSDA_NONE_HI, xa = MSDA_NONE_LO, xb = MSDA_NONE_HI;
#pragma unroll
    for (int j = 0; j < MSDA_ROUND; ++j) {
      const int y = ((key[j] >> MSDA_HIT_BITS) & ((1 << MSDA_HIT_BITS) - 1)) - 1;
      const int x = (key[j] & ((1 << MSDA_HIT_BITS) - 1)) - 1;
      const bool r0in = y >= ty0 && y < ty1, r1in = y + 1 >= ty0 && y + 1 < ty1;
      const bool c0in = x >= tx0 && x < tx1, c1in = x + 1 >= tx0 && x + 1 < tx1;
      const unsigned m = key[j] < 0 ? 0u
                                    : (r0in && c0in ? 1u : 0u) | (r0in && c1in ? 2u : 0u) | (r1in && c0in ? 4u : 0u) |
                                          (r1in && c1in ? 8u : 0u);
      // (unsigned: a corner outside the tile gives a meaningless cell, never used, not an overflow)
      const unsigned cy0 = static_cast<unsigned>(y - ty0) * my >> 16, cy1 = static_cast<unsigned>(y + 1 - ty0) * my >> 16;
      const unsigned cx0 = static_cast<unsigned>(x - tx0) * mx >> 16, cx1 = static_cast<unsigned>(x + 1 - tx0) * mx >> 16;
      owners[j] = (m & 1u ? cy0 * gx + cx0 : MSDA_NO_OWNER) | (m & 2u ? cy0 * gx + cx1 : MSDA_NO_OWNER) << 6 |
                  (m & 4u ? cy1 * gx + cx0 : MSDA_NO_OWNER) << 12 | (m & 8u ? cy1 * gx + cx1 : MSDA_NO_OWNER) << 18;
      p00[j] = (y - ty0) * tw + (x - tx0);
      if (m) {
        hits |= 1u << j;
        key[j] |= static_cast<int>(m << 28);
        ya = min(ya, r0in ? y : y + 1), yb = max(yb, r1in ? y + 1 : y);
        xa = min(xa, c0in ? x : x + 1), xb = max(xb, c1in ? x + 1 : x);
      }
    }
    int total;
    // (The scan's barrier: every thread is done with the previous round, its records and its
    // bbox; the round before that's bbox is reset for the next round.)
    const int before = msda_round_scan(__popc(hits), &total, sums[parity]);
    if (t < 4) bbox[parity ^ 1][t] = t % 2 == 0 ? MSDA_NONE_LO : MSDA_NONE_HI;
    if (total == 0) continue;  // (block-uniform)
    ya = __reduce_min_sync(0xffffffffu, ya), yb = __reduce_max_sync(0xffffffffu, yb);
    xa = __reduce_min_sync(0xffffffffu, xa), xb = __reduce_max_sync(0xffffffffu, xb);
    if (lane == 0 && ya <= yb) {
      atomicMin(box, ya), atomicMax(box + 1, yb), atomicMin(box + 2, xa), atomicMax(box + 3, xb);
    }
    {
      int pos = before;
#pragma unroll
      for (int j = 0; j < MSDA_ROUND; ++j)
        if (hits >> j & 1u) {
          hrec[pos++] = make_int4(point[j], p00[j], static_cast<int>(owners[j]), key[j]);
        }
    }
    __syncthreads();
    const int by0 = box[0], bh = box[1] - by0 + 1, bx0 = box[2], bw = box[3] - bx0 + 1;
    if (bh * bw <= MSDA_PRIV_PX && total >= 2 * MSDA_PW) {
      // 2a. Few pixels (clustered points): warp w adds hits [e0, e1) into its own copy of the
      // box of those pixels; then the copies are summed in warp order (and zeroed again).
      float* mine = priv + warp * (bh * bw) * MSDA_D;
      const int per = (total + MSDA_PW - 1) / MSDA_PW, e0 = warp * per, e1 = min(e0 + per, total);
      const int box0 = (by0 - ty0) * tw + (bx0 - tx0);  // the box's first pixel in the tile
      const auto add = [&](const MsdaHit& h) {
        const int p = h.rec.y + koff - box0;  // (y - by0) * tw + (x - bx0): the box's rows are tw apart
        msda_hit_add(mine, p / tw * bw + p % tw, h, lane, (static_cast<unsigned>(h.rec.w) >> (28 + k) & 1u) != 0u);
      };
      for (int e = e0; e < e1; e += 2) {  // two hits' loads, then their adds
        const MsdaHit h0 = msda_hit(hrec, e, wts, go, lane);
        const MsdaHit h1 = msda_hit(hrec, min(e + 1, e1 - 1), wts, go, lane);
        add(h0);
        __syncwarp();  // (a lane's add of h1 may read a pixel another lane wrote for h0)
        if (e + 1 < e1) add(h1);
        __syncwarp();
      }
      __syncthreads();
      for (int x = t; x < bh * bw * MSDA_D; x += MSDA_PT) {
        float s = 0.f;
#pragma unroll 4
        for (int w = 0; w < MSDA_PW; ++w) {
          s += priv[w * (bh * bw) * MSDA_D + x];
          priv[w * (bh * bw) * MSDA_D + x] = 0.f;
        }
        const int a = x / MSDA_D, c = x % MSDA_D;
        plane[((by0 - ty0 + a / bw) * tw + (bx0 - tx0 + a % bw)) * MSDA_D + c] += s;
      }
    } else {
      // 2b. Warp w adds the corners it owns of every hit, in the list's order (a window of 32
      // hits at a time; two hits' loads, then their adds).
      for (int h0 = 0; h0 < total; h0 += 32) {
        bool own = false;
        if (h0 + lane < total) {
          const unsigned x = static_cast<unsigned>(hrec[h0 + lane].z) ^ my_owner;  // a zero field: this warp's
          own = ((x - MSDA_OWNER_ONES) & ~x & MSDA_OWNER_HIGHS) != 0u;
        }
        const auto add = [&](const MsdaHit& h) {
          msda_hit_add(plane, h.rec.y + koff, h, lane,
                       (static_cast<unsigned>(h.rec.z) >> (6 * k) & MSDA_NO_OWNER) == static_cast<unsigned>(warp));
        };
        unsigned todo = __ballot_sync(0xffffffffu, own);
        while (todo) {
          // MSDA_AHEAD hits' loads at once (the last ones repeat the first when fewer are
          // left), then their adds in order.
          int js[MSDA_AHEAD];
#pragma unroll
          for (int q = 0; q < MSDA_AHEAD; ++q) {
            js[q] = todo ? h0 + __ffs(todo) - 1 : -1;
            todo &= todo - 1u;  // (0 stays 0)
          }
          MsdaHit hs[MSDA_AHEAD];
#pragma unroll
          for (int q = 0; q < MSDA_AHEAD; ++q) hs[q] = msda_hit(hrec, js[q] >= 0 ? js[q] : js[0], wts, go, lane);
#pragma unroll
          for (int q = 0; q < MSDA_AHEAD; ++q) {
            if (js[q] >= 0) add(hs[q]);
            __syncwarp();  // (a lane's add of the next hit may read a pixel another lane wrote)
          }
        }
      }
    }
  }
  // 3. The plane in the storage type (16-bit: over its own first half, a chunk of 8 elements a
  // thread at a time, every read of a chunk before any write), stored by one TMA box (the part
  // outside the level is clipped).
  __syncthreads();
#if MSDA_DTYPE != 2
  for (int v0 = 0; v0 < pixels * MSDA_D / 8; v0 += MSDA_PT) {
    const int v = v0 + t;
    uint4 packed = make_uint4(0u, 0u, 0u, 0u);
    if (v < pixels * MSDA_D / 8) {
      const float4 x = reinterpret_cast<const float4*>(plane)[2 * v];
      const float4 y = reinterpret_cast<const float4*>(plane)[2 * v + 1];
      const float f[MSDA_VEC] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
      packed = msda_pack(f);
    }
    __syncthreads();
    if (v < pixels * MSDA_D / 8) reinterpret_cast<uint4*>(plane)[v] = packed;
  }
#endif
  tma_async_proxy_fence();
  __syncthreads();
  if (t == 0) {
    const CUtensorMap* maps[MSDA_L] = {MSDA_PLANE_MAP_PTRS};
    msda_for<0, MSDA_L>([&](auto lc) {
      constexpr int L = decltype(lc)::value;
      if (l == L) msda_plane_out<L>::type::store(maps[L], plane, {.N = n, .H = ty0, .W = tx0, .M = head, .C = 0});
    });
    tma_store_commit_group();
    tma_store_async_wait<0>();
  }
}
#endif  // MSDA_PLANES
#endif

#if MSDA_CAST
// f32 -> msda_t, 8 elements a thread, grid-stride; `count` is a multiple of 8.
static_assert(tma_plan_msda_bwd_cast::BLOCK_THREADS == 256, "the plan's block is the kernel's");
static_assert(MSDA_DTYPE != 2, "f32 storage needs no cast");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_CAST_LAUNCH_BOUNDS msda_bwd_cast(const float* __restrict__ src,
                                                                             msda_t* __restrict__ dst,
                                                                             long long count) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count / 8;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float4 x = __ldg(reinterpret_cast<const float4*>(src) + 2 * i);
    const float4 y = __ldg(reinterpret_cast<const float4*>(src) + 2 * i + 1);
    const float f[MSDA_VEC] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
    reinterpret_cast<uint4*>(dst)[i] = msda_pack(f);
  }
}
#endif
