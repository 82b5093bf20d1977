// DeepSeek V4 MoE routing (the contract of routing.py's module doc), one warp per token.
//
//   s = sqrt(softplus(logit)) in fp32 (softplus: x above 20, else log1p(exp(x))); sel = s + bias, NaN -> -1e30.
//   Scored layers: lane l holds experts 128 j + 4 l + c (16-byte loads, c < 4, j < kVec), as order-preserving
//   uint32 keys of sel. Each pick takes the warp's largest key by one redux.sync max, then the lowest expert
//   id holding it by one redux.sync min (ties go to the lowest id, as the reference's stable sort), and the
//   lane holding that expert clears it. A warp routes one token, or two side by side (their picks' reductions
//   are independent, so one's latency hides the other's), and more by grid stride.
//   Hash layers: lane j < topk reads tid2eid[input_id, j] (bounds as the module doc); only the picked logits
//   are read.
//   Weights: the picks' unbiased s (recomputed from the picked logit), summed in pick order by every lane,
//   / (sum if > 0 else 1) * route_scale.
// No atomics and fixed summation orders: the output is the same on every call.

#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <type_traits>

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxVec = 4;  // float4s per lane: at most 512 experts
constexpr int kMaxTopk = 32;  // one pick per lane

// log1p(exp(x)) from the hardware's approximate exp2/log2 (a few instructions each), kept accurate for small
// exp(x) by log(u) * ex / (u - 1) (Goldberg's log1p); the accurate libm calls cost several times more and made
// the kernel instruction-bound.
__device__ __forceinline__ float sqrt_softplus(float x) {
  const float ex = __expf(x);
  const float u = 1.0f + ex;
  const float log1p = u == 1.0f ? ex : __logf(u) * __fdividef(ex, u - 1.0f);
  return sqrtf(x > 20.0f ? x : log1p);
}

// Larger sel -> larger key, -0 as +0 (they compare equal, so the lower id must win). 0 is below every key
// of a real sel (the smallest, -inf's, is 0x007fffff): it marks picked experts and padding.
__device__ __forceinline__ uint32_t sel_key(float sel) {
  if (sel != sel) sel = -1e30f;
  if (sel == 0.0f) sel = 0.0f;
  const uint32_t b = __float_as_uint(sel);
  return (b >> 31) ? ~b : (b | 0x80000000u);
}

template <bool kAligned>
__device__ __forceinline__ float4 load4(const float* p, int e0, int n) {
  if (kAligned && e0 + 3 < n) return __ldg(reinterpret_cast<const float4*>(p + e0));
  float4 v;
  v.x = e0 < n ? __ldg(p + e0) : 0.0f;
  v.y = e0 + 1 < n ? __ldg(p + e0 + 1) : 0.0f;
  v.z = e0 + 2 < n ? __ldg(p + e0 + 2) : 0.0f;
  v.w = e0 + 3 < n ? __ldg(p + e0 + 3) : 0.0f;
  return v;
}

__device__ __forceinline__ float part(const float4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }

// ids[t, k] and w[t, k] for k < topk, from lane k's pick and the warp's total (every lane holds the same).
__device__ __forceinline__ void write_picks(int* ids, float* w, int64_t t, int topk, int lane, int id, float s,
                                            float total, float scale) {
  if (lane < topk) {
    ids[t * topk + lane] = id;
    w[t * topk + lane] = s / (total > 0.0f ? total : 1.0f) * scale;
  }
}

// At most 64 registers where that does not spill (E <= 384 at one token per warp, E <= 256 at two): 32 warps
// per SM, so T = 8192 at two tokens per warp is one wave.
template <int kVec, bool kAligned, int kTok>
__global__ void __launch_bounds__(256, kVec * kTok <= 4 && kVec < 4 ? 4 : 1)
    scored_kernel(const float* __restrict__ logits, int64_t stride, const float* __restrict__ bias, bool has_bias,
                  int T, int E, int topk, float scale, int* __restrict__ ids, float* __restrict__ w) {
  constexpr int kPer = 4 * kVec;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int64_t step = static_cast<int64_t>(gridDim.x) * warps * kTok;
  for (int64_t t0 = (static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5)) * kTok; t0 < T; t0 += step) {
    // kTok tokens' picks run side by side: their reductions are independent, so one's latency hides another's.
    float4 cur[kTok][kVec];
#pragma unroll
    for (int u = 0; u < kTok; ++u)
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        cur[u][j] = t0 + u < T ? load4<kAligned>(logits + (t0 + u) * stride, j * 128 + lane * 4, E)
                               : make_float4(0.f, 0.f, 0.f, 0.f);
    uint32_t key[kTok][kPer];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {  // the bias is read here, not held: a warp routes few tokens (L1 hits)
      const float4 bj = has_bias ? load4<kAligned>(bias, j * 128 + lane * 4, E) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int u = 0; u < kTok; ++u)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int e = j * 128 + lane * 4 + c;
          key[u][j * 4 + c] = e < E ? sel_key(sqrt_softplus(part(cur[u][j], c)) + part(bj, c)) : 0u;
        }
    }
    float total[kTok], my_s[kTok];
    int my_id[kTok];
