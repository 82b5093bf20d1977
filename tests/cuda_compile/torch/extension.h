// Compile-only stand-in for <torch/extension.h>: declarations of what topk_cuda.cu uses (see ../README.md).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#define TORCH_CHECK(cond, ...) \
  do {                         \
    if (!(cond)) throw 0;      \
  } while (0)
#define C10_CUDA_CHECK(expr) (void)(expr)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() (void)0
#define TORCH_EXTENSION_NAME ds4kernels_topk_cuda

namespace torch {
enum ScalarType { kFloat32, kInt32, kInt64 };
struct Tensor {
  bool is_cuda() const;
  int64_t dim() const;
  ScalarType scalar_type() const;
  int64_t size(int64_t) const;
  int64_t numel() const;
  int64_t stride(int64_t) const;
  int get_device() const;
  int device() const;
  Tensor to(ScalarType) const;
  Tensor contiguous() const;
  Tensor options() const;
  Tensor dtype(ScalarType) const;
  template <class T>
  T* data_ptr() const;
};
Tensor empty(std::initializer_list<int64_t>, const Tensor& options);
Tensor dtype(ScalarType);
}  // namespace torch

namespace py {
struct arg {
  explicit arg(const char*);
  template <class T>
  arg& operator=(T&&);  // a default value
};
}  // namespace py

struct ModuleStandIn {
  template <class... Args>
  void def(Args&&...);
};
#define PYBIND11_MODULE(name, m) void pybind11_init_##name(ModuleStandIn& m)
