// SGD, following torch.optim.SGD's single-tensor update.
#include "kiln/optim/sgd.h"

#include "kiln/autograd/autograd.h"
#include "kiln/ops/elementwise.h"

namespace kiln::optim {

Options SGDOptions::to_map() const {
  return {{"lr", lr},
          {"momentum", momentum},
          {"dampening", dampening},
          {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& o) : SGD(one_group(std::move(params)), o) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o) : Optimizer("SGD", o.to_map()) {
  add_param_groups(std::move(groups));
}

void SGD::check_options(const Options& o) const {
  KILN_CHECK(o.at("lr") >= 0, ValueError, "SGD: invalid learning rate: ", o.at("lr"));
  KILN_CHECK(o.at("momentum") >= 0, ValueError, "SGD: invalid momentum value: ", o.at("momentum"));
  KILN_CHECK(o.at("weight_decay") >= 0, ValueError, "SGD: invalid weight_decay value: ",
             o.at("weight_decay"));
  KILN_CHECK(o.at("nesterov") == 0 || (o.at("momentum") > 0 && o.at("dampening") == 0),
             ValueError, "SGD: Nesterov momentum requires a momentum and zero dampening");
}

void SGD::update(ParamGroup& group) {
  const double lr = group.get("lr"), momentum = group.get("momentum");
  const double dampening = group.get("dampening"), weight_decay = group.get("weight_decay");
  const bool nesterov = flag(group, "nesterov"), maximize = flag(group, "maximize");
  for (Tensor& p : group.params) {
    Tensor grad = autograd::grad(p);
    if (!grad.defined()) continue;
    Tensor g = maximize ? neg(grad) : autograd::detach(grad);
    if (weight_decay != 0) g = add(g, p, weight_decay);
    if (momentum != 0) {
      ParamState& st = state_for(p);
      auto it = st.buffers.find("momentum_buffer");
      Tensor buf;
      if (it == st.buffers.end()) {
        buf = g.clone();
        st.buffers["momentum_buffer"] = buf;
      } else {
        buf = it->second;
        mul_(buf, Scalar(momentum));
        add_(buf, g, 1 - dampening);
      }
      g = nesterov ? add(g, buf, momentum) : buf;
    }
    add_(p, g, -lr);
  }
}

}  // namespace kiln::optim
