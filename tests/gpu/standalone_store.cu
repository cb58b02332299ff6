// Standalone probes of TMA stores with nvcc + the driver API: which coordinates trap, and
// how far past the inner dim a store writes. On a GPU machine:
//   nvcc -arch=sm_90a -o /tmp/st tests/gpu/standalone_store.cu -lcuda && /tmp/st X Y INNER
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "harness.cu"
#define CK(x) do { auto r = (x); if (r != 0) { printf("%s = %d at %d\n", #x, (int)r, __LINE__); return 1; } } while (0)
int main(int argc, char** argv) {
  const int x0 = atoi(argv[1]), y0 = atoi(argv[2]);
  const int W = atoi(argv[3]);     // inner dim (elements of 4 B); rows are 64 elements apart
  const int H = 16, PITCH = 64;
  CK(cudaSetDevice(0));
  float* d; CK(cudaMalloc(&d, H * PITCH * 4));
  CK(cudaMemset(d, 0xff, H * PITCH * 4));
  CUtensorMap map;
  cuuint64_t gdim[2] = {(cuuint64_t)W, H}; cuuint64_t gstr[1] = {PITCH * 4};
  cuuint32_t box[2] = {16, 8}; cuuint32_t es[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, gdim, gstr, box, es,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  BoxPlan plan = {}; plan.coords[0][0] = x0; plan.coords[0][1] = y0;
  std::vector<float> src(128); for (int i = 0; i < 128; ++i) src[i] = 1000.f + i;
  unsigned char* in; CK(cudaMalloc(&in, 512)); CK(cudaMemcpy(in, src.data(), 512, cudaMemcpyHostToDevice));
  harness_store<<<1, 128, 512 + 1024>>>(map, plan, 2, 1, 512, in, 0);
  CK(cudaDeviceSynchronize());
  std::vector<float> h(H * PITCH); CK(cudaMemcpy(h.data(), d, H * PITCH * 4, cudaMemcpyDeviceToHost));
  int written = 0, outside = 0, wrong = 0;
  for (int y = 0; y < H; ++y) for (int x = 0; x < PITCH; ++x) {
    const float v = h[y * PITCH + x];
    if (v != v) continue;  // 0xffffffff is a NaN: untouched
    ++written;
    const int r = y - y0, c = x - x0;
    if (x >= W || y >= H) ++outside;
    if (r < 0 || r >= 8 || c < 0 || c >= 16 || v != 1000.f + r * 16 + c) ++wrong;
  }
  printf("store x0=%d y0=%d W=%d: %d written, %d past the inner dim, %d wrong\n", x0, y0, W, written, outside, wrong);
  return 0;
}
