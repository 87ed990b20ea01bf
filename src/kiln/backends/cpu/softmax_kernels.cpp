// CPU kernels for softmax and log_softmax along one dim (attrs[0]), numerically stable:
// the line's max is subtracted before exp; sums accumulate in double and each output is
// rounded once. A line containing NaN gives NaN; a line of all -inf gives NaN (softmax) as
// PyTorch.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "aligned_scratch.h"
#include "isa/vec_math.h"
#include "line_strides.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/streaming_store.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/strided_loop.h"
#include "next_row_prefetch.h"
#include "permuted_copy.h"
#include "reduce_utils.h"
#include "scalar_math.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kShortRowBlock = 256;  // rows per block of the short-row functions

// float16 rows (decision 0068): groups of rows widened into a float32 buffer, the float32
// path's functions on them (the short-row blocks as its blocks, else row by row), narrowed
// back: the float32 softmax of the widened rows rounded once, bit for bit, in one pass.
bool float16_softmax_rows(const Tensor& in, const Tensor& out, int64_t rows, int64_t len,
                          bool log) {
  const VecMathF32& vm = vec_math_f32();
  const uint16_t* src = static_cast<const uint16_t*>(in.raw_data());
  uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
  const bool short_rows = len <= kSoftmaxShortRowMax && rows >= 16 && vm.softmax_short_rows;
  const int64_t group = short_rows ? kShortRowBlock : std::max<int64_t>(1, 2048 / len);
  const int64_t groups = (rows + group - 1) / group;
  const bool threaded = groups > 1 && in.numel() >= (int64_t(1) << 15);
  parallel_region(threaded, [&] {
    AlignedVector<float> a(static_cast<size_t>(std::min(group, rows) * len)), b(a.size());
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r0 = g * group, count = std::min(group, rows - r0), n = count * len;
      vm.widen_f16(src + r0 * len, a.data(), n);
      if (short_rows) vm.softmax_short_rows(a.data(), b.data(), count, len, log);
      else
        for (int64_t j = 0; j < n; j += len) vm.softmax_row(a.data() + j, b.data() + j, len, log);
      vm.narrow_f16(b.data(), dst + r0 * len, n);
    }
  });
  return true;
}

