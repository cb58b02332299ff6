// A kernel written against Mirage MPK's documented TMA API (its "minimal usage example":
// a 4096 x 1024 bf16 tensor, 64 x 64 boxes, B = 3, SMEM_REPEAT_COL = 2), ported to tma by
// changing two lines: the include and the tile's type.
//
//   tma header tiles.tma --mpk -o tiles.cuh
//   nvcc -std=c++20 -arch=sm_90a -o mpk_copy mpk_copy.cu
//
// Each block loads its 64 x 128 tile (two boxes) with tma_cp_async, copies the shared memory
// it received out raw (so a test can compare it with the CPU model), and stores the tile back
// with tma_store_async. Compiles under NVRTC too (the host part is left out there).
#include "tiles.cuh"  // MPK: #include "tasks/hopper/tma.cuh"

// MPK: using TMA_2D = kernel::tma::tma_2d<bfloat16, 3, 3, 3, 4096, 1024, 64, 64, 1024, 1, 1, 2, 64 * 64>;
using TMA_2D = kernel::tma::tma_mpk_a;
using T = TMA_2D::T;

constexpr int TileR = 64;   // SMEM_ROW x SMEM_REPEAT_ROW
constexpr int TileC = 128;  // SMEM_COL x SMEM_REPEAT_COL
static_assert(TileR * TileC * sizeof(T) == TMA_2D::TX_BYTES, "the bytes MPK's example expects are the tile's TX_BYTES");

extern "C" __global__ void mpk_copy(const __grid_constant__ CUtensorMap in_map,
                                    const __grid_constant__ CUtensorMap out_map, unsigned char* smem_dump) {
  extern __shared__ char smem_raw[];
  __shared__ kernel::Barrier mbar;
  // The 128B swizzle wants the destination on 1024 bytes (TMA_2D::SMEM_ALIGN).
  char* smem_ptr = reinterpret_cast<char*>(
      (reinterpret_cast<unsigned long long>(smem_raw) + TMA_2D::SMEM_ALIGN - 1) & ~(unsigned long long)(TMA_2D::SMEM_ALIGN - 1));
  const TMA_2D tma(&in_map);
  const TMA_2D tma_out(&out_map);
  const int ITER_ROW = blockIdx.y, ITER_COL = blockIdx.x;
  const int slot = 0, phase = 0;
  (void)slot;
  if (threadIdx.x == 0) {
    kernel::initialize_barrier(mbar, 1);
    tma_fence_mbarrier_init();
  }
  __syncthreads();

  // 1) Tell the barrier how many bytes to expect: as in MPK, lane 0 of the calling warp arrives
  //    (%laneid), the one arrival initialize_barrier(mbar, 1) waits for.
  if (threadIdx.x < 32) {
    size_t bytes = TileR * TileC * sizeof(T);
    set_barrier_transaction_bytes(mbar, bytes);
  }
  // 2) GMEM -> SMEM, coords are {col, row} in elements (innermost first).
  if (threadIdx.x == 0) {
    int coords[2] = {ITER_COL * TileC, ITER_ROW * TileR};
    tma.tma_cp_async(mbar, smem_ptr, coords);
  }
  // 3) Wait for the bytes to land.
  wait(mbar, phase);

  // ... computation on the tile: here, its shared memory is copied out raw.
  unsigned char* dump = smem_dump + (size_t)(blockIdx.y * gridDim.x + blockIdx.x) * TMA_2D::SMEM_BYTES;
  for (unsigned i = threadIdx.x; i < TMA_2D::SMEM_BYTES; i += blockDim.x) dump[i] = smem_ptr[i];
  __syncthreads();

  // 4) SMEM -> GMEM store back (same coords).
  if (threadIdx.x == 0) {
    int coords[2] = {ITER_COL * TileC, ITER_ROW * TileR};
    tma_out.tma_store_async(smem_ptr, coords);
    kernel::tma::store_commit_group();
    kernel::tma::store_async_wait<0>();
    kernel::tma::async_proxy_fence();
  }
}

#if !defined(__CUDACC_RTC__)
// The host side: tma_encode_mpk_a (generated, checked) instead of MPK's constructor.
//   mpk_copy check          the encode checks, no GPU needed: prints one line per case
//   mpk_copy run IN OUT D   copies the bf16 tensor in file IN through the kernel; writes the
//                           tensor stored back to OUT and every block's shared memory to D
#include <cstdio>
#include <cstring>
#include <vector>

