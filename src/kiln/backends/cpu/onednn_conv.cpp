// oneDNN convolution for the CPU backend (see onednn_conv.h and decision 0016).
//   - Plans (primitive descriptor, primitive, the reorders between kiln's NC[D]HW layout
//     and the blocked layout oneDNN picks) are cached by shape and attributes.
//   - Weights are reordered to oneDNN's layout once and cached per weight tensor
//     (onednn_packed_weights.h: a freed or modified weight never matches a stale copy).
#include "onednn_conv.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/ops/conv.h"
#include "kiln/tensor/tensor.h"
#include "kiln/tensor/tensor_impl.h"

#include "kiln/tensor/empty.h"
#include "kiln/tensor/memory_format.h"
#include "onednn_conv_layouts.h"
#include "onednn_packed_weights.h"
#include "onednn_plan_cache.h"
#include "onednn_runtime.h"
#include "permuted_copy.h"
#include "weight_identity.h"

namespace kiln::cpu {

#ifndef KILN_HAVE_DNNL

bool onednn_convolution(OpCall&) { return false; }

#else

namespace {

using dnnl::memory;

struct ConvPlan {
  dnnl::primitive_desc pd;  // a convolution_forward or (transposed) deconvolution_forward
  dnnl::primitive prim;
  memory::desc src_plain, dst_plain, w_plain;
  bool reorder_src = false, reorder_dst = false;
  // The nhwc result is moved to the NCHW output by kiln's tiled copy (copy_permuted) rather
  // than oneDNN's reorder: [16, 64, 112, 112] 7.2 -> 3.4 ms in float32 (decision 0028).
  bool dst_by_copy = false;
  // The NCHW source moved to nhwc by kiln's tiled copy too (bfloat16 below AMX, decision 0149).
  bool src_by_copy = false;
  dnnl::reorder src_in, dst_out;
};

OnednnPlanCache<ConvPlan> g_plans;

// Winograd (decision 0030): oneDNN's F(2x2, 3x3) / F(4x4, 3x3) kernels, float32 only, for 3x3
// stride-1 undilated ungrouped 2-D layers with 16+ channels each way and at least
// kWinogradMinFlop of work per call. ResNet-50's 3x3 layers ran 1.3-2.7x faster than the
// direct kernel at batch 1 and 16; smaller ones ran slower ([1, 64, 7, 7] -> 64: 0.88x, 3
// input channels: 0.43x).
// oneDNN 2.6's transform of the weight into the Winograd domain is slow (Zen 4, two threads:
// about 8 ms for [256, 256, 3, 3], 70 ms for [512, 512, 3, 3], against 0.5-10 ms for the layer
// itself), so Winograd only pays when the transformed weight is cached and used again: the
// weight must be kiln memory (foreign memory is never cached, weight_identity.h) and not a
// weight being trained (requires grad with grad mode on: each optimizer step moves its version,
// so every forward would transform it again; a training step of [16, 512, 7, 7] -> 512 took
// 2.4x PyTorch's time). Decision 0050.
constexpr double kWinogradMinFlop = 16e6;

bool weight_reused(const Tensor& w) {
  return WeightIdentity::trackable(w) &&
         !(autograd::is_grad_enabled() && autograd::requires_grad(w));
}

bool winograd_candidate(const OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  if (!onednn_winograd_allowed() || x.dtype() != DType::F32 || x.dim() != 4) return false;
  if (call.bool_attr(3) || call.int_attr(5) != 1) return false;  // transposed or grouped
  if (w.size(2) != 3 || w.size(3) != 3 || w.size(0) < 16 || w.size(1) < 16) return false;
  for (int64_t v : call.ints_attr(0))
    if (v != 1) return false;  // stride
  for (int64_t v : call.ints_attr(2))
    if (v != 1) return false;  // dilation
  const double flop = 2.0 * double(call.outs[0].numel()) * double(w.size(1)) * 9.0;
  return flop >= kWinogradMinFlop && weight_reused(w);
}

// Activations in nhwc: a 4-D input and output both laid out channels-last and not both plainly
// contiguous. A tensor whose two layouts coincide (1x1 pixels, one channel) counts as either:
// asking both to be is_channels_last() sent a channels-last [1, 512, 2, 2] input with its
// [1, 512, 1, 1] output (ResNet-50's last stride-2 layers on 32x32 images) to kiln's
// reference kernel, 3.4 ms against oneDNN's 45 us.
bool activations_nhwc(const OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& y = call.outs[0];
  return x.dim() == 4 && x.is_contiguous(MemoryFormat::ChannelsLast) &&
         y.is_contiguous(MemoryFormat::ChannelsLast) && !(x.is_contiguous() && y.is_contiguous());
}

// The activation of a convolution_activation call (attrs 6-8), none for a plain convolution.
ConvEpilogue epilogue_of(const OpCall& call) {
  if (call.attrs.size() < 9) return {};
  return {ConvActivation(call.int_attr(6)), call.double_attr(7), call.double_attr(8)};
}

// The epilogue as oneDNN post-ops (HardSigmoid: a linear step, then a clip to [0, 1]).
dnnl::post_ops post_ops_of(const ConvEpilogue& e) {
  dnnl::post_ops po;
  const float a = float(e.alpha), b = float(e.beta);
  switch (e.activation) {
    case ConvActivation::Relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0, 0); break;
    case ConvActivation::Clip: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, a, b); break;
    case ConvActivation::HardSigmoid:
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, a, b);
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f);
      break;
    case ConvActivation::HardSwish:
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0, 0);
      break;
    case ConvActivation::None: break;
  }
  return po;
}

