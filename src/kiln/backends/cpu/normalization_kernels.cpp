// CPU kernels of native_layer_norm / native_rms_norm over contiguous rows (the op layer makes
// inputs contiguous): statistics accumulate in double (two passes for the variance, so no
// cancellation), then one pass writes (x - mean) * rstd * weight + bias. Rows run in parallel.
#include <cmath>
#include <type_traits>
#include <vector>

#include "isa/reduce_vec.h"
#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/streaming_store.h"

namespace kiln::cpu {
namespace {

template <typename T>
using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Calls row(r) for every row, in parallel for large inputs; each thread fences its streaming
// stores (if any) before the region ends.
template <typename F>
void for_rows(int64_t rows, int64_t len, F&& row) {
  if (rows <= 1 || rows * len < (int64_t(1) << 15)) {  // no OpenMP region (0.25 us serialised)
    for (int64_t r = 0; r < rows; ++r) row(r);
    detail::stream_fence();
    return;
  }
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < rows; ++r) row(r);
    detail::stream_fence();
  }
}

// Rows shorter than this take the four-row statistics (reduce_vec.h).
constexpr int64_t kShortNormRow = 64;

template <typename T, bool kLayer>
void norm_kernel(OpCall& call) {
  using S = stat_t<T>;
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor& b = kLayer ? call.inputs[2] : call.inputs[1];  // unused for rms
  const int64_t k = call.int_attr(0);
  const double eps = call.double_attr(1);
  int64_t len = 1;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) len *= x.size(i);
  const int64_t rows = len > 0 ? x.numel() / len : 0;
  const T* src = static_cast<const T*>(x.raw_data());
  const T* wp = w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr;
  const T* bp = kLayer && b.defined() ? static_cast<const T*>(b.raw_data()) : nullptr;
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  S* mean_out = kLayer ? static_cast<S*>(call.outs[1].raw_data()) : nullptr;
  S* rstd_out = static_cast<S*>(call.outs[kLayer ? 2 : 1].raw_data());
  // Writes row r's normalised values to out: float32 outputs far beyond the cache with
  // non-temporal stores interleaved with the write pass (decision 0027; rows normalised in a
  // buffer and streamed out in one burst measured slower, 27-28 against 31-32 GB/s for
  // [65536, 1024]).
  const bool stream = call.outs[0].nbytes() >= size_t(detail::kStreamingStoreBytes) &&
                      (dst + rows * len <= src || src + rows * len <= dst);
  // Writes (in - sm) * sr * weight + bias to out (len values).
  auto write_row = [&](const T* in, T* out, S sm, S sr) {
    if constexpr (std::is_same_v<T, float>) {
      // This file is baseline (SSE2) code: the write pass takes the ISA level's vectors.
      if (const VecNormAffineF32 affine = vec_math_f32().norm_affine) {
        affine(in, out, len, sm, sr, wp, bp, stream);
        return;
      }
    }
    if (wp && bp) {  // the usual affine case as one branch-free (vectorisable) loop
      for (int64_t i = 0; i < len; ++i)
        out[i] = convert_value<T>((S(in[i]) - sm) * sr * S(wp[i]) + S(bp[i]));
      return;
    }
    for (int64_t i = 0; i < len; ++i) {
      S v = (S(in[i]) - sm) * sr;
      if (wp) v *= S(wp[i]);
      if (bp) v += S(bp[i]);
      out[i] = convert_value<T>(v);
    }
  };
  auto row_into = [&](int64_t r, T* out) {
    const T* in = src + r * len;
    double mean = 0, m2 = 0;
    if constexpr (std::is_same_v<T, float>) {
      // float32: the vectorised double-lane sums of the reductions (same two-pass formula).
      const VecReduce& vr = reduce_vec();
      if constexpr (kLayer) mean = vr.sum_f32(in, len) / double(len);
      m2 = vr.sum_sq_dev_f32(in, len, mean) / double(len);
    } else {
    if constexpr (kLayer) {
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // independent sums: the adds overlap
      int64_t i = 0;
      for (; i + 4 <= len; i += 4) {
        s0 += double(in[i]), s1 += double(in[i + 1]), s2 += double(in[i + 2]),
            s3 += double(in[i + 3]);
      }
      for (; i < len; ++i) s0 += double(in[i]);
      mean = (s0 + s1 + s2 + s3) / double(len);
    }
    {
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = 0;
      for (; i + 4 <= len; i += 4) {
        const double d0 = double(in[i]) - mean, d1 = double(in[i + 1]) - mean;
        const double d2 = double(in[i + 2]) - mean, d3 = double(in[i + 3]) - mean;
        s0 += d0 * d0, s1 += d1 * d1, s2 += d2 * d2, s3 += d3 * d3;
      }
      for (; i < len; ++i) {
        const double d = double(in[i]) - mean;
        s0 += d * d;
      }
      m2 = (s0 + s1 + s2 + s3) / double(len);
    }
    }
    const double rstd = 1.0 / std::sqrt(m2 + eps);
    if constexpr (kLayer) mean_out[r] = S(mean);
    rstd_out[r] = S(rstd);
    write_row(in, out, S(mean), S(rstd));
  };
  if constexpr (std::is_same_v<T, float>) {
    const VecReduce& vr = reduce_vec();
    if (len < kShortNormRow && rows >= 8 && vr.norm_stats_four_runs_f32) {
      // Short rows: statistics four rows at a time, transposed in registers (a call per row
      // to each of sum_f32 and sum_sq_dev_f32, then a scalar square root and division, took
      // layer_norm of [4096, 8] to 1.6x PyTorch's time). Every row of the tensor takes this
      // path (the last group repeats its last row), so no result depends on the threads.
      const int64_t quads = (rows + 3) / 4;
      for_rows(quads, 4 * len, [&](int64_t q) {
        const int64_t r0 = 4 * q, count = std::min<int64_t>(4, rows - r0);
        const float* x4[4];
        for (int64_t k = 0; k < 4; ++k) x4[k] = src + (r0 + std::min(k, count - 1)) * len;
        double mean[4], m2[4];
        vr.norm_stats_four_runs_f32(x4, len, kLayer, mean, m2);
        for (int64_t k = 0; k < count; ++k) {
          const double rstd = 1.0 / std::sqrt(m2[k] + eps);
          if constexpr (kLayer) mean_out[r0 + k] = S(mean[k]);
          rstd_out[r0 + k] = S(rstd);
          write_row(x4[k], dst + (r0 + k) * len, S(mean[k]), S(rstd));
        }
      });
      return;
    }
  }
  for_rows(rows, len, [&](int64_t r) { row_into(r, dst + r * len); });
}

