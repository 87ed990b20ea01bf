// The fast path of the float32 / bfloat16 / float16 reductions (see reduction_fast.h). Two layouts:
//   runs: each output's reduced elements are one contiguous run. Outputs are spread over
//         the threads; when there are fewer outputs than threads (a full reduction), each run
//         is cut into chunks whose partial results are combined in a fixed order, so the
//         result does not depend on the thread count. On Intel CPUs long runs (or chunks)
//         are read up to four side by side by each thread, more memory streams in flight
//         (decision 0020); on AMD one sequential stream per thread is faster (decision 0049).
//   rows: the kept innermost dim is contiguous in input and output; blocks of that dim are
//         accumulated row by row (one add_row per reduced position), spread over threads.
#include "aligned_scratch.h"
#include "reduction_fast.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "isa/reduce_vec.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/core/error.h"
#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/core/half.h"
#include "reduce_utils.h"
#include "kiln/tensor/strided_loop.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

// Below this many input elements the reduction runs on one thread: the size from which the
// elementwise ops split too (detail::kParallelElements).
constexpr int64_t kParallelElements = int64_t(1) << 15;
static_assert(kParallelElements == detail::kParallelElements);
// Elements per chunk when a single run is split across threads: two chunks at the smallest
// parallel size, so that the sum of an elementwise op's result is read where each half was
// written. With 2^16 a run of 2^15-2^17 elements stayed one chunk on one thread: mse_loss of
// [8, 4096] float32 (a subtraction and a product split over the threads, then the mean)
// took 22.6 us, the other thread taking back every line for the next call's product, and
// 9.7 with the elementwise ops on one thread too.
constexpr int64_t kRunChunk = int64_t(1) << 14;
// Runs (or chunks of one) at least this long are read several at a time by each thread.
constexpr int64_t kGroupedRun = 4096;
// Columns per block in the rows layout (the accumulators stay in L1).
constexpr int64_t kRowBlock = VecReduce::kMaxRow;

// Runs a thread reads side by side (1 to VecReduce::kMaxRuns; decision 0049): four on Intel,
// where interleaved reads measured 35-37 GB/s against 28-29 for one stream per thread, one
// elsewhere (AMD Zen 4: 45-47 GB/s for one stream, 30 for four). KILN_REDUCE_STREAMS sets it
// (for measuring and for testing both paths on any CPU); the results are the same bit for bit.
int read_streams_per_thread() {
  static const int streams = [] {
    const char* v = std::getenv("KILN_REDUCE_STREAMS");
    if (!v || !*v) return cpu_features().vendor == "GenuineIntel" ? VecReduce::kMaxRuns : 1;
    const std::string s = v;
    if (s.size() != 1 || s[0] < '1' || s[0] > char('0' + VecReduce::kMaxRuns))
      throw ValueError("KILN_REDUCE_STREAMS must be 1 to " + std::to_string(VecReduce::kMaxRuns) +
                       ", got '" + s + "'");
    return s[0] - '0';
  }();
  return streams;
}

inline float nan_max(float a, float b) { return (b > a || b != b) ? b : a; }
inline float nan_min(float a, float b) { return (b < a || b != b) ? b : a; }

// The vector functions for input type T: float32, bfloat16 or float16 (the 16-bit types as
// their bits; the float16 entries exist where the CPU has F16C, which fast_reduce checks).
template <typename T>
struct Ops {
  static constexpr bool kF32 = std::is_same_v<T, float>;
  static constexpr bool kHalf = std::is_same_v<T, Half>;
  static const uint16_t* bits(const T* x) { return reinterpret_cast<const uint16_t*>(x); }
  static const uint16_t* const* bits(const T* const* x) {
    return reinterpret_cast<const uint16_t* const*>(x);
  }

