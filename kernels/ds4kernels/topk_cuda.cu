// Top-k per row, one 512-thread block per row (the contract of topk.py's module doc).
//
// Keys: fp32 -> order-preserving uint32 (NaN highest, as torch.topk).
//   1. A bracket: a histogram of the top 11 bits of 1024 or 2048 keys sampled from the row (groups of 8
//      neighbours); the digits of two sample ranks, 4 sigma either side of K's, bracket the K-th largest
//      key (w.h.p.).
//   2. One pass over the row in index order: keys above the bracket go straight to the output, keys inside
//      it are gathered into shared memory as (key, column). Rows of at most two samples gather everything.
//      The pass compares the floats themselves against the bracket where that decides exactly as the keys
//      would (float_test), and each thread walks bit masks of its hits rather than branching per column. The
//      gathered keys' first select digits are counted as they are gathered.
//   3. Radix select on the gathered keys (11-bit digits, from the first bit the bracket leaves open) fixes
//      the (K - above)-th largest exactly; one pass writes the gathered keys above it, then its lowest-index
//      ties. When the bracket missed (ties, adversarial rows) the same select runs on the whole row.
// Positions come from block scans, never from atomics: the output order is the same on every call.

#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cub/block/block_scan.cuh>

#include <type_traits>

namespace {

constexpr int kThreads = 512;
constexpr int kItems = 4;  // keys per thread in the sample and in ordered passes over gathered keys
constexpr int kTile = kThreads * kItems;
constexpr int kCap = 8192;   // gathered keys held in shared memory
constexpr int kBinBits = 11;  // digit width of the bracket's sample histogram and of each select round
constexpr int kBins = 1 << kBinBits;

// Phase clocks (built with -DDS4_TOPK_PHASES, benchmarks/kernels_topk_phases.py): thread 0 of block r stamps
// (clock64, %globaltimer ns) after a block barrier at each phase boundary into g_phase[r][phase] for r < kPhaseRows.
// 0 start, 1 bracket done, 2 pass over the row done, 3 select rounds done, 4 end. Off by default: no cost.
#ifdef DS4_TOPK_PHASES
constexpr int kPhaseRows = 1 << 14;
constexpr int kPhases = 5;
__device__ long long g_phase[kPhaseRows][kPhases][2];
__device__ __forceinline__ void phase(int i) {
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x < kPhaseRows) {
    long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    g_phase[blockIdx.x][i][0] = clock64();
    g_phase[blockIdx.x][i][1] = ns;
  }
}
#else
__device__ __forceinline__ void phase(int) {}
#endif

template <cub::BlockScanAlgorithm kAlgo>
struct SmemT {
  using Scan = cub::BlockScan<int, kThreads, kAlgo>;
  typename Scan::TempStorage scan;
  typename Scan::TempStorage scan2;  // the pass over the row alternates the two: no barrier between tiles
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

template <class Smem>
using ScanOf = typename Smem::Scan;

template <class Smem>
struct GatheredSource {  // the keys gathered in shared memory
  const Smem* s;
  __device__ __forceinline__ uint32_t key(int i) const { return s->ckey[i]; }
  __device__ __forceinline__ int col(int i) const { return s->cidx[i]; }
};

// The digit holding the want-th largest key (1-based, want >= 1 and at most the keys counted) among nbins
// bins (a power of two <= kBins) and the number of keys in larger digits, into s.bin / s.above.
template <class Smem>
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
  ScanOf<Smem>(s.scan).ExclusiveSum(sum, run);
  for (int j = 0; j < per; ++j) {
    if (local[j] > 0 && run < want && run + local[j] >= want) {
      s.bin = nbins - 1 - (threadIdx.x * per + j);
      s.above = run;
    }
    run += local[j];
  }
  __syncthreads();
}