#pragma unroll
    for (int u = 0; u < kTok; ++u) total[u] = my_s[u] = 0.0f, my_id[u] = -1;
    for (int k = 0; k < topk; ++k) {
      uint32_t top[kTok], id[kTok];
#pragma unroll
      for (int u = 0; u < kTok; ++u) {
        uint32_t best = 0u;
#pragma unroll
        for (int i = 0; i < kPer; ++i) best = max(best, key[u][i]);
        top[u] = __reduce_max_sync(kFull, best);
      }
#pragma unroll
      for (int u = 0; u < kTok; ++u) {
        uint32_t mine = 0xffffffffu;
#pragma unroll
        for (int i = kPer - 1; i >= 0; --i)  // the lowest id of this lane's experts holding the top key
          if (key[u][i] == top[u]) mine = (i / 4) * 128 + lane * 4 + i % 4;
        id[u] = __reduce_min_sync(kFull, mine);
      }
#pragma unroll
      for (int u = 0; u < kTok; ++u) {
        float xk = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          if ((i / 4) * 128 + lane * 4 + i % 4 == static_cast<int>(id[u])) {
            xk = part(cur[u][i / 4], i % 4);
            key[u][i] = 0u;
          }
        }
        const float sk = sqrt_softplus(__shfl_sync(kFull, xk, (id[u] >> 2) & 31));  // the same on every lane
        total[u] += sk;
        if (lane == k) {
          my_id[u] = static_cast<int>(id[u]);
          my_s[u] = sk;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kTok; ++u)
      if (t0 + u < T) write_picks(ids, w, t0 + u, topk, lane, my_id[u], my_s[u], total[u], scale);
  }
}

__global__ void __launch_bounds__(256) hash_kernel(const float* __restrict__ logits, int64_t stride,
                                                   const int64_t* __restrict__ tokens, const int* __restrict__ table,
                                                   int64_t vocab, int T, int E, int topk, float scale,
                                                   int* __restrict__ ids, float* __restrict__ w) {
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int64_t step = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5); t < T; t += step) {
    const int64_t v = __ldg(tokens + t);
    int id = -1;
    if (lane < topk && v >= 0 && v < vocab) {
      const int ent = __ldg(table + v * topk + lane);
      id = ent >= 0 && ent < E ? ent : -1;
    }
    const float s = id >= 0 ? sqrt_softplus(__ldg(logits + t * stride + id)) : 0.0f;
    float total = 0.0f;
    for (int k = 0; k < topk; ++k) total += __shfl_sync(kFull, s, k);
    write_picks(ids, w, t, topk, lane, id, s, total, scale);
  }
}

int blocks_for(int64_t T, int64_t warps, int64_t tokens) {
  const int64_t per_block = warps * tokens;
  return static_cast<int>((T + per_block - 1) / per_block);
}

void check_common(const torch::Tensor& logits, const torch::Tensor& ids, const torch::Tensor& w, int64_t topk,
                  int64_t warps, int64_t tokens) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && logits.scalar_type() == torch::kFloat32,
              "logits must be a 2-D float32 CUDA tensor");
  TORCH_CHECK(logits.stride(1) == 1, "logits must have unit stride along experts");
  TORCH_CHECK(topk >= 1 && topk <= kMaxTopk && topk <= logits.size(1), "topk must be in [1, min(32, E)]");
  TORCH_CHECK(logits.size(0) < (1LL << 31), "at most 2^31 - 1 tokens");
  TORCH_CHECK(ids.scalar_type() == torch::kInt32 && w.scalar_type() == torch::kFloat32 &&
                  ids.numel() == logits.size(0) * topk && w.numel() == logits.size(0) * topk,
              "ids (int32) and w (float32) must be contiguous [T, topk]");
  TORCH_CHECK(warps >= 1 && warps <= 8 && tokens >= 1, "warps must be in [1, 8] and tokens >= 1");
}

}  // namespace

