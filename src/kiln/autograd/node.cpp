// Graph nodes, saved tensors and the derivative registry.
#include "kiln/autograd/node.h"

#include <map>
#include <mutex>

#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};

std::map<std::string, DerivativeFn>& derivative_table() {
  static auto* t = new std::map<std::string, DerivativeFn>();
  return *t;
}
std::mutex& derivative_mutex() {
  static std::mutex m;
  return m;
}

// A tensor viewing t's data (same storage, geometry and version counter) with no autograd.
Tensor alias_without_autograd(const Tensor& t) { return autograd::detach(t); }
}  // namespace

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1)) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  auto& meta = *leaf_.impl()->autograd_meta;
  for (auto& hook : meta.hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  if (!meta.grad.defined()) {
    // Own the storage: the same gradient tensor may flow to several leaves.
    meta.grad = autograd::is_grad_enabled() ? g : autograd::detach(g).clone();
  } else if (autograd::is_grad_enabled()) {
    meta.grad = meta.grad + g;  // create_graph: keep the graph of the accumulation
  } else {
    meta.grad.add_(g);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(leaf_);
  return {};
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner)
    : is_output_(is_output) {
  if (!t.defined()) return;
  data_ = alias_without_autograd(t);
  version_ = t.version();
  requires_grad_ = autograd::requires_grad(t);
  if (is_output) {
    owner_ = owner;
    output_nr_ = t.impl()->autograd_meta ? t.impl()->autograd_meta->output_nr : 0;
  } else if (requires_grad_) {
    auto& m = *t.impl()->autograd_meta;
    if (m.grad_fn) {
      grad_fn_ = m.grad_fn;
      output_nr_ = m.output_nr;
    } else {
      original_ = t;  // a leaf: gradients must reach the leaf itself
    }
  }
}

Tensor SavedTensor::unpack(const std::string& op) const {
  KILN_CHECK(data_.defined(), Error,
             "Trying to backward through the graph a second time (or directly access saved "
             "tensors after they have already been freed). Saved intermediate values of the "
             "graph are freed when you call .backward() or autograd.grad(). Specify "
             "retain_graph=True if you need to backward through the graph a second time (in op '",
             op, "')");
  KILN_CHECK(data_.version() == version_, Error,
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [", dtype_name(data_.dtype()), " ", shape_str(data_.shape()),
             "], which is output ", output_nr_, " of ", op, ", is at version ", data_.version(),
             "; expected version ", version_, " instead.");
  if (original_.defined()) return original_;
  if (!requires_grad_) return data_;
  Tensor t = alias_without_autograd(data_);
  auto meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  meta->grad_fn = is_output_ ? owner_.lock() : grad_fn_;
  meta->output_nr = output_nr_;
  t.impl()->autograd_meta = std::move(meta);
  return t;
}

OpCall GradContext::as_call() const {
  OpCall c;
  c.op = op;
  c.attrs = attrs;
  return c;
}

void register_derivative(const std::string& op, DerivativeFn fn) {
  std::lock_guard lock(derivative_mutex());
  derivative_table()[op] = fn;
}

DerivativeFn find_derivative(const std::string& op) {
  std::lock_guard lock(derivative_mutex());
  auto it = derivative_table().find(op);
  return it == derivative_table().end() ? nullptr : it->second;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  int64_t lead = grad.dim() - int64_t(shape.size());
  Dims dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && grad.shape()[size_t(lead) + i] != 1) dims.push_back(lead + int64_t(i));
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  if (lead > 0 || r.shape() != shape) r = reshape(r, shape);
  return r;
}

}  // namespace kiln
