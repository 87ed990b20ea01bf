#pragma once
// SGD with momentum, dampening, Nesterov momentum, weight decay and maximize, following
// torch.optim.SGD:
//   g = grad (negated if maximize) + weight_decay * p
//   buf = g on the first step, else momentum * buf + (1 - dampening) * g
//   g = g + momentum * buf (nesterov) or buf
//   p = p - lr * g
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  Options to_map() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options = {});

 protected:
  void check_options(const Options& o) const override;
  void update(ParamGroup& group) override;
};

}  // namespace kiln::optim