void route_scored(torch::Tensor logits, torch::Tensor bias, bool has_bias, double route_scale, int64_t topk,
                  torch::Tensor ids, torch::Tensor w, int64_t warps, int64_t tokens) {
  check_common(logits, ids, w, topk, warps, tokens);
  const int64_t T = logits.size(0), E = logits.size(1);
  TORCH_CHECK(E <= 128 * kMaxVec, "at most 512 experts");
  TORCH_CHECK(!has_bias || (bias.is_cuda() && bias.scalar_type() == torch::kFloat32 && bias.numel() == E),
              "bias must be a float32 CUDA tensor of E elements");
  if (T == 0) return;
  const at::cuda::CUDAGuard guard(logits.device());
  const float* x = logits.data_ptr<float>();
  const float* b = has_bias ? bias.data_ptr<float>() : x;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && logits.stride(0) % 4 == 0 &&
                       (!has_bias || reinterpret_cast<uintptr_t>(b) % 16 == 0);
  const int vec = static_cast<int>((E + 127) / 128);
  auto launch = [&](auto kernel) {
    kernel<<<blocks_for(T, warps, tokens), static_cast<int>(warps * 32), 0, at::cuda::getCurrentCUDAStream()>>>(
        x, logits.stride(0), b, has_bias, static_cast<int>(T), static_cast<int>(E), static_cast<int>(topk),
        static_cast<float>(route_scale), ids.data_ptr<int>(), w.data_ptr<float>());
  };
  auto by_vec = [&](auto aligned_tag, auto tok_tag) {
    constexpr bool kA = decltype(aligned_tag)::value;
    constexpr int kT = decltype(tok_tag)::value;
    if (vec == 1) launch(scored_kernel<1, kA, kT>);
    else if (vec == 2) launch(scored_kernel<2, kA, kT>);
    else if (vec == 3) launch(scored_kernel<3, kA, kT>);
    else launch(scored_kernel<4, kA, kT>);
  };
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (aligned) {
    if (tokens == 1) by_vec(std::true_type{}, One{});
    else by_vec(std::true_type{}, Two{});
  } else {
    if (tokens == 1) by_vec(std::false_type{}, One{});
    else by_vec(std::false_type{}, Two{});
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void route_hash(torch::Tensor logits, torch::Tensor input_ids, torch::Tensor tid2eid, double route_scale,
                int64_t topk, torch::Tensor ids, torch::Tensor w, int64_t warps, int64_t tokens) {
  check_common(logits, ids, w, topk, warps, tokens);
  const int64_t T = logits.size(0), E = logits.size(1);
  TORCH_CHECK(input_ids.is_cuda() && input_ids.scalar_type() == torch::kInt64 && input_ids.numel() == T,
              "input_ids must be int64 [T] on the CUDA device");
  TORCH_CHECK(tid2eid.is_cuda() && tid2eid.scalar_type() == torch::kInt32 && tid2eid.dim() == 2 &&
                  tid2eid.size(1) == topk,
              "tid2eid must be int32 [vocab, topk] on the CUDA device");
  if (T == 0) return;
  const at::cuda::CUDAGuard guard(logits.device());
  hash_kernel<<<blocks_for(T, warps, tokens), static_cast<int>(warps * 32), 0, at::cuda::getCurrentCUDAStream()>>>(
      logits.data_ptr<float>(), logits.stride(0), input_ids.data_ptr<int64_t>(), tid2eid.data_ptr<int>(),
      tid2eid.size(0), static_cast<int>(T), static_cast<int>(E), static_cast<int>(topk),
      static_cast<float>(route_scale), ids.data_ptr<int>(), w.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("route_scored", &route_scored, "Scored-layer routing into ids int32 [T, topk] and w float32 [T, topk]",
        py::arg("logits"), py::arg("bias"), py::arg("has_bias"), py::arg("route_scale"), py::arg("topk"),
        py::arg("ids"), py::arg("w"), py::arg("warps"), py::arg("tokens"));
  m.def("route_hash", &route_hash, "Hash-layer routing into ids int32 [T, topk] and w float32 [T, topk]",
        py::arg("logits"), py::arg("input_ids"), py::arg("tid2eid"), py::arg("route_scale"), py::arg("topk"),
        py::arg("ids"), py::arg("w"), py::arg("warps"), py::arg("tokens"));
}