// bfloat16 rows through float32: each row is widened once with the ISA's vector converter,
// takes the float32 path's vectorised statistics, and is written back rounded once (in
// registers, norm_affine_bf16). The
// generic loop converted every element on its own in baseline code (BERT's bfloat16
// layer norms ran 3-4x slower than float32 per element). False at the baseline ISA level.
template <bool kLayer>
bool norm_bf16_via_f32(OpCall& call) {
  const VecMathF32& vm = vec_math_f32();
  if (!vm.widen_bf16 || !vm.norm_affine_bf16) return false;
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor& b = kLayer ? call.inputs[2] : call.inputs[1];
  const int64_t k = call.int_attr(0);
  const double eps = call.double_attr(1);
  int64_t len = 1;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) len *= x.size(i);
  const int64_t rows = len > 0 ? x.numel() / len : 0;
  auto widened = [&](const Tensor& t) {
    std::vector<float> v;
    if (t.defined()) {
      v.resize(size_t(len));
      vm.widen_bf16(static_cast<const uint16_t*>(t.raw_data()), v.data(), len);
    }
    return v;
  };
  const std::vector<float> wv = widened(w), bv = kLayer ? widened(b) : std::vector<float>();
  const uint16_t* src = static_cast<const uint16_t*>(x.raw_data());
  uint16_t* dst = static_cast<uint16_t*>(call.outs[0].raw_data());
  float* mean_out = kLayer ? static_cast<float*>(call.outs[1].raw_data()) : nullptr;
  float* rstd_out = static_cast<float*>(call.outs[kLayer ? 2 : 1].raw_data());
  const VecReduce& vr = reduce_vec();
  for_rows(rows, len, [&](int64_t r) {
    thread_local std::vector<float> row;
    row.resize(size_t(len));
    float* v = row.data();
    vm.widen_bf16(src + r * len, v, len);
    const double mean = kLayer ? vr.sum_f32(v, len) / double(len) : 0.0;
    const double rstd = 1.0 / std::sqrt(vr.sum_sq_dev_f32(v, len, mean) / double(len) + eps);
    if constexpr (kLayer) mean_out[r] = float(mean);
    rstd_out[r] = float(rstd);
    const float sm = float(mean), sr = float(rstd);
    const float* wp = wv.empty() ? nullptr : wv.data();
    const float* bp = bv.empty() ? nullptr : bv.data();
    vm.norm_affine_bf16(v, dst + r * len, len, sm, sr, wp, bp);
  });
  return true;
}

template <bool kLayer>
void norm_dispatch(OpCall& call) {
  if (call.inputs[0].dtype() == DType::BF16 && norm_bf16_via_f32<kLayer>(call)) return;
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), kLayer ? "layer_norm" : "rms_norm",
                      [&]<typename T>() { norm_kernel<T, kLayer>(call); });
}

}  // namespace

void register_normalization_kernels() {
  register_kernel("native_layer_norm", DeviceType::CPU, norm_dispatch<true>, kFloatDTypes);
  register_kernel("native_rms_norm", DeviceType::CPU, norm_dispatch<false>, kFloatDTypes);
}

}  // namespace kiln::cpu
