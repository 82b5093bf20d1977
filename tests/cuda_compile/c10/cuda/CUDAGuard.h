// Compile-only stand-in (see ../../README.md): at::cuda::CUDAGuard is declared with CUDAContext.h's.
#pragma once
#include <ATen/cuda/CUDAContext.h>
