// Top-k per row, one 512-thread block per row (the contract of topk.py's module doc).
//
// Keys: fp32 -> order-preserving uint32 (NaN highest, as torch.topk).
//   1. A bracket: a histogram of the top 11 bits of 1024 or 2048 keys sampled from the row (groups of 8
//      neighbours); the digits of two sample ranks, 4 sigma either side of K's, bracket the K-th largest
//      key (w.h.p.).
//   2. One pass over the row in index order: keys above the bracket go straight to the output, keys inside
//      it are gathered into shared memory as (key, column). Rows of at most two samples gather everything.
//   3. Radix select on the gathered keys (11-bit digits, from the first bit the bracket leaves open) fixes
//      the (K - above)-th largest exactly; one pass writes the gathered keys above it, then its lowest-index
//      ties. When the bracket missed (ties, adversarial rows) the same select runs on the whole row.
// Positions come from block scans, never from atomics: the output order is the same on every call.

#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cub/block/block_scan.cuh>

namespace {

constexpr int kThreads = 512;
constexpr int kItems = 4;  // keys per thread in the sample and in ordered passes over gathered keys
constexpr int kTile = kThreads * kItems;
constexpr int kBins = 2048;  // 11-bit digits
constexpr int kCap = 8192;   // gathered keys held in shared memory

using Scan = cub::BlockScan<int, kThreads>;

struct Smem {
  typename Scan::TempStorage scan;
  int hist[kBins];
  int bin;
  int above;
  uint32_t hi;
  uint32_t lo;
  uint32_t ckey[kCap];
  int cidx[kCap];
};

__device__ __forceinline__ uint32_t sort_key(float x) {
  const uint32_t b = __float_as_uint(x);
  const uint32_t k = (b >> 31) ? ~b : (b | 0x80000000u);
  return (x != x) ? 0xFFFFFFFFu : k;
}

struct RowSource {  // the row in global memory: (key, column) of column i
  const float* base;
  int64_t stride;
  __device__ __forceinline__ uint32_t key(int i) const { return sort_key(__ldg(base + i * stride)); }
  __device__ __forceinline__ int col(int i) const { return i; }
};

struct GatheredSource {  // the keys gathered in shared memory
  const Smem* s;
  __device__ __forceinline__ uint32_t key(int i) const { return s->ckey[i]; }
  __device__ __forceinline__ int col(int i) const { return s->cidx[i]; }
};

// The digit holding the want-th largest key (1-based, want >= 1 and at most the keys counted) among nbins
// bins (a power of two <= 2048) and the number of keys in larger digits, into s.bin / s.above.
__device__ void find_bin(Smem& s, int want, int nbins) {
  const int per = nbins > kThreads ? nbins / kThreads : 1;
  int local[kBins / kThreads] = {};
  int sum = 0;
  for (int j = 0; j < per; ++j) {
    const int r = threadIdx.x * per + j;  // rank of the bin from the top: thread 0 holds the largest digits
    local[j] = r < nbins ? s.hist[nbins - 1 - r] : 0;
    sum += local[j];
  }
  int run;
  Scan(s.scan).ExclusiveSum(sum, run);
  for (int j = 0; j < per; ++j) {
    if (local[j] > 0 && run < want && run + local[j] >= want) {
      s.bin = nbins - 1 - (threadIdx.x * per + j);
      s.above = run;
    }
    run += local[j];
  }
  __syncthreads();
}

// The want-th largest key of src[0, n) (whose bits above `open` all equal `fixed`) by 11-bit digits, then
// its keys above it and its lowest-index ties at out_row[pos0, pos0 + want), in index order.
template <class Src>
__device__ void select_write(Smem& s, const Src& src, int n, int want, int* out_row, int pos0, int open,
                             uint64_t fixed) {
  while (open > 0) {
    const int width = min(11, open);
    const int shift = open - width;
    for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const uint32_t k = src.key(i);
      if ((static_cast<uint64_t>(k) >> open) == fixed) atomicAdd(&s.hist[(k >> shift) & ((1u << width) - 1)], 1);
    }
    __syncthreads();
    find_bin(s, want, 1 << width);
    fixed = (fixed << width) | static_cast<uint32_t>(s.bin);
    want -= s.above;
    open = shift;
    __syncthreads();
  }
  const uint32_t t = static_cast<uint32_t>(fixed);
  const int ties = want;  // ties at t to take, lowest index first
  int taken = pos0, eq_seen = 0;
  for (int base = 0; base < n; base += kTile) {
    uint32_t keys[kItems];
    int packed = 0;
    for (int j = 0; j < kItems; ++j) {
      const int i = base + threadIdx.x * kItems + j;
      keys[j] = i < n ? src.key(i) : 0u;
      packed += (i < n && keys[j] > t) + ((i < n && keys[j] == t) << 16);
    }
    int excl, total;
    Scan(s.scan).ExclusiveSum(packed, excl, total);
    int pg = excl & 0xFFFF, pe = eq_seen + (excl >> 16);
    for (int j = 0; j < kItems; ++j) {
      const int i = base + threadIdx.x * kItems + j;
      if (i >= n) continue;
      if (keys[j] > t) {
        out_row[taken + pg++] = src.col(i);
      } else if (keys[j] == t) {
        if (pe < ties) out_row[taken + (total & 0xFFFF) + pe - eq_seen] = src.col(i);
        ++pe;
      }
    }
    // the ties taken in this tile follow its keys above t; later tiles start after both
    const int eq_tile = total >> 16;
    taken += (total & 0xFFFF) + max(0, min(ties - eq_seen, eq_tile));
    eq_seen += eq_tile;
    __syncthreads();
  }
}

