// pad (constant, reflect, replicate, circular; negative pads crop) and one_hot.
#include "kiln/ops/indexing.h"
#include "kiln/ops/indexing_common.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

// attrs: pad (pairs, last dim first), mode, value. Validates as PyTorch does.
std::vector<TensorMeta> pad_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& pad = c.ints_attr(0);
  const std::string& mode = c.string_attr(1);
  KILN_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" ||
                 mode == "circular",
             ValueError, "pad: expected mode 'constant', 'reflect', 'replicate' or 'circular', "
             "got '", mode, "'");
  KILN_CHECK(pad.size() % 2 == 0, ValueError, "Padding length must be divisible by 2, got ",
             pad.size());
  int64_t np = int64_t(pad.size() / 2);
  KILN_CHECK(np <= x.dim(), ValueError, "Padding length should be less than or equal to two "
             "times the input dimension but got padding length ", pad.size(),
             " and input of dimension ", x.dim());
  if (mode != "constant")
    KILN_CHECK(np >= 1 && np <= 3, ValueError, "pad: mode '", mode, "' pads the last 1, 2 or 3 "
               "dims, but got padding for ", np, " dims");
  Shape s = x.shape();
  for (int64_t k = 0; k < np; ++k) {
    int64_t d = x.dim() - 1 - k;
    int64_t n = x.size(d), l = pad[size_t(2 * k)], r = pad[size_t(2 * k + 1)];
    if (mode == "reflect")
      KILN_CHECK(l < n && r < n, ValueError, "Argument #4: Padding size should be less than the "
                 "corresponding input dimension, but got: padding (", l, ", ", r,
                 ") at dimension ", d, " of input ", shape_str(x.shape()));
    if (mode == "circular")
      KILN_CHECK(l <= n && r <= n, ValueError, "Padding value causes wrapping around more than "
                 "once: padding (", l, ", ", r, ") at dimension ", d, " of input ",
                 shape_str(x.shape()));
    if (mode == "replicate")
      KILN_CHECK(n > 0 || (l <= 0 && r <= 0), ValueError, "pad: replicate padding needs a "
                 "non-empty input, but dimension ", d, " of input ", shape_str(x.shape()),
                 " is empty");
    s[size_t(d)] = n + l + r;
    KILN_CHECK(s[size_t(d)] >= 0, ShapeError, "The input size ", n, ", plus negative padding ",
               l, " and ", r, " resulted in a negative output size, which is invalid. Check "
               "dimension ", d, " of your input.");
  }
  return {{s, x.dtype()}};
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode,
           double value) {
  return call_op(KILN_OP("pad"), {x}, {pad, mode, value});
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  KILN_CHECK(x.dtype() == DType::I64, Error,
             "one_hot is only applicable to index tensor of dtype int64, got ",
             dtype_name(x.dtype()));
  KILN_CHECK(num_classes >= -1, ValueError,
             "one_hot: expected num_classes to be -1 or non-negative, got ", num_classes);
  if (num_classes < 0) return call_op(KILN_OP("one_hot.infer"), {x}, {num_classes});
  return call_op(KILN_OP("one_hot"), {x}, {num_classes});
}

namespace ops {
void register_pad_ops() {
  register_op("pad",
              "pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor",
              pad_meta);
  register_op("one_hot", "one_hot(Tensor self, int num_classes) -> Tensor",
              [](const OpCall& c) -> std::vector<TensorMeta> {
                Shape s = c.inputs[0].shape();
                s.push_back(c.int_attr(0));
                return {{s, DType::I64}};
              });
  // num_classes = -1 infers the count from the data, so the output shape is dynamic.
  register_op("one_hot.infer", "one_hot(Tensor self, int num_classes=-1) -> Tensor", nullptr)
      .dynamic_shape = true;
}
}  // namespace ops

}  // namespace kiln
