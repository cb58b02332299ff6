// Probe kernels for layouts the toolkit does not model yet (interleave): raw TMA copies
// from encode arguments, with an exact count of the transaction bytes each load delivers.
//
// probe_load: shared memory is poisoned with 0xCD, the mbarrier is told to expect
// 2^20 - 1 bytes (the largest tx-count), the copy is issued and given 1 ms to land, then the
// thread arrives and completes one byte at a time until the phase completes: the number of
// single-byte completions it took gives the bytes the copy counted, exactly. (Guessing an
// expected count is not enough: a count smaller than the delivered bytes can complete the
// phase early.) The whole window is copied out.
//
// probe_store: shared memory holds self-describing words (word k = k | 0xA5000000), one box
// is stored and waited for; the host reads global memory back.
//
// Each kernel's shared memory and launch are its plan's (tma_plan_probe_load,
// tma_plan_probe_store: the scratch region `window`, the poisoned window, 1024-byte aligned
// as the harness aligns, on 128 threads). Compiled after harness.cu (the test puts it
// first): tma_load_box, tma_store_box and smem_addr come from there.

#define PROBE_TX_MAX 1048575u  // 2^20 - 1: the largest mbarrier tx-count

struct Coords { int c[5]; };  // TMA order (innermost first)

__device__ __forceinline__ unsigned long long probe_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// info[0]: bytes the copy counted on the mbarrier (-1: more than PROBE_TX_MAX).
extern "C" __global__ void TMA_PLAN_PROBE_LOAD_LAUNCH_BOUNDS
probe_load(const __grid_constant__ CUtensorMap map, int rank, Coords coords, unsigned char* out, long long* info) {
  typedef tma_plan_probe_load P;
  extern __shared__ unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long bar;
  unsigned char* smem = P::window(P::base(smem_raw));
  const unsigned window = P::BYTES_window;
  for (unsigned i = threadIdx.x; i < window; i += blockDim.x) smem[i] = 0xCD;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  const unsigned b = smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(PROBE_TX_MAX) : "memory");
    tma_load_box(smem_addr(smem), &map, b, rank, coords.c);
    const unsigned long long start = probe_now();
    while (probe_now() - start < 1000000ull) {
    }
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(b) : "memory");
    long long counted = -1;
    for (unsigned k = 0; k <= PROBE_TX_MAX; ++k) {
      unsigned done;
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.b32 %0, 1, 0, p;\n}\n"
          : "=r"(done) : "r"(b) : "memory");
      if (done) {
        counted = static_cast<long long>(PROBE_TX_MAX - k);
        break;
      }
      asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], 1;" :: "r"(b) : "memory");
    }
    info[0] = counted;
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < window; i += blockDim.x) out[i] = smem[i];
}

extern "C" __global__ void TMA_PLAN_PROBE_STORE_LAUNCH_BOUNDS
probe_store(const __grid_constant__ CUtensorMap map, int rank, Coords coords) {
  typedef tma_plan_probe_store P;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = P::window(P::base(smem_raw));
  const unsigned window = P::BYTES_window;
  unsigned* words = reinterpret_cast<unsigned*>(smem);
  for (unsigned i = threadIdx.x; i < window / 4; i += blockDim.x) words[i] = i | 0xA5000000u;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store_box(&map, smem_addr(smem), rank, coords.c, 0);
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
  __syncthreads();
}
