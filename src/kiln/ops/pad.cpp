// pad (constant, reflect, replicate, circular; negative pads crop) and one_hot.
#include <optional>

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
      // Error (Python RuntimeError), as torch raises for these two.
      KILN_CHECK(l < n && r < n, Error, "Argument #4: Padding size should be less than the "
                 "corresponding input dimension, but got: padding (", l, ", ", r,
                 ") at dimension ", d, " of input ", shape_str(x.shape()));
    if (mode == "circular")
      KILN_CHECK(l <= n && r <= n, Error, "Padding value causes wrapping around more than "
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

namespace {

// A channels-last input's padding as the padding of its NHWC view (x.permute(0, 2, 3, 1),
// contiguous), when the arguments are valid (invalid ones take the plain route, whose checks
// name the caller's dims). The pairs are for the view's dims, last first.
std::optional<std::vector<int64_t>> nhwc_view_pad(const Tensor& x, const std::vector<int64_t>& pad,
                                                  const std::string& mode) {
  if (!x.is_channels_last() || pad.size() % 2 != 0 || pad.size() > 8) return std::nullopt;
  std::vector<int64_t> left(4, 0), right(4, 0);  // per dim of x
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    const size_t d = 3 - k;
    left[d] = pad[2 * k];
    right[d] = pad[2 * k + 1];
    const int64_t n = x.size(int64_t(d));
    if (left[d] < 0 || right[d] < 0) return std::nullopt;  // cropping
    if (mode == "reflect" && (left[d] >= n || right[d] >= n)) return std::nullopt;
    if (mode == "circular" && (left[d] > n || right[d] > n)) return std::nullopt;
    if (mode == "replicate" && n == 0 && left[d] + right[d] > 0) return std::nullopt;
  }
  if (mode != "constant" && (pad.empty() || pad.size() > 6)) return std::nullopt;
  static constexpr size_t kViewDim[4] = {0, 2, 3, 1};  // view dim v is x's dim kViewDim[v]
  std::vector<int64_t> view_pad;
  for (size_t v = 4; v-- > 0;) {
    view_pad.push_back(left[kViewDim[v]]);
    view_pad.push_back(right[kViewDim[v]]);
  }
  while (view_pad.size() > 2 && view_pad[view_pad.size() - 1] == 0 &&
         view_pad[view_pad.size() - 2] == 0)
    view_pad.resize(view_pad.size() - 2);  // unpadded leading dims (the modes pad at most 3)
  return view_pad;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode,
           double value) {
  // Channels-last inputs are padded as their NHWC view, rows of channels moved whole, and
  // the result is channels-last as PyTorch's: the kernel's walk over NCHW rows moved one
  // element at a time ([8, 32, 28, 28] float32 padded by 1: 789 us against torch's 25).
  if (auto view_pad = nhwc_view_pad(x, pad, mode))
    return call_op(KILN_OP("pad"), {x.permute({0, 2, 3, 1})}, {*view_pad, mode, value})
        .permute({0, 3, 1, 2});
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