// Contiguous float32 along the last dim: the ISA-selected vector row (float32 accumulation,
// as PyTorch), rows split over the threads.
bool vectorised_softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  const VecMathF32& vm = vec_math_f32();
  const VecSoftmaxRowF32 row = vm.softmax_row;
  const int64_t d = dim < 0 ? dim + in.dim() : dim;
  const bool f16 = in.dtype() == DType::F16 && vm.widen_f16;
  if (!row || (in.dtype() != DType::F32 && in.dtype() != DType::BF16 && !f16) || in.dim() == 0 ||
      d != in.dim() - 1 || !in.is_contiguous() || !out.is_contiguous() || in.numel() == 0)
    return false;
  const int64_t len = in.size(d), rows = in.numel() / len;
  if (f16) return float16_softmax_rows(in, out, rows, len, log);
  if (len <= kSoftmaxShortRowMax && rows >= 16 && vm.softmax_short_rows) {
    // Many short rows: blocks of rows over the threads, each transposed a vector's width of
    // rows at a time (vec_math.h). log_softmax(-1) of [4096, 8], two threads, row by row ->
    // transposed: 52-54 -> 19-25 us (PyTorch 33).
    constexpr int64_t kBlockRows = kShortRowBlock;
    const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
    const bool bf16 = in.dtype() == DType::BF16;
    parallel_region(blocks > 1 && in.numel() >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = b * kBlockRows, count = std::min(kBlockRows, rows - r0);
        if (bf16)
          vm.softmax_short_rows_bf16(static_cast<const uint16_t*>(in.raw_data()) + r0 * len,
                                     static_cast<uint16_t*>(out.raw_data()) + r0 * len, count,
                                     len, log);
        else
          vm.softmax_short_rows(static_cast<const float*>(in.raw_data()) + r0 * len,
                                static_cast<float*>(out.raw_data()) + r0 * len, count, len, log);
      }
    });
    return true;
  }
  if (in.dtype() == DType::BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(in.raw_data());
    uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
    const bool threaded = rows > 1 && in.numel() >= (int64_t(1) << 15);
    const VecSoftmaxRowBf16 row_bf16 = vm.softmax_row_bf16;
    if (len > 256 && row_bf16) {
      // Long rows converted in registers (softmax_row_bf16: the float32 row's operations on
      // the widened values, rounded once), the exponentials waiting in a per-thread float32
      // row: [4096, 1024] 940-1039 -> 823-883 us, [64, 50257] 757-880 -> 587-678 us, against
      // widening each row into a buffer and narrowing it back (library before / after
      // alternated, four pairs, two threads).
      parallel_region(threaded, [&] {
        AlignedVector<float> scratch(static_cast<size_t>(len));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r)
          row_bf16(src + r * len, dst + r * len, scratch.data(), len, log);
      });
      return true;
    }
    // Short rows (attention scores: 128-256) are widened several at a time (up to 2048
    // elements), normalised in float32 and narrowed back, one widening and one narrowing call
    // per group: [1, 12, 128, 128] took 70-88 us row by row against 94-104 us (both timed
    // alternately in one process, two threads), and 53 us against 57 us for the in-register
    // rows above (which widen every value twice, in the max and the exp passes).
    const int64_t group = len <= 256 ? 2048 / len : 1;
    const int64_t groups = (rows + group - 1) / group;
    parallel_region(threaded, [&] {
      AlignedVector<float> buf(static_cast<size_t>(group * len));
#pragma omp for schedule(static)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t r0 = g * group, n = std::min(group, rows - r0) * len;
        vm.widen_bf16(src + r0 * len, buf.data(), n);
        for (int64_t j = 0; j < n; j += len) row(buf.data() + j, buf.data() + j, len, log);
        vm.narrow_bf16(buf.data(), dst + r0 * len, n);
      }
    });
    return true;
  }
  const float* src = static_cast<const float*>(in.raw_data());
  float* dst = static_cast<float*>(out.raw_data());
  // Outputs far beyond the cache: rows of up to 1024 values keep their exponentials in an L1
  // scratch row and write out with non-temporal stores (softmax_rows_stream, which also
  // spreads each row's stores over the next row's math), so out is not read from memory before
  // it is written. Both forms in one process, alternated, two threads, Zen 5 (kiln/copy at
  // 56-90 GB/s of copy as the host's memory moved): rows of 128 0.80x the time, 256
  // 0.78-0.83x, 512 0.84x, 1024 0.92-0.98x; 2048 1.15x, 3072 1.11x, 4096 1.06-1.08x, 8192
  // 1.13-1.17x, 16384 1.14x (longer rows lose, as session 7 found on another host: decision
  // 0063). Before that (sessions 7 and 9, decision 0027) ordinary stores were kept for every
  // row length. The streamed rows take no software prefetch of the next row: on Zen 4 it
  // slowed [65536, 1024] by about 15% (the hardware prefetchers follow the rows unaided).
  const VecSoftmaxRowsStreamF32 stream_rows = vm.softmax_rows_stream;
  constexpr int64_t kStreamRowMax = 1024;
  const bool stream = stream_rows && len <= kStreamRowMax &&
                      out.nbytes() >= size_t(detail::kStreamingStoreBytes) &&
                      (dst + in.numel() <= src || src + in.numel() <= dst);
  if (stream) {
#pragma omp parallel
    {
      // Each thread's rows in one contiguous range (as schedule(static)), pipelined within it.
      const int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
      const int64_t r0 = rows * id / threads, r1 = rows * (id + 1) / threads;
      // Cache-line aligned: a std::vector's 16-byte alignment split every vector access of
      // the exponentials over two lines (14.1-14.2 against 10.4-10.6 ms on [65536, 1024], Zen 4).
      alignas(64) float scratch[2 * kStreamRowMax];
      if (r1 > r0) stream_rows(src + r0 * len, dst + r0 * len, scratch, r1 - r0, len, log);
      detail::stream_fence();
    }
    return true;
  }
  auto one_row = [&](int64_t r) {
    if (r + 1 < rows) prefetch_next_row(src + (r + 1) * len, len * int64_t(sizeof(float)));
    row(src + r * len, dst + r * len, len, log);
  };
  if (rows > 1 && in.numel() >= (int64_t(1) << 15)) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) one_row(r);
  } else {  // no OpenMP region: a serialised one costs 0.25 us (a decode step's attention rows)
    for (int64_t r = 0; r < rows; ++r) one_row(r);
  }
  return true;
}

