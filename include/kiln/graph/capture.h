#pragma once
// Capture: while one lives on a thread, the tracer interceptor records every op that thread
// dispatches at the top level (ops called from inside another op's kernel or composite are
// that op's business and are not recorded). Tensors met as inputs that the graph did not
// produce become captured constants.
#include <memory>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::graph {

class Capture {
 public:
  // Starts recording on this thread (one capture per thread at a time).
  Capture();
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Declares a function input (before the function runs).
  void add_input(const Tensor& t);
  // Stops recording and returns the graph whose outputs are `outputs` (tensors the function
  // returned: results of recorded ops, inputs, or captured tensors).
  Graph finish(const std::vector<Tensor>& outputs);
  // Whether the function read a value the captured ops computed on the host (see
  // note_host_read): its control flow may depend on the data, so the graph must not replace it.
  bool data_dependent() const;
  // Stops recording without a graph (after an exception); finish() and the destructor call it.
  void close();

  struct State;

 private:
  std::unique_ptr<State> state_;
  bool closed_ = false;
};

// Whether this thread is capturing.
bool is_capturing();
// Called by the bindings when t is read on the host (item(), tolist(), a branch on it): if t
// was computed by the captured ops, the function's control flow may depend on its values and
// the graph must not be replayed (it is marked data-dependent).
void note_host_read(const Tensor& t);

}  // namespace kiln::graph
