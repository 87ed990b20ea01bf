// nn::functional: linear, bilinear, embedding, dropout and activations.
#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "kiln/ops/leaky_relu.h"

namespace kiln::nn::functional {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(x.defined() && weight.defined(), ValueError, "linear: input and weight must be defined");
  KILN_CHECK(weight.dim() == 2, ShapeError, "linear: expected a 2-D weight [out, in], got shape ",
             shape_str(weight.shape()));
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError,
             "linear: input of shape ", shape_str(x.shape()), " does not match weight of shape ",
             shape_str(weight.shape()), " (expected the input's last dim to be ", weight.size(1), ")");
  KILN_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)}, ShapeError,
             "linear: expected bias of shape [", weight.size(0), "], got ", shape_str(bias.shape()));
  return kiln::linear(x, weight, bias);
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(weight.defined() && weight.dim() == 3, ShapeError,
             "bilinear: expected a 3-D weight [out, in1, in2], got shape ",
             weight.defined() ? shape_str(weight.shape()) : std::string("undefined"));
  int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  KILN_CHECK(x1.dim() >= 1 && x2.dim() == x1.dim() && x1.size(-1) == in1 && x2.size(-1) == in2,
             ShapeError, "bilinear: inputs of shapes ", shape_str(x1.shape()), " and ",
             shape_str(x2.shape()), " do not match weight of shape ", shape_str(weight.shape()));
  Shape lead(x1.shape().begin(), x1.shape().end() - 1);
  KILN_CHECK(Shape(x2.shape().begin(), x2.shape().end() - 1) == lead, ShapeError,
             "bilinear: input1 and input2 must have the same leading dims, got ",
             shape_str(x1.shape()), " and ", shape_str(x2.shape()));
  KILN_CHECK(!bias.defined() || bias.shape() == Shape{out}, ShapeError,
             "bilinear: expected bias of shape [", out, "], got ", shape_str(bias.shape()));
  Tensor a = reshape(x1, {-1, in1}), b = reshape(x2, {-1, in2});
  // t[n, k, j] = sum_i a[n, i] W[k, i, j]; y[n, k] = sum_j t[n, k, j] b[n, j].
  Tensor w2 = reshape(permute(weight, {1, 0, 2}), {in1, out * in2});
  Tensor t = reshape(mm(a, w2), {-1, out, in2});
  Tensor y = sum(t * unsqueeze(b, 1), {2});
  if (bias.defined()) y = y + bias;
  Shape out_shape = lead;
  out_shape.push_back(out);
  return reshape(y, out_shape);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  KILN_CHECK(weight.defined() && weight.dim() == 2, ShapeError,
             "embedding: expected a 2-D weight [num_embeddings, embedding_dim], got shape ",
             weight.defined() ? shape_str(weight.shape()) : std::string("undefined"));
  KILN_CHECK(indices.defined() && (indices.dtype() == DType::I64 || indices.dtype() == DType::I32),
             Error, "embedding: expected indices of dtype int64 or int32, got ",
             indices.defined() ? std::string(dtype_name(indices.dtype())) : std::string("undefined"));
  int64_t num = weight.size(0);
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = reshape(index_select(weight, 0, reshape(indices, {-1})), out_shape);
  if (padding_idx) {
    int64_t p = *padding_idx;
    KILN_CHECK(p >= -num && p < num, IndexError, "embedding: padding_idx ", p,
               " is out of range for ", num, " embeddings");
    if (p < 0) p += num;
    if (autograd::requires_grad(out)) {
      // Same values; the rows picked by padding_idx pass no gradient back to the weight.
      Tensor pad_mask = unsqueeze(eq(indices, Scalar(p)), -1);
      out = where(pad_mask, autograd::detach(out), out);
    }
  }
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  return kiln::dropout(x, p, training, gen);
}

Tensor relu(const Tensor& x) { return kiln::relu(x); }
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  // Floating CPU tensors: one pass in the leaky_relu kernel (the composite below took 2.4 ms
  // on 1M float32, torch 55 us); other devices and dtypes keep the composite.
  if (is_floating(x.dtype()) && x.device().type == DeviceType::CPU)
    return ops::leaky_relu_op(x, negative_slope);
  return where(gt(x, Scalar(0.0)), x, x * negative_slope);
}
Tensor gelu(const Tensor& x, const std::string& approximate) { return kiln::gelu(x, approximate); }
Tensor silu(const Tensor& x) { return kiln::silu(x); }
Tensor sigmoid(const Tensor& x) { return kiln::sigmoid(x); }
Tensor tanh(const Tensor& x) { return kiln::tanh(x); }
Tensor softmax(const Tensor& x, int64_t dim) { return kiln::softmax(x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return kiln::log_softmax(x, dim); }

}  // namespace kiln::nn::functional
