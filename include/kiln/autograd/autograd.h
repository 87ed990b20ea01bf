#pragma once
// Autograd: reverse-mode differentiation recorded by the autograd interceptor as ops run.
// Semantics follow PyTorch: leaves are tensors created by the user (requires_grad set by
// hand); results of differentiable ops on tensors that require grad get a grad_fn; backward()
// accumulates into leaves' .grad; retain_graph, create_graph (higher-order gradients),
// grad modes (no_grad, inference_mode), tensor hooks.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

class Node;

// Per-tensor state (TensorImpl::autograd_meta).
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                       // accumulated gradient (leaves, or retain_grad)
  std::shared_ptr<Node> grad_fn;     // nullptr for leaves
  uint32_t output_nr = 0;            // which output of grad_fn this tensor is
  bool retains_grad = false;
  std::vector<std::function<Tensor(const Tensor&)>> hooks;  // may return undefined (no change)
  // Leaves: called with the leaf after each accumulation into its grad (optimizer-in-backward).
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that accumulates into grad
};

namespace autograd {

// Tensor-level accessors (also exposed as Tensor methods by the Python layer).
bool requires_grad(const Tensor& t);
Tensor& set_requires_grad(Tensor& t, bool requires_grad = true);  // leaves only
bool is_leaf(const Tensor& t);
Tensor grad(const Tensor& t);  // the .grad field (undefined if none)
void set_grad(Tensor& t, const Tensor& g);
std::shared_ptr<Node> grad_fn(const Tensor& t);
void retain_grad(Tensor& t);
// Registers a hook called with the gradient of t during backward; if it returns a defined
// tensor, that replaces the gradient.
void register_hook(Tensor& t, std::function<Tensor(const Tensor&)> hook);
// torch's register_post_accumulate_grad_hook: hook(t) after each backward pass has added to
// t.grad (t a leaf that requires grad; Error otherwise).
void register_post_accumulate_grad_hook(Tensor& t, std::function<void(const Tensor&)> hook);
// A tensor sharing data with t but outside the graph (requires_grad false).
Tensor detach(const Tensor& t);
Tensor& detach_(Tensor& t);

// Computes gradients of tensors w.r.t. graph leaves and accumulates them in .grad.
// grad_tensors: one per tensor (undefined allowed only for scalar tensors: ones).
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false);
// Returns d(sum of outputs·grad_outputs)/d(inputs) without touching .grad.
// allow_unused=false raises when an input is not reachable from the outputs.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// Grad mode (thread-local).
bool is_grad_enabled();
void set_grad_enabled(bool enabled);
bool is_inference_mode_enabled();
// torch.autograd.set_detect_anomaly (process-wide): with check_nan, a backward node whose
// gradient output holds NaN raises an Error naming the node and the output.
bool is_anomaly_enabled();
bool is_anomaly_check_nan_enabled();
void set_anomaly_enabled(bool enabled, bool check_nan = true);

class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }

 private:
  bool prev_;
};
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev_); }

 private:
  bool prev_;
};
// Inference mode: no graph recording and no version tracking needs (tensors made here can
// not be used in autograd later).
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();

 private:
  bool prev_grad_, prev_inference_;
};

// Installs the autograd interceptor (done once at start; idempotent).
void install();

}  // namespace autograd

// Convenience on tensors.
inline void backward(const Tensor& t, const Tensor& grad = Tensor(), bool retain_graph = false,
                     bool create_graph = false) {
  autograd::backward({t}, grad.defined() ? std::vector<Tensor>{grad} : std::vector<Tensor>{},
                     retain_graph, create_graph);
}

}  // namespace kiln
