// Det: determinants of square matrices (batched over leading dims) by Gaussian elimination
// with partial pivoting on the host, in float64.
#include <cmath>
#include <utility>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/einsum.h"

namespace kiln::onnx {

namespace {

double determinant(std::vector<double> a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r) {
      if (std::fabs(a[size_t(r * n + col)]) > std::fabs(a[size_t(pivot * n + col)])) pivot = r;
    }
    if (a[size_t(pivot * n + col)] == 0) return 0;
    if (pivot != col) {
      for (int64_t k = 0; k < n; ++k) std::swap(a[size_t(pivot * n + k)], a[size_t(col * n + k)]);
      det = -det;
    }
    const double p = a[size_t(col * n + col)];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      const double f = a[size_t(r * n + col)] / p;
      for (int64_t k = col; k < n; ++k) a[size_t(r * n + k)] -= f * a[size_t(col * n + k)];
    }
  }
  return det;
}

std::vector<Tensor> op_det(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_CHECK(x.dim() >= 2 && x.size(-1) == x.size(-2), ShapeError, "input must be [..., M, M], got ",
             shape_str(x.shape()));
  const int64_t n = x.size(-1);
  const std::vector<double> v = cast(x, DType::F64).to_vector<double>();
  const int64_t count = n == 0 ? 0 : x.numel() / (n * n);
  std::vector<double> out;
  for (int64_t b = 0; b < count; ++b) {
    out.push_back(determinant({v.begin() + b * n * n, v.begin() + (b + 1) * n * n}, n));
  }
  Shape batch(x.shape().begin(), x.shape().end() - 2);
  return one(ctx.on_device(cast(tensor_from(out, batch), x.dtype())));
}

}  // namespace

void register_linalg_ops(OpTable& t) {
  t.add("Det", op_det);
  t.add("Einsum", [](OpContext& ctx) {
    std::vector<Tensor> operands;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) operands.push_back(ctx.input(i));
    return one(einsum(ctx.attr_string("equation"), operands));
  });
}

}  // namespace kiln::onnx
