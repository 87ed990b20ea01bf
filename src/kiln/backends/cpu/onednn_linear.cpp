// fused_linear's oneDNN path (see onednn_linear.h). Plans (primitive descriptor and
// primitive) are cached by dtypes, shape, strides and epilogue; the weight's layout is the
// one oneDNN picks for the product (format `any`), so it is packed once per weight tensor.
#include "onednn_linear.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kiln/backends/cpu/cpu_info.h"
#include "onednn_packed_weights.h"
#include "onednn_plan_cache.h"
#include "onednn_runtime.h"

namespace kiln::cpu {

#ifndef KILN_HAVE_DNNL

bool onednn_linear(const Tensor&, const Tensor&, const Tensor&, LinearActivation, const Tensor&,
                   const Tensor&) {
  return false;
}

#else

namespace {

using dnnl::memory;

struct LinearPlan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  memory::desc a, w_plain, bias, residual, c;
  memory::desc weights, scratchpad;  // pd's, queried once
};

OnednnPlanCache<LinearPlan> g_plans;

memory::data_type onednn_type(DType t) {
  return t == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32;
}

void append_activation(dnnl::post_ops& po, LinearActivation act) {
  switch (act) {
    case LinearActivation::None: return;
    case LinearActivation::Relu:
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      return;
    case LinearActivation::Gelu:
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
      return;
    case LinearActivation::GeluTanh:
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
      return;
    case LinearActivation::Silu:  // swish with alpha 1: x * sigmoid(x)
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
      return;
  }
}

std::shared_ptr<LinearPlan> make_plan(const Tensor& x, const Tensor& w, const Tensor& bias,
                                      LinearActivation act, const Tensor& residual, bool reused,
                                      const Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  const memory::data_type dt = onednn_type(x.dtype());
  auto plan = std::make_shared<LinearPlan>();
  plan->a = memory::desc({M, K}, dt, {x.stride(0), x.stride(1)});
  // W.T as a [K, N] matrix: element (k, n) lies at n * row stride + k.
  plan->w_plain = memory::desc({K, N}, dt, {1, w.stride(0)});
  // A weight not (yet) worth a packed copy keeps its own layout: a reorder made for one use
  // cost more than oneDNN's packing of blocks as it goes (decision 0120).
  const memory::desc w_any =
      reused ? memory::desc({K, N}, dt, memory::format_tag::any) : plan->w_plain;
  plan->c = memory::desc({M, N}, onednn_type(out.dtype()), {out.stride(0), 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops po;
  append_activation(po, act);
  if (residual.defined()) {
    plan->residual =
        memory::desc({M, N}, onednn_type(residual.dtype()), {residual.stride(0), 1});
    po.append_binary(dnnl::algorithm::binary_add, plan->residual);
  }
  attr.set_post_ops(po);
  if (bias.defined()) plan->bias = memory::desc({1, N}, dt, {N, 1});
  const dnnl::matmul::desc desc = bias.defined()
                                      ? dnnl::matmul::desc(plan->a, w_any, plan->bias, plan->c)
                                      : dnnl::matmul::desc(plan->a, w_any, plan->c);
  plan->pd = dnnl::matmul::primitive_desc(desc, attr, onednn_engine());
  plan->prim = dnnl::matmul(plan->pd);
  plan->weights = plan->pd.weights_desc();
  plan->scratchpad = plan->pd.scratchpad_desc();
  return plan;
}

std::string plan_key(const Tensor& x, const Tensor& w, const Tensor& bias, LinearActivation act,
                     const Tensor& residual, bool reused, const Tensor& out) {
  const bool res = residual.defined();
  return onednn_key({int64_t(x.dtype()), int64_t(out.dtype()), int64_t(act), bias.defined(),
                     res ? int64_t(residual.dtype()) : -1, res ? residual.stride(0) : 0,
                     x.size(0), x.size(1), w.size(0), x.stride(0), x.stride(1), w.stride(0),
                     out.stride(0), reused});
}

}  // namespace

bool onednn_linear(const Tensor& x_in, const Tensor& w, const Tensor& bias, LinearActivation act,
                   const Tensor& residual, bool reused, const Tensor& out) {
  const int64_t M = x_in.size(0), K = x_in.size(1), N = w.size(0);
  if (!onednn_takes_linear(M, M * N * K, K)) return false;
  if (x_in.dtype() == DType::F32 && own_kernel_takes_f32_linear(M)) return false;
  if (x_in.dtype() != DType::F32 &&
      !(x_in.dtype() == DType::BF16 && isa_level() >= IsaLevel::Avx512Vnni &&
        !own_tile_kernels_take_products()))
    return false;
  if (x_in.stride(0) == 0 || x_in.stride(1) == 0 ||
      (residual.defined() && residual.stride(0) == 0))
    return false;  // broadcast operands have no oneDNN layout
  // A strided x (a slice of wider rows, a transpose) is copied first: oneDNN 2.6 takes another
  // implementation for it, which streamed [8, 4096] x [4096, 4096]^T float32 at 10 GB/s
  // against 21 with the rows contiguous (M = 4: 14 against 28; the copy of M x K values is
  // small beside the N x K weight).
  const Tensor x = x_in.is_contiguous() ? x_in : x_in.contiguous();
  const std::string key = plan_key(x, w, bias, act, residual, reused, out);
  try {
    std::shared_ptr<LinearPlan> plan =
        g_plans.get(key, [&] { return make_plan(x, w, bias, act, residual, reused, out); });
    dnnl::stream& s = onednn_stream();
    // The packed weight is shared by every M: its layout depends on N, K and the dtype.
    const std::string w_key =
        "linear|" + onednn_key({int64_t(w.dtype()), N, K, w.stride(0)});
    const PackedWeightMemory packed =
        onednn_packed_weight(w, w_key, plan->w_plain, plan->weights, s);
    const memory& weights = packed.memory;
    const memory& src = onednn_bound_memory(plan, OnednnArg::Source, plan->a, x.raw_data());
    const memory& dst = onednn_bound_memory(plan, OnednnArg::Destination, plan->c, out.raw_data());
    const memory& scratch = onednn_bound_scratchpad(plan, plan->scratchpad);
    // Up to six arguments: source, weights, destination, scratchpad, bias, residual.
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, src.get()},
                               {DNNL_ARG_WEIGHTS, weights.get()},
                               {DNNL_ARG_DST, dst.get()},
                               {DNNL_ARG_SCRATCHPAD, scratch.get()}};
    int count = 4;
    if (bias.defined())
      args[count++] = {DNNL_ARG_BIAS,
                       onednn_bound_memory(plan, OnednnArg::Bias, plan->bias, bias.raw_data())
                           .get()};
    if (residual.defined()) {
      const int index = act == LinearActivation::None ? 0 : 1;  // the binary post-op's slot
      args[count++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1,
                       onednn_bound_memory(plan, OnednnArg::Residual, plan->residual,
                                           residual.raw_data())
                           .get()};
    }
    onednn_execute(plan->prim, s, args, count);
  } catch (const dnnl::error&) {
    return false;  // no oneDNN implementation for this combination: kiln's kernels run
  }
  return true;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
