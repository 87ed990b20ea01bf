#pragma once
// The autograd graph: a Node per recorded op, edges to the nodes that produced its inputs,
// and saved tensors that detect in-place modification through the version counter.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/registry.h"

namespace kiln {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // nullptr: the input needs no gradient
  uint32_t input_nr = 0;       // which input of `node` receives the gradient
  bool valid() const { return node != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  // grads[i] is the gradient of output i (undefined if none flowed); returns one gradient
  // per next edge (undefined where none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}
  virtual uint32_t num_outputs() const { return 1; }

  std::vector<Edge> next_edges;
  // Hooks on the gradient of each output (tensor hooks of non-leaf tensors / leaves).
  std::vector<std::vector<std::function<Tensor(const Tensor&)>>> pre_hooks;
  // Node hooks (torch.autograd.graph.Node.register_prehook / register_hook), run when the
  // node runs: before it, with all its output gradients (after the tensor hooks), which they
  // may replace; after it, with its input gradients (replaceable) and output gradients.
  std::vector<std::function<void(std::vector<Tensor>& grad_outputs)>> node_pre_hooks;
  std::vector<std::function<void(std::vector<Tensor>& grad_inputs,
                                 const std::vector<Tensor>& grad_outputs)>> node_post_hooks;
  // Owned by the language bindings (Python's node.metadata dict); kiln itself never reads it.
  std::shared_ptr<void> binding_metadata;
  const uint64_t sequence_nr;  // creation order: later nodes run first in backward
};

// The node at a leaf: adds incoming gradients into the leaf's .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

namespace autograd {
class PackedTensor;
}

// The edge through which a gradient for t enters the graph: its grad_fn, or for a leaf that
// requires grad its AccumulateGrad node (made on first use); none if t needs no gradient.
Edge gradient_edge(const Tensor& t);

// A tensor kept for backward, with the version it had when saved. With saved-tensor hooks
// installed (kiln/autograd/saved_tensor_hooks.h) only what the pack hook returned is kept.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner);
  // The saved tensor, connected to the graph; Error naming `op` if it was modified in place.
  Tensor unpack(const std::string& op) const;
  // Where the saved tensor sits in its storage, without the version check or an unpack, for
  // derivatives that need only that (in-place writes never change it).
  int64_t storage_offset() const { return storage_offset_; }
  bool is_contiguous() const { return contiguous_; }
  void reset() { *this = SavedTensor(); }
  bool defined() const { return data_.defined() || packed_ != nullptr; }

 private:
  Tensor data_;          // alias (same storage, geometry, version counter), no autograd meta
  Tensor original_;      // for leaves: the leaf itself (so gradients reach it)
  std::shared_ptr<autograd::PackedTensor> packed_;  // instead of data_ under hooks
  std::shared_ptr<Node> leaf_accumulator_;          // for packed leaves: where grads go
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_;
  int64_t storage_offset_ = 0;
  bool contiguous_ = true;
  uint64_t version_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  std::shared_ptr<Node> grad_fn_;    // of a saved non-leaf input
  std::weak_ptr<Node> owner_;        // for saved outputs (avoids a cycle)
  uint32_t output_nr_ = 0;
  bool released_ = false;
};

namespace autograd {
// autograd::grad with the inputs given as graph edges (torch's GradientEdge, from
// gradient_edge(t)): the gradient flowing into each edge, even after the tensor it came from
// is gone or was modified in place.
std::vector<Tensor> grad_at_edges(const std::vector<Tensor>& outputs,
                                  const std::vector<Edge>& inputs,
                                  const std::vector<Tensor>& grad_outputs = {},
                                  std::optional<bool> retain_graph = std::nullopt,
                                  bool create_graph = false, bool allow_unused = false);
// torch's Variable._execution_engine.queue_callback: fn runs once the backward pass running
// on this thread has finished its nodes. Error outside a backward pass.
void queue_backward_callback(std::function<void()> fn);
// A number identifying the backward pass running on this thread (a new one per pass, nested
// passes included); 0 outside backward.
uint64_t current_backward_pass_id();
// backward(tensors, inputs=): gradients flow only to `inputs`; leaves among them accumulate
// into .grad (with their hooks), and the gradient reaching each input is returned (the
// caller stores those of non-leaf inputs).
std::vector<Tensor> backward_to(const std::vector<Tensor>& tensors,
                                const std::vector<Tensor>& grad_tensors,
                                const std::vector<Tensor>& inputs, bool retain_graph,
                                bool create_graph);
}  // namespace autograd

// Derivative of an op: gradients for each input from the gradients of the outputs.
struct GradContext {
  const OpDef* op;
  std::vector<AttrValue> attrs;
  std::vector<SavedTensor> inputs, outputs;
  std::vector<bool> needs_input_grad;
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  std::vector<Device> input_devices;

  Tensor input(size_t i) const { return inputs[i].unpack(op->name); }
  Tensor output(size_t i) const { return outputs[i].unpack(op->name); }
  bool needs(size_t i) const { return i < needs_input_grad.size() && needs_input_grad[i]; }
  // Attribute helpers mirroring OpCall.
  OpCall as_call() const;
};
using DerivativeFn = std::vector<Tensor> (*)(const GradContext& ctx,
                                             const std::vector<Tensor>& grad_outputs);

// Registers the derivative of an op (by name).
void register_derivative(const std::string& op, DerivativeFn fn);
DerivativeFn find_derivative(const std::string& op);

// Sums grad down to shape (undoing broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace kiln
