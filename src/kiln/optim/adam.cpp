// Adam and AdamW, following torch.optim.Adam's single-tensor update.
#include "kiln/optim/adam.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/adam_step.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"

namespace kiln::optim {

namespace {
template <typename O>
Options adam_map(const O& o) {
  return {{"lr", o.lr},           {"beta1", o.beta1},
          {"beta2", o.beta2},     {"eps", o.eps},
          {"weight_decay", o.weight_decay}, {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

Options AdamOptions::to_map() const { return adam_map(*this); }
Options AdamWOptions::to_map() const { return adam_map(*this); }

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o) : Adam(one_group(std::move(params)), o) {}
Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& o) : Adam("Adam", o.to_map(), false) {
  add_param_groups(std::move(groups));
}
Adam::Adam(const char* name, Options defaults, bool decoupled)
    : Optimizer(name, std::move(defaults)), decoupled_weight_decay_(decoupled) {}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& o)
    : AdamW(one_group(std::move(params)), o) {}
AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o)
    : Adam("AdamW", o.to_map(), true) {
  add_param_groups(std::move(groups));
}

void Adam::check_options(const Options& o) const {
  const char* n = name().c_str();
  KILN_CHECK(o.at("lr") >= 0, ValueError, n, ": invalid learning rate: ", o.at("lr"));
  KILN_CHECK(o.at("eps") >= 0, ValueError, n, ": invalid epsilon value: ", o.at("eps"));
  KILN_CHECK(o.at("beta1") >= 0 && o.at("beta1") < 1, ValueError, n,
             ": invalid beta parameter at index 0: ", o.at("beta1"));
  KILN_CHECK(o.at("beta2") >= 0 && o.at("beta2") < 1, ValueError, n,
             ": invalid beta parameter at index 1: ", o.at("beta2"));
  KILN_CHECK(o.at("weight_decay") >= 0, ValueError, n, ": invalid weight_decay value: ",
             o.at("weight_decay"));
}

void Adam::update(ParamGroup& group) {
  const double lr = group.get("lr"), beta1 = group.get("beta1"), beta2 = group.get("beta2");
  const double eps = group.get("eps"), weight_decay = group.get("weight_decay");
  const bool amsgrad = flag(group, "amsgrad"), maximize = flag(group, "maximize");
  for (Tensor& p : group.params) {
    Tensor grad = autograd::grad(p);
    if (!grad.defined()) continue;
    ParamState& st = state_for(p);
    if (!st.buffers.count("exp_avg")) {
      st.buffers["exp_avg"] = zeros_like(p);
      st.buffers["exp_avg_sq"] = zeros_like(p);
    }
    if (amsgrad && !st.buffers.count("max_exp_avg_sq")) st.buffers["max_exp_avg_sq"] = zeros_like(p);
    Tensor& exp_avg = st.buffers["exp_avg"];
    Tensor& exp_avg_sq = st.buffers["exp_avg_sq"];
    st.step += 1;
    const double step = double(st.step);
    const double bias_correction1 = 1 - std::pow(beta1, step);
    const double bias_correction2 = 1 - std::pow(beta2, step);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    if (!amsgrad && (decoupled_weight_decay_ || weight_decay == 0) &&
        adam_step_supported(p, grad, exp_avg, exp_avg_sq)) {
      // One pass, the same float32 results as the sequence below (adam_step.h).
      AdamStepScalars s;
      s.decay = weight_decay != 0 ? 1 - lr * weight_decay : 1.0;
      s.lerp_weight = 1 - beta1;
      s.beta2 = beta2;
      s.one_minus_beta2 = 1 - beta2;
      s.bias_correction2_sqrt = bias_correction2_sqrt;
      s.eps = eps;
      s.neg_step_size = -step_size;
      s.maximize = maximize;
      adam_step_(p, grad, exp_avg, exp_avg_sq, s);
      continue;
    }
    Tensor g = maximize ? neg(grad) : autograd::detach(grad);
    if (weight_decay != 0) {
      if (decoupled_weight_decay_) mul_(p, Scalar(1 - lr * weight_decay));
      else g = add(g, p, weight_decay);
    }
    exp_avg.copy_(lerp(exp_avg, g, Scalar(1 - beta1)));
    mul_(exp_avg_sq, Scalar(beta2));
    addcmul_(exp_avg_sq, g, g, 1 - beta2);
    Tensor denom;
    if (amsgrad) {
      Tensor& max_sq = st.buffers["max_exp_avg_sq"];
      max_sq.copy_(maximum(max_sq, exp_avg_sq));
      denom = div(sqrt(max_sq), Scalar(bias_correction2_sqrt));
    } else {
      denom = div(sqrt(exp_avg_sq), Scalar(bias_correction2_sqrt));
    }
    add_(denom, Scalar(eps));
    addcdiv_(p, exp_avg, denom, -step_size);
  }
}

}  // namespace kiln::optim
