// CPU kernels of cross_entropy_rows and its backward (ops/cross_entropy_rows.h) for float32 and
// bfloat16 logits [N, C] (contiguous; the op layer makes them so). Forward: per row the
// logsumexp (the ISA's vector row on float32 values; bfloat16 rows widened first; a double
// loop at the baseline level) and the loss lse - x[target]; sums in double over a fixed split
// into pieces, added in order, so the result does not depend on the thread count. Backward:
// per row exp(x - lse) * share (the ISA's vector row), minus the share at the target; ignored
// targets give zero rows.
#include <cmath>
#include <cstring>
#include <vector>

#include "isa/softmax_grad_rows.h"
#include "isa/vec_math.h"
#include "class_targets_check.h"
#include "kiln/core/convert.h"
#include "kiln/core/error.h"
#include "kiln/core/half.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "kiln/ops/cross_entropy_rows.h"

namespace kiln::cpu {
namespace {

using ops::NllReduction;

// Elements of float32 logits, or of bfloat16 ones held as their bits.
float to_float(float v) { return v; }
float to_float(uint16_t b) { return float(BFloat16::from_bits(b)); }
void store(float* p, double v) { *p = float(v); }
void store(uint16_t* p, double v) { *p = BFloat16(float(v)).bits; }

// logsumexp of a row of n values (float32, or bfloat16 widened into buf).
template <typename E>
float row_logsumexp(const E* row, int64_t n, std::vector<float>& buf) {
  if (n == 0) return -INFINITY;  // no classes (every target ignored): the vector row needs n >= 1
  const VecMathF32& vm = vec_math_f32();
  const float* f = nullptr;
  if constexpr (std::is_same_v<E, float>) {
    f = row;
  } else if (vm.widen_bf16) {
    buf.resize(size_t(n));
    vm.widen_bf16(row, buf.data(), n);
    f = buf.data();
  }
  if (f && vm.logsumexp_row) return vm.logsumexp_row(f, n);
  double m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const double v = to_float(row[j]);
    m = (v > m || v != v) ? v : m;
  }
  if (std::isinf(m) || m != m) return float(m);
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(double(to_float(row[j])) - m);
  return float(m + std::log(s));
}

template <typename E, typename T>
void forward(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t N = x.size(0), C = x.size(1);
  const auto reduction = NllReduction(call.int_attr(0));
  const int64_t ignore = call.int_attr(1);
  const int64_t* target = static_cast<const int64_t*>(call.inputs[1].raw_data());
  check_class_targets(target, N, C, ignore, "cross_entropy");
  const E* xp = static_cast<const E*>(x.raw_data());
  T* loss = static_cast<T*>(call.outs[0].raw_data());
  float* lse = static_cast<float*>(call.outs[1].raw_data());
  constexpr int64_t kPieces = 64;
  double sums[kPieces] = {}, counts[kPieces] = {};
  auto piece = [&](int64_t p) {
    std::vector<float> buf;
    double s = 0, c = 0;
    for (int64_t i = N * p / kPieces; i < N * (p + 1) / kPieces; ++i) {
      const E* row = xp + i * C;
      lse[i] = row_logsumexp(row, C, buf);
      double l = 0;
      if (target[i] != ignore) {
        l = double(lse[i]) - double(to_float(row[target[i]]));
        c += 1;
      }
      if (reduction == NllReduction::None) loss[i] = convert_value<T>(l);
      s += l;
    }
    sums[p] = s;
    counts[p] = c;
  };
  if (N * C >= detail::kParallelElements && N > 1) detail::parallel_chunks(kPieces, piece);
  else
    for (int64_t p = 0; p < kPieces; ++p) piece(p);
  double s = 0, c = 0;
  for (int64_t p = 0; p < kPieces; ++p) {
    s += sums[p];
    c += counts[p];
  }
  *static_cast<float*>(call.outs[2].raw_data()) = float(c);
  if (reduction == NllReduction::Sum) *loss = convert_value<T>(s);
  if (reduction == NllReduction::Mean) *loss = convert_value<T>(s / c);  // 0 / 0: nan
}

template <typename E, typename T>
void backward(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& x = call.inputs[1];
  const int64_t N = x.size(0), C = x.size(1);
  const auto reduction = NllReduction(call.int_attr(0));
  const int64_t ignore = call.int_attr(1);
  const int64_t* target = static_cast<const int64_t*>(call.inputs[2].raw_data());
  check_class_targets(target, N, C, ignore, "cross_entropy_backward");
  const float* lse = static_cast<const float*>(call.inputs[3].raw_data());
  const float total = *static_cast<const float*>(call.inputs[4].raw_data());
  const T* g = static_cast<const T*>(gy.raw_data());
  const E* xp = static_cast<const E*>(x.raw_data());
  E* out = static_cast<E*>(call.outs[0].raw_data());
  if (N * C == 0) return;
  const SoftmaxGradRows& rows = softmax_grad_rows();
  void (*vec_row)(const E*, float, float, E*, int64_t) = nullptr;
  if constexpr (std::is_same_v<E, float>) vec_row = rows.cross_entropy_f32;
  else vec_row = rows.cross_entropy_bf16;
  const double reduced = reduction == NllReduction::None ? 0.0 : double(float(g[0]));
  auto row = [&](int64_t i) {
    E* o = out + i * C;
    if (target[i] == ignore) {
      std::memset(static_cast<void*>(o), 0, size_t(C) * sizeof(E));
      return;
    }
    const double share = reduction == NllReduction::None ? double(float(g[i]))
                         : reduction == NllReduction::Mean ? reduced / double(total)
                                                           : reduced;
    const E* xr = xp + i * C;
    if (vec_row) {
      vec_row(xr, lse[i], float(share), o, C);
    } else {
      for (int64_t j = 0; j < C; ++j) store(o + j, std::exp(double(to_float(xr[j])) - lse[i]) * share);
    }
    const int64_t t = target[i];
    store(o + t, std::exp(double(to_float(xr[t])) - lse[i]) * share - share);
  };
  if (N * C >= detail::kParallelElements && N > 1) detail::parallel_chunks(N, row);
  else
    for (int64_t i = 0; i < N; ++i) row(i);
}

void forward_dispatch(OpCall& call) {
  if (call.inputs[0].dtype() == DType::BF16) forward<uint16_t, BFloat16>(call);
  else forward<float, float>(call);
}

void backward_dispatch(OpCall& call) {
  if (call.inputs[1].dtype() == DType::BF16) backward<uint16_t, BFloat16>(call);
  else backward<float, float>(call);
}

}  // namespace

void register_cross_entropy_rows_kernels() {
  const DTypeMask f32_bf16 = dtype_bit(DType::F32) | dtype_bit(DType::BF16);
  register_kernel("cross_entropy_rows", DeviceType::CPU, forward_dispatch, f32_bf16);
  register_kernel("cross_entropy_rows_backward", DeviceType::CPU, backward_dispatch, f32_bf16);
}

}  // namespace kiln::cpu