  static double sum(const T* x, int64_t n) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) return v.sum_f32(x, n);
    else return (kHalf ? v.sum_f16 : v.sum_bf16)(bits(x), n);
  }
  static double sum_sq_dev(const T* x, int64_t n, double mean) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) return v.sum_sq_dev_f32(x, n, mean);
    else return (kHalf ? v.sum_sq_dev_f16 : v.sum_sq_dev_bf16)(bits(x), n, mean);
  }
  static float extremum(bool is_max, const T* x, int64_t n) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) return is_max ? v.max_f32(x, n) : v.min_f32(x, n);
    else if constexpr (kHalf) return (is_max ? v.max_f16 : v.min_f16)(bits(x), n);
    else return (is_max ? v.max_bf16 : v.min_bf16)(bits(x), n);
  }
  static void sum_runs(const T* const* x, const int64_t* n, int count, double* out) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) v.sum_runs_f32(x, n, count, out);
    else (kHalf ? v.sum_runs_f16 : v.sum_runs_bf16)(bits(x), n, count, out);
  }
  static void extremum_runs(bool is_max, const T* const* x, const int64_t* n, int count,
                            float* out) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) (is_max ? v.max_runs_f32 : v.min_runs_f32)(x, n, count, out);
    else if constexpr (kHalf) (is_max ? v.max_runs_f16 : v.min_runs_f16)(bits(x), n, count, out);
    else (is_max ? v.max_runs_bf16 : v.min_runs_bf16)(bits(x), n, count, out);
  }
  static void sum_strided_runs(const T* x, int64_t stride, int64_t n, int64_t count,
                               double* out) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) v.sum_strided_runs_f32(x, stride, n, count, out);
    else (kHalf ? v.sum_strided_runs_f16 : v.sum_strided_runs_bf16)(bits(x), stride, n, count, out);
  }
  static void extremum_strided_runs(bool is_max, const T* x, int64_t stride, int64_t n,
                                    int64_t count, float* out) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) {
      (is_max ? v.max_strided_runs_f32 : v.min_strided_runs_f32)(x, stride, n, count, out);
    } else if constexpr (kHalf) {
      (is_max ? v.max_strided_runs_f16 : v.min_strided_runs_f16)(bits(x), stride, n, count, out);
    } else {
      (is_max ? v.max_strided_runs_bf16 : v.min_strided_runs_bf16)(bits(x), stride, n, count,
                                                                    out);
    }
  }
  static void sum_rows(double* acc, const T* base, const int64_t* offs, int64_t rows,
                       int64_t n) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) v.sum_rows_f32(acc, base, offs, rows, n);
    else (kHalf ? v.sum_rows_f16 : v.sum_rows_bf16)(acc, bits(base), offs, rows, n);
  }
  static void extremum_rows(bool is_max, float* acc, const T* base, const int64_t* offs,
                            int64_t rows, int64_t n) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) (is_max ? v.max_rows_f32 : v.min_rows_f32)(acc, base, offs, rows, n);
    else if constexpr (kHalf) (is_max ? v.max_rows_f16 : v.min_rows_f16)(acc, bits(base), offs, rows, n);
    else (is_max ? v.max_rows_bf16 : v.min_rows_bf16)(acc, bits(base), offs, rows, n);
  }
  static void sum_periodic(const T* x, int64_t n, int64_t period, double* out) {
    const VecReduce& v = reduce_vec();
    if constexpr (kF32) v.sum_periodic_f32(x, n, period, out);
    else (kHalf ? v.sum_periodic_f16 : v.sum_periodic_bf16)(bits(x), n, period, out);
  }
};

