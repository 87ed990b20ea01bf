// Statistical reductions: var, std (with correction), vector norms and logsumexp. All
// take floating inputs (logsumexp promotes integers to the default float, as PyTorch).
#include <cmath>

#include "kiln/ops/complex.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "op_helpers.h"
#include "reduction_util.h"

namespace kiln {

namespace {

void check_var_dtype(const char* name, const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), Error, name,
             "(): std and var only support floating point and complex dtypes, got ",
             ops::torch_type_name(x.dtype()));
}

Tensor var_like(const char* op, const Tensor& x, const Dims& dims, double correction,
                bool keepdim) {
  check_var_dtype(op, x);
  if (is_complex(x.dtype())) {
    // E|z - E z|^2 = var(re z) + var(im z): a real result, and autograd through the parts.
    const Tensor v = add(var(real(x), dims, correction, keepdim),
                         var(imag(x), dims, correction, keepdim));
    return std::string(op) == "std" ? sqrt(v) : v;
  }
  return call_op(get_op(op), {x}, {std::vector<int64_t>(dims), keepdim, correction});
}

}  // namespace

Tensor var(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  return var_like("var", x, dims, correction, keepdim);
}
Tensor std(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  return var_like("std", x, dims, correction, keepdim);
}

Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) {
  KILN_CHECK(is_floating(x.dtype()), Error,
             "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
             ops::torch_type_name(x.dtype()));
  KILN_CHECK(!std::isnan(p), ValueError, "norm: expected p to be a number, got nan");
  if (p < 0 || std::isinf(p)) {
    // Norms whose reduction has no identity need at least one element per output.
    std::vector<bool> mask = ops::reduction_mask("norm", x.shape(), dims);
    bool empty = false;
    for (size_t i = 0; i < mask.size(); ++i) empty = empty || (mask[i] && x.shape()[i] == 0);
    KILN_CHECK(!empty, ValueError, "linalg.vector_norm cannot compute the ", p,
               " norm on an empty tensor because the operation does not have an identity");
  }
  return call_op(KILN_OP("norm"), {x}, {std::vector<int64_t>(dims), keepdim, p});
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  Tensor in = is_floating(x.dtype()) ? x : to_dtype(x, default_float_dtype());
  return call_op(KILN_OP("logsumexp"), {in}, {std::vector<int64_t>(dims), keepdim});
}

namespace ops {
void register_reduction_stat_ops() {
  register_op("var", "var(Tensor self, int[] dim, bool keepdim=False, *, float correction=1) -> Tensor",
              reduce_meta);
  register_op("std", "std(Tensor self, int[] dim, bool keepdim=False, *, float correction=1) -> Tensor",
              reduce_meta);
  register_op("norm", "norm(Tensor self, int[] dim, bool keepdim=False, *, float p=2) -> Tensor",
              reduce_meta);
  register_op("logsumexp", "logsumexp(Tensor self, int[] dim, bool keepdim=False) -> Tensor",
              reduce_meta);
}
}  // namespace ops

}  // namespace kiln
