// The autograd interceptor: when grad mode is on and an input requires grad, it runs the op
// (with autograd excluded below it, so composite ops record once), then records an OpNode
// holding what the op's derivative needs and links the outputs to it.
#include <mutex>

#include "copy_slices.h"
#include "kiln/autograd/node.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"

namespace kiln::autograd {

namespace {

class OpNode : public Node {
 public:
  OpNode(GradContext ctx, DerivativeFn fn, uint32_t num_outputs)
      : ctx_(std::move(ctx)), fn_(fn), num_outputs_(num_outputs) {}
  std::string name() const override { return ctx_.op->name + "Backward"; }
  uint32_t num_outputs() const override { return num_outputs_; }
  void release_saved() override {
    for (auto& s : ctx_.inputs) s.reset();
    for (auto& s : ctx_.outputs) s.reset();
    released_ = true;
  }
  GradContext& ctx() { return ctx_; }
  void poison(const std::string& why) { poisoned_ = why; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    KILN_CHECK(fn_ != nullptr, NotImplementedError, "the derivative for '", ctx_.op->name,
               "' is not implemented");
    KILN_CHECK(poisoned_.empty(), Error, "cannot differentiate through '", ctx_.op->name,
               "': saving its outputs for backward failed when it ran (", poisoned_, ")");
    KILN_CHECK(!released_, Error,
               "Trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed). Specify retain_graph=True if you "
               "need to backward through the graph a second time (in ", name(), ")");
    // Outputs that received no gradient get zeros, so formulas need not special-case them.
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined() && i < ctx_.outputs.size() && ctx_.outputs[i].defined()) {
        Tensor o = ctx_.outputs[i].unpack(ctx_.op->name);
        if ((is_floating(o.dtype()) || is_complex(o.dtype()))) grads[i] = zeros_like(o);
      }
    std::vector<Tensor> result = fn_(ctx_, grads);
    result.resize(next_edges.size());
    for (size_t i = 0; i < result.size(); ++i) {
      if (!result[i].defined() || !next_edges[i].valid()) continue;
      const Shape& want = ctx_.input_shapes[i];
      KILN_CHECK(result[i].shape() == want, Error, "autograd: derivative of '", ctx_.op->name,
                 "' returned a gradient of shape ", shape_str(result[i].shape()), " for input ",
                 i, " of shape ", shape_str(want), " (this is a bug in kiln)");
      if (result[i].dtype() != ctx_.input_dtypes[i]) result[i] = to_dtype(result[i], ctx_.input_dtypes[i]);
    }
    return result;
  }

 private:
  GradContext ctx_;
  DerivativeFn fn_;
  uint32_t num_outputs_;
  bool released_ = false;
  std::string poisoned_;  // why saving the outputs failed (a saved-tensor pack hook threw)
};

class AutogradInterceptor : public Interceptor {
 public:
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    if (!is_grad_enabled()) return next(call);
    bool any = false;
    for (const auto& t : call.inputs) any = any || requires_grad(t);
    for (const auto& t : call.outs) any = any || requires_grad(t);
    if (!any) return next(call);
    const OpDef& op = *call.op;
    DerivativeFn fn = find_derivative(op.name);
    // Composite ops without a derivative of their own let their inner ops record.
    if (!fn && op.composite) return next(call);

    for (const auto& out : call.outs) {
      KILN_CHECK(!(requires_grad(out) && is_leaf(out)), Error,
                 "a leaf Variable that requires grad is being used in an in-place operation "
                 "(op '", op.name, "').");
    }
    // An in-place op writing a view of a tensor: the base's history is rebased onto a
    // CopySlices node after the op is recorded (copy_slices.cpp).
    int64_t view_out = -1, self_input = -1;
    Edge base_edge;
    for (size_t k = 0; k < call.outs.size(); ++k) {
      const Tensor& out = call.outs[k];
      if (!out.defined() || !out.is_view()) continue;
      KILN_CHECK(call.outs.size() == 1, NotImplementedError, "in-place operation '", op.name,
                 "' with several outputs on a view of a tensor in the autograd graph is not "
                 "supported; apply it to a clone");
      check_in_place_on_view(out, op.name);
      view_out = int64_t(k);
      base_edge = gradient_edge(Tensor(out.impl()->view_base));
      for (size_t i = 0; i < call.inputs.size(); ++i)
        if (call.inputs[i].defined() && call.inputs[i].impl() == out.impl()) self_input = int64_t(i);
    }