// Many runs shorter than kGroupedRun, equally spaced (kept_dims_collapse): blocks of outputs
// per call of the strided-runs functions, with the results reduce_runs' per-run calls give.
// A call per output plus the offset tables cost 50 us for sum(-1) of [4096, 8] float32
// (torch: 12 us) and 77 us over the 32 channels of a channels-last [8, 32, 28, 28] (18).
template <typename T>
bool reduce_short_runs(const ReduceGeometry& g, const T* src, T* dst, FastReduceKind kind,
                       int threads) {
  int64_t in_stride, out_stride;
  if (!kept_dims_collapse(g, in_stride, out_stride)) return false;
  int64_t outputs = 1;
  for (int64_t s : g.outer_shape) outputs *= s;
  const int64_t n = g.red_numel;
  if (outputs < threads || n >= kGroupedRun) return false;
  const bool extremum = kind == FastReduceKind::Max || kind == FastReduceKind::Min;
  const bool is_max = kind == FastReduceKind::Max;
  // Blocks of up to kBlock outputs, at least two per thread: each run's result is computed on
  // its own, so the split changes none. (With 256 per block, mean(2, 3) of [8, 32, 28, 28]:
  // 256 runs of 784, ran as one block on one thread, 1.6x PyTorch's time.)
  constexpr int64_t kBlock = 256;
  const int64_t block = std::clamp<int64_t>((outputs + 2 * threads - 1) / (2 * threads), 1, kBlock);
  const int64_t blocks = (outputs + block - 1) / block;
  auto run_block = [&](int64_t b) {
    const int64_t o0 = b * block, count = std::min(block, outputs - o0);
    const T* x = src + o0 * in_stride;
    T* out = dst + o0 * out_stride;
    if (extremum) {
      float r[kBlock];
      Ops<T>::extremum_strided_runs(is_max, x, in_stride, n, count, r);
      for (int64_t k = 0; k < count; ++k) out[k * out_stride] = T(r[k]);
    } else {
      double r[kBlock];
      Ops<T>::sum_strided_runs(x, in_stride, n, count, r);
      const double scale = kind == FastReduceKind::Mean ? double(n) : 1.0;
      for (int64_t k = 0; k < count; ++k) out[k * out_stride] = convert_value<T>(r[k] / scale);
    }
  };
  // One thread: no OpenMP region at all (a serialised one costs about 0.25 us, a tenth of
  // amax(-1) of [64, 64]).
  if (threads <= 1) {
    for (int64_t b = 0; b < blocks; ++b) run_block(b);
    return true;
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) run_block(b);
  return true;
}

// Each output's reduced elements are runs.size() contiguous runs of run_len elements at
// these offsets from the output's first input element (one run, offset 0, when the reduced
// elements are contiguous; Var, Std and Norm2 take one run only).
struct ReducedRuns {
  int64_t run_len = 0;
  std::vector<int64_t> offsets{0};
};

