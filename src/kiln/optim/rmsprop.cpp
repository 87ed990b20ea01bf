// RMSprop, following torch.optim.RMSprop's single-tensor update.
#include "kiln/optim/rmsprop.h"

#include "kiln/autograd/autograd.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"

namespace kiln::optim {

Options RMSpropOptions::to_map() const {
  return {{"lr", lr},
          {"alpha", alpha},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"momentum", momentum},
          {"centered", centered ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& o)
    : RMSprop(one_group(std::move(params)), o) {}
RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& o)
    : Optimizer("RMSprop", o.to_map()) {
  add_param_groups(std::move(groups));
}

void RMSprop::check_options(const Options& o) const {
  KILN_CHECK(o.at("lr") >= 0, ValueError, "RMSprop: invalid learning rate: ", o.at("lr"));
  KILN_CHECK(o.at("eps") >= 0, ValueError, "RMSprop: invalid epsilon value: ", o.at("eps"));
  KILN_CHECK(o.at("momentum") >= 0, ValueError, "RMSprop: invalid momentum value: ",
             o.at("momentum"));
  KILN_CHECK(o.at("weight_decay") >= 0, ValueError, "RMSprop: invalid weight_decay value: ",
             o.at("weight_decay"));
  KILN_CHECK(o.at("alpha") >= 0, ValueError, "RMSprop: invalid alpha value: ", o.at("alpha"));
}

void RMSprop::update(ParamGroup& group) {
  const double lr = group.get("lr"), alpha = group.get("alpha"), eps = group.get("eps");
  const double weight_decay = group.get("weight_decay"), momentum = group.get("momentum");
  const bool centered = flag(group, "centered"), maximize = flag(group, "maximize");
  for (Tensor& p : group.params) {
    Tensor grad = autograd::grad(p);
    if (!grad.defined()) continue;
    ParamState& st = state_for(p);
    if (!st.buffers.count("square_avg")) st.buffers["square_avg"] = zeros_like(p);
    if (momentum > 0 && !st.buffers.count("momentum_buffer"))
      st.buffers["momentum_buffer"] = zeros_like(p);
    if (centered && !st.buffers.count("grad_avg")) st.buffers["grad_avg"] = zeros_like(p);
    Tensor g = maximize ? neg(grad) : autograd::detach(grad);
    st.step += 1;
    if (weight_decay != 0) g = add(g, p, weight_decay);
    Tensor& square_avg = st.buffers["square_avg"];
    mul_(square_avg, Scalar(alpha));
    addcmul_(square_avg, g, g, 1 - alpha);
    Tensor avg;
    if (centered) {
      Tensor& grad_avg = st.buffers["grad_avg"];
      grad_avg.copy_(lerp(grad_avg, g, Scalar(1 - alpha)));
      avg = sqrt(addcmul(square_avg, grad_avg, grad_avg, -1.0));
    } else {
      avg = sqrt(square_avg);
    }
    add_(avg, Scalar(eps));
    if (momentum > 0) {
      Tensor& buf = st.buffers["momentum_buffer"];
      mul_(buf, Scalar(momentum));
      addcdiv_(buf, g, avg);
      add_(p, buf, -lr);
    } else {
      addcdiv_(p, g, avg, -lr);
    }
  }
}

}  // namespace kiln::optim
