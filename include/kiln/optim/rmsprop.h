#pragma once
// RMSprop (momentum, centered, weight decay, maximize), following torch.optim.RMSprop:
//   g = grad (negated if maximize) + weight_decay * p
//   sq = alpha * sq + (1 - alpha) * g * g
//   centered: ga = lerp(ga, g, 1 - alpha); avg = sqrt(sq - ga * ga) + eps
//   else avg = sqrt(sq) + eps
//   momentum > 0: buf = momentum * buf + g / avg; p = p - lr * buf
//   else p = p - lr * g / avg
// State buffers: "square_avg", "grad_avg" (centered), "momentum_buffer" (momentum > 0).
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
  Options to_map() const;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = {});
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options = {});

 protected:
  void check_options(const Options& o) const override;
  void update(ParamGroup& group) override;
};

}  // namespace kiln::optim