template <typename T>
void reduce_runs(const ReduceGeometry& g, const T* src, T* dst, FastReduceKind kind,
                 double correction, const ReducedRuns& runs) {
  if (runs.offsets.size() == 1) {
    const bool short_kind = kind == FastReduceKind::Sum || kind == FastReduceKind::Mean ||
                            kind == FastReduceKind::Max || kind == FastReduceKind::Min;
    int64_t outputs = 1;
    for (int64_t s : g.outer_shape) outputs *= s;
    const bool parallel = outputs * g.red_numel >= kParallelElements && omp_get_max_threads() > 1;
    if (short_kind &&
        reduce_short_runs(g, src, dst, kind, parallel ? omp_get_max_threads() : 1))
      return;
  }
  const KeptOffsets offsets(g);
  const int64_t outputs = offsets.count(), n = runs.run_len;
  const int64_t runs_per_output = int64_t(runs.offsets.size());
  const bool extremum = kind == FastReduceKind::Max || kind == FastReduceKind::Min;
  const bool is_max = kind == FastReduceKind::Max;
  const bool parallel = outputs * g.red_numel >= kParallelElements && omp_get_max_threads() > 1;
  const int threads = parallel ? omp_get_max_threads() : 1;
  // Var, Std and Norm2 finish each run with a square root or a division: one unit per run.
  const bool whole_runs = kind == FastReduceKind::Var || kind == FastReduceKind::Std ||
                          kind == FastReduceKind::Norm2;
  // Chunks per run: 1 unless there are too few runs to keep every thread busy.
  const int64_t chunks = (outputs * runs_per_output < threads && !whole_runs)
                             ? std::clamp<int64_t>(n / kRunChunk, 1, 4 * threads)
                             : 1;
  const int64_t chunk_len = (n + chunks - 1) / chunks;
  const int64_t units = outputs * runs_per_output * chunks;
  std::vector<double> partial(static_cast<size_t>(units));
  // Unit u is chunk u % chunks of run (u / chunks) % runs_per_output of output
  // u / (chunks * runs_per_output): an output's units are consecutive, in memory order.
  // (Divisions only where there is more than one chunk or output: with three 64-bit
  // divisions per unit, sum() over the 2048 rows of a [2048, 384] column slice took 1.3x
  // PyTorch's time, 1.07-1.11x without, measured beside a CI run.)
  auto unit_run = [&](int64_t u, const T*& x, int64_t& len) {
    int64_t c = 0, r = u, o = 0;
    if (chunks > 1) c = u % chunks, r = u / chunks;
    if (outputs > 1) o = r / runs_per_output, r %= runs_per_output;
    const int64_t begin = c * chunk_len;
    len = std::min(n, begin + chunk_len) - begin;
    x = src + offsets.in(o) + runs.offsets[size_t(r)] + begin;
  };
  if (!whole_runs && chunk_len >= kGroupedRun) {
    // Long runs: a thread reads up to kMaxRuns units side by side (VecReduce's *_runs),
    // each with the result it would get alone; groups are sized so that every thread gets
    // the same number of units where the count allows (12 runs on two threads: three groups
    // of four left one thread a third of the work).
    constexpr int kMaxGroup = VecReduce::kMaxRuns;
    const int64_t per_thread = (units + threads - 1) / threads;
    const int64_t groups_per_thread = (per_thread + read_streams_per_thread() - 1) /
                                      read_streams_per_thread();
    const int64_t group = std::clamp<int64_t>(
        (per_thread + groups_per_thread - 1) / groups_per_thread, 1, kMaxGroup);
    const int64_t groups = (units + group - 1) / group;
    parallel_region(parallel, [&] {
#pragma omp for schedule(static)
      for (int64_t g = 0; g < groups; ++g) {
        const T* xs[kMaxGroup];
        int64_t lens[kMaxGroup];
        const int count = int(std::min(group, units - g * group));
        for (int k = 0; k < count; ++k) unit_run(g * group + k, xs[k], lens[k]);
        double* out = &partial[size_t(g * group)];
        if (extremum) {
          float r[kMaxGroup];
          Ops<T>::extremum_runs(is_max, xs, lens, count, r);
          for (int k = 0; k < count; ++k) out[k] = r[k];
        } else {
          Ops<T>::sum_runs(xs, lens, count, out);
        }
      }
    });
  } else {
    parallel_region(parallel, [&] {
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; ++u) {
        const T* x;
        int64_t len;
        unit_run(u, x, len);
        if (extremum) {
          partial[size_t(u)] = Ops<T>::extremum(is_max, x, len);
        } else if (whole_runs) {
          // Var / Std: two passes over the run (mean, then squared deviations), as the generic
          // kernel; Norm2: the squared deviations from 0.
          const double mean =
              kind == FastReduceKind::Norm2 ? 0.0 : Ops<T>::sum(x, len) / double(len);
          // 16-bit floats widened in registers: a pass widening blocks into a buffer first took
          // bfloat16 norm(dim=1) of [2048, 2048] to 1.5x PyTorch's time on one thread.
          const double ss = Ops<T>::sum_sq_dev(x, len, mean);
          if (kind == FastReduceKind::Norm2) {
            partial[size_t(u)] = std::sqrt(ss);
            continue;
          }
          const double var = ss / std::max(0.0, double(len) - correction);
          partial[size_t(u)] = kind == FastReduceKind::Std ? std::sqrt(var) : var;
        } else {
          partial[size_t(u)] = Ops<T>::sum(x, len);
        }
      }
    });
  }
  const int64_t per_output = runs_per_output * chunks;
  for (int64_t o = 0; o < outputs; ++o) {
    const double* p = &partial[size_t(o * per_output)];
    double r = p[0];
    for (int64_t c = 1; c < per_output; ++c) {
      if (extremum) r = is_max ? nan_max(float(r), float(p[c])) : nan_min(float(r), float(p[c]));
      else r += p[c];
    }
    if (kind == FastReduceKind::Mean) r /= double(g.red_numel);
    dst[offsets.out(o)] = extremum ? T(float(r)) : convert_value<T>(r);
  }
}

