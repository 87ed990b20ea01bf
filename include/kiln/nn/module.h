#pragma once
// nn::Module: the base of every layer, in the style of libtorch's torch::nn::Module.
//
// A module owns named parameters (leaf tensors that require grad), named buffers (tensors
// that are state but not trained, such as BatchNorm's running statistics) and named
// submodules (shared_ptr). Registered tensors live in slots owned by the module, and the
// reference returned by register_parameter/register_buffer stays valid for the module's
// lifetime: layers keep `Tensor& weight` members bound to their slots, so to(dtype) and
// to(device), which put converted tensors in the slots, are seen through those members.
//
// There is no virtual forward: each layer exposes a typed forward (and operator()).
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/nn/ordered_dict.h"
#include "kiln/tensor/tensor.h"

namespace kiln::nn {

// name -> tensor, in the order PyTorch's state_dict() uses.
using StateDict = OrderedDict<std::string, Tensor>;

// load_state_dict found keys or shapes that do not match the module. The message lists
// every missing key, unexpected key and shape mismatch (as PyTorch's "Error(s) in loading
// state_dict for ..."); the lists are also available one by one.
class StateDictError : public Error {
 public:
  StateDictError(const std::string& module, std::vector<std::string> missing,
                 std::vector<std::string> unexpected, std::vector<std::string> mismatched);
  const std::vector<std::string>& missing_keys() const { return missing_; }
  const std::vector<std::string>& unexpected_keys() const { return unexpected_; }
  // One line per mismatch: "size mismatch for <key>: ...".
  const std::vector<std::string>& shape_mismatches() const { return mismatched_; }

 private:
  std::vector<std::string> missing_, unexpected_, mismatched_;
};

// What a non-strict load left out (as PyTorch's _IncompatibleKeys).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The layer's class name ("Linear"), used in messages and str().
  const std::string& type_name() const { return type_name_; }

  // --- registration -------------------------------------------------------------------
  // Registers a parameter. A tensor that already is a leaf requiring grad is registered as
  // is (so one parameter can be shared by several modules); anything else is detached into
  // a new leaf sharing its data, with requires_grad set as asked (floating dtypes only).
  // An undefined tensor registers an absent parameter (PyTorch's `bias=None`), which
  // parameters() and state_dict() skip. Names are non-empty, without '.', and unique among
  // this module's parameters, buffers and submodules (ValueError otherwise).
  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  // A buffer: module state that is not trained. persistent=false keeps it out of state_dict.
  Tensor& register_buffer(const std::string& name, Tensor value, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_module_impl(name, module);
    return module;
  }
  // Replaces an already registered submodule.
  template <typename M>
  std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> module) {
    replace_module_impl(name, module);
    return module;
  }

  // This module's own entries by name (ValueError listing the known names otherwise).
  Tensor& parameter(const std::string& name);
  Tensor& buffer(const std::string& name);
  std::shared_ptr<Module> child(const std::string& name) const;

  // --- traversal ----------------------------------------------------------------------
  // Parameters of this module, then of its submodules depth first, each tensor once
  // (a shared parameter appears under its first name), undefined ones skipped.
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  // All modules below this one, depth first, each once under its first dotted name (this
  // one is "" and is included only when it is owned by a shared_ptr).
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules() const;

  // --- mode, placement, gradients -----------------------------------------------------
  // Sets training mode here and in every submodule.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer to `device`; floating ones are converted to `dtype`
  // (integer buffers such as num_batches_tracked keep their dtype). Each converted tensor
  // replaces the old one in its slot, keeping requires_grad (and a converted .grad).
  // Parameters shared between modules stay shared. An optimizer built before the move
  // still holds the old tensors: build optimizers after moving the module.
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);

  // Clears (set_to_none) or zeroes the .grad of every parameter.
  void zero_grad(bool set_to_none = true);

  // --- state --------------------------------------------------------------------------
  // Parameters and persistent buffers by dotted name (own entries first, then submodules);
  // the values share data with the module's tensors (detached: they do not require grad).
  StateDict state_dict() const;
  // Copies values into the module's tensors (converting dtype and device as copy_ does).
  // Nothing is copied when anything is wrong: a shape mismatch always raises
  // StateDictError; missing and unexpected keys raise it when strict, and are returned
  // otherwise.
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

  // PyTorch-style nested description, e.g. "Linear(in_features=2, out_features=3, bias=true)".
  std::string str() const;
  // The part inside the parentheses of this module's own line.
  virtual std::string extra_repr() const { return ""; }

 protected:
  void register_module_impl(const std::string& name, std::shared_ptr<Module> module);
  void replace_module_impl(const std::string& name, std::shared_ptr<Module> module);

 private:
  struct Slot {
    std::string name;
    Tensor* tensor;  // points into storage_
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  template <typename Fn>
  void visit(const std::string& prefix, Fn&& fn) const;  // fn(prefix, const Module&)
  void convert(Device* device, DType* dtype);

  std::string type_name_;
  bool training_ = true;
  std::deque<Tensor> storage_;  // registered tensors; deque keeps their addresses stable
  std::vector<Slot> params_, buffers_;
  OrderedDict<std::string, std::shared_ptr<Module>> children_;
};

}  // namespace kiln::nn
