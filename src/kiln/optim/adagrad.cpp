// Adagrad, following torch.optim.Adagrad's single-tensor update.
#include "kiln/optim/adagrad.h"

#include "kiln/autograd/autograd.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"

namespace kiln::optim {

Options AdagradOptions::to_map() const {
  return {{"lr", lr},
          {"lr_decay", lr_decay},
          {"weight_decay", weight_decay},
          {"initial_accumulator_value", initial_accumulator_value},
          {"eps", eps},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& o)
    : Adagrad(one_group(std::move(params)), o) {}
Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& o)
    : Optimizer("Adagrad", o.to_map()) {
  add_param_groups(std::move(groups));
}

void Adagrad::check_options(const Options& o) const {
  KILN_CHECK(o.at("lr") >= 0, ValueError, "Adagrad: invalid learning rate: ", o.at("lr"));
  KILN_CHECK(o.at("lr_decay") >= 0, ValueError, "Adagrad: invalid lr_decay value: ",
             o.at("lr_decay"));
  KILN_CHECK(o.at("weight_decay") >= 0, ValueError, "Adagrad: invalid weight_decay value: ",
             o.at("weight_decay"));
  KILN_CHECK(o.at("initial_accumulator_value") >= 0, ValueError,
             "Adagrad: invalid initial_accumulator_value value: ", o.at("initial_accumulator_value"));
  KILN_CHECK(o.at("eps") >= 0, ValueError, "Adagrad: invalid epsilon value: ", o.at("eps"));
}

void Adagrad::update(ParamGroup& group) {
  const double lr = group.get("lr"), lr_decay = group.get("lr_decay");
  const double weight_decay = group.get("weight_decay"), eps = group.get("eps");
  const double init = group.get("initial_accumulator_value");
  const bool maximize = flag(group, "maximize");
  for (Tensor& p : group.params) {
    Tensor grad = autograd::grad(p);
    if (!grad.defined()) continue;
    ParamState& st = state_for(p);
    if (!st.buffers.count("sum")) st.buffers["sum"] = full_like(p, init);
    st.step += 1;
    const double step = double(st.step);
    Tensor g = maximize ? neg(grad) : autograd::detach(grad);
    if (weight_decay != 0) g = add(g, p, weight_decay);
    const double clr = lr / (1 + (step - 1) * lr_decay);
    Tensor& sum = st.buffers["sum"];
    addcmul_(sum, g, g, 1.0);
    Tensor std = sqrt(sum);
    add_(std, Scalar(eps));
    addcdiv_(p, g, std, -clr);
  }
}

}  // namespace kiln::optim