// Sum / mean / max / min whose reduced elements form several contiguous runs of at least
// this many elements (after reduced_dims_in_memory_order) take reduce_runs with one unit per
// run: sum() of a KV-cache slice [1, 12, 140, 64] of [1, 12, 1024, 64] (12 runs of 8960)
// ran the generic kernel at 83 us against torch's 8 us.
constexpr int64_t kMinSplitRun = 16;

// Kept dims that follow each other in memory in input and output alike merged into one
// (innermost first; size-1 dims dropped), so the rows layout sees the [28, 28] image of sum(1)
// over NCHW [8, 32, 28, 28] as rows of 784 columns rather than 224 rows of 28 with scalar
// tails (30 us against 16 for the same sum over [8, 32, 784], one thread). Row-major output
// order is kept, so every result is the one the unmerged walk gives.
void merge_kept_dims(ReduceGeometry& g) {
  Shape shape;
  Strides in, out;  // innermost first
  for (size_t d = g.outer_shape.size(); d-- > 0;) {
    const int64_t n = g.outer_shape[d];
    if (n == 1) continue;
    if (!shape.empty() && g.outer_in[d] == in.back() * shape.back() &&
        g.outer_out[0][d] == out.back() * shape.back()) {
      shape.back() *= n;
      continue;
    }
    shape.push_back(n);
    in.push_back(g.outer_in[d]);
    out.push_back(g.outer_out[0][d]);
  }
  if (shape.empty()) return;  // one output: nothing to merge
  g.outer_shape.assign(shape.rbegin(), shape.rend());
  g.outer_in.assign(in.rbegin(), in.rend());
  g.outer_out[0].assign(out.rbegin(), out.rend());
}

