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
//   sorted          (MSDA_BWD 2) no floating-point atomics: the scatter becomes a gather. A bin is
//                   one (batch, head, pixel) row of grad_value; msda_bwd_count counts each bin's
//                   contributions (point corners inside the map), msda_bwd_scan_* turn the counts
//                   into offsets, msda_bwd (the point pass, msda_bwd's mapping and gradients of
//                   loc and attn) files each contribution (its grad_out row, its weight) at its
//                   bin's next free slot, and msda_bwd_gather sums each bin's entries into
//                   grad_value in the storage type (no f32 buffer, no cast, no zeroing); bins of
//                   more than MSDA_BIG entries (clustered points) are summed by msda_bwd_big, a
//                   block each. MSDA_DETERMINISTIC: the sums in 64-bit fixed point, scaled from
//                   the largest bin and the largest term (exact, so any order gives the same bits).

#define MSDA_SORTED (MSDA_BWD == 2)
#if MSDA_GRAD16 || MSDA_SORTED
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

// f32 -> msda_t, rounded to nearest even.
__device__ __forceinline__ msda_t msda_from_f32(float f) {
#if MSDA_DTYPE == 2
  return f;
#else
  unsigned short h;
#if MSDA_DTYPE == 1
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
  asm("{ .reg .f16 r;\n\t cvt.rn.f16.f32 r, %1;\n\t mov.b16 %0, r; }" : "=h"(h) : "f"(f));
#endif
  return h;
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
};

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
      float d_a = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) d_a += pt.wt(k) * dot[k];
      const float d_fw = (1.f - pt.lh) * (dot[1] - dot[0]) + pt.lh * (dot[3] - dot[2]);
      const float d_fh = (1.f - pt.lw) * (dot[2] - dot[0]) + pt.lw * (dot[3] - dot[1]);
      d_a = msda_sum<32>(d_a);
      const float gx = msda_sum<32>(pt.a * d_fw) * static_cast<float>(W);
      const float gy = msda_sum<32>(pt.a * d_fh) * static_cast<float>(H);
      if (lane == 0) {
        ga[i] = pt.a != 0.f ? d_a : 0.f;
        gl[i] = make_float2(gx, gy);
      }
    }
  }
  msda_softmax_grad<32>(ga, weight, lane, true);
}

#else
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

#if MSDA_SORTED
static_assert(!MSDA_STAGED, "the sorted design stages nothing");
// stats[]: the largest bin's entries, the largest |term| (f32 bits), entries lost (a bin whose
// count and filing disagree: 0 unless the two passes' corner tests differ), bins of more than
// MSDA_BIG entries (listed in `big`).
#define MSDA_STAT_COUNT 0
#define MSDA_STAT_TERM 1
#define MSDA_STAT_LOST 2
#define MSDA_STAT_BIG 3
#define MSDA_STATS 4
#ifndef MSDA_BIG
#define MSDA_BIG 64  // entries of the largest bin msda_bwd_gather sums
#endif
#ifndef MSDA_DETERMINISTIC
#define MSDA_DETERMINISTIC 0
#endif

// A contribution counted but not filed, or filed but not counted: a named record in debug
// builds (the trap stops the operator), a count the host reads otherwise.
__device__ __forceinline__ void msda_sorted_lost(unsigned* stats, const char* kernel, int bin) {
  atomicAdd(stats + MSDA_STAT_LOST, 1u);
#if defined(TMA_DEBUG)
  printf("%s: bin %d's count and its filed entries disagree (the count pass and the point pass saw different corners)\n",
         kernel, bin);
  __trap();
#else
  (void)kernel, (void)bin;
#endif
}

// The bins of (n, head): key (n * M + head) * spatial + pixel; grad_value's row of a bin.
__device__ __forceinline__ long long msda_bin_row(int bin, int spatial) {
  const int nh = bin / spatial, s = bin % spatial;
  return (static_cast<long long>(nh / MSDA_M) * spatial + s) * MSDA_M + nh % MSDA_M;
}
#endif