// Contiguous float32 / bfloat16 / float16 along a dim that is not the last ([outer, L, inner] with
// inner > 1, e.g. softmax(dim=0) of a matrix): each unit is a tile of L lines by `block`
// adjacent columns, loaded into a float32 scratch (one line per row of the tile), so the
// max, exp (the ISA's vector exp) and sum run along contiguous columns instead of walking
// each column with a stride and a double exp per element (the generic loop: 73 ms for
// softmax(dim=0) of [2048, 2048] float32 against PyTorch's 5 ms). Sums accumulate in
// float32, as the last-dim path and PyTorch.
bool vectorised_softmax_inner(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  const VecMathF32& vm = vec_math_f32();
  const int64_t d = dim < 0 ? dim + in.dim() : dim;
  const bool f16 = in.dtype() == DType::F16 && vm.widen_f16;
  if (!vm.softmax_columns || !vm.widen_bf16 ||
      (in.dtype() != DType::F32 && in.dtype() != DType::BF16 && !f16) ||
      in.dim() == 0 || d >= in.dim() - 1 || in.numel() == 0)
    return false;
  int64_t in_outer = 0, in_line = 0, out_outer = 0, out_line = 0;
  if (!outer_line_strides(in, d, in_outer, in_line) ||
      !outer_line_strides(out, d, out_outer, out_line))
    return false;
  int64_t inner = 1;
  for (int64_t k = d + 1; k < in.dim(); ++k) inner *= in.size(k);
  const int64_t L = in.size(d), outer = in.numel() / (L * inner);
  // Columns per tile: up to 256 (whole cache lines of each row, several in a row for the
  // prefetcher), the tile (L x block floats) at most about 1 MiB. Tiles of 16 columns (128
  // KiB) ran softmax(dim=0) of [2048, 2048] float32 in 9.4 ms, 128 columns in 5.1 ms
  // (PyTorch 2.13: 5.4 ms, same script).
  const int64_t block =
      std::clamp<int64_t>((int64_t(1) << 18) / L / 16 * 16, 16, kSoftmaxColumnsMax);
  if (L * block > (int64_t(1) << 22)) return false;  // very long lines: the generic loop
  const int64_t blocks = (inner + block - 1) / block, units = outer * blocks;
  const bool bf16 = in.dtype() == DType::BF16;
  parallel_region(units > 1 && in.numel() >= (int64_t(1) << 15), [&] {
    // The tile holds its L lines of w columns densely (line stride w) for the ISA's column
    // softmax, whose exp runs over the whole tile: with a call per line, narrow tiles
    // (softmax(dim=0) of [4096, 8]) spent their time in the vector function's tails (213 us
    // against PyTorch's 95), and the other passes ran in this unit's SSE2 code.
    AlignedVector<float> tile(static_cast<size_t>(L * block));
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t o = u / blocks, c0 = u % blocks * block, w = std::min(block, inner - c0);
      const int64_t in_base = o * in_outer + c0, out_base = o * out_outer + c0;
      const float* src_f = static_cast<const float*>(in.raw_data()) + in_base;
      const uint16_t* src_h = static_cast<const uint16_t*>(in.raw_data()) + in_base;
      for (int64_t j = 0; j < L; ++j) {
        float* t = tile.data() + j * w;
        if (bf16) vm.widen_bf16(src_h + j * in_line, t, w);
        else if (f16) vm.widen_f16(src_h + j * in_line, t, w);
        else std::copy_n(src_f + j * in_line, w, t);
      }
      vm.softmax_columns(tile.data(), L, w, log);
      float* dst_f = static_cast<float*>(out.raw_data()) + out_base;
      uint16_t* dst_h = static_cast<uint16_t*>(out.raw_data()) + out_base;
      for (int64_t j = 0; j < L; ++j) {
        const float* t = tile.data() + j * w;
        if (bf16) vm.narrow_bf16(t, dst_h + j * out_line, w);
        else if (f16) vm.narrow_f16(t, dst_h + j * out_line, w);
        else std::copy_n(t, w, dst_f + j * out_line);
      }
    }
  });
  return true;
}