static int check() {
  alignas(16) static unsigned char host[64];
  CUtensorMap map;
  tma_encode_error err;
  const unsigned long long tensor = 4096ull * 1024 * sizeof(T);
  struct Case {
    const char* name;
    const void* base;
    unsigned long long bytes;
    tma_encode_status want;
  } cases[] = {
      {"misaligned base", host + 8, tensor, TMA_ENCODE_RULE},
      {"buffer too small", host, tensor - 1, TMA_ENCODE_BUFFER_TOO_SMALL},
      {"null base", nullptr, tensor, TMA_ENCODE_NULL_ARGUMENT},
  };
  int bad = 0;
  for (const Case& c : cases) {
    const CUresult r = tma_encode_mpk_a(&map, c.base, c.bytes, &err);
    const bool ok = err.status == c.want && r == CUDA_ERROR_INVALID_VALUE;
    std::printf("%s: %s (%s, rule \"%s\"): %s\n", c.name, ok ? "refused" : "UNEXPECTED",
                tma_encode_status_name(err.status), err.rule, err.message);
    bad += !ok;
  }
  // Good arguments reach the driver: encoded on a machine with a GPU (over device memory, in
  // the context cudaMalloc makes current: the driver wants one), NO_DRIVER without.
  void* dev = nullptr;
  if (cudaMalloc(&dev, tensor) != cudaSuccess) dev = nullptr;
  const CUresult r = tma_encode_mpk_a(&map, dev != nullptr ? dev : static_cast<void*>(host), tensor, &err);
  if (dev != nullptr) cudaFree(dev);
  const bool ok = r == CUDA_SUCCESS || err.status == TMA_ENCODE_NO_DRIVER;
  std::printf("good arguments: %s (%s)%s%s\n", ok ? "passed the checks" : "UNEXPECTED", tma_encode_status_name(err.status),
              err.message[0] ? ": " : "", err.message);
  bad += !ok;
  return bad == 0 ? 0 : 1;
}

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

static bool read_file(const char* path, std::vector<unsigned char>& out) {
  FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return true;
}

static bool write_file(const char* path, const std::vector<unsigned char>& data) {
  FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

static int run(const char* in_path, const char* out_path, const char* dump_path) {
  const size_t bytes = 4096ull * 1024 * sizeof(T);
  std::vector<unsigned char> in;
  if (!read_file(in_path, in) || in.size() != bytes) {
    std::fprintf(stderr, "%s: expected %zu bytes\n", in_path, bytes);
    return 1;
  }
  const dim3 grid(1024 / TileC, 4096 / TileR);
  const size_t dump_bytes = (size_t)grid.x * grid.y * TMA_2D::SMEM_BYTES;
  unsigned char *d_in, *d_out, *d_dump;
  CHECK_CUDA(cudaMalloc(&d_in, bytes));
  CHECK_CUDA(cudaMalloc(&d_out, bytes));
  CHECK_CUDA(cudaMalloc(&d_dump, dump_bytes));
  CHECK_CUDA(cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(d_out, 0xA5, bytes));  // poisoned: every byte must be stored
  CHECK_CUDA(cudaMemset(d_dump, 0xA5, dump_bytes));
  CUtensorMap in_map, out_map;
  tma_encode_error err;
  if (tma_encode_mpk_a(&in_map, d_in, bytes, &err) != CUDA_SUCCESS ||
      tma_encode_mpk_a(&out_map, d_out, bytes, &err) != CUDA_SUCCESS) {
    std::fprintf(stderr, "encode failed: %s\n", err.message);
    return 1;
  }
  const int smem = TMA_2D::SMEM_BYTES + TMA_2D::SMEM_ALIGN;
  CHECK_CUDA(cudaFuncSetAttribute(mpk_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  mpk_copy<<<grid, 128, smem>>>(in_map, out_map, d_dump);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned char> out(bytes), dump(dump_bytes);
  CHECK_CUDA(cudaMemcpy(out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(dump.data(), d_dump, dump_bytes, cudaMemcpyDeviceToHost));
  if (!write_file(out_path, out) || !write_file(dump_path, dump)) {
    std::fprintf(stderr, "cannot write the results\n");
    return 1;
  }
  std::printf("ran %u x %u blocks\n", grid.x, grid.y);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "check") == 0) return check();
  if (argc == 5 && std::strcmp(argv[1], "run") == 0) return run(argv[2], argv[3], argv[4]);
  std::fprintf(stderr, "usage: %s check | run IN OUT DUMP\n", argv[0]);
  return 2;
}
#endif
