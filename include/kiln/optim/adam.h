#pragma once
// Adam and AdamW (with amsgrad and maximize), following torch.optim.Adam / AdamW:
//   step += 1; g = grad (negated if maximize)
//   Adam: g = g + weight_decay * p          AdamW: p = p * (1 - lr * weight_decay)
//   m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g
//   (amsgrad) vmax = max(vmax, v) and vmax replaces v below
//   p = p - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// The state buffers are "exp_avg", "exp_avg_sq" and "max_exp_avg_sq"; group options "lr",
// "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize".
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  Options to_map() const;
};

// AdamW's weight decay defaults to 0.01, as PyTorch's.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  Options to_map() const;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = {});

 protected:
  Adam(const char* name, Options defaults, bool decoupled);
  void check_options(const Options& o) const override;
  void update(ParamGroup& group) override;

 private:
  bool decoupled_weight_decay_ = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = {});
};

}  // namespace kiln::optim
