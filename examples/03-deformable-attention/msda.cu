// Multi-scale deformable attention, forward (MSDA), two ways:
//   msda_tma : each sampling point's 2 x 2 x 32 bilinear neighbourhood is one 3-D TMA box
//              [2][2][32] over the level's [H][W][C] view of one (batch, head); out-of-bounds
//              neighbours arrive as zeros from the hardware, which is the operator's padding.
//   msda_ldg : the same operator with plain global loads, the baseline.
//
// Layouts (the standard ones):
//   value    [N][S][HEADS][32] f16 (or bf16), S = sum over levels of H_l * W_l
//   loc      [N][Q][HEADS][L][P][2] f32 in [0, 1], (x = along W, y = along H)
//   attn     [N][Q][HEADS][L][P] f32
//   out      [N][Q][HEADS * 32] (element type of value), accumulated in f32
//
// Work split: one block per (batch, query), one warp per head, one lane per sampling point
// (L * P = 32) while issuing loads, one lane per channel while accumulating. Each warp has
// its own mbarrier (per-warp barriers were the fastest in the seed experiments).
// The tile helpers (Value::load, TX_BYTES, the element type Value::elem) are generated from
// the tile declaration; `Value` is the tile's name for these kernels (their plans, setup.rs:
// tma_plan_msda_tma places the boxes in shared memory, both give the launch's block).

#define MSDA_HEADS 8
#define MSDA_LEVELS 4
#define MSDA_POINTS 8
#define MSDA_CH 32
#define MSDA_PTS (MSDA_LEVELS * MSDA_POINTS)
#define MSDA_BOX_BYTES (2 * 2 * MSDA_CH * 2)
// Each warp gathers its 32 points in phases of MSDA_PHASE_PTS through one buffer of that many
// boxes. Fewer points per phase means less shared memory and more resident warps; on an H100
// that ran slower (16: 223 us, 32: 189 us), so one phase of 32 is the default.
#ifndef MSDA_PHASE_PTS
#define MSDA_PHASE_PTS 32
#endif
#define MSDA_PHASES (MSDA_PTS / MSDA_PHASE_PTS)

static_assert(MSDA_PTS == 32, "one lane per sampling point");
static_assert(MSDA_PTS % MSDA_PHASE_PTS == 0, "whole phases");

struct MsdaLevels {
  int h[MSDA_LEVELS];
  int w[MSDA_LEVELS];
  int start[MSDA_LEVELS];
};

