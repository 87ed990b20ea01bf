// The optimizer steps of the ai.onnx.preview.training domain: Adagrad, Momentum (standard
// and Nesterov) and Adam, each updating any number of tensors at once. Inputs: the learning
// rate R and step count T (scalars), then the tensors X, their gradients G and the
// optimizer's per-tensor state, one group after the other; outputs: new X then new state.
#include <cmath>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"

namespace kiln::onnx {

namespace {

// The number of tensors a node updates, given how many groups (X, G and states) it has.
size_t tensor_count(const OpContext& ctx, size_t groups) {
  KILN_CHECK(ctx.num_inputs() >= 2 && (ctx.num_inputs() - 2) % groups == 0, ValueError, "expected R, T and ",
             groups, " groups of equally many tensors, got ", ctx.num_inputs(), " inputs");
  return (ctx.num_inputs() - 2) / groups;
}

// norm_coefficient * X + G: the gradient with L2 regularisation.
Tensor regularised(const Tensor& x, const Tensor& g, double norm) {
  return norm == 0 ? g : add(mul(x, norm), g);
}

std::vector<Tensor> op_adagrad(OpContext& ctx) {
  const size_t n = tensor_count(ctx, 3);
  const double r = ctx.input_scalar(0), t = ctx.input_scalar(1);
  const double decay = ctx.attr_float("decay_factor", 0.f), eps = ctx.attr_float("epsilon", 1e-6f);
  const double norm = ctx.attr_float("norm_coefficient", 0.f);
  const double rate = r / (1 + t * decay);
  std::vector<Tensor> xs(n), hs(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    Tensor g = regularised(x, ctx.input(2 + n + i), norm);
    Tensor h = add(ctx.input(2 + 2 * n + i), mul(g, g));
    xs[i] = sub(x, div(mul(g, rate), add(sqrt(h), eps)));
    hs[i] = h;
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Tensor> op_momentum(OpContext& ctx) {
  const size_t n = tensor_count(ctx, 3);
  const double r = ctx.input_scalar(0), t = ctx.input_scalar(1);
  const double alpha = ctx.attr_float("alpha"), beta = ctx.attr_float("beta");
  const double norm = ctx.attr_float("norm_coefficient");
  const std::string mode = ctx.attr_string("mode");
  KILN_CHECK(mode == "standard" || mode == "nesterov", ValueError, "mode must be standard or nesterov, got ",
             quoted(mode, 20));
  const double beta_now = t > 0 ? beta : 1.0;  // the first step takes the whole gradient
  std::vector<Tensor> xs(n), vs(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    Tensor g = regularised(x, ctx.input(2 + n + i), norm);
    Tensor v = add(mul(ctx.input(2 + 2 * n + i), alpha), mul(g, beta_now));
    xs[i] = sub(x, mul(mode == "standard" ? v : add(g, mul(v, alpha)), r));
    vs[i] = v;
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

std::vector<Tensor> op_adam(OpContext& ctx) {
  const size_t n = tensor_count(ctx, 4);
  const double r = ctx.input_scalar(0), t = ctx.input_scalar(1);
  const double alpha = ctx.attr_float("alpha", 0.9f), beta = ctx.attr_float("beta", 0.999f);
  const double eps = ctx.attr_float("epsilon", 1e-6f), norm = ctx.attr_float("norm_coefficient", 0.f);
  const double norm_post = ctx.attr_float("norm_coefficient_post", 0.f);
  // Bias correction of both moments folded into the rate (none before the first step).
  const double rate = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
  std::vector<Tensor> xs(n), vs(n), hs(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    Tensor g = regularised(x, ctx.input(2 + n + i), norm);
    Tensor v = add(mul(ctx.input(2 + 2 * n + i), alpha), mul(g, 1 - alpha));
    Tensor h = add(mul(ctx.input(2 + 3 * n + i), beta), mul(mul(g, g), 1 - beta));
    Tensor x_new = sub(x, div(mul(v, rate), add(sqrt(h), eps)));
    xs[i] = norm_post == 0 ? x_new : mul(x_new, 1 - norm_post);
    vs[i] = v;
    hs[i] = h;
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

}  // namespace

void register_training_ops(OpTable& t) {
  t.add("ai.onnx.preview.training:Adagrad", op_adagrad);
  t.add("ai.onnx.preview.training:Momentum", op_momentum);
  t.add("ai.onnx.preview.training:Adam", op_adam);
}

}  // namespace kiln::onnx