template <typename T>
void reduce_rows(const ReduceGeometry& g, const T* src, T* dst, FastReduceKind kind) {
  // The kept innermost dim (unit stride in input and output) is split into blocks; the
  // other kept dims are walked by offset.
  const int64_t cols = g.outer_shape.back();
  Shape other_shape(g.outer_shape.begin(), g.outer_shape.end() - 1);
  Strides other_in(g.outer_in.begin(), g.outer_in.end() - 1);
  Strides other_out(g.outer_out[0].begin(), g.outer_out[0].end() - 1);
  std::vector<int64_t> in_off, out_off;
  for_each_offset2(other_shape, other_in, other_out, [&](int64_t i, int64_t o) {
    in_off.push_back(i);
    out_off.push_back(o);
  });
  const bool extremum = kind == FastReduceKind::Max || kind == FastReduceKind::Min;
  // One block of rows of at most 16 columns, the reduced rows following each other (sum(0)
  // of [4096, 8]: a bias gradient): the block summed flat by columns.
  if (!extremum && in_off.size() == 1 && 16 % cols == 0 && g.red.shape.size() == 1 &&
      g.red.strides[0] == cols) {
    std::vector<double> acc(static_cast<size_t>(cols), 0.0);
    const int64_t n = g.red_numel * cols;
    Ops<T>::sum_periodic(src + in_off[0], n, cols, acc.data());
    const double scale = kind == FastReduceKind::Mean ? 1.0 / double(g.red_numel) : 1.0;
    for (int64_t j = 0; j < cols; ++j)
      dst[out_off[0] + j] = convert_value<T>(acc[size_t(j)] * scale);
    return;
  }
  // The reduced rows' offsets, written by index: push_back per row (the vector's end pointer
  // stored and reloaded each time) took 20% of sum(0) of [8192, 64].
  std::vector<int64_t> red_off(static_cast<size_t>(g.red_numel));
  if (g.red.shape.size() == 1) {
    for (int64_t r = 0; r < g.red_numel; ++r) red_off[size_t(r)] = r * g.red.strides[0];
  } else {
    size_t at = 0;
    g.red.for_each([&](int64_t off) { red_off[at++] = off; });
  }
  const int64_t threads = omp_get_max_threads();
  const int64_t outer_rows = int64_t(in_off.size());
  const int64_t rows = int64_t(red_off.size());
  // Few column blocks (a narrow or single [R, C] matrix, sum(0) of [8192, 64]): the reduced
  // rows are cut into pieces of at least kPieceRows, each summed on its own and the pieces
  // added in order. The cut depends on the shape only, never on the thread count, so every
  // thread count gives the same bits; pieces start on whole row groups (kRowGroup rows summed
  // in float before carrying in double), so the float sums are those of one pass. With the
  // columns alone to split, sum(0) of [8192, 64] ran on one thread (54 us, PyTorch 27) and
  // wide matrices were cut into narrow column strips read with a row's stride.
  constexpr int64_t kPieceRows = 512, kMaxPieces = 8, kRowGroup = VecReduce::kRowGroup;
  const int64_t wide_blocks = (cols + kRowBlock - 1) / kRowBlock;
  const int64_t pieces = outer_rows * wide_blocks >= 4
                             ? 1
                             : std::clamp<int64_t>(rows / kPieceRows, 1, kMaxPieces);
  // Otherwise column blocks narrow enough to give each thread two (columns are summed
  // independently, so the split changes no result): with one block of up to kRowBlock
  // columns, sum(0) of [2048, 512] ran on one thread (92 us against PyTorch's 51 on two).
  const int64_t want_blocks = (2 * threads + outer_rows - 1) / outer_rows;
  const int64_t block =
      pieces > 1 ? std::min(kRowBlock, (cols + 15) / 16 * 16)
                 : std::clamp<int64_t>((cols / want_blocks + 15) / 16 * 16, 64, kRowBlock);
  const int64_t blocks = (cols + block - 1) / block;
  const int64_t units = outer_rows * blocks * pieces;
  auto piece_begin = [&](int64_t k) { return k * rows / pieces / kRowGroup * kRowGroup; };
  const bool is_max = kind == FastReduceKind::Max;
  const bool parallel =
      units > 1 && outer_rows * cols * g.red_numel >= kParallelElements && threads > 1;
  // Unit u: piece u % pieces of column block (u / pieces) % blocks of outer row u / (pieces *
  // blocks); its partial result lives at partial[u * block].
  std::vector<double> partial(pieces > 1 && !extremum ? size_t(units * block) : 0);
  AlignedVector<float> partial_best(pieces > 1 && extremum ? size_t(units * block) : 0);
  const double scale = kind == FastReduceKind::Mean ? 1.0 / double(g.red_numel) : 1.0;
  parallel_region(parallel, [&] {
    // A column block's sums / extrema, on the stack: two heap blocks of 4-8 KiB per thread
    // and call (beyond malloc's per-thread cache) were about a tenth of sum(0) of [64, 64].
    alignas(64) double acc[kRowBlock];
    alignas(64) float best[kRowBlock];
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t k = u % pieces, b = u / pieces % blocks, o = u / (pieces * blocks);
      const int64_t c0 = b * block, len = std::min(cols, c0 + block) - c0;
      const int64_t r0 = piece_begin(k), r1 = k + 1 < pieces ? piece_begin(k + 1) : rows;
      const T* base = src + in_off[size_t(o)] + c0;
      T* out = dst + out_off[size_t(o)] + c0;
      if (extremum) {
        float* m = pieces > 1 ? &partial_best[size_t(u * block)] : best;
        for (int64_t i = 0; i < len; ++i) m[i] = float(base[red_off[size_t(r0)] + i]);
        Ops<T>::extremum_rows(is_max, m, base, red_off.data() + r0 + 1, r1 - r0 - 1, len);
        if (pieces == 1)
          for (int64_t i = 0; i < len; ++i) out[i] = T(m[i]);
      } else {
        double* a = pieces > 1 ? &partial[size_t(u * block)] : acc;
        std::fill(a, a + len, 0.0);
        Ops<T>::sum_rows(a, base, red_off.data() + r0, r1 - r0, len);
        if (pieces == 1)
          for (int64_t i = 0; i < len; ++i) out[i] = convert_value<T>(a[i] * scale);
      }
    }
  });
  if (pieces == 1) return;
  // The pieces of each column block combined in order.
  for (int64_t ob = 0; ob < outer_rows * blocks; ++ob) {
    const int64_t o = ob / blocks, c0 = ob % blocks * block, len = std::min(cols, c0 + block) - c0;
    T* out = dst + out_off[size_t(o)] + c0;
    const size_t first = size_t(ob * pieces * block);
    for (int64_t i = 0; i < len; ++i) {
      if (extremum) {
        float m = partial_best[first + size_t(i)];
        for (int64_t k = 1; k < pieces; ++k) {
          const float v = partial_best[first + size_t(k * block + i)];
          m = is_max ? nan_max(m, v) : nan_min(m, v);
        }
        out[i] = T(m);
      } else {
        double a = partial[first + size_t(i)];
        for (int64_t k = 1; k < pieces; ++k) a += partial[first + size_t(k * block + i)];
        out[i] = convert_value<T>(a * scale);
      }
    }
  }
}