std::string plan_key(const OpCall& call, bool winograd) {
  std::string k = std::to_string(int(call.inputs[0].dtype())) + "w" +
                  std::to_string(int(call.inputs[1].dtype())) +
                  (activations_nhwc(call) ? "nhwc" : "") +
                  (call.inputs[1].is_channels_last() ? "ohwi" : "");
  auto add = [&k](const std::vector<int64_t>& v) {
    k += '|';
    for (int64_t x : v) k += std::to_string(x) + ',';
  };
  add(call.inputs[0].shape());
  add(call.inputs[1].shape());
  add(call.ints_attr(0));
  add(call.ints_attr(1));
  add(call.ints_attr(2));
  k += '|' + std::to_string(call.int_attr(5)) + (call.inputs[2].defined() ? "b" : "-");
  if (call.bool_attr(3)) add(call.ints_attr(4));  // transposed: its output padding
  if (winograd) k += "|winograd";  // the switch may change between calls
  const ConvEpilogue e = epilogue_of(call);
  if (e.activation != ConvActivation::None)
    k += "|act" + std::to_string(int64_t(e.activation)) + ',' + std::to_string(e.alpha) + ',' +
         std::to_string(e.beta);
  return k;
}

// rewrite: allow the layout rewrites of decision 0028 (nhwc for first and small 1x1 layers, the
// gathered source of strided 1x1 layers); a plan oneDNN cannot make with them is made again
// without (see onednn_convolution). winograd: oneDNN's Winograd algorithm on its blocked
// layout (winograd_candidate); refused, the direct plan is made instead.
std::shared_ptr<ConvPlan> make_plan(const OpCall& call, bool rewrite, bool winograd) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor& y = call.outs[0];
  const int64_t nd = x.dim(), groups = call.int_attr(5);
  const memory::data_type dt =
      x.dtype() == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32;
  auto plan = std::make_shared<ConvPlan>();
  const bool nhwc = activations_nhwc(call);
  const memory::format_tag act_tag =
      nhwc ? memory::format_tag::nhwc : plain_activation_tag(nd);
  plan->src_plain = memory::desc(onednn_dims(x.shape()), dt, act_tag);
  plan->dst_plain = memory::desc(onednn_dims(y.shape()), dt, act_tag);
  const bool transposed = call.bool_attr(3);
  memory::dims wdims = onednn_dims(w.shape());
  memory::dims wstrides(w.strides().begin(), w.strides().end());
  if (transposed) {
    // PyTorch stores a transposed convolution's weight as [in, out / groups, k...]; oneDNN's
    // deconvolution wants [out, in, k...]: the same memory with the first two dims swapped.
    std::swap(wdims[0], wdims[1]);
    std::swap(wstrides[0], wstrides[1]);
    if (groups > 1) {  // [groups, out / groups, in / groups, k...]
      wdims[1] /= groups;
      wdims.insert(wdims.begin(), groups);
      wstrides.insert(wstrides.begin(), wdims[2] * w.stride(0));
    }
  } else if (groups > 1) {
    // The weight as stored: contiguous (oihw) or channels-last (ohwi), described by its
    // strides (grouped: the leading dim split into groups x out-channels-per-group).
    wdims[0] /= groups;
    wdims.insert(wdims.begin(), groups);
    wstrides.insert(wstrides.begin(), wdims[1] * w.stride(0));
  }
  // The weight in its own dtype: a float32 weight with bfloat16 activations (autocast's form,
  // decision 0121) is rounded by the reorder that packs it, once per weight.
  plan->w_plain = memory::desc(
      wdims, w.dtype() == DType::BF16 ? memory::data_type::bf16 : memory::data_type::f32, wstrides);
  const auto any = memory::format_tag::any;
  // Activation layout: 1x1 convolutions run fastest on kiln's own NC[D]HW layout (oneDNN's
  // im2col + sgemm path, no reorders: 0.56-0.77x torch 2.13 in decision 0016's measurements);
  // the others let oneDNN pick its blocked layout (brgconv / depthwise kernels) and pay one
  // reorder each way. Two kinds of 2-D layer take nhwc instead, with a reorder each way
  // (decision 0028): first layers (at most 4 input channels; ResNet-50's stem [16, 3, 224,
  // 224] 20.1 -> 14.0 ms in bfloat16, 27.0 -> 22.9 ms in float32) and 1x1 layers with at most
  // 64 output pixels per image, whose per-image GEMM is too narrow for oneDNN's plain path
  // (512 -> 2048 channels at 7 x 7, batch 16: 6.3 -> 4.7 ms bfloat16, 11.4 -> 9.3 ms float32).
  bool one_by_one = true;
  for (int64_t i = 2; i < w.dim(); ++i) one_by_one = one_by_one && w.size(i) == 1;
  int64_t out_pixels = 1;
  for (int64_t i = 2; i < nd; ++i) out_pixels *= y.size(i);
  const bool plain_layer = !transposed && groups == 1;
  // bfloat16 NCHW layers without AMX: every one through nhwc, both moves by kiln's tiled copy
  // (decision 0149: oneDNN's nhwc kernels beat its im2col + GEMM path and its blocked layout
  // by more than the two copies cost; ResNet-50 bfloat16 NCHW on Zen 4, batch 1, 39.6 -> 34.6
  // ms, batch 16 471 -> 447 ms, medians of interleaved runs). Not measured with AMX.
  const bool bf16_via_nhwc = dt == memory::data_type::bf16 && isa_level() < IsaLevel::Amx;
  const bool via_nhwc = rewrite && !winograd && !nhwc && nd == 4 && plain_layer &&
                        (bf16_via_nhwc || (one_by_one ? out_pixels <= 64 : w.size(1) <= 4));
  // Channels-last activations are used as they are: oneDNN's direct kernels run on nhwc; its
  // Winograd kernels take only their blocked layout.
  const bool plain_act = !winograd && (nhwc || (plain_layer && one_by_one));
  memory::dims strides(call.ints_attr(0).begin(), call.ints_attr(0).end());
  // A strided 1x1 convolution without padding on NC[D]HW bfloat16 reads every stride-th
  // pixel: the reorder gathers them (the source described with its strides times the
  // convolution's) and the convolution runs at stride 1, where oneDNN's bfloat16 path is
  // faster (decision 0028: [16, 512, 28, 28] -> 1024 at stride 2, 15.2 -> 9.2 ms).
  bool gather = rewrite && plain_act && !nhwc && dt == memory::data_type::bf16;
  for (int64_t i = 0; i < nd - 2; ++i)
    gather = gather && call.ints_attr(1)[size_t(i)] == 0;
  bool strided = false;
  for (int64_t st : strides) strided = strided || st > 1;
  gather = gather && strided;
  memory::dims src_dims = onednn_dims(x.shape());
  memory::desc src_any = plain_act ? plan->src_plain : memory::desc(src_dims, dt, any);
  memory::desc dst_any =
      plain_act ? plan->dst_plain : memory::desc(onednn_dims(y.shape()), dt, any);
  if (gather) {
    // x[:, :, ::s, ::s] as a strided view of x's memory; the convolution's source is that
    // view made dense. oneDNN 2.6 refuses a view whose extent along a dim (size x stride)
    // passes the next outer stride, which happens for odd sizes: those keep the stride.
    memory::dims sub = onednn_dims(y.shape());
    sub[1] = x.size(1);
    memory::dims view_strides(static_cast<size_t>(nd), 0);
    int64_t stride = 1;
    for (int64_t i = nd - 1; i >= 0; --i) {
      view_strides[size_t(i)] = stride * (i >= 2 ? strides[size_t(i - 2)] : 1);
      stride *= x.size(i);
    }
    for (int64_t i = 1; i < nd; ++i)
      gather = gather && view_strides[size_t(i - 1)] >= view_strides[size_t(i)] * sub[size_t(i)];
    if (gather) {
      src_dims = sub;
      plan->src_plain = memory::desc(src_dims, dt, view_strides);
      src_any = memory::desc(src_dims, dt, plain_activation_tag(nd));
      std::fill(strides.begin(), strides.end(), 1);
    }
  }
  if (via_nhwc) {
    src_any = memory::desc(src_dims, dt, memory::format_tag::nhwc);
    dst_any = memory::desc(onednn_dims(y.shape()), dt, memory::format_tag::nhwc);
  }
  memory::desc w_any(wdims, dt, any);
  memory::dims padding(call.ints_attr(1).begin(), call.ints_attr(1).end());
  memory::dims dilation;
  for (int64_t d : call.ints_attr(2)) dilation.push_back(d - 1);  // oneDNN counts the gaps
  const bool has_bias = call.inputs[2].defined();
  memory::desc bias_md = has_bias ? memory::desc({y.size(1)}, dt, memory::format_tag::a)
                                  : memory::desc();
  // A user scratchpad (a per-thread buffer) keeps concurrent calls of one cached primitive
  // from sharing oneDNN's global scratch buffer.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (const ConvEpilogue e = epilogue_of(call); e.activation != ConvActivation::None)
    attr.set_post_ops(post_ops_of(e));
  dnnl::engine& eng = onednn_engine();
  if (transposed) {
    // PyTorch's output = (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding
    // + 1; oneDNN's deconvolution takes the output padding off the right-hand padding.
    memory::dims padding_r = padding;
    for (size_t i = 0; i < padding_r.size(); ++i) padding_r[i] -= call.ints_attr(4)[i];
    dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                           dnnl::algorithm::deconvolution_direct, src_any, w_any,
                                           bias_md, dst_any, strides, dilation, padding,
                                           padding_r);
    dnnl::deconvolution_forward::primitive_desc pd(desc, attr, eng);
    plan->pd = pd;
    plan->prim = dnnl::deconvolution_forward(pd);
  } else {
    const auto algorithm = winograd ? dnnl::algorithm::convolution_winograd
                                    : dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, src_any,
                                         w_any, bias_md, dst_any, strides, dilation, padding,
                                         padding);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
    plan->pd = pd;
    plan->prim = dnnl::convolution_forward(pd);
  }
  plan->reorder_src = plan->pd.src_desc() != plan->src_plain;
  plan->reorder_dst = plan->pd.dst_desc() != plan->dst_plain;
  plan->dst_by_copy = via_nhwc && plan->reorder_dst && plan->pd.dst_desc() == dst_any;
  plan->src_by_copy = bf16_via_nhwc && via_nhwc && !gather && plan->reorder_src &&
                      plan->pd.src_desc() == src_any;
  if (plan->reorder_src)
    plan->src_in = dnnl::reorder(
        dnnl::reorder::primitive_desc(eng, plan->src_plain, eng, plan->pd.src_desc()));
  if (plan->reorder_dst)
    plan->dst_out = dnnl::reorder(
        dnnl::reorder::primitive_desc(eng, plan->pd.dst_desc(), eng, plan->dst_plain));
  return plan;
}

}  // namespace

