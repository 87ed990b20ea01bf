// CPU kernels for the backward of softmax and log_softmax along one dim (attrs[0]):
// _softmax_backward_data(g, y) = y * (g - sum(g * y)) and _log_softmax_backward_data(g, y) =
// g - exp(y) * sum(g), y the forward's output. The op layer passes contiguous inputs of one
// shape and dtype. float32 / bfloat16 rows along the last dim run the ISA's vector rows (float32
// sums, as PyTorch); any other case a scalar loop with double sums.
#include <cmath>

#include "isa/softmax_grad_rows.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

// Rows of len values of element type E through the ISA's row function.
template <typename E>
void vector_rows(void (*row)(const E*, const E*, E*, int64_t), const Tensor& g, const Tensor& y,
                 const Tensor& out, int64_t len) {
  const int64_t rows = g.numel() / len;
  const E* gp = static_cast<const E*>(g.raw_data());
  const E* yp = static_cast<const E*>(y.raw_data());
  E* op = static_cast<E*>(out.raw_data());
  parallel_region(rows > 1 && g.numel() >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(gp + r * len, yp + r * len, op + r * len, len);
  });
}

template <bool kLog>
bool vector_rows(const Tensor& g, const Tensor& y, const Tensor& out, int64_t len) {
  const SoftmaxGradRows& t = softmax_grad_rows();
  if (g.dtype() == DType::F32 && t.softmax_f32)
    vector_rows<float>(kLog ? t.log_softmax_f32 : t.softmax_f32, g, y, out, len);
  else if (g.dtype() == DType::BF16 && t.softmax_bf16)
    vector_rows<uint16_t>(kLog ? t.log_softmax_bf16 : t.softmax_bf16, g, y, out, len);
  else
    return false;
  return true;
}

// Lines of len values inner apart, outer * inner of them, in double.
template <typename T, bool kLog>
void scalar_lines(const Tensor& g, const Tensor& y, const Tensor& out, int64_t outer, int64_t len,
                  int64_t inner) {
  using C = opmath_t<T>;
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* yp = static_cast<const T*>(y.raw_data());
  T* op = static_cast<T*>(out.raw_data());
  parallel_region(outer * inner > 1 && g.numel() >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
    for (int64_t line = 0; line < outer * inner; ++line) {
      const int64_t base = line / inner * len * inner + line % inner;
      auto at = [&](const T* p, int64_t j) { return double(C(p[base + j * inner])); };
      double s = 0;
      for (int64_t j = 0; j < len; ++j) s += kLog ? at(gp, j) : at(gp, j) * at(yp, j);
      for (int64_t j = 0; j < len; ++j)
        op[base + j * inner] = convert_value<T>(kLog ? at(gp, j) - std::exp(at(yp, j)) * s
                                                     : at(yp, j) * (at(gp, j) - s));
    }
  });
}

template <bool kLog>
void softmax_backward_kernel(OpCall& call) {
  const Tensor& g = call.inputs[0];
  const Tensor& y = call.inputs[1];
  const Tensor& out = call.outs[0];
  if (g.numel() == 0) return;
  const int64_t nd = g.dim();
  const int64_t d = nd == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + nd : call.int_attr(0));
  const int64_t len = nd == 0 ? 1 : g.size(d);
  int64_t inner = 1;
  for (int64_t k = d + 1; k < nd; ++k) inner *= g.size(k);
  if (inner == 1 && vector_rows<kLog>(g, y, out, len)) return;
  const int64_t outer = g.numel() / (len * inner);
  KILN_DISPATCH_FLOAT(g.dtype(), kLog ? "_log_softmax_backward_data" : "_softmax_backward_data",
                      [&]<typename T>() { scalar_lines<T, kLog>(g, y, out, outer, len, inner); });
}

}  // namespace

void register_softmax_backward_kernels() {
  register_kernel("_softmax_backward_data", DeviceType::CPU, softmax_backward_kernel<false>,
                  kFloatDTypes);
  register_kernel("_log_softmax_backward_data", DeviceType::CPU, softmax_backward_kernel<true>,
                  kFloatDTypes);
}

}  // namespace kiln::cpu
