// Linear, Bilinear, Flatten and Embedding layers.
#include "kiln/nn/linear.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/views.h"

namespace kiln::nn {

namespace {
TensorOptions float_options(TensorOptions o) {
  KILN_CHECK(!o.dtype || is_floating(*o.dtype), TypeError,
             "nn layers need a floating-point parameter dtype, got ", dtype_name(*o.dtype));
  return o;
}
void check_positive(const char* layer, const char* what, int64_t v) {
  KILN_CHECK(v >= 0, ValueError, layer, ": ", what, " must be non-negative, got ", v);
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, TensorOptions o)
    : Module("Linear"),
      in_features((check_positive("Linear", "in_features", in), in)),
      out_features((check_positive("Linear", "out_features", out), out)),
      weight(register_parameter("weight", empty({out, in}, float_options(o)))),
      bias(register_parameter("bias", with_bias ? empty({out}, float_options(o)) : Tensor())) {
  reset_parameters();
}

void Linear::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", gen);
  if (bias.defined()) {
    double bound = in_features > 0 ? 1.0 / std::sqrt(double(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) { return functional::linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" +
         std::to_string(out_features) + ", bias=" + (bias.defined() ? "true" : "false");
}

Bilinear::Bilinear(int64_t in1, int64_t in2, int64_t out, bool with_bias, TensorOptions o)
    : Module("Bilinear"),
      in1_features((check_positive("Bilinear", "in1_features", in1), in1)),
      in2_features((check_positive("Bilinear", "in2_features", in2), in2)),
      out_features((check_positive("Bilinear", "out_features", out), out)),
      weight(register_parameter("weight", empty({out, in1, in2}, float_options(o)))),
      bias(register_parameter("bias", with_bias ? empty({out}, float_options(o)) : Tensor())) {
  reset_parameters();
}

void Bilinear::reset_parameters(Generator* gen) {
  double bound = in1_features > 0 ? 1.0 / std::sqrt(double(in1_features)) : 0.0;
  init::uniform_(weight, -bound, bound, gen);
  if (bias.defined()) init::uniform_(bias, -bound, bound, gen);
}

Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) {
  return functional::bilinear(x1, x2, weight, bias);
}

std::string Bilinear::extra_repr() const {
  return "in1_features=" + std::to_string(in1_features) + ", in2_features=" +
         std::to_string(in2_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

namespace {
std::optional<int64_t> normalise_padding(std::optional<int64_t> p, int64_t num) {
  if (!p) return p;
  KILN_CHECK(*p >= -num && *p < num, ValueError, "Embedding: padding_idx must be within "
             "[-num_embeddings, num_embeddings) = [", -num, ", ", num, "), got ", *p);
  return *p < 0 ? *p + num : *p;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad, TensorOptions o)
    : Module("Embedding"),
      num_embeddings((check_positive("Embedding", "num_embeddings", num), num)),
      embedding_dim((check_positive("Embedding", "embedding_dim", dim), dim)),
      padding_idx(normalise_padding(pad, num)),
      weight(register_parameter("weight", empty({num, dim}, float_options(o)))) {
  reset_parameters();
}

void Embedding::reset_parameters(Generator* gen) {
  init::normal_(weight, 0.0, 1.0, gen);
  if (padding_idx) {
    autograd::NoGradGuard no_grad;
    Tensor row = weight.select(0, *padding_idx);
    init::zeros_(row);
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  return functional::embedding(indices, weight, padding_idx);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace kiln::nn