bool onednn_convolution(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const DType dt = x.dtype();
  if (!onednn_enabled()) return false;
  if (!x.device().is_cpu()) return false;  // the testing backend keeps kiln's kernel
  if (dt != DType::F32 && !(dt == DType::BF16 && isa_level() >= IsaLevel::Avx512Vnni)) return false;
  if (x.dim() < 3 || x.dim() > 5 || call.outs[0].numel() == 0) return false;
  // Both activations contiguous, or both channels-last (4-D); anything else: kiln's kernel.
  const bool nhwc = activations_nhwc(call);
  if (!nhwc && (!x.is_contiguous() || !call.outs[0].is_contiguous())) return false;
  if (!call.inputs[1].is_contiguous() && !call.inputs[1].is_channels_last()) return false;
  if (call.inputs[2].defined() && (!call.inputs[2].is_contiguous() || call.inputs[2].dtype() != dt))
    return false;
  const bool winograd = winograd_candidate(call);
  const std::string key = plan_key(call, winograd);
  try {
    std::shared_ptr<ConvPlan> plan = g_plans.get(key, [&] {
      if (winograd) {
        try {
          return make_plan(call, true, true);
        } catch (const dnnl::error&) {  // e.g. below AVX-512, or padding it does not take
        }
      }
      try {
        return make_plan(call, true, false);
      } catch (const dnnl::error&) {
        return make_plan(call, false, false);  // oneDNN's default layouts (before 0028)
      }
    });
    dnnl::stream& s = onednn_stream();
    memory src(plan->src_plain, onednn_engine(), const_cast<void*>(x.raw_data()));
    Tensor nhwc_in;  // src_by_copy: the source in nhwc, a kiln tensor for copy_permuted
    if (plan->src_by_copy) {
      nhwc_in = empty_strided_tensor(x.shape(), channels_last_strides(x.shape()), dt, x.device());
      if (copy_permuted(x, nhwc_in)) {
        src = memory(plan->pd.src_desc(), onednn_engine(), nhwc_in.raw_data());
      } else {
        memory moved(plan->pd.src_desc(), onednn_engine(), nhwc_in.raw_data());
        plan->src_in.execute(s, src, moved);
        src = moved;
      }
    } else if (plan->reorder_src) {
      memory blocked = onednn_thread_memory(plan->pd.src_desc(), OnednnBuffer::Source);
      plan->src_in.execute(s, src, blocked);
      src = blocked;
    }
    const PackedWeightMemory packed = onednn_packed_weight(
        call.inputs[1], "conv|" + key, plan->w_plain, plan->pd.weights_desc(), s);
    const memory& weights = packed.memory;
    memory dst_user(plan->dst_plain, onednn_engine(), call.outs[0].raw_data());
    Tensor nhwc_out;  // dst_by_copy: the result in nhwc, a kiln tensor for copy_permuted
    if (plan->dst_by_copy) {
      const Tensor& y = call.outs[0];
      nhwc_out = empty_strided_tensor(y.shape(), channels_last_strides(y.shape()), dt, y.device());
    }
    memory dst = plan->dst_by_copy
                     ? memory(plan->pd.dst_desc(), onednn_engine(), nhwc_out.raw_data())
                 : plan->reorder_dst
                     ? onednn_thread_memory(plan->pd.dst_desc(), OnednnBuffer::Destination)
                     : dst_user;
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (call.inputs[2].defined())
      args[DNNL_ARG_BIAS] = memory(plan->pd.weights_desc(1), onednn_engine(),
                                   const_cast<void*>(call.inputs[2].raw_data()));
    memory scratch = onednn_scratchpad(plan->pd.scratchpad_desc());
    args[DNNL_ARG_SCRATCHPAD] = scratch;
    plan->prim.execute(s, args);
    if (plan->dst_by_copy) {
      s.wait();
      if (!copy_permuted(nhwc_out, call.outs[0])) plan->dst_out.execute(s, dst, dst_user);
    } else if (plan->reorder_dst) {
      plan->dst_out.execute(s, dst, dst_user);
    }
    s.wait();
  } catch (const dnnl::error&) {
    return false;  // no oneDNN implementation for this case: kiln's own kernel runs
  }
  return true;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
