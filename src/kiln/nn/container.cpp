// Sequential, ModuleList and ModuleDict.
#include "kiln/nn/container.h"

namespace kiln::nn {

Sequential::Sequential(std::initializer_list<AnyModule> layers) : Module("Sequential") {
  for (const auto& l : layers) push_back(l);
}

void Sequential::push_back(AnyModule layer) {
  register_module(std::to_string(layers_.size()), layer.ptr());
  layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& l : layers_) y = l.forward(y);
  return y;
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  KILN_CHECK(i < layers_.size(), IndexError, "Sequential: index ", i, " is out of range for ",
             layers_.size(), " layers");
  return layers_[i].ptr();
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules)
    : Module("ModuleList") {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  KILN_CHECK(i < modules_.size(), IndexError, "ModuleList: index ", i, " is out of range for ",
             modules_.size(), " modules");
  return modules_[i];
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  register_module(key, std::move(module));
}

}  // namespace kiln::nn
