#pragma once
// optim::Optimizer: the base of every optimizer, as torch.optim.Optimizer.
//
// Parameters are held in groups; each group has its own hyperparameters (a name -> value
// map: "lr", "weight_decay", "momentum", "beta1", ...; flags are 0 or 1), filled in from the
// optimizer's defaults where the group does not set them. Per-parameter state (step count
// and buffers such as "exp_avg") is created on the first step that sees a gradient.
// state_dict() snapshots groups and state (tensors are cloned) with parameters numbered
// across groups in order, as PyTorch does; load_state_dict() restores them so that training
// resumes bit-exactly.
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::optim {

// Hyperparameters of a group by name.
using Options = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params{};
  Options options{};  // unset keys take the optimizer's defaults

  bool has(const std::string& key) const { return options.count(key) != 0; }
  // ValueError naming the known keys when absent.
  double get(const std::string& key) const;
  void set(const std::string& key, double value) { options[key] = value; }
  double lr() const { return get("lr"); }
};

struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> buffers;
};

struct OptimizerStateDict {
  struct Group {
    Options options;
    std::vector<int64_t> params;  // indices of the group's parameters
  };
  std::vector<Group> param_groups;
  std::map<int64_t, ParamState> state;  // by parameter index
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }
  // One update of every parameter that has a gradient, with gradients off. closure (if
  // given) runs first with gradients on (it should zero the grads, compute the loss and
  // call backward) and its loss is returned.
  Tensor step(const std::function<Tensor()>& closure = nullptr);
  // Clears (set_to_none) or zeroes the gradient of every parameter.
  void zero_grad(bool set_to_none = true);

  // Adds a group; its options are checked (unknown names and bad values are ValueError)
  // and completed from the defaults. A parameter may belong to one group only.
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }
  // The state of a parameter (nullptr before its first update).
  const ParamState* state(const Tensor& param) const;

  OptimizerStateDict state_dict() const;
  // Group options and state from a state_dict of an optimizer of the same kind built over
  // parameters of the same shapes in the same grouping (ValueError otherwise). State
  // tensors are copied to their parameter's device (floating ones to its dtype).
  void load_state_dict(const OptimizerStateDict& state);

 protected:
  Optimizer(std::string name, Options defaults);
  void add_param_groups(std::vector<ParamGroup> groups);
  // Checks the values of a complete group's options (ValueError naming the bad one).
  virtual void check_options(const Options& options) const = 0;
  // Updates the parameters of one group that have a gradient (called with grad mode off).
  virtual void update(ParamGroup& group) = 0;
  ParamState& state_for(const Tensor& param);
  // The value of a flag option (0 or 1).
  static bool flag(const ParamGroup& g, const std::string& key) { return g.get(key) != 0; }

 private:
  std::string name_;
  Options defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

// Single-group convenience: every parameter in one group with the defaults.
std::vector<ParamGroup> one_group(std::vector<Tensor> params);

}  // namespace kiln::optim