// Grid: N * M * chunks blocks, chunks = ceil(Q / QPB), block b = (n * M + head) * chunks + chunk.
extern "C" __global__ void TMA_PLAN_MSDA_BWD_LAUNCH_BOUNDS
msda_bwd(const msda_t* __restrict__ value, const float* __restrict__ loc, const float* __restrict__ attn,
         const msda_t* __restrict__ grad_out,
#if MSDA_SORTED
         uint2* __restrict__ entries, int* __restrict__ cursor, const int* __restrict__ offsets,
         unsigned* __restrict__ stats,
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
  float gr[MSDA_VEC];
#pragma unroll
  for (int j = 0; j < MSDA_VEC; ++j) gr[j] = msda_scalar(grad_out[nqh * MSDA_D + msda_red_channel(sub, j)]);
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
#if MSDA_SORTED
  // The largest |weight * grad_out| this thread files (as bits: NaN above inf above finite).
  unsigned gmax = 0u, term_max = 0u;
#pragma unroll
  for (int j = 0; j < MSDA_VEC; ++j) gmax = max(gmax, __float_as_uint(fabsf(g[j])));
#pragma unroll
  for (int o = MSDA_TPQ / 2; o > 0; o /= 2) gmax = max(gmax, __shfl_xor_sync(0xffffffffu, gmax, o, MSDA_TPQ));
  const int bin0 = (n * MSDA_M + head) * spatial;
#endif
  float* ga = grad_attn + nqh * MSDA_LP;
  float2* gl = reinterpret_cast<float2*>(grad_loc) + nqh * MSDA_LP;
  const int c = sub * MSDA_VEC;
  msda_for<0, MSDA_L>([&](auto lc) {
    constexpr int l = decltype(lc)::value;
    const int H = sh.h(l), W = sh.w(l);
    const long long row0 = static_cast<long long>(n) * spatial + sh.start(l);
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
#if MSDA_SORTED
        // Corner k is filed by thread k % TPQ of the (query, head).
        if (sub == k % MSDA_TPQ) {
          const int bin = bin0 + sh.start(l) + hh * W + ww;
          const int left = atomicSub(cursor + bin, 1);  // this bin's slots not yet taken
          if (left > 0) {
            entries[offsets[bin] + left - 1] = make_uint2(static_cast<unsigned>(nqh), __float_as_uint(scale));
            term_max = max(term_max, __float_as_uint(fabsf(scale) * __uint_as_float(gmax)));
          } else {
            msda_sorted_lost(stats, "msda_bwd", bin);
          }
        }
#else
        {
          float s[MSDA_VEC];
#pragma unroll
          for (int j = 0; j < MSDA_VEC; ++j) s[j] = scale * gr[j];
          msda_red(grad_value + (off - c), sub, s);
        }
#endif
      }
      float d_a = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) d_a += pt.wt(k) * dot[k];
      const float d_fw = (1.f - pt.lh) * (dot[1] - dot[0]) + pt.lh * (dot[3] - dot[2]);
      const float d_fh = (1.f - pt.lw) * (dot[2] - dot[0]) + pt.lw * (dot[3] - dot[1]);
      d_a = msda_sum<MSDA_TPQ>(d_a);
      const float gx = msda_sum<MSDA_TPQ>(pt.a * d_fw) * static_cast<float>(W);
      const float gy = msda_sum<MSDA_TPQ>(pt.a * d_fh) * static_cast<float>(H);
      if (live && sub == 0) {
        ga[i] = pt.a != 0.f ? d_a : 0.f;
        gl[i] = make_float2(gx, gy);
      }
    }
  });
  msda_softmax_grad<MSDA_TPQ>(ga, weight, sub, live);
#if MSDA_SORTED && MSDA_DETERMINISTIC
  // One atomic a warp: the fixed-point scale's largest term.
#pragma unroll
  for (int o = 16; o > 0; o /= 2) term_max = max(term_max, __shfl_xor_sync(0xffffffffu, term_max, o));
  if (t % 32 == 0) atomicMax(stats + MSDA_STAT_TERM, term_max);
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
#if MSDA_SORTED
// ---------------------------------------------------------------------------------------------
// The sorted design's passes around msda_bwd (see the top of the file).

