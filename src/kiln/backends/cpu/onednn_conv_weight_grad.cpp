// The weight gradient of a convolution through oneDNN's convolution_backward_weights
// (decision 0050). kiln's own kernel (conv_kernels.cpp: im2col plus a float32 product per
// chunk of samples, bfloat16 widened and rounded on one thread) ran ResNet-50's layers at
// 70-90 GFLOP/s, so a training step of a 3x3 layer took up to twice PyTorch's time.
//   - Plans (the backward primitive with the forward hint oneDNN requires, and the reorders
//     between kiln's NC[D]HW layout and the blocked layouts oneDNN picks) are cached by shape.
//   - Ungrouped and grouped, 1-3 spatial dims, float32 and bfloat16 (bfloat16 from the level
//     where the forward convolution takes oneDNN); transposed convolutions keep kiln's kernel.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/tensor/tensor.h"
#include "onednn_conv.h"
#include "onednn_conv_layouts.h"
#include "onednn_plan_cache.h"
#include "onednn_runtime.h"

namespace kiln::cpu {

#ifndef KILN_HAVE_DNNL

bool onednn_convolution_weight_grad(OpCall&) { return false; }

#else

namespace {

using dnnl::memory;

struct WeightGradPlan {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  memory::desc src_plain, diff_dst_plain, diff_w_plain;
  bool reorder_src = false, reorder_diff_dst = false, reorder_diff_w = false;
  dnnl::reorder src_in, diff_dst_in, diff_w_out;
};

OnednnPlanCache<WeightGradPlan> g_plans;


// inputs {x, grad_y}; outs {dW}; attrs {weight_shape, stride, padding, dilation, transposed,
// output_padding, groups}.
std::string plan_key(const OpCall& call) {
  std::string k = std::to_string(int(call.inputs[0].dtype()));
  auto add = [&k](const std::vector<int64_t>& v) {
    k += '|';
    for (int64_t x : v) k += std::to_string(x) + ',';
  };
  add(call.inputs[0].shape());
  add(call.inputs[1].shape());
  add(call.outs[0].shape());
  for (size_t a = 1; a <= 3; ++a) add(call.ints_attr(a));
  return k + '|' + std::to_string(call.int_attr(6));
}

std::shared_ptr<WeightGradPlan> make_plan(const OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& gy = call.inputs[1];
  const Tensor& dw = call.outs[0];
  const int64_t nd = x.dim(), groups = call.int_attr(6);
  const memory::data_type dt =
      x.dtype() == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32;
  auto plan = std::make_shared<WeightGradPlan>();
  plan->src_plain = memory::desc(onednn_dims(x.shape()), dt, plain_activation_tag(nd));
  plan->diff_dst_plain = memory::desc(onednn_dims(gy.shape()), dt, plain_activation_tag(nd));
  // dW is contiguous [out, in / groups, k...]; grouped, the same memory as
  // [groups, out / groups, in / groups, k...].
  memory::dims wdims = onednn_dims(dw.shape());
  if (groups > 1) {
    wdims[0] /= groups;
    wdims.insert(wdims.begin(), groups);
  }
  memory::dims wstrides(wdims.size());
  int64_t stride = 1;
  for (size_t i = wdims.size(); i-- > 0;) {
    wstrides[i] = stride;
    stride *= wdims[i];
  }
  plan->diff_w_plain = memory::desc(wdims, dt, wstrides);
  const auto any = memory::format_tag::any;
  const memory::desc src_any(onednn_dims(x.shape()), dt, any);
  const memory::desc dst_any(onednn_dims(gy.shape()), dt, any);
  const memory::desc w_any(wdims, dt, any);
  const memory::dims strides(call.ints_attr(1).begin(), call.ints_attr(1).end());
  const memory::dims padding(call.ints_attr(2).begin(), call.ints_attr(2).end());
  memory::dims dilation;
  for (int64_t d : call.ints_attr(3)) dilation.push_back(d - 1);  // oneDNN counts the gaps
  dnnl::engine& eng = onednn_engine();
  // The backward primitive is made against the forward one it differentiates.
  dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::convolution_direct, src_any, w_any,
                                      dst_any, strides, dilation, padding, padding);
  dnnl::convolution_forward::primitive_desc fwd_pd(fwd, eng);
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, src_any,
                                                w_any, dst_any, strides, dilation, padding,
                                                padding);
  // A user scratchpad (a per-thread buffer): concurrent calls of one cached primitive must not
  // share oneDNN's global one.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  plan->pd = dnnl::convolution_backward_weights::primitive_desc(desc, attr, eng, fwd_pd);
  plan->prim = dnnl::convolution_backward_weights(plan->pd);
  plan->reorder_src = plan->pd.src_desc() != plan->src_plain;
  plan->reorder_diff_dst = plan->pd.diff_dst_desc() != plan->diff_dst_plain;
  plan->reorder_diff_w = plan->pd.diff_weights_desc() != plan->diff_w_plain;
  if (plan->reorder_src)
    plan->src_in = dnnl::reorder(
        dnnl::reorder::primitive_desc(eng, plan->src_plain, eng, plan->pd.src_desc()));
  if (plan->reorder_diff_dst)
    plan->diff_dst_in = dnnl::reorder(
        dnnl::reorder::primitive_desc(eng, plan->diff_dst_plain, eng, plan->pd.diff_dst_desc()));
  if (plan->reorder_diff_w)
    plan->diff_w_out = dnnl::reorder(dnnl::reorder::primitive_desc(
        eng, plan->pd.diff_weights_desc(), eng, plan->diff_w_plain));
  return plan;
}

}  // namespace

