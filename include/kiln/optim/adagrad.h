#pragma once
// Adagrad, following torch.optim.Adagrad:
//   step += 1; g = grad (negated if maximize) + weight_decay * p
//   clr = lr / (1 + (step - 1) * lr_decay)
//   sum = sum + g * g  (sum starts at initial_accumulator_value)
//   p = p - clr * g / (sqrt(sum) + eps)
// State buffer: "sum".
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
  Options to_map() const;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& options = {});
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& options = {});

 protected:
  void check_options(const Options& o) const override;
  void update(ParamGroup& group) override;
};

}  // namespace kiln::optim
