// optim::Optimizer: parameter groups, per-parameter state, zero_grad, step, state dicts.
#include "kiln/optim/optimizer.h"

#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"

namespace kiln::optim {

namespace {
std::string key_list(const Options& o) {
  std::string s;
  for (const auto& [k, v] : o) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "(none)" : s;
}
}  // namespace

double ParamGroup::get(const std::string& key) const {
  auto it = options.find(key);
  KILN_CHECK(it != options.end(), ValueError, "parameter group has no option \"", key,
             "\"; its options: ", key_list(options));
  return it->second;
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params), {}}};
}

Optimizer::Optimizer(std::string name, Options defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::add_param_groups(std::vector<ParamGroup> groups) {
  size_t n = 0;
  for (const auto& g : groups) n += g.params.size();
  KILN_CHECK(n > 0, ValueError, name_, ": optimizer got an empty parameter list");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  for (const auto& [k, v] : group.options)
    KILN_CHECK(defaults_.count(k) || k == "initial_lr", ValueError, name_, ": unknown option \"",
               k, "\" in a parameter group; known options: ", key_list(defaults_));
  for (const auto& [k, v] : defaults_) group.options.emplace(k, v);
  check_options(group.options);
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& g : groups_)
    for (const auto& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK(p.defined(), ValueError, name_, ": parameter ", i, " of the group is undefined");
    KILN_CHECK(autograd::is_leaf(p), ValueError, name_, ": can't optimize a non-leaf Tensor "
               "(parameter ", i, " of the group)");
    KILN_CHECK(is_floating(p.dtype()), TypeError, name_, ": parameter ", i,
               " of the group has dtype ", dtype_name(p.dtype()), "; only floating-point "
               "tensors can be optimized");
    KILN_CHECK(seen.insert(p.impl()).second, ValueError, name_, ": some parameters appear in "
               "more than one parameter group (or twice in one)");
  }
  groups_.push_back(std::move(group));
}

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  if (closure) {
    autograd::EnableGradGuard enable;
    loss = closure();
  }
  autograd::NoGradGuard no_grad;
  for (auto& g : groups_) update(g);
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (auto& p : g.params) {
      Tensor grad = autograd::grad(p);
      if (!grad.defined()) continue;
      if (set_to_none) {
        autograd::set_grad(p, Tensor());
      } else {
        autograd::NoGradGuard no_grad;
        Tensor gd = autograd::detach(grad);
        gd.zero_();
      }
    }
}

const ParamState* Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

ParamState& Optimizer::state_for(const Tensor& param) { return state_[param.impl()]; }

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict sd;
  int64_t index = 0;
  for (const auto& g : groups_) {
    OptimizerStateDict::Group sg{g.options, {}};
    for (const auto& p : g.params) {
      if (const ParamState* st = state(p)) {
        ParamState copy{st->step, {}};
        for (const auto& [name, t] : st->buffers) copy.buffers[name] = t.clone();
        sd.state[index] = std::move(copy);
      }
      sg.params.push_back(index++);
    }
    sd.param_groups.push_back(std::move(sg));
  }
  return sd;
}

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  KILN_CHECK(sd.param_groups.size() == groups_.size(), ValueError, name_, ": loaded state dict "
             "has ", sd.param_groups.size(), " parameter groups, the optimizer has ", groups_.size());
  std::vector<Tensor> by_index;
  for (size_t i = 0; i < groups_.size(); ++i) {
    KILN_CHECK(sd.param_groups[i].params.size() == groups_[i].params.size(), ValueError, name_,
               ": loaded state dict contains a parameter group (", i, ") with ",
               sd.param_groups[i].params.size(), " parameters, the optimizer's group has ",
               groups_[i].params.size());
    for (const auto& p : groups_[i].params) by_index.push_back(p);
  }
  // Check everything before changing anything.
  std::map<int64_t, Tensor> param_of;
  {
    int64_t n = 0;
    for (size_t i = 0; i < groups_.size(); ++i)
      for (int64_t id : sd.param_groups[i].params) param_of[id] = by_index[size_t(n++)];
    KILN_CHECK(int64_t(param_of.size()) == n, ValueError, name_,
               ": loaded state dict numbers two parameters alike");
  }
  for (size_t i = 0; i < groups_.size(); ++i) check_options(sd.param_groups[i].options);
  for (const auto& [id, st] : sd.state) {
    auto it = param_of.find(id);
    KILN_CHECK(it != param_of.end(), ValueError, name_, ": loaded state dict has state for "
               "parameter ", id, ", which no group lists");
    for (const auto& [name, t] : st.buffers)
      KILN_CHECK(t.defined() && t.shape() == it->second.shape(), ValueError, name_,
                 ": state \"", name, "\" of parameter ", id, " has shape ",
                 t.defined() ? shape_str(t.shape()) : std::string("(undefined)"),
                 ", the parameter has shape ", shape_str(it->second.shape()));
  }
  for (size_t i = 0; i < groups_.size(); ++i) groups_[i].options = sd.param_groups[i].options;
  state_.clear();
  for (const auto& [id, st] : sd.state) {
    const Tensor& p = param_of[id];
    ParamState copy{st.step, {}};
    for (const auto& [name, t] : st.buffers) {
      Tensor v = to_device(t, p.device());
      if (is_floating(v.dtype())) v = to_dtype(v, p.dtype());
      copy.buffers[name] = v.shares_storage_with(t) ? v.clone() : v;
    }
    state_[p.impl()] = std::move(copy);
  }
}

}  // namespace kiln::optim