bool contiguous_softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  return vectorised_softmax(in, out, dim, log) || vectorised_softmax_inner(in, out, dim, log);
}

// Input and output in one dense permuted layout (a transposed or channels-last tensor and
// the output that follows its layout): views of both in memory order are contiguous, and the
// softmax runs along dim's place in that order.
bool softmax_in_memory_order(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  if (in.dim() < 2 || in.is_contiguous() || in.strides() != out.strides() ||
      in.shape() != out.shape() || !is_non_overlapping_and_dense(in.shape(), in.strides()))
    return false;
  std::vector<int64_t> order(size_t(in.dim()));
  for (int64_t i = 0; i < in.dim(); ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return in.stride(a) > in.stride(b); });
  Shape shape;
  Strides strides;
  const int64_t d = dim < 0 ? dim + in.dim() : dim;
  int64_t d_at = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    shape.push_back(in.size(order[i]));
    strides.push_back(in.stride(order[i]));
    if (order[i] == d) d_at = int64_t(i);
  }
  const Tensor in_view = make_view(in, shape, strides, in.storage_offset());
  const Tensor out_view = make_view(out, shape, strides, out.storage_offset());
  return in_view.is_contiguous() && contiguous_softmax(in_view, out_view, d_at, log);
}

// Any other layout of a float32 / bfloat16 / float16 input (a slice, a row step, a transpose
// whose output is contiguous): the input copied into a contiguous buffer (permuted_copy.h),
// the softmax into out (or a contiguous buffer copied into out). The element loop (double
// math, one thread) took 15-34x PyTorch's time (decision 0131).
bool softmax_staged(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  const DType dt = in.dtype();
  if ((dt != DType::F32 && dt != DType::BF16 && dt != DType::F16) || out.dtype() != dt ||
      in.numel() == 0 || in.dim() == 0)
    return false;
  return run_on_contiguous(in, out, [&](const Tensor& src, const Tensor& dst) {
    return contiguous_softmax(src, dst, dim, log);
  });
}

template <bool kLog>
void softmax_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (contiguous_softmax(in, out, call.int_attr(0), kLog)) return;
  if (softmax_in_memory_order(in, out, call.int_attr(0), kLog)) return;
  if (softmax_staged(in, out, call.int_attr(0), kLog)) return;
  LineGeometry g = line_geometry(in, out, call.int_attr(0));
  KILN_DISPATCH_FLOAT(in.dtype(), kLog ? "log_softmax" : "softmax", [&]<typename T>() {
    using C = opmath_t<T>;
    const T* src = static_cast<const T*>(in.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    for_each_offset2(g.outer_shape, g.outer_in, g.outer_out, [&](int64_t io, int64_t oo) {
      auto x = [&](int64_t j) { return double(C(src[io + j * g.in_step])); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < g.len; ++j) m = nan_max(m, x(j));
      double sum = 0;
      for (int64_t j = 0; j < g.len; ++j) sum += std::exp(x(j) - m);
      if constexpr (kLog) {
        double log_sum = std::log(sum);
        for (int64_t j = 0; j < g.len; ++j)
          dst[oo + j * g.out_step] = convert_value<T>(x(j) - m - log_sum);
      } else {
        for (int64_t j = 0; j < g.len; ++j)
          dst[oo + j * g.out_step] = convert_value<T>(std::exp(x(j) - m) / sum);
      }
    });
  });
}

}  // namespace

void register_softmax_kernels() {
  register_kernel("softmax", DeviceType::CPU, softmax_kernel<false>, kFloatDTypes);
  register_kernel("log_softmax", DeviceType::CPU, softmax_kernel<true>, kFloatDTypes);
}

}  // namespace kiln::cpu