// Each point's inside corners, one count each in its bin. A thread a point.
static_assert(tma_plan_msda_bwd_count::BLOCK_THREADS == 256, "the plan's block is the kernel's");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_COUNT_LAUNCH_BOUNDS msda_bwd_count(const float* __restrict__ loc,
                                                                               int* __restrict__ counts,
                                                                               const __grid_constant__ MsdaShapes sh,
                                                                               int queries, int spatial, int batch) {
  const long long points = static_cast<long long>(batch) * queries * MSDA_M * MSDA_LP;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < points;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long nqh = i / MSDA_LP;
    const int l = static_cast<int>(i % MSDA_LP) / MSDA_P;
    const int head = static_cast<int>(nqh % MSDA_M), n = static_cast<int>(nqh / MSDA_M / queries);
    const int H = sh.h(l), W = sh.w(l);
    const MsdaPoint pt(__ldg(reinterpret_cast<const float2*>(loc) + i), H, W, 0.f, true);
    const int bin0 = (n * MSDA_M + head) * spatial + sh.start(l);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (pt.in[k]) atomicAdd(counts + bin0 + (pt.h0 + pt.dh(k)) * W + pt.w0 + pt.dw(k), 1);
  }
}

// Exclusive scan of the counts into offsets: tiles of MSDA_SCAN_TILE bins (256 threads x 8).
#define MSDA_SCAN_PER_THREAD 8
#define MSDA_SCAN_TILE (256 * MSDA_SCAN_PER_THREAD)