    GradContext ctx;
    ctx.op = &op;
    ctx.attrs = call.attrs;
    // Inputs that the op overwrites are saved as copies taken before the op runs.
    std::vector<Tensor> inputs_to_save = call.inputs;
    for (auto& in : inputs_to_save)
      for (const auto& out : call.outs)
        if (in.defined() && in.shares_storage_with(out)) {
          NoGradGuard ng;
          Tensor copy = clone(in);
          if (auto* m = in.impl()->autograd_meta.get()) copy.impl()->autograd_meta = std::make_shared<AutogradMeta>(*m);
          in = copy;
          break;
        }
    for (const auto& in : call.inputs) {
      ctx.needs_input_grad.push_back(requires_grad(in));
      ctx.input_shapes.push_back(in.defined() ? in.shape() : Shape{});
      ctx.input_dtypes.push_back(in.defined() ? in.dtype() : DType::F32);
      ctx.input_devices.push_back(in.defined() ? in.device() : Device());
    }
    std::vector<Edge> edges;
    for (const auto& in : call.inputs) edges.push_back(gradient_edge(in));
    // In-place and out= ops change tensors the caller holds: their inputs are saved (where a
    // saved-tensor pack hook may throw) before the op runs, so that a failure leaves them as
    // they were. Functional ops save after running: a failure there loses only new tensors.
    const bool writes = !call.outs.empty();
    std::vector<SavedTensor> saved_inputs;
    if (writes)
      for (const auto& in : inputs_to_save) saved_inputs.emplace_back(in, false, nullptr);

    std::vector<Tensor> outs;
    {
      InterceptorExcludeGuard exclude(InterceptorSlot::Autograd);
      outs = next(call);
    }
    bool any_float = false;
    for (const auto& o : outs) any_float = any_float || (o.defined() && (is_floating(o.dtype()) || is_complex(o.dtype())));
    if (!any_float) return outs;

    if (!writes)
      for (const auto& in : inputs_to_save) saved_inputs.emplace_back(in, false, nullptr);
    auto node = std::make_shared<OpNode>(std::move(ctx), fn, uint32_t(outs.size()));
    node->next_edges = std::move(edges);
    node->ctx().inputs = std::move(saved_inputs);
    for (size_t i = 0; i < outs.size(); ++i) {
      Tensor& o = outs[i];
      if (!o.defined() || !(is_floating(o.dtype()) || is_complex(o.dtype()))) continue;
      auto& m = o.impl()->autograd_meta;
      if (!m) m = std::make_shared<AutogradMeta>();
      m->requires_grad = true;
      m->grad_fn = node;
      m->output_nr = uint32_t(i);
    }
    try {
      for (const auto& o : outs) node->ctx().outputs.emplace_back(o, true, node);
    } catch (const std::exception& e) {
      // The op has run (an in-place write stays written) and its outputs point at the node:
      // backward through it must fail rather than use a half-saved node.
      node->poison(e.what());
      if (view_out >= 0) rebase_view_history(outs[size_t(view_out)], node, self_input, base_edge);
      throw;
    }
    if (view_out >= 0) rebase_view_history(outs[size_t(view_out)], node, self_input, base_edge);
    return outs;
  }
};

}  // namespace

void register_builtin_derivatives();

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_builtin_derivatives();
    static AutogradInterceptor interceptor;
    set_interceptor(InterceptorSlot::Autograd, &interceptor);
  });
}

// Autograd is always on, as in PyTorch: installed when the library loads.
namespace {
const bool g_installed = (install(), true);
}

}  // namespace kiln::autograd
