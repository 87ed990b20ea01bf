// nn::Module: registration, traversal, train/eval, conversion and state dicts.
#include "kiln/nn/module.h"

#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"

namespace kiln::nn {

namespace {

std::string join_quoted(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
  return s;
}

std::string load_error_message(const std::string& module, const std::vector<std::string>& missing,
                               const std::vector<std::string>& unexpected,
                               const std::vector<std::string>& mismatched) {
  std::string msg = "Error(s) in loading state_dict for " + module + ":";
  if (!missing.empty()) msg += "\n\tMissing key(s) in state_dict: " + join_quoted(missing) + ".";
  if (!unexpected.empty())
    msg += "\n\tUnexpected key(s) in state_dict: " + join_quoted(unexpected) + ".";
  for (const auto& m : mismatched) msg += "\n\t" + m;
  return msg;
}

std::string known_names(const std::vector<std::string>& names) {
  return names.empty() ? std::string("(none)") : join_quoted(names);
}

std::string indent(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

}  // namespace

StateDictError::StateDictError(const std::string& module, std::vector<std::string> missing,
                               std::vector<std::string> unexpected,
                               std::vector<std::string> mismatched)
    : Error(load_error_message(module, missing, unexpected, mismatched)),
      missing_(std::move(missing)),
      unexpected_(std::move(unexpected)),
      mismatched_(std::move(mismatched)) {}

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

void Module::check_new_name(const std::string& name, const char* what) const {
  KILN_CHECK(!name.empty(), ValueError, type_name_, ": ", what, " name can't be empty");
  KILN_CHECK(name.find('.') == std::string::npos, ValueError, type_name_, ": ", what,
             " name can't contain \".\", got \"", name, "\"");
  for (const auto& s : params_)
    KILN_CHECK(s.name != name, ValueError, type_name_, ": attribute \"", name,
               "\" already exists (a parameter)");
  for (const auto& s : buffers_)
    KILN_CHECK(s.name != name, ValueError, type_name_, ": attribute \"", name,
               "\" already exists (a buffer)");
  KILN_CHECK(!children_.contains(name), ValueError, type_name_, ": attribute \"", name,
             "\" already exists (a submodule)");
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name, "parameter");
  if (value.defined()) {
    bool is_param = autograd::requires_grad(value) && autograd::is_leaf(value);
    if (!is_param || !requires_grad) {
      value = autograd::detach(value);
      autograd::set_requires_grad(value, requires_grad);
    }
  }
  storage_.push_back(std::move(value));
  params_.push_back({name, &storage_.back(), true});
  return storage_.back();
}

Tensor& Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_new_name(name, "buffer");
  storage_.push_back(std::move(value));
  buffers_.push_back({name, &storage_.back(), persistent});
  return storage_.back();
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  KILN_CHECK(module != nullptr, ValueError, type_name_, ": submodule \"", name, "\" is null");
  KILN_CHECK(module.get() != this, ValueError, type_name_, ": a module can't be its own submodule");
  children_.insert(name, std::move(module));
}

void Module::replace_module_impl(const std::string& name, std::shared_ptr<Module> module) {
  KILN_CHECK(children_.contains(name), ValueError, type_name_, ": no submodule \"", name,
             "\" to replace; submodules: ", known_names(children_.keys()));
  KILN_CHECK(module != nullptr, ValueError, type_name_, ": submodule \"", name, "\" is null");
  children_.insert_or_assign(name, std::move(module));
}

Tensor& Module::parameter(const std::string& name) {
  std::vector<std::string> names;
  for (auto& s : params_) {
    if (s.name == name) return *s.tensor;
    names.push_back(s.name);
  }
  KILN_THROW(ValueError, type_name_, " has no parameter \"", name, "\"; parameters: ",
             known_names(names));
}

Tensor& Module::buffer(const std::string& name) {
  std::vector<std::string> names;
  for (auto& s : buffers_) {
    if (s.name == name) return *s.tensor;
    names.push_back(s.name);
  }
  KILN_THROW(ValueError, type_name_, " has no buffer \"", name, "\"; buffers: ", known_names(names));
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  const auto* m = children_.find(name);
  KILN_CHECK(m != nullptr, ValueError, type_name_, " has no submodule \"", name,
             "\"; submodules: ", known_names(children_.keys()));
  return *m;
}