// s.hi / s.lo: the keys in [lo, hi] hold the row's K-th largest (w.h.p.): the top-11-bit digits of the
// sample's j_hi-th and j_lo-th largest keys, 4 sigma of the sample rank either side of K's, widened to
// whole digits (all ones / 0 past the sample's ends).
template <int kSample>
__device__ void bracket(Smem& s, const RowSource& src, int length, int k) {
  constexpr int kSpt = kSample / kThreads;  // sampled keys per thread
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
  __syncthreads();
  const int64_t group = threadIdx.x / (8 / kSpt);
  for (int j = 0; j < kSpt; ++j) {
    const int64_t pos = group * length / (kSample / 8) + (threadIdx.x % (8 / kSpt)) * kSpt + j;
    atomicAdd(&s.hist[src.key(static_cast<int>(min(pos, static_cast<int64_t>(length - 1)))) >> 21], 1);
  }
  __syncthreads();
  const float q = static_cast<float>(k) / static_cast<float>(length);
  const float r = q * kSample;
  const float m = 4.0f * sqrtf(r * (1.0f - q)) + 4.0f;
  const int j_hi = static_cast<int>(floorf(r - m)), j_lo = static_cast<int>(ceilf(r + m));
  uint32_t hi = 0xFFFFFFFFu, lo = 0u;
  if (j_hi >= 1) {
    find_bin(s, j_hi, kBins);
    hi = static_cast<uint32_t>(((static_cast<uint64_t>(s.bin) + 1) << 21) - 1);
  }
  if (j_lo <= kSample) {
    find_bin(s, j_lo, kBins);
    lo = static_cast<uint32_t>(s.bin) << 21;
  }
  __syncthreads();  // every thread has read s.bin before it is written again
  if (threadIdx.x == 0) {
    s.hi = hi;
    s.lo = lo;
  }
  __syncthreads();
}

