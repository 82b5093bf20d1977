// Compile-only stand-in (see ../../README.md).
#pragma once
#include <cuda_runtime.h>
namespace at {
namespace cuda {
cudaStream_t getCurrentCUDAStream();
struct CUDAGuard {
  explicit CUDAGuard(int device);
};
}  // namespace cuda
}  // namespace at