// The want-th largest key of src[0, n) (whose bits above `open` all equal `fixed`) by kBinBits-bit digits, then
// its keys above it and its lowest-index ties at out_row[pos0, pos0 + want), in index order.
// built: s.hist already holds the first round's digits of src's keys (the pass over the row counted them).
template <class Smem, class Src>
__device__ void select_write(Smem& s, const Src& src, int n, int want, int* out_row, int pos0, int open,
                             uint64_t fixed, bool built = false) {
  while (open > 0) {
    const int width = min(kBinBits, open);
    const int shift = open - width;
    if (!built) {
      for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
      __syncthreads();
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const uint32_t k = src.key(i);
        if ((static_cast<uint64_t>(k) >> open) == fixed) atomicAdd(&s.hist[(k >> shift) & ((1u << width) - 1)], 1);
      }
      __syncthreads();
    }
    built = false;
    find_bin(s, want, 1 << width);
    fixed = (fixed << width) | static_cast<uint32_t>(s.bin);
    want -= s.above;
    open = shift;
    __syncthreads();
  }
  phase(3);
  const uint32_t t = static_cast<uint32_t>(fixed);
  const int ties = want;  // ties at t to take, lowest index first
  int taken = pos0, eq_seen = 0;
  for (int base = 0; base < n; base += kTile) {
    const int i0 = base + threadIdx.x * kItems;
    uint32_t gt = 0, eq = 0;  // bit j: column i0 + j is above t / equal to it
    for (int j = 0; j < kItems; ++j) {
      if (i0 + j < n) {
        const uint32_t key = src.key(i0 + j);
        gt |= static_cast<uint32_t>(key > t) << j;
        eq |= static_cast<uint32_t>(key == t) << j;
      }
    }
    int excl, total;
    ScanOf<Smem>(s.scan).ExclusiveSum(__popc(gt) + (__popc(eq) << 16), excl, total);
    int pg = excl & 0xFFFF, pe = eq_seen + (excl >> 16);
    for (; gt; gt &= gt - 1) out_row[taken + pg++] = src.col(i0 + __ffs(gt) - 1);
    for (; eq && pe < ties; eq &= eq - 1) out_row[taken + (total & 0xFFFF) + pe++ - eq_seen] = src.col(i0 + __ffs(eq) - 1);
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
template <int kSample, class Smem>
__device__ void bracket(Smem& s, const RowSource& src, int length, int k) {
  constexpr int kSpt = kSample / kThreads;  // sampled keys per thread
  constexpr int kShift = 32 - kBinBits;
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
  __syncthreads();
  const int64_t group = threadIdx.x / (8 / kSpt);
  for (int j = 0; j < kSpt; ++j) {
    const int64_t pos = group * length / (kSample / 8) + (threadIdx.x % (8 / kSpt)) * kSpt + j;
    atomicAdd(&s.hist[src.key(static_cast<int>(min(pos, static_cast<int64_t>(length - 1)))) >> kShift], 1);
  }
  __syncthreads();
  const float q = static_cast<float>(k) / static_cast<float>(length);
  const float r = q * kSample;
  const float m = 4.0f * sqrtf(r * (1.0f - q)) + 4.0f;
  const int j_hi = static_cast<int>(floorf(r - m)), j_lo = static_cast<int>(ceilf(r + m));
  uint32_t hi = 0xFFFFFFFFu, lo = 0u;
  if (j_hi >= 1) {
    find_bin(s, j_hi, kBins);
    hi = static_cast<uint32_t>(((static_cast<uint64_t>(s.bin) + 1) << kShift) - 1);
  }
  if (j_lo <= kSample) {
    find_bin(s, j_lo, kBins);
    lo = static_cast<uint32_t>(s.bin) << kShift;
  }
  __syncthreads();  // every thread has read s.bin before it is written again
  if (threadIdx.x == 0) {
    s.hi = hi;
    s.lo = lo;
  }
  __syncthreads();
}

// The two tests of the pass over the row: above the bracket (to the output) and inside it (gathered).
struct KeyTest {  // on the keys (any bracket)
  using T = uint32_t;
  uint32_t hi, lo;
  __device__ __forceinline__ static T of(float x) { return sort_key(x); }
  __device__ __forceinline__ bool above(T v) const { return v > hi; }
  __device__ __forceinline__ bool inside(T v) const { return v >= lo; }  // for keys not above
};

struct FloatTest {  // the same tests as float compares, without the key of every column (see float_test)
  using T = float;
  float g, lo;
  __device__ __forceinline__ static T of(float x) { return x; }
  __device__ __forceinline__ bool above(T v) const { return !(v < g); }  // NaN is above, as its key
  __device__ __forceinline__ bool inside(T v) const { return v >= lo; }
};

__device__ __forceinline__ float key_float(uint32_t k) {  // the float whose key is k (k a non-NaN key)
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

// The bracket [lo, hi] as float compares, when they decide exactly as KeyTest does for every float x:
// key(x) > hi <=> key(x) >= hi + 1 <=> !(x < key_float(hi + 1)), and key(x) >= lo <=> x >= key_float(lo).
// Both hold for a threshold from -inf's key to +inf's other than +0's (the floats -0 and +0 compare equal,
// their keys do not). NaN's key (all ones) is above every hi but all ones, which is left to KeyTest; lo = 0
// takes every key, as x >= -inf takes every float but NaN, which is above.
__device__ __forceinline__ bool float_test(uint32_t hi, uint32_t lo, FloatTest& t) {
  auto exact = [](uint32_t k) { return k >= 0x007FFFFFu && k <= 0xFF800000u && k != 0x80000000u; };
  if (hi == 0xFFFFFFFFu || !exact(hi + 1) || (lo != 0u && !exact(lo))) return false;
  t.g = key_float(hi + 1);
  t.lo = lo == 0u ? -INFINITY : key_float(lo);
  return true;
}

// Columns [base, base + kRowItems * kThreads) of the row into q, kRowItems consecutive ones per thread:
// 16-byte loads where the row allows them, all in flight before any is used; columns past length read 0.
template <int kRowItems>
__device__ __forceinline__ void load_tile(float4* q, const RowSource& src, bool vec, int length, int base) {
  constexpr int kQ = kRowItems / 4;
  const int i0 = base + threadIdx.x * kRowItems;
  if (vec && i0 + kRowItems <= length) {
    const float4* p = reinterpret_cast<const float4*>(src.base + i0);
#pragma unroll
    for (int j = 0; j < kQ; ++j) q[j] = __ldg(p + j);
  } else {
    float f[kRowItems];
#pragma unroll
    for (int j = 0; j < kRowItems; ++j)
      f[j] = i0 + j < length ? __ldg(src.base + static_cast<int64_t>(i0 + j) * src.stride) : 0.0f;
#pragma unroll
    for (int j = 0; j < kQ; ++j) q[j] = make_float4(f[4 * j], f[4 * j + 1], f[4 * j + 2], f[4 * j + 3]);
  }
}

// The pass over the row in index order: columns above the bracket to out_row[n_gt], columns inside it
// gathered into s.ckey / s.cidx[n_c] (as many as fit); n_gt and n_c count them all. q holds tile 0 (loaded by
// the caller), and each gathered key's digit (key >> hshift) & hmask is counted into s.hist (the select's first
// round, which then needs no pass of its own over the gathered keys). Whole tiles run without
// bounds checks, the last one with them. Each thread keeps which of its columns go where as bit masks and
// walks only their set bits (a branch per column would run, predicated, in nearly every warp: sparse hits;
// measured on the H200, that predicated scatter was slower at every benchmark shape, dense rows included).
template <int kRowItems, class Smem, class Test>
__device__ __forceinline__ void row_pass(Smem& s, const RowSource& src, bool vec, int length, int k, int* out_row,
                                         const Test& t, float4* q, int hshift, uint32_t hmask, int& n_gt, int& n_c) {
  constexpr int kRowTile = kThreads * kRowItems;
  n_gt = 0;
  n_c = 0;
  // (array-reference lambda parameters crash nvcc 13.0's front end: pointers)
  auto tile = [&](const float4* q, int base, auto& scan_storage, auto full) {
    constexpr bool kFull = decltype(full)::value;
    const int i0 = base + threadIdx.x * kRowItems;
    uint32_t up = 0, in = 0;  // bit j: column i0 + j is above the bracket / inside it
#pragma unroll
    for (int j = 0; j < kRowItems; ++j) {
      const float x = j % 4 == 0 ? q[j / 4].x : j % 4 == 1 ? q[j / 4].y : j % 4 == 2 ? q[j / 4].z : q[j / 4].w;
      const typename Test::T v = Test::of(x);
      const bool ok = kFull || i0 + j < length;
      const bool a = t.above(v);
      up |= static_cast<uint32_t>(ok && a) << j;
      in |= static_cast<uint32_t>(ok && !a && t.inside(v)) << j;
    }
    int excl, total;
    ScanOf<Smem>(scan_storage).ExclusiveSum(__popc(up) + (__popc(in) << 16), excl, total);
    int pg = n_gt + (excl & 0xFFFF), pc = n_c + (excl >> 16);
    for (; up && pg < k; up &= up - 1) out_row[pg++] = i0 + __ffs(up) - 1;
    for (; in && pc < kCap; in &= in - 1) {  // the key again from the line just read (L1)
      const int i = i0 + __ffs(in) - 1;
      const uint32_t key = src.key(i);
      s.ckey[pc] = key;
      s.cidx[pc++] = i;
      atomicAdd(&s.hist[(key >> hshift) & hmask], 1);
    }
    n_gt += total & 0xFFFF;
    n_c += total >> 16;
  };
  // (loading the next tile during this one was slower on the H200: 32.7 vs 30.2 us at 256 x 32768)
  int n = 0;
  for (int base = 0; base < length; base += kRowTile, ++n) {
    auto& storage = n & 1 ? s.scan2 : s.scan;
    if (base + kRowTile <= length) {
      tile(q, base, storage, std::true_type{});
    } else {
      tile(q, base, storage, std::false_type{});
    }
    if (base + kRowTile < length) load_tile<kRowItems>(q, src, vec, length, base + kRowTile);
  }
  __syncthreads();  // the gathered keys and the scan storage, before the selection
}

// kRowItems: consecutive columns per thread in the pass over the row (16-byte loads, all in flight at once);
// kSample: keys sampled for the bracket; kMinBlocks: blocks per SM the registers are capped for;
// kAlgo: CUB's block scan; kEarly: the pass's first tile is loaded before the bracket, not after it;
// float_pass: the pass tests floats where the bracket allows it (float_test), else keys.
template <int kRowItems, int kSample, int kMinBlocks, cub::BlockScanAlgorithm kAlgo, bool kEarly>
__global__ void __launch_bounds__(kThreads, kMinBlocks) topk_kernel(const float* __restrict__ x, int64_t sxm, int64_t sxn,
                                                           const int* __restrict__ starts,
                                                           const int* __restrict__ ends, int cols, int k,
                                                           int* __restrict__ out, int64_t som, bool float_pass) {
  using Smem = SmemT<kAlgo>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int row = blockIdx.x;
  const int start = min(max(starts[row], 0), cols);
  const int length = max(min(ends[row], cols) - start, 0);
  int* out_row = out + row * som;
  if (length <= k) {
    for (int i = threadIdx.x; i < k; i += kThreads) out_row[i] = i < length ? i : -1;
    return;
  }
  phase(0);
  const RowSource row_src{x + row * sxm + static_cast<int64_t>(start) * sxn, sxn};
  const bool vec = sxn == 1 && (reinterpret_cast<uintptr_t>(row_src.base) & 15) == 0;
  float4 q[kRowItems / 4];  // tile 0 of the pass over the row
  if (kEarly) load_tile<kRowItems>(q, row_src, vec, length, 0);
  uint32_t hi = 0xFFFFFFFFu, lo = 0u;  // rows of at most two samples' columns: every key is gathered
  if (length > 2 * kSample) {
    bracket<kSample>(s, row_src, length, k);
    hi = s.hi;
    lo = s.lo;
  }
  if (!kEarly) load_tile<kRowItems>(q, row_src, vec, length, 0);
  const int open = lo == hi ? 0 : 32 - __clz(lo ^ hi);  // the bits the bracket leaves open
  const int width = min(kBinBits, open);
  // the select's first round is counted during the pass (the bracket is done with s.hist)
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
  __syncthreads();
  phase(1);
  // 2. keys above hi to the output, keys in [lo, hi] gathered, both in index order
  int n_gt, n_c;
  FloatTest ft;
  if (float_pass && float_test(hi, lo, ft)) {
    row_pass<kRowItems>(s, row_src, vec, length, k, out_row, ft, q, open - width, (1u << width) - 1, n_gt, n_c);
  } else {
    row_pass<kRowItems>(s, row_src, vec, length, k, out_row, KeyTest{hi, lo}, q, open - width, (1u << width) - 1,
                        n_gt, n_c);
  }
  phase(2);
  // 3. the exact selection among the gathered keys; the whole row when the bracket missed or overflowed
  if (n_gt <= k && n_gt + n_c >= k && n_c <= kCap) {
    if (n_gt < k) {
      select_write(s, GatheredSource<Smem>{&s}, n_c, k - n_gt, out_row, n_gt, open, static_cast<uint64_t>(hi) >> open,
                   true);
    } else {
      phase(3);
    }
  } else {
    select_write(s, row_src, length, k, out_row, 0, 32, 0);
  }
  phase(4);
}

}  // namespace

torch::Tensor topk_per_row(torch::Tensor logits, torch::Tensor starts, torch::Tensor ends, int64_t k, bool float_pass) {
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
  static bool configured[2][64] = {};  // per kernel and device, on the first call (outside any graph capture)
  auto launch = [&](auto kernel, int which, size_t smem) {
    const int dev = logits.get_device();
    if (dev >= 64 || !configured[which][dev]) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
      if (dev < 64) configured[which][dev] = true;
    }
    kernel<<<rows, kThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
        logits.data_ptr<float>(), logits.stride(0), logits.stride(1), s.data_ptr<int>(), e.data_ptr<int>(),
        static_cast<int>(cols), static_cast<int>(k), out.data_ptr<int>(), out.stride(0), float_pass);
  };
  // Measured on an H200 (benchmarks/results/kernels_h200_notes.md): rows enough for several waves of blocks run
  // best at 3 blocks per SM (8 columns per thread, a 1024-key sample) with warp-scan block scans; fewer or longer
  // rows at 2 blocks per SM with 16 columns per thread, a 2048-key sample (whose tighter bracket still fits long
  // rows' gathered keys) and raking scans. The first tile loaded before the bracket: 3% faster with many rows
  // (other blocks' passes keep HBM busy meanwhile), 3% slower with few (its loads delay the sample's). 12-bit
  // digits (fewer select rounds) were slower at every shape.
  if (rows >= 1024 && cols <= 32768) {
    launch(topk_kernel<8, 1024, 3, cub::BLOCK_SCAN_WARP_SCANS, true>, 0, sizeof(SmemT<cub::BLOCK_SCAN_WARP_SCANS>));
  } else {
    launch(topk_kernel<16, 2048, 2, cub::BLOCK_SCAN_RAKING, false>, 1, sizeof(SmemT<cub::BLOCK_SCAN_RAKING>));
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

#ifdef DS4_TOPK_PHASES
// int64 [kPhaseRows, 5, 2] on the CPU: the last launch's (clock64, globaltimer ns) per block and phase.
torch::Tensor phase_clocks() {
  auto out = torch::empty({kPhaseRows, kPhases, 2}, torch::dtype(torch::kInt64));
  C10_CUDA_CHECK(cudaDeviceSynchronize());
  C10_CUDA_CHECK(cudaMemcpyFromSymbol(out.data_ptr<int64_t>(), g_phase, sizeof(g_phase)));
  return out;
}
#endif

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
#ifdef DS4_TOPK_PHASES
  m.def("phase_clocks", &phase_clocks, "int64 [rows, 5, 2]: (clock64, globaltimer ns) at each phase boundary");
#endif
  m.def("topk_per_row", &topk_per_row, "Top-k per row (radix select; int32 [rows, k], request-local indices)",
        py::arg("logits"), py::arg("starts"), py::arg("ends"), py::arg("k"), py::arg("float_pass") = true);
}
