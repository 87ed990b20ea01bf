#pragma once
// kiln::compile (decision 0081): a function of tensors captured once per guard (the inputs'
// shapes, dtypes, devices, layouts and requires_grad, and whether grad mode is on), optimised
// by the passes of passes.h and replayed through the dispatcher on later calls. A capture that
// read computed values on the host (its control flow may depend on them) is not replayed:
// that guard keeps running the function eagerly.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::graph {

using TensorFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct CompileOptions {
  bool fuse = true;          // pointwise fusion for graphs that record no gradient
  size_t max_graphs = 8;     // captures per function; beyond it new guards run eagerly
};

class CompiledFunction {
 public:
  CompiledFunction(TensorFunction fn, CompileOptions options);
  ~CompiledFunction();
  CompiledFunction(CompiledFunction&&) noexcept;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  int64_t captures() const;         // graphs captured so far
  int64_t replays() const;          // calls answered by a graph
  std::string last_graph() const;   // the most recent capture's optimised graph, as text

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

CompiledFunction compile(TensorFunction fn, CompileOptions options = {});

}  // namespace kiln::graph

namespace kiln {
using graph::compile;
}  // namespace kiln