template <typename T>
bool run(OpCall& call, FastReduceKind kind) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  ReduceGeometry g = reduce_geometry(in, call.ints_attr(0), call.bool_attr(1), {&out});
  if (g.red_numel == 0 || out.numel() == 0 || g.red.shape.empty()) return false;
  const T* src = static_cast<const T*>(in.raw_data());
  T* dst = static_cast<T*>(out.raw_data());
  const double correction =
      (kind == FastReduceKind::Var || kind == FastReduceKind::Std) ? call.double_attr(2) : 0.0;
  reduced_dims_in_memory_order(g);
  if (g.red.shape.size() == 1 && g.red.strides[0] == 1) {
    ReducedRuns runs;
    runs.run_len = g.red.shape[0];
    reduce_runs(g, src, dst, kind, correction, runs);
    return true;
  }
  const bool split_kind = kind == FastReduceKind::Sum || kind == FastReduceKind::Mean ||
                          kind == FastReduceKind::Max || kind == FastReduceKind::Min;
  if (split_kind && g.red.strides.back() == 1 && g.red.shape.back() >= kMinSplitRun) {
    ReducedRuns runs;
    runs.run_len = g.red.shape.back();
    const OffsetWalk outer(Shape(g.red.shape.begin(), g.red.shape.end() - 1),
                           Strides(g.red.strides.begin(), g.red.strides.end() - 1));
    runs.offsets.clear();
    outer.for_each([&](int64_t off) { runs.offsets.push_back(off); });
    reduce_runs(g, src, dst, kind, correction, runs);
    return true;
  }
  // Any number of kept columns: narrow ones (sum(0) of [4096, 8]) go through the rows' scalar
  // tails, which still beat the generic kernel (14 against 36 us).
  merge_kept_dims(g);
  const bool rows_layout = !g.outer_shape.empty() && g.outer_in.back() == 1 &&
                           g.outer_out[0].back() == 1;
  if (rows_layout && kind != FastReduceKind::Var && kind != FastReduceKind::Std &&
      kind != FastReduceKind::Norm2) {
    reduce_rows(g, src, dst, kind);
    return true;
  }
  return false;
}

}  // namespace

bool fast_reduce(OpCall& call, FastReduceKind kind) {
  const Tensor& in = call.inputs[0];
  if (call.outs.size() != 1 || call.outs[0].dtype() != in.dtype()) return false;
  switch (in.dtype()) {
    case DType::F32:
      return run<float>(call, kind);
    case DType::BF16:
      return run<BFloat16>(call, kind);
    case DType::F16:  // where the CPU has F16C (decision 0067)
      return reduce_vec().sum_f16 != nullptr && run<Half>(call, kind);
    default:
      return false;
  }
}

}  // namespace kiln::cpu