template <typename Fn>
void Module::visit(const std::string& prefix, Fn&& fn) const {
  fn(prefix, *this);
  for (const auto& [name, child] : children_) child->visit(prefix + name + ".", fn);
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  auto add = [&](const std::string& prefix, const Module& m) {
    for (const auto& s : m.params_)
      if (s.tensor->defined() && seen.insert(s.tensor->impl()).second)
        out.insert(prefix + s.name, *s.tensor);
  };
  if (recurse) visit("", add);
  else add("", *this);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const { return named_parameters(recurse).values(); }

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out;
  std::unordered_set<const TensorImpl*> seen;
  auto add = [&](const std::string& prefix, const Module& m) {
    for (const auto& s : m.buffers_)
      if (s.tensor->defined() && seen.insert(s.tensor->impl()).second)
        out.insert(prefix + s.name, *s.tensor);
  };
  if (recurse) visit("", add);
  else add("", *this);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const {
  return children_;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules() const {
  // Each module once, under its first name (as PyTorch).
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  std::unordered_set<const Module*> seen{this};
  if (auto self = std::const_pointer_cast<Module>(weak_from_this().lock())) out.insert("", self);
  std::function<void(const std::string&, const Module&)> rec = [&](const std::string& prefix,
                                                                   const Module& m) {
    for (const auto& [name, child] : m.children_) {
      if (!seen.insert(child.get()).second) continue;
      std::string full = prefix.empty() ? name : prefix + "." + name;
      out.insert(full, child);
      rec(full, *child);
    }
  };
  rec("", *this);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::convert(Device* device, DType* dtype) {
  // One conversion per tensor, so parameters shared between modules stay shared.
  std::unordered_map<const TensorImpl*, Tensor> done;
  auto conv = [&](Tensor& t, bool is_param) {
    if (!t.defined()) return;
    auto it = done.find(t.impl());
    if (it != done.end()) {
      t = it->second;
      return;
    }
    const TensorImpl* key = t.impl();
    bool cast = dtype && is_floating(t.dtype()) && t.dtype() != *dtype;
    bool move = device && t.device() != *device;
    if (!cast && !move) {
      done.emplace(key, t);
      return;
    }
    autograd::NoGradGuard no_grad;
    Tensor x = autograd::detach(t);
    if (move) x = to_device(x, *device);
    if (cast) x = to_dtype(x, *dtype);
    if (x.shares_storage_with(t)) x = x.clone();
    if (is_param) {
      autograd::set_requires_grad(x, autograd::requires_grad(t));
      Tensor g = autograd::grad(t);
      if (g.defined()) {
        if (move) g = to_device(g, *device);
        if (cast) g = to_dtype(g, *dtype);
        autograd::set_grad(x, g);
      }
    }
    done.emplace(key, x);
    t = x;
  };
  visit("", [&](const std::string&, const Module& cm) {
    Module& m = const_cast<Module&>(cm);
    for (auto& s : m.params_) conv(*s.tensor, true);
    for (auto& s : m.buffers_) conv(*s.tensor, false);
  });
}

void Module::to(Device device) { convert(&device, nullptr); }
void Module::to(DType dtype) {
  KILN_CHECK(is_floating(dtype), TypeError,
             "nn.Module.to only accepts floating point dtypes, but got desired dtype=",
             dtype_name(dtype));
  convert(nullptr, &dtype);
}
void Module::to(Device device, DType dtype) {
  KILN_CHECK(is_floating(dtype), TypeError,
             "nn.Module.to only accepts floating point dtypes, but got desired dtype=",
             dtype_name(dtype));
  convert(&device, &dtype);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor p : parameters()) {
    Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    if (set_to_none) {
      autograd::set_grad(p, Tensor());
    } else {
      autograd::NoGradGuard no_grad;
      Tensor gd = autograd::detach(g);
      gd.zero_();
    }
  }
}

StateDict Module::state_dict() const {
  StateDict out;
  visit("", [&](const std::string& prefix, const Module& m) {
    for (const auto& s : m.params_)
      if (s.tensor->defined()) out.insert(prefix + s.name, autograd::detach(*s.tensor));
    for (const auto& s : m.buffers_)
      if (s.tensor->defined() && s.persistent)
        out.insert(prefix + s.name, autograd::detach(*s.tensor));
  });
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  OrderedDict<std::string, Tensor*> expected;
  visit("", [&](const std::string& prefix, const Module& cm) {
    Module& m = const_cast<Module&>(cm);
    for (auto& s : m.params_)
      if (s.tensor->defined()) expected.insert_or_assign(prefix + s.name, s.tensor);
    for (auto& s : m.buffers_)
      if (s.tensor->defined() && s.persistent) expected.insert_or_assign(prefix + s.name, s.tensor);
  });
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [key, slot] : expected) {
    const Tensor* v = state.find(key);
    if (!v) {
      missing.push_back(key);
      continue;
    }
    KILN_CHECK(v->defined(), ValueError, "load_state_dict: the value of \"", key,
               "\" is an undefined tensor");
    if (v->shape() != slot->shape())
      mismatched.push_back("size mismatch for " + key + ": copying a param with shape " +
                           shape_str(v->shape()) + " from checkpoint, the shape in current model is " +
                           shape_str(slot->shape()) + ".");
  }
  for (const auto& [key, value] : state)
    if (!expected.contains(key)) unexpected.push_back(key);
  if (!mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty())))
    throw StateDictError(type_name_, missing, unexpected, mismatched);
  autograd::NoGradGuard no_grad;
  for (const auto& [key, slot] : expected) {
    const Tensor* v = state.find(key);
    if (!v || v->is_same(*slot)) continue;
    Tensor dst = autograd::detach(*slot);
    copy_(dst, *v);
  }
  return {missing, unexpected};
}

std::string Module::str() const {
  std::ostringstream os;
  os << type_name_ << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (const auto& [name, child] : children_) os << "  (" << name << "): " << indent(child->str()) << "\n";
  }
  os << ")";
  return os.str();
}

}  // namespace kiln::nn
