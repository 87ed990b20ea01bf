#pragma once
// Containers: Sequential (a chain of Tensor -> Tensor layers), ModuleList, ModuleDict.
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

// Any module with a `Tensor forward(const Tensor&)`, type-erased (for Sequential).
class AnyModule {
 public:
  template <typename M>
  AnyModule(std::shared_ptr<M> module)  // NOLINT: implicit, so {make_shared<Linear>(...), ...} works
      : module_(module), forward_([m = module.get()](const Tensor& x) { return m->forward(x); }) {
    KILN_CHECK(module != nullptr, ValueError, "AnyModule: the module is null");
  }
  Tensor forward(const Tensor& x) const { return forward_(x); }
  const std::shared_ptr<Module>& ptr() const { return module_; }

 private:
  std::shared_ptr<Module> module_;
  std::function<Tensor(const Tensor&)> forward_;
};

// Runs its layers in order; they are registered as submodules "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<AnyModule> layers);
  // make_shared<Sequential>(make_shared<Linear>(2, 3), make_shared<ReLU>()).
  template <typename... Ms>
  explicit Sequential(std::shared_ptr<Ms>... layers) : Module("Sequential") {
    (push_back(AnyModule(std::move(layers))), ...);
  }
  void push_back(AnyModule layer);
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  size_t size() const { return layers_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  // The i-th layer as its type (nullptr if it is not an M).
  template <typename M>
  std::shared_ptr<M> get(size_t i) const {
    return std::dynamic_pointer_cast<M>((*this)[i]);
  }

 private:
  std::vector<AnyModule> layers_;
};

// A list of submodules registered as "0", "1", ...; it has no forward.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <typename M>
  std::shared_ptr<M> get(size_t i) const {
    return std::dynamic_pointer_cast<M>((*this)[i]);
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Submodules by key (keys are submodule names: non-empty, without '.'), in insertion order.
class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  void insert(const std::string& key, std::shared_ptr<Module> module);
  bool contains(const std::string& key) const { return named_children().contains(key); }
  std::shared_ptr<Module> operator[](const std::string& key) const { return child(key); }
  template <typename M>
  std::shared_ptr<M> get(const std::string& key) const {
    return std::dynamic_pointer_cast<M>(child(key));
  }
  std::vector<std::string> keys() const { return named_children().keys(); }
  size_t size() const { return children().size(); }
};

}  // namespace kiln::nn