// Exclusive prefix of x over the block (blockDim.x a multiple of 32, at most 1024); *total
// receives the block's sum. Every thread calls it.
__device__ __forceinline__ int msda_block_scan(int x, int* total) {
  __shared__ int warp_sums[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int inc = x;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    warp_sums[lane] = w;  // inclusive
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_sums[warp - 1] : 0) + inc - x;
  *total = warp_sums[warps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return before;
}

static_assert(tma_plan_msda_bwd_scan_tiles::BLOCK_THREADS == 256, "the plan's block is the kernel's");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_SCAN_TILES_LAUNCH_BOUNDS
msda_bwd_scan_tiles(const int* __restrict__ counts, int* __restrict__ tile_sums, int bins) {
  const int base = blockIdx.x * MSDA_SCAN_TILE + threadIdx.x * MSDA_SCAN_PER_THREAD;
  int sum = 0;
#pragma unroll
  for (int j = 0; j < MSDA_SCAN_PER_THREAD; ++j) sum += base + j < bins ? counts[base + j] : 0;
  int total;
  msda_block_scan(sum, &total);
  if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

// One block: the tiles' sums into their exclusive prefixes, in place.
static_assert(tma_plan_msda_bwd_scan_sums::BLOCK_THREADS == 1024, "the plan's block is the kernel's");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_SCAN_SUMS_LAUNCH_BOUNDS msda_bwd_scan_sums(int* __restrict__ tile_sums,
                                                                                       int tiles) {
  int carry = 0;
  for (int i0 = 0; i0 < tiles; i0 += blockDim.x) {
    const int i = i0 + threadIdx.x;
    const int x = i < tiles ? tile_sums[i] : 0;
    int total;
    const int before = msda_block_scan(x, &total);
    if (i < tiles) tile_sums[i] = carry + before;
    carry += total;
  }
}

// offsets[b] = entries of the bins before b (offsets[bins] = all of them); the largest count,
// and the bins of more than MSDA_BIG entries listed for msda_bwd_big.
static_assert(tma_plan_msda_bwd_scan_fill::BLOCK_THREADS == 256, "the plan's block is the kernel's");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_SCAN_FILL_LAUNCH_BOUNDS
msda_bwd_scan_fill(const int* __restrict__ counts, const int* __restrict__ tile_sums, int* __restrict__ offsets,
                   unsigned* __restrict__ stats, int* __restrict__ big, int bins) {
  const int base = blockIdx.x * MSDA_SCAN_TILE + threadIdx.x * MSDA_SCAN_PER_THREAD;
  int c[MSDA_SCAN_PER_THREAD], sum = 0, most = 0;
#pragma unroll
  for (int j = 0; j < MSDA_SCAN_PER_THREAD; ++j) {
    c[j] = base + j < bins ? counts[base + j] : 0;
    sum += c[j];
    most = max(most, c[j]);
    if (c[j] > MSDA_BIG) big[atomicAdd(stats + MSDA_STAT_BIG, 1u)] = base + j;
  }
  int total;
  int at = tile_sums[blockIdx.x] + msda_block_scan(sum, &total);
#pragma unroll
  for (int j = 0; j < MSDA_SCAN_PER_THREAD; ++j) {
    if (base + j < bins) offsets[base + j] = at;
    at += c[j];
    if (base + j == bins - 1) offsets[bins] = at;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) most = max(most, __shfl_xor_sync(0xffffffffu, most, o));
  if (threadIdx.x % 32 == 0 && most > 0) atomicMax(stats + MSDA_STAT_COUNT, static_cast<unsigned>(most));
}

// The deterministic sums' fixed point: every term t becomes round(t * 2^shift) in 64 bits, with
// shift such that the largest bin's entries times the largest |term| stay below 2^61: integer
// sums are exact, so every order gives the same bits. Terms not finite: f32 sums instead (NaN
// and inf propagate as in the fast mode).
struct MsdaFixed {
  float scale = 1.f, inv = 1.f;
  bool exact = false;
  MsdaFixed() = default;
  __device__ __forceinline__ explicit MsdaFixed(const unsigned* __restrict__ stats) {
    const float bound = static_cast<float>(stats[MSDA_STAT_COUNT]) * __uint_as_float(stats[MSDA_STAT_TERM]);
    exact = bound <= 3.0e38f;
    int e = 0;
    if (exact && bound > 0.f) frexpf(bound, &e);  // bound < 2^e
    const int shift = min(61 - e, 126);            // >= -67: 2^shift and 2^-shift are normal floats
    scale = __int_as_float((127 + shift) << 23);
    inv = __int_as_float((127 - shift) << 23);
  }
};

// A bin's TPQ threads each sum MSDA_VEC channels of its entries' terms weight * grad_out[row].
template <bool EXACT>
struct MsdaAcc {
  typedef float type;
};
template <>
struct MsdaAcc<true> {
  typedef long long type;
};
template <bool EXACT>
struct MsdaBinSum {
  typedef typename MsdaAcc<EXACT>::type acc_t;
  acc_t v[MSDA_VEC];
  __device__ __forceinline__ MsdaBinSum() {
#pragma unroll
    for (int j = 0; j < MSDA_VEC; ++j) v[j] = 0;
  }
  __device__ __forceinline__ void add(uint2 e, const msda_t* __restrict__ grad_out, int sub, float scale) {
    float g[MSDA_VEC];
    msda_unpack(__ldg(reinterpret_cast<const uint4*>(grad_out + static_cast<long long>(e.x) * MSDA_D) + sub), g);
    const float w = __uint_as_float(e.y);
#pragma unroll
    for (int j = 0; j < MSDA_VEC; ++j) {
      if constexpr (EXACT)
        v[j] += __float2ll_rn(w * g[j] * scale);
      else
        v[j] += w * g[j];
    }
  }
  __device__ __forceinline__ float at(int j, float inv) const {
    if constexpr (EXACT)
      return __ll2float_rn(v[j]) * inv;
    else
      return v[j];
  }
};

template <bool EXACT>
__device__ __forceinline__ void msda_gather_bin(const uint2* __restrict__ entries, int o0, int o1,
                                                const msda_t* __restrict__ grad_out, gv_t* __restrict__ out,
                                                int sub, const MsdaFixed& fx) {
  MsdaBinSum<EXACT> sum;
  int j = o0;
  for (; j + 1 < o1; j += 2) {  // two rows in flight
    const uint2 a = __ldg(entries + j), b = __ldg(entries + j + 1);
    sum.add(a, grad_out, sub, fx.scale);
    sum.add(b, grad_out, sub, fx.scale);
  }
  if (j < o1) sum.add(__ldg(entries + j), grad_out, sub, fx.scale);
  float f[MSDA_VEC];
#pragma unroll
  for (int k = 0; k < MSDA_VEC; ++k) f[k] = sum.at(k, fx.inv);
  reinterpret_cast<uint4*>(out)[sub] = msda_pack(f);
}

// grad_value's bins of at most MSDA_BIG entries, TPQ threads a bin, written in the storage type
// (empty bins too: zero).
static_assert(tma_plan_msda_bwd_gather::BLOCK_THREADS == 256, "the plan's block is the kernel's");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_GATHER_LAUNCH_BOUNDS
msda_bwd_gather(const uint2* __restrict__ entries, const int* __restrict__ offsets, const int* __restrict__ cursor,
                const msda_t* __restrict__ grad_out, gv_t* __restrict__ grad_value, unsigned* __restrict__ stats,
                int spatial, int bins) {
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int sub = threadIdx.x % MSDA_TPQ;
  if (gid / MSDA_TPQ >= bins) return;  // whole bins
  const int bin = static_cast<int>(gid / MSDA_TPQ);
  const int o0 = offsets[bin], o1 = offsets[bin + 1];
  if (sub == 0 && cursor[bin] != 0) msda_sorted_lost(stats, "msda_bwd_gather", bin);
  if (o1 - o0 > MSDA_BIG) return;  // msda_bwd_big's
  gv_t* out = grad_value + msda_bin_row(bin, spatial) * MSDA_D;
#if MSDA_DETERMINISTIC
  const MsdaFixed fx(stats);
  if (fx.exact) {
    msda_gather_bin<true>(entries, o0, o1, grad_out, out, sub, fx);
    return;
  }
#else
  MsdaFixed fx{};
#endif
  msda_gather_bin<false>(entries, o0, o1, grad_out, out, sub, fx);
}

// The bins of more than MSDA_BIG entries (listed by msda_bwd_scan_fill), a block each in turn:
// its 256 / TPQ groups each sum every (256 / TPQ)-th entry, then the groups' sums are added in
// group order.
#define MSDA_BIG_GROUPS (256 / MSDA_TPQ)
template <bool EXACT>
__device__ __forceinline__ void msda_big_bin(const uint2* __restrict__ entries, int o0, int o1,
                                             const msda_t* __restrict__ grad_out, gv_t* __restrict__ out,
                                             const MsdaFixed& fx) {
  typedef typename MsdaBinSum<EXACT>::acc_t acc_t;
  __shared__ acc_t part[MSDA_BIG_GROUPS][MSDA_D];
  const int sub = threadIdx.x % MSDA_TPQ, group = threadIdx.x / MSDA_TPQ;
  MsdaBinSum<EXACT> sum;
  for (int j = o0 + group; j < o1; j += MSDA_BIG_GROUPS) sum.add(__ldg(entries + j), grad_out, sub, fx.scale);
#pragma unroll
  for (int k = 0; k < MSDA_VEC; ++k) part[group][sub * MSDA_VEC + k] = sum.v[k];
  __syncthreads();
  for (int ch = threadIdx.x; ch < MSDA_D; ch += blockDim.x) {
    acc_t total = 0;
    for (int gi = 0; gi < MSDA_BIG_GROUPS; ++gi) total += part[gi][ch];
    float f;
    if constexpr (EXACT)
      f = __ll2float_rn(total) * fx.inv;
    else
      f = total;
    out[ch] = msda_from_f32(f);
  }
  __syncthreads();  // part is reused by the next bin
}

static_assert(tma_plan_msda_bwd_big::BLOCK_THREADS == 256, "the plan's block is the kernel's");
extern "C" __global__ void TMA_PLAN_MSDA_BWD_BIG_LAUNCH_BOUNDS
msda_bwd_big(const uint2* __restrict__ entries, const int* __restrict__ offsets, const int* __restrict__ big,
             const msda_t* __restrict__ grad_out, gv_t* __restrict__ grad_value, const unsigned* __restrict__ stats,
             int spatial) {
  const int n_big = static_cast<int>(stats[MSDA_STAT_BIG]);
#if MSDA_DETERMINISTIC
  const MsdaFixed fx(stats);
#else
  MsdaFixed fx{};
#endif
  for (int i = blockIdx.x; i < n_big; i += gridDim.x) {
    const int bin = big[i];
    gv_t* out = grad_value + msda_bin_row(bin, spatial) * MSDA_D;
#if MSDA_DETERMINISTIC
    if (fx.exact) {
      msda_big_bin<true>(entries, offsets[bin], offsets[bin + 1], grad_out, out, fx);
      continue;
    }
#endif
    msda_big_bin<false>(entries, offsets[bin], offsets[bin + 1], grad_out, out, fx);
  }
}
#endif  // MSDA_SORTED
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
