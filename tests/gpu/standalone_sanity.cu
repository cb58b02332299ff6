// Standalone check of the harness kernel with nvcc + the driver API, no Rust runtime:
// tells a kernel bug from a launch-path bug. On a GPU machine:
//   nvcc -arch=sm_90a -o /tmp/sanity tests/gpu/standalone_sanity.cu -lcuda && /tmp/sanity
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include "harness.cu"
#define CK(x) do { auto r = (x); if (r != 0) { printf("%s = %d at %d\n", #x, (int)r, __LINE__); return 1; } } while (0)
int main(int argc, char** argv) {
  const int x0 = argc > 1 ? atoi(argv[1]) : 5;
  CK(cudaSetDevice(0));
  const int H = 40, W = 48;
  std::vector<float> h(H * W);
  for (int i = 0; i < H * W; ++i) h[i] = float(i);
  float* d; CK(cudaMalloc(&d, H * W * 4));
  CK(cudaMemcpy(d, h.data(), H * W * 4, cudaMemcpyHostToDevice));
  CUtensorMap map;
  cuuint64_t gdim[2] = {W, H}; cuuint64_t gstr[1] = {W * 4};
  cuuint32_t box[2] = {16, 8}; cuuint32_t es[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, gdim, gstr, box, es,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  BoxPlan plan = {}; plan.coords[0][0] = x0; plan.coords[0][1] = 3; plan.smem_offset[0] = 0;
  unsigned char* out; CK(cudaMalloc(&out, 512));
  harness_load<<<1, 128, 512 + 1024>>>(map, plan, 2, 1, 512, 512, 0, out);
  CK(cudaDeviceSynchronize());
  float o[128]; CK(cudaMemcpy(o, out, 512, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int r = 0; r < 8; ++r) for (int c = 0; c < 16; ++c) { const int x = x0 + c; const float want = (x >= 0 && x < W) ? float((3 + r) * W + x) : 0.f; bad += o[r * 16 + c] != want; }
  printf("standalone harness_load x0=%d: %d bad of 128\n", x0, bad);
  return bad != 0;
}
