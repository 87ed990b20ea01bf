// Tensor-level autograd accessors: requires_grad, grad, leaves, hooks, detach.
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/ops/copy.h"
#include "kiln/tensor/empty.h"

namespace kiln::autograd {

namespace {
AutogradMeta* meta(const Tensor& t) { return t.impl()->autograd_meta.get(); }
AutogradMeta& ensure_meta(const Tensor& t) {
  auto& m = t.impl()->autograd_meta;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}
}  // namespace

bool requires_grad(const Tensor& t) {
  auto* m = t.defined() ? meta(t) : nullptr;
  return m && m->requires_grad;
}

Tensor& set_requires_grad(Tensor& t, bool value) {
  auto* m = meta(t);
  KILN_CHECK(!(m && m->grad_fn) || value, Error,
             "you can only change requires_grad flags of leaf variables. If you want to use a "
             "computed variable in a subgraph that doesn't require differentiation use "
             "var_no_grad = var.detach().");
  if (m && m->grad_fn) return t;
  KILN_CHECK(!value || (is_floating(t.dtype()) || is_complex(t.dtype())), Error,
             "only Tensors of floating point and complex dtype can require gradients (got ",
             dtype_name(t.dtype()), ")");
  ensure_meta(t).requires_grad = value;
  return t;
}

bool is_leaf(const Tensor& t) {
  auto* m = meta(t);
  return !m || !m->grad_fn;
}

Tensor grad(const Tensor& t) {
  auto* m = meta(t);
  return m ? m->grad : Tensor();
}

void set_grad(Tensor& t, const Tensor& g) {
  if (g.defined()) {
    KILN_CHECK(g.shape() == t.shape(), ShapeError, "assigned grad has shape ",
               shape_str(g.shape()), " but the tensor has shape ", shape_str(t.shape()));
    KILN_CHECK(g.device() == t.device(), DeviceError, "assigned grad is on ", g.device(),
               " but the tensor is on ", t.device());
  }
  ensure_meta(t).grad = g;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  auto* m = meta(t);
  return m ? m->grad_fn : nullptr;
}

void register_hook(Tensor& t, std::function<Tensor(const Tensor&)> hook) {
  KILN_CHECK(requires_grad(t), Error,
             "cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = ensure_meta(t);
  if (m.grad_fn) {
    auto& hooks = m.grad_fn->pre_hooks;
    if (hooks.size() <= m.output_nr) hooks.resize(m.output_nr + 1);
    hooks[m.output_nr].push_back(std::move(hook));
  } else {
    m.hooks.push_back(std::move(hook));
  }
}

void register_post_accumulate_grad_hook(Tensor& t, std::function<void(const Tensor&)> hook) {
  KILN_CHECK(requires_grad(t), Error,
             "cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = ensure_meta(t);
  KILN_CHECK(!m.grad_fn, Error, "post accumulate grad hooks cannot be registered on non-leaf tensors");
  m.post_accumulate_hooks.push_back(std::move(hook));
}

void retain_grad(Tensor& t) {
  KILN_CHECK(requires_grad(t), Error, "can't retain_grad on Tensor that has requires_grad=False");
  AutogradMeta& m = ensure_meta(t);
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep their grad anyway
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = t.impl_ptr();
  register_hook(t, [weak](const Tensor& g) -> Tensor {
    if (auto impl = weak.lock()) {
      auto& mm = *impl->autograd_meta;
      if (!mm.grad.defined()) {  // contiguous, as torch's retained gradients
        mm.grad = empty_tensor(g.shape(), g.dtype(), g.device());
        copy_(mm.grad, g);
      }
      else mm.grad = mm.grad + g;
    }
    return Tensor();
  });
}

Tensor detach(const Tensor& t) {
  auto* i = t.impl();
  auto impl = std::make_shared<TensorImpl>(i->storage(), i->storage_offset(), i->shape(),
                                           i->strides(), i->dtype(), i->version_counter());
  return Tensor(std::move(impl));
}

Tensor& detach_(Tensor& t) {
  if (auto* m = meta(t)) {
    m->grad_fn.reset();
    m->requires_grad = false;
  }
  return t;
}

}  // namespace kiln::autograd
