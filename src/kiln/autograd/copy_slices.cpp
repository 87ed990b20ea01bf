// In-place ops on views of tensors in the graph (PyTorch's CopySlices). After
// `base[idx].mul_(w)`, gradients reach `base` through a CopySlices node that takes the
// gradient of the whole base, runs the in-place op's derivative on the part the view
// covers, writes the result for the view's old values back into that part and passes the
// rest through unchanged to the base's previous history; the op's other inputs get their
// gradients as usual. The view itself is re-linked to the base's new history.
#include "copy_slices.h"

#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

// Where a view sits in its contiguous base, in elements.
struct ViewGeometry {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  Shape base_shape;
  // The view's part of a fresh contiguous base-shaped tensor (writes land in it).
  Tensor part_of(const Tensor& base_like) const {
    return base_like.as_strided(shape, strides, offset);
  }
};

class CopySlices : public Node {
 public:
  CopySlices(ViewGeometry g, std::shared_ptr<Node> fn, int64_t self_input, Edge base_edge)
      : g_(std::move(g)), fn_(std::move(fn)), self_(self_input) {
    next_edges.push_back(std::move(base_edge));
    for (size_t i = 0; i < fn_->next_edges.size(); ++i)
      next_edges.push_back(int64_t(i) == self_ ? Edge{} : fn_->next_edges[i]);
  }
  std::string name() const override { return "CopySlices"; }
  void release_saved() override { fn_->release_saved(); }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(next_edges.size());
    if (!grads[0].defined()) return out;
    Tensor result = grads[0].contiguous();
    if (result.impl() == grads[0].impl()) result = clone(result);  // never write into a shared grad
    Tensor part = g_.part_of(result);
    std::vector<Tensor> op_grads = fn_->apply({part.clone()});
    if (self_ >= 0 && size_t(self_) < op_grads.size() && op_grads[size_t(self_)].defined())
      part.copy_(op_grads[size_t(self_)]);
    else
      part.zero_();  // the op replaced the view's values: none of the old ones survive
    out[0] = result;
    for (size_t i = 0; i < op_grads.size() && i + 1 < out.size(); ++i)
      if (int64_t(i) != self_) out[i + 1] = op_grads[i];
    return out;
  }

 private:
  ViewGeometry g_;
  std::shared_ptr<Node> fn_;
  int64_t self_;
};

// The view's gradient path after the rebase: its gradient is the base's gradient restricted
// to the view, so backward from the view scatters into a zero base-shaped gradient.
class ViewOfBase : public Node {
 public:
  ViewOfBase(ViewGeometry g, Edge base) : g_(std::move(g)) { next_edges.push_back(std::move(base)); }
  std::string name() const override { return "AsStridedBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor result = zeros(g_.base_shape, TensorOptions(grads[0].dtype(), grads[0].device()));
    g_.part_of(result).copy_(grads[0]);
    return {result};
  }

 private:
  ViewGeometry g_;
};

}  // namespace

void check_in_place_on_view(const Tensor& view, const std::string& op) {
  const auto& base = view.impl()->view_base;
  if (!base) return;
  auto* m = base->autograd_meta.get();
  KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), Error,
             "a view of a leaf Variable that requires grad is being used in an in-place "
             "operation (op '", op, "').");
  KILN_CHECK(base->is_contiguous(), NotImplementedError, "in-place operation '", op,
             "' on a view of a non-contiguous tensor in the autograd graph is not supported; "
             "apply it to a clone");
}

void rebase_view_history(Tensor& view, const std::shared_ptr<Node>& fn, int64_t self_input,
                         const Edge& base_edge) {
  Tensor base(view.impl()->view_base);
  ViewGeometry g{view.shape(), view.strides(),
                 view.impl()->storage_offset() - base.impl()->storage_offset(), base.shape()};
  auto copy_slices = std::make_shared<CopySlices>(g, fn, self_input, base_edge);
  auto& bm = base.impl()->autograd_meta;
  if (!bm) bm = std::make_shared<AutogradMeta>();
  bm->requires_grad = true;
  bm->grad_fn = copy_slices;
  bm->output_nr = 0;
  auto& vm = view.impl()->autograd_meta;
  if (!vm) vm = std::make_shared<AutogradMeta>();
  vm->requires_grad = true;
  vm->grad_fn = std::make_shared<ViewOfBase>(g, Edge{copy_slices, 0});
  vm->output_nr = 0;
}

}  // namespace kiln::autograd