// The value's element type is the tile's, Value::elem (tma_half or tma_bfloat16: raw bits).
__device__ __forceinline__ float msda_to_f32(tma_bfloat16 x) {
  return __uint_as_float(static_cast<unsigned>(x.bits) << 16);
}
__device__ __forceinline__ float msda_to_f32(tma_half x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

// The bits of `f` rounded to the element type E.
template <class E>
__device__ __forceinline__ unsigned short msda_from_f32(float f);
template <>
__device__ __forceinline__ unsigned short msda_from_f32<tma_bfloat16>(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
template <>
__device__ __forceinline__ unsigned short msda_from_f32<tma_half>(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// The sampling point of this lane: its level, neighbourhood corner and bilinear fractions.
struct MsdaPoint {
  int level, h0, w0;
  float lh, lw, weight;
};

__device__ __forceinline__ MsdaPoint msda_point(const float* __restrict__ loc, const float* __restrict__ attn,
                                                const MsdaLevels& lv, long long pq_head, int lane) {
  MsdaPoint p;
  p.level = lane / MSDA_POINTS;
  const long long i = pq_head * MSDA_PTS + lane;
  const float x = loc[2 * i], y = loc[2 * i + 1];
  const int H = lv.h[p.level], W = lv.w[p.level];
  // Coordinates in f32 (never f16: rounding there moves samples to the wrong pixel).
  const float h_im = y * H - 0.5f, w_im = x * W - 0.5f;
  const bool inside = h_im > -1.f && w_im > -1.f && h_im < H && w_im < W;
  if (inside) {
    const float hf = floorf(h_im), wf = floorf(w_im);
    p.h0 = static_cast<int>(hf);  // in [-1, H - 1]: the box is at most partly outside
    p.w0 = static_cast<int>(wf);  // in [-1, W - 1]
    p.lh = h_im - hf;
    p.lw = w_im - wf;
    p.weight = attn[i];
  } else {
    // Contributes nothing (grid_sample zero padding). Its box is still loaded, so that the
    // expected byte count stays exact, but at (0, 0): always inside the image, whatever
    // the location was (even NaN or huge), with weight and fractions 0.
    p.h0 = 0;
    p.w0 = 0;
    p.lh = 0.f;
    p.lw = 0.f;
    p.weight = 0.f;
  }
  return p;
}

// What the generated tile helpers must agree with (the tile is declared on the host).
static_assert(Value::RANK == 3u, "[H][W][C] view");
static_assert(Value::BOXES == 1u, "one box per load");
static_assert(Value::TX_BYTES == MSDA_BOX_BYTES, "a [2][2][32] 16-bit box is 256 bytes");
// msda_tma's shared memory: the plan's staging region `boxes`, box q of warp w's phase at
// Plan::boxes(base, w * MSDA_PHASE_PTS + q), each aligned for the tile.
typedef tma_plan_msda_tma MsdaTmaPlan;
static_assert(MsdaTmaPlan::COPIES_boxes == MSDA_HEADS * MSDA_PHASE_PTS, "one box per point of a phase, per warp");
static_assert(MsdaTmaPlan::BLOCK_THREADS == MSDA_HEADS * 32 && tma_plan_msda_ldg::BLOCK_THREADS == MSDA_HEADS * 32,
              "one warp per head");
// Both kernels keep __launch_bounds__(threads) without a blocks-per-SM minimum (the plans'
// TMA_PLAN_<K>_LAUNCH_BOUNDS macros name one, 1, which lets ptxas take 37 and 70 registers
// instead of 32: other code); the launch's block still comes from the plans.

extern "C" __global__ void __launch_bounds__(MSDA_HEADS * 32)
msda_tma(const CUtensorMap* __restrict__ maps,  // [N][HEADS][LEVELS], in global memory
         const float* __restrict__ loc, const float* __restrict__ attn, unsigned short* __restrict__ out,
         const __grid_constant__ MsdaLevels lv, int queries) {
  extern __shared__ unsigned char msda_smem_raw[];
  __shared__ __align__(8) tma_mbarrier bars[MSDA_HEADS];
  unsigned char* const msda_smem = MsdaTmaPlan::base(msda_smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.x / queries;
  const int head = warp;
  const long long pq_head = static_cast<long long>(blockIdx.x) * MSDA_HEADS + head;
  // Descriptor (b, head, level) is maps[(b * HEADS + head) * LEVELS + level].
  const CUtensorMap* head_maps = maps + (b * MSDA_HEADS + head) * MSDA_LEVELS;
  if (lane < MSDA_LEVELS) tma_prefetch_tensormap(head_maps + lane);
  tma_mbarrier* bar = &bars[warp];
  if (lane == 0) {
    tma_mbarrier_init(bar, 1);  // one arrival per phase: lane 0's arrive_expect_tx
    tma_fence_mbarrier_init();  // visible to the async proxy before any copy signals it
  }
  __syncwarp();
  const MsdaPoint p = msda_point(loc, attn, lv, pq_head, lane);
  const unsigned first_box = warp * MSDA_PHASE_PTS;  // this warp's boxes: first_box + 0 .. PHASE_PTS - 1
  float acc = 0.f;
  const int c = lane;
  for (int phase = 0; phase < MSDA_PHASES; ++phase) {
    if (phase > 0) {
      __syncwarp();             // every lane is done reading the previous phase's boxes
      tma_async_proxy_fence();  // ... before the copy engine overwrites them
    }
    // MSDA_PHASE_PTS boxes x 256 B complete this mbarrier phase.
    if (lane == 0) tma_mbarrier_arrive_expect_tx(bar, MSDA_PHASE_PTS * Value::TX_BYTES);
    __syncwarp();
    // Every point of this phase loads its box, even an invisible one (at (0, 0), weight 0):
    // the expected byte count stays exact. Coordinates in user order (h, w, c); c = 0 is
    // 16-byte aligned.
    if (lane / MSDA_PHASE_PTS == phase)
      Value::load(head_maps + p.level, bar, MsdaTmaPlan::boxes(msda_smem, first_box + lane % MSDA_PHASE_PTS),
                  {.H = p.h0, .W = p.w0, .C = 0});
    tma_mbarrier_wait(bar, phase & 1, MSDA_PHASE_PTS * Value::TX_BYTES, Value::TILE_ID);
#pragma unroll 4
    for (int q = 0; q < MSDA_PHASE_PTS; ++q) {
      const int pt = phase * MSDA_PHASE_PTS + q;
      const float lh = __shfl_sync(0xffffffffu, p.lh, pt);
      const float lw = __shfl_sync(0xffffffffu, p.lw, pt);
      const float a = __shfl_sync(0xffffffffu, p.weight, pt);
      const unsigned char* t = MsdaTmaPlan::boxes(msda_smem, first_box + q);
      const float v00 = msda_to_f32(Value::at(t, {.H = 0, .W = 0, .C = c}));
      const float v01 = msda_to_f32(Value::at(t, {.H = 0, .W = 1, .C = c}));
      const float v10 = msda_to_f32(Value::at(t, {.H = 1, .W = 0, .C = c}));
      const float v11 = msda_to_f32(Value::at(t, {.H = 1, .W = 1, .C = c}));
      acc += a * ((1.f - lh) * ((1.f - lw) * v00 + lw * v01) + lh * ((1.f - lw) * v10 + lw * v11));
    }
  }
  out[pq_head * MSDA_CH + c] = msda_from_f32<Value::elem>(acc);
}

extern "C" __global__ void __launch_bounds__(MSDA_HEADS * 32)
msda_ldg(const unsigned short* __restrict__ value, int spatial,  // value [N][S][HEADS][32]
         const float* __restrict__ loc, const float* __restrict__ attn, unsigned short* __restrict__ out,
         const __grid_constant__ MsdaLevels lv, int queries) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.x / queries;
  const int head = warp;
  const long long pq_head = static_cast<long long>(blockIdx.x) * MSDA_HEADS + head;
  const MsdaPoint p = msda_point(loc, attn, lv, pq_head, lane);
  const int c = lane;
  float acc = 0.f;
#pragma unroll 4
  for (int pt = 0; pt < MSDA_PTS; ++pt) {
    const int level = pt / MSDA_POINTS;
    const int h0 = __shfl_sync(0xffffffffu, p.h0, pt);
    const int w0 = __shfl_sync(0xffffffffu, p.w0, pt);
    const float lh = __shfl_sync(0xffffffffu, p.lh, pt);
    const float lw = __shfl_sync(0xffffffffu, p.lw, pt);
    const float a = __shfl_sync(0xffffffffu, p.weight, pt);
    const int H = lv.h[level], W = lv.w[level];
    const unsigned short* base =
        value + ((static_cast<long long>(b) * spatial + lv.start[level]) * MSDA_HEADS + head) * MSDA_CH + c;
    float v[2][2];
#pragma unroll
    for (int dh = 0; dh < 2; ++dh)
#pragma unroll
      for (int dw = 0; dw < 2; ++dw) {
        const int hh = h0 + dh, ww = w0 + dw;
        const bool in = hh >= 0 && hh < H && ww >= 0 && ww < W;
        v[dh][dw] = in ? msda_to_f32(Value::elem{__ldg(base + (static_cast<long long>(hh) * W + ww) * MSDA_HEADS * MSDA_CH)})
                       : 0.f;
      }
    acc += a * ((1.f - lh) * ((1.f - lw) * v[0][0] + lw * v[0][1]) + lh * ((1.f - lw) * v[1][0] + lw * v[1][1]));
  }
  out[pq_head * MSDA_CH + c] = msda_from_f32<Value::elem>(acc);
}