// kRowItems: consecutive columns per thread in the pass over the row (16-byte loads, all in flight at once);
// kSample: keys sampled for the bracket; kMinBlocks: blocks per SM the registers are capped for.
template <int kRowItems, int kSample, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) topk_kernel(const float* __restrict__ x, int64_t sxm, int64_t sxn,
                                                           const int* __restrict__ starts,
                                                           const int* __restrict__ ends, int cols, int k,
                                                           int* __restrict__ out, int64_t som) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int row = blockIdx.x;
  const int start = min(max(starts[row], 0), cols);
  const int length = max(min(ends[row], cols) - start, 0);
  constexpr int kRowTile = kThreads * kRowItems;
  int* out_row = out + row * som;
  if (length <= k) {
    for (int i = threadIdx.x; i < k; i += kThreads) out_row[i] = i < length ? i : -1;
    return;
  }
  const RowSource row_src{x + row * sxm + static_cast<int64_t>(start) * sxn, sxn};
  const bool vec = sxn == 1 && (reinterpret_cast<uintptr_t>(row_src.base) & 15) == 0;
  uint32_t hi = 0xFFFFFFFFu, lo = 0u;  // rows of at most two samples' columns: every key is gathered
  if (length > 2 * kSample) {
    bracket<kSample>(s, row_src, length, k);
    hi = s.hi;
    lo = s.lo;
  }
  // 2. keys above hi to the output, keys in [lo, hi] gathered, both in index order
  auto load_tile = [&](uint32_t(&keys)[kRowItems], int i0) {
    if (vec && i0 + kRowItems <= length) {
      const float4* p = reinterpret_cast<const float4*>(row_src.base + i0);
      float4 v[kRowItems / 4];
      for (int j = 0; j < kRowItems / 4; ++j) v[j] = __ldg(p + j);  // all in flight before any is used
      for (int j = 0; j < kRowItems / 4; ++j) {
        keys[4 * j] = sort_key(v[j].x);
        keys[4 * j + 1] = sort_key(v[j].y);
        keys[4 * j + 2] = sort_key(v[j].z);
        keys[4 * j + 3] = sort_key(v[j].w);
      }
    } else {
      for (int j = 0; j < kRowItems; ++j) keys[j] = i0 + j < length ? row_src.key(i0 + j) : 0u;
    }
  };
  int n_gt = 0, n_c = 0;
  for (int base = 0; base < length; base += kRowTile) {
    const int i0 = base + threadIdx.x * kRowItems;
    uint32_t keys[kRowItems];
    load_tile(keys, i0);  // (loading the next tile during this one was slower: registers)
    int packed = 0;
    for (int j = 0; j < kRowItems; ++j) {
      const bool ok = i0 + j < length;
      packed += (ok && keys[j] > hi) + ((ok && keys[j] >= lo && keys[j] <= hi) << 16);
    }
    int excl, total;
    Scan(s.scan).ExclusiveSum(packed, excl, total);
    int pg = n_gt + (excl & 0xFFFF), pc = n_c + (excl >> 16);
    for (int j = 0; j < kRowItems; ++j) {
      const int i = i0 + j;
      if (i >= length) continue;
      if (keys[j] > hi) {
        if (pg < k) out_row[pg] = i;
        ++pg;
      } else if (keys[j] >= lo) {
        if (pc < kCap) {
          s.ckey[pc] = keys[j];
          s.cidx[pc] = i;
        }
        ++pc;
      }
    }
    n_gt += total & 0xFFFF;
    n_c += total >> 16;
    __syncthreads();
  }
  // 3. the exact selection among the gathered keys; the whole row when the bracket missed or overflowed
  if (n_gt <= k && n_gt + n_c >= k && n_c <= kCap) {
    if (n_gt < k) {
      const int open = lo == hi ? 0 : 32 - __clz(lo ^ hi);  // the bits the bracket leaves open
      select_write(s, GatheredSource{&s}, n_c, k - n_gt, out_row, n_gt, open, static_cast<uint64_t>(hi) >> open);
    }
  } else {
    select_write(s, row_src, length, k, out_row, 0, 32, 0);
  }
}

}  // namespace

torch::Tensor topk_per_row(torch::Tensor logits, torch::Tensor starts, torch::Tensor ends, int64_t k) {
  TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && logits.scalar_type() == torch::kFloat32,
              "logits must be a 2-D float32 CUDA tensor");
  TORCH_CHECK(k >= 1 && k < (1 << 30), "k must be in [1, 2^30)");
  const at::cuda::CUDAGuard guard(logits.device());
  const int64_t rows = logits.size(0), cols = logits.size(1);
  TORCH_CHECK(starts.numel() == rows && ends.numel() == rows, "starts and ends must be [rows]");
  TORCH_CHECK(cols < (1LL << 31), "at most 2^31 - 1 columns");
  auto out = torch::empty({rows, k}, logits.options().dtype(torch::kInt32));
  if (rows == 0) return out;
  auto s = starts.to(torch::kInt32).contiguous();
  auto e = ends.to(torch::kInt32).contiguous();
  const size_t smem = sizeof(Smem);
  static bool configured[2][64] = {};  // per kernel and device, on the first call (outside any graph capture)
  auto launch = [&](auto kernel, int which) {
    const int dev = logits.get_device();
    if (dev >= 64 || !configured[which][dev]) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
      if (dev < 64) configured[which][dev] = true;
    }
    kernel<<<rows, kThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
        logits.data_ptr<float>(), logits.stride(0), logits.stride(1), s.data_ptr<int>(), e.data_ptr<int>(),
        static_cast<int>(cols), static_cast<int>(k), out.data_ptr<int>(), out.stride(0));
  };
  // Measured on an H200: rows enough for several waves of blocks run best at 3 blocks per SM (fewer
  // registers, 8 columns per thread, a 1024-key sample); fewer or longer rows at 2 blocks per SM with 16
  // columns per thread and a 2048-key sample, whose tighter bracket still fits long rows' gathered keys.
  if (rows >= 1024 && cols <= 32768) {
    launch(topk_kernel<8, 1024, 3>, 0);
  } else {
    launch(topk_kernel<16, 2048, 2>, 1);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("topk_per_row", &topk_per_row, "Top-k per row (radix select; int32 [rows, k], request-local indices)");
}