bool onednn_convolution_weight_grad(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& gy = call.inputs[1];
  const Tensor& dw = call.outs[0];
  const DType dt = x.dtype();
  if (!onednn_enabled() || !x.device().is_cpu()) return false;
  if (dt != DType::F32 && !(dt == DType::BF16 && isa_level() >= IsaLevel::Avx512Vnni))
    return false;
  if (x.dim() < 3 || x.dim() > 5 || call.bool_attr(4)) return false;  // transposed: kiln's
  if (dw.numel() == 0 || x.numel() == 0 || gy.numel() == 0) return false;
  if (!x.is_contiguous() || !gy.is_contiguous() || !dw.is_contiguous()) return false;
  if (gy.dtype() != dt || dw.dtype() != dt) return false;
  try {
    std::shared_ptr<WeightGradPlan> plan = g_plans.get(plan_key(call), [&] {
      return make_plan(call);
    });
    dnnl::engine& eng = onednn_engine();
    dnnl::stream& s = onednn_stream();
    memory src(plan->src_plain, eng, const_cast<void*>(x.raw_data()));
    if (plan->reorder_src) {
      memory blocked = onednn_thread_memory(plan->pd.src_desc(), OnednnBuffer::Source);
      plan->src_in.execute(s, src, blocked);
      src = blocked;
    }
    memory diff_dst(plan->diff_dst_plain, eng, const_cast<void*>(gy.raw_data()));
    if (plan->reorder_diff_dst) {
      memory blocked =
          onednn_thread_memory(plan->pd.diff_dst_desc(), OnednnBuffer::Destination);
      plan->diff_dst_in.execute(s, diff_dst, blocked);
      diff_dst = blocked;
    }
    memory diff_w_user(plan->diff_w_plain, eng, dw.raw_data());
    memory diff_w = plan->reorder_diff_w
                        ? onednn_thread_memory(plan->pd.diff_weights_desc(), OnednnBuffer::Weights)
                        : diff_w_user;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_DIFF_DST, diff_dst},
                                         {DNNL_ARG_DIFF_WEIGHTS, diff_w},
                                         {DNNL_ARG_SCRATCHPAD,
                                          onednn_scratchpad(plan->pd.scratchpad_desc())}};
    plan->prim.execute(s, args);
    if (plan->reorder_diff_w) plan->diff_w_out.execute(s, diff_w, diff_w_user);
    s.wait();
  } catch (const dnnl::error&) {
    return false;  // no oneDNN implementation for this case: kiln's own kernel runs
  }
  return true;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
