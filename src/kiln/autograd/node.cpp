// Graph nodes, saved tensors and the derivative registry.
#include "kiln/autograd/node.h"

#include "kiln/autograd/saved_tensor_hooks.h"

#include <map>
#include <mutex>

#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/memory_format.h"

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

// Whether g, the first gradient reaching a leaf, can become its .grad without a copy (torch's
// AccumulateGrad rule): nothing else sees g's data (g held only by the caller; its storage
// held only by g and the chain of view bases that only g keeps alive: the weight gradient of
// a Linear arrives as the transpose of a transposed product) and it has the leaf's layout.
// The copy cost 23 ms of GPT-2-small's training step (batch 4 x 256), about 1% of it.
bool can_take_as_grad(const Tensor& g, const Tensor& leaf) {
  const TensorImpl* impl = g.impl();
  if (g.impl_ptr().use_count() != 1 || impl->autograd_meta || g.shape() != leaf.shape() ||
      g.dtype() != leaf.dtype() || g.device() != leaf.device())
    return false;
  const bool same_layout = (g.is_contiguous() && leaf.is_contiguous()) ||
                           (leaf.is_channels_last() && g.strides() == leaf.strides());
  if (!same_layout) return false;
  long owners = 1;
  for (const TensorImpl* v = impl; v->view_base; v = v->view_base.get()) {
    if (v->view_base.use_count() != 1 || v->view_base->autograd_meta ||
        v->view_base->storage() != impl->storage())
      return false;
    ++owners;
  }
  return impl->storage().use_count() == owners;
}

// A copy of g in the leaf's layout where that is a dense one (a transposed or channels-last
// parameter gets a gradient laid out as itself), else contiguous: torch's
// clone_obey_contract. clone() alone would keep g's layout (preserve_format).
Tensor copy_in_layout_of(const Tensor& g, const Tensor& leaf) {
  const bool dense = is_non_overlapping_and_dense(leaf.shape(), leaf.strides());
  Tensor out = dense ? empty_strided_tensor(leaf.shape(), leaf.strides(), g.dtype(), g.device())
                     : empty_tensor(g.shape(), g.dtype(), g.device());
  copy_(out, autograd::detach(g));
  return out;
}
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
    // Own the storage: the same gradient tensor may flow to several leaves (then it is
    // copied; one that nothing else sees is taken as it is).
    if (autograd::is_grad_enabled()) meta.grad = g;
    else if (can_take_as_grad(g, leaf_)) meta.grad = autograd::detach(g);
    else meta.grad = copy_in_layout_of(g, leaf_);
  } else if (autograd::is_grad_enabled()) {
    meta.grad = meta.grad + g;  // create_graph: keep the graph of the accumulation
  } else {
    meta.grad.add_(g);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(leaf_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  auto* m = t.defined() ? t.impl()->autograd_meta.get() : nullptr;
  if (!m || !m->requires_grad) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner)
    : is_output_(is_output) {
  if (!t.defined()) return;
  shape_ = t.shape();
  dtype_ = t.dtype();
  device_ = t.device();
  storage_offset_ = t.storage_offset();
  contiguous_ = t.is_contiguous();
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
    }
  }
  if (auto hooks = autograd::current_saved_tensor_hooks()) {
    // The pack hook sees an output without its grad_fn: a hook that keeps the tensor it was
    // given (identity hooks, a dict of activations) would otherwise make a reference cycle
    // node -> packed -> output -> node that nothing frees (torch 2.13 leaks there).
    autograd::NoGradGuard no_grad;  // as torch: hooks run outside the graph
    packed_ = hooks->pack(is_output ? alias_without_autograd(t) : t);
    KILN_CHECK(packed_ != nullptr, Error, "saved-tensor pack hook returned nothing");
    if (!is_output && requires_grad_ && !grad_fn_) leaf_accumulator_ = gradient_edge(t).node;
    return;
  }
  data_ = alias_without_autograd(t);
  if (!is_output && requires_grad_ && !grad_fn_) original_ = t;  // gradients must reach the leaf
}

namespace {
// The tensor that a pack hook's result unpacks to, checked against what was saved.
Tensor unpack_hooked(autograd::PackedTensor& packed, const Shape& shape, DType dtype,
                     const Device& device, const std::string& op) {
  Tensor t = packed.unpack();
  KILN_CHECK(t.defined(), Error, "saved-tensor unpack hook returned an undefined tensor (in op '",
             op, "')");
  KILN_CHECK(t.shape() == shape && t.dtype() == dtype && t.device() == device, Error,
             "saved-tensor unpack hook returned a tensor of shape ", shape_str(t.shape()), ", ",
             dtype_name(t.dtype()), " on ", t.device().str(), " for a saved tensor of shape ",
             shape_str(shape), ", ", dtype_name(dtype), " on ", device.str(), " (in op '", op,
             "'); unpack must give back what pack was given");
  return t;
}
}  // namespace

Tensor SavedTensor::unpack(const std::string& op) const {
  KILN_CHECK(defined(), Error,
             "Trying to backward through the graph a second time (or directly access saved "
             "tensors after they have already been freed). Saved intermediate values of the "
             "graph are freed when you call .backward() or autograd.grad(). Specify "
             "retain_graph=True if you need to backward through the graph a second time (in op '",
             op, "')");
  Tensor data;
  if (packed_) {
    // No version check: the hooks own the values (a pack that copies may outlive in-place
    // writes to the original; torch does not check here either).
    data = unpack_hooked(*packed_, shape_, dtype_, device_, op);
    if (!requires_grad_) return alias_without_autograd(data);
  } else {
    KILN_CHECK(data_.version() == version_, Error,
               "one of the variables needed for gradient computation has been modified by an "
               "inplace operation: [", dtype_name(data_.dtype()), " ", shape_str(data_.shape()),
               "], which is output ", output_nr_, " of ", op, ", is at version ", data_.version(),
               "; expected version ", version_, " instead.");
    if (original_.defined()) return original_;
    if (!requires_grad_) return data_;
    data = data_;
  }
  Tensor t = alias_without_autograd(data);
  auto meta = std::make_shared<AutogradMeta>();
  meta->requires_grad = true;
  if (leaf_accumulator_) {
    meta->grad_accumulator = leaf_accumulator_;  // a leaf: its gradients reach the leaf's node
  } else {
    meta->grad_fn = is_output_ ? owner_.lock() : grad_fn_;
    meta->output_nr = output_nr_;
  }
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
  // Dims along which the gradient is expanded (stride 0: the gradient of sum() or mean(), or
  // a broadcast value) sum to one slice times their size, without a pass over the copies: the
  // bias of `(x + b).sum()` summed 1.5M stride-0 values in 1.7 ms where PyTorch took 0.1.
  // float32 / bfloat16 sums accumulate in double, where n * v is exact, so the rounded result
  // is the same.
  Tensor g = grad;
  double copies = 1;
  Dims summed;
  for (int64_t d : dims) {
    if (g.stride(d) == 0 && g.size(d) > 1) {
      copies *= double(g.size(d));
      g = narrow(g, d, 0, 1);
    } else {
      summed.push_back(d);
    }
  }
  Tensor r = summed.empty() ? g : sum(g, summed, true);
  if (copies != 1) r = r * copies;
  if (lead > 0 || r.shape() != shape) r = reshape(r, shape);
  return r;
}

}  // namespace kiln
