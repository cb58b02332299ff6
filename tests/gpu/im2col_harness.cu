// Harness kernel of the im2col model == hardware test (tests/gpu_im2col_model.rs): one kernel
// for every rank, the coordinates and offsets as arguments (TMA order, innermost first), so
// thousands of random specs share one compile. The rendered helpers (`T::load`) are checked
// on a smaller corpus by the same test. Needs the tma prelude before it (CUtensorMap).

__device__ __forceinline__ unsigned i2c_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The dynamic buffer aligned up to 1024 B (the 128B swizzle's period): offsets are the model's.
__device__ __forceinline__ unsigned char* i2c_aligned(unsigned char* raw) {
  unsigned a = i2c_smem_addr(raw);
  return raw + (((a + 1023u) & ~1023u) - a);
}

// try_wait + selp for at most ~200 ms of %globaltimer: bytes that never come are a finding,
// not a hung test.
__device__ __forceinline__ bool i2c_wait_bounded(unsigned bar, unsigned phase) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.b32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(phase) : "memory");
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (!done && now - start > 200000000ull) return false;
  }
  return true;
}

struct I2cCall {
  int coords[5];             // TMA order: C, W, (H, (D,)) N
  unsigned short offsets[3];  // TMA order: W, (H, (D))
};

// One im2col load of `call` into shared memory pre-filled with `fill`, expecting `tx_bytes` on
// the mbarrier; `window` raw bytes come back in `out`, and `status[0]` says whether the phase
// completed (1) or timed out (0: the bytes delivered differ from `tx_bytes`).
extern "C" __global__ void im2col_harness_load(const __grid_constant__ CUtensorMap map, const __grid_constant__ I2cCall call,
                                               int rank, unsigned tx_bytes, unsigned window, unsigned fill,
                                               unsigned char* out, int* status) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long bar;
  unsigned char* smem = i2c_aligned(smem_raw);
  for (unsigned i = threadIdx.x; i < window; i += blockDim.x) smem[i] = static_cast<unsigned char>(fill);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  const unsigned b = i2c_smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(tx_bytes) : "memory");
    const unsigned dst = i2c_smem_addr(smem);
    const unsigned long long m = reinterpret_cast<unsigned long long>(&map);
    const int* c = call.coords;
    const unsigned short* o = call.offsets;
    switch (rank) {
      case 3:
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5}], [%2], {%6};"
                     :: "r"(dst), "l"(m), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "h"(o[0]) : "memory");
        break;
      case 4:
        asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};"
                     :: "r"(dst), "l"(m), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "h"(o[0]), "h"(o[1])
                     : "memory");
        break;
      default:
        asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%3, %4, %5, %6, %7}], [%2], {%8, %9, %10};"
                     :: "r"(dst), "l"(m), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]),
                        "h"(o[0]), "h"(o[1]), "h"(o[2])
                     : "memory");
        break;
    }
  }
  const bool done = i2c_wait_bounded(b, 0);
  if (threadIdx.x == 0) status[0] = done ? 1 : 0;
  __syncthreads();
  for (unsigned i = threadIdx.x; i < window; i += blockDim.x) out[i] = smem[i];
}
