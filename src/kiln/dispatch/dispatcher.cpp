#include "kiln/dispatch/dispatcher.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "float16_in_float32.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/dispatch/interceptor_state.h"
#include "kiln/runtime/guard.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/pointwise_layout.h"

namespace kiln {

namespace {

std::atomic<int> g_fallback{-1};  // -1: not read from the environment yet
std::atomic<int64_t> g_total_fallbacks{0};

// A 0-d CPU input may join tensors on another device, as in PyTorch (a scalar such as
// `x_xpu * torch.tensor(2.0)`): it is copied to their device.
bool is_cpu_scalar(const Tensor& t) { return t.dim() == 0 && t.device().type == DeviceType::CPU; }

// A meta op may take CPU index tensors (integer or bool: embedding ids, positions from a
// plain arange), as PyTorch's meta kernels do: true when every tensor of the call is on the
// meta device or is such a CPU input (or a 0-d CPU input), and one is on meta. The CPU
// tensors are then moved to meta (geometry only). Checked only after a device mismatch.
bool meta_call_with_cpu_indices(OpCall& call) {
  bool any_meta = false;
  for (const auto& t : call.inputs) {
    if (!t.defined()) continue;
    if (t.device().type == DeviceType::Meta) any_meta = true;
    else if (!t.device().is_cpu() || (is_floating(t.dtype()) && t.dim() > 0) ||
             is_complex(t.dtype()))
      return false;
  }
  for (const auto& t : call.outs)
    if (t.defined() && t.device().type != DeviceType::Meta) return false;
  if (!any_meta) return false;
  for (auto& t : call.inputs)
    if (t.defined() && t.device().is_cpu()) t = t.to(Device(DeviceType::Meta, 0));
  return true;
}

// The device every tensor of the call is on (0-d CPU inputs aside, which are moved to it);
// DeviceError naming both when two differ.
Device call_device(OpCall& call) {
  const Tensor* first = nullptr;
  for (const auto& t : call.inputs)
    if (t.defined() && !is_cpu_scalar(t)) {
      first = &t;
      break;
    }
  for (size_t i = 0; !first && i < call.outs.size(); ++i)
    if (call.outs[i].defined()) first = &call.outs[i];
  for (size_t i = 0; !first && i < call.inputs.size(); ++i)
    if (call.inputs[i].defined()) first = &call.inputs[i];
  if (!first) {
    KILN_INTERNAL_ASSERT(call.device.has_value(), "op '", call.op->name,
                         "' called with no tensor and no device");
    return resolve_device(*call.device);
  }
  const Device device = first->device();
  bool move_scalars = false, meta_with_cpu_indices = false;
  auto check = [&](const Tensor& t, bool input) {
    if (meta_with_cpu_indices || !t.defined() || t.device() == device) return;
    if (input && is_cpu_scalar(t)) {
      move_scalars = true;
      return;
    }
    if (meta_call_with_cpu_indices(call)) {  // the CPU inputs were moved to meta
      meta_with_cpu_indices = true;
      return;
    }
    KILN_THROW(DeviceError, "Expected all tensors to be on the same device, but found at least two "
               "devices, ", device, " and ", t.device(), " (in op '", call.op->name, "')");
  };
  for (const auto& t : call.inputs) check(t, true);
  for (const auto& t : call.outs) check(t, false);
  if (meta_with_cpu_indices) return Device(DeviceType::Meta, 0);
  if (move_scalars)
    for (auto& t : call.inputs)
      if (t.defined() && t.device() != device) t = t.to(device);
  return device;
}

// The dtype that picks the kernel: inputs[0]'s (else the first output's), except that a call
// touching a complex tensor anywhere (an input, a planned or given output: real -> complex
// copies, complex -> real abs) is keyed by that complex dtype, so that it reaches a kernel
// written for complex numbers and never a real kernel that would misread one.
DType key_dtype(const OpCall& call, const std::vector<TensorMeta>& metas) {
  for (const auto& t : call.inputs)
    if (t.defined() && is_complex(t.dtype())) return t.dtype();
  for (const auto& m : metas)
    if (is_complex(m.dtype)) return m.dtype;
  for (const auto& t : call.outs)
    if (t.defined() && is_complex(t.dtype())) return t.dtype();
  for (const auto& t : call.inputs)
    if (t.defined()) return t.dtype();
  if (!metas.empty()) return metas[0].dtype;
  for (const auto& t : call.outs)
    if (t.defined()) return t.dtype();
  return DType::F32;
}

std::string dtype_list(DTypeMask mask) {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i)
    if (mask & dtype_bit(DType(i))) s += (s.empty() ? "" : ", ") + std::string(dtype_name(DType(i)));
  return s.empty() ? "none" : s;
}

// A 4-D output of shape `shape` is laid out channels-last when some 4-D input is (and not
// also plain contiguous) and no input of the output's shape is plainly contiguous.
bool wants_channels_last(const OpCall& call, const Shape& shape) {
  if (shape.size() != 4) return false;
  bool any = false;
  for (const Tensor& t : call.inputs) {
    if (!t.defined() || t.dim() != 4) continue;
    const bool plain = t.is_contiguous();
    if (plain && t.shape() == shape && !t.is_contiguous(MemoryFormat::ChannelsLast)) return false;
    any = any || t.is_channels_last();
  }
  return any;
}

// metas' shapes are moved into fresh outputs.
void prepare_outputs(OpCall& call, std::vector<TensorMeta>& metas, Device device) {
  const OpDef& op = *call.op;
  if (call.outs.empty()) {
    call.outs.reserve(metas.size());
    for (auto& m : metas) {
      std::optional<Strides> strides;
      if (op.pointwise_layout) strides = pointwise_result_strides(m.shape, call.inputs);
      else if (op.keeps_channels_last && wants_channels_last(call, m.shape))
        strides = channels_last_strides(m.shape);
      if (strides)
        call.outs.push_back(empty_strided_tensor(m.shape, *strides, m.dtype, device));
      else
        call.outs.push_back(empty_tensor(std::move(m.shape), m.dtype, device));
    }
    return;
  }
  KILN_CHECK(call.outs.size() == metas.size(), ValueError, op.name, ": expected ", metas.size(),
             " output tensors, got ", call.outs.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    Tensor& out = call.outs[i];
    KILN_CHECK(out.dtype() == metas[i].dtype, Error, op.name, ": result type ",
               metas[i].dtype, " can't be written to an output of dtype ", out.dtype());
    if (out.shape() != metas[i].shape) {
      // As PyTorch: an empty out= tensor is resized; a non-empty one of another shape is an
      // error (PyTorch warns and resizes; kiln refuses to silently reallocate user memory).
      KILN_CHECK(out.numel() == 0 && !out.is_view(), ShapeError, op.name,
                 ": output tensor has shape ", shape_str(out.shape()), " but the result has shape ",
                 shape_str(metas[i].shape));
      Tensor fresh = empty_tensor(metas[i].shape, metas[i].dtype, device);
      out.impl()->set_storage(fresh.impl()->storage(), 0, fresh.shape(), fresh.strides());
    }
    out.impl()->bump_version();
  }
}

std::vector<Tensor> run_on_cpu_instead(OpCall& call, Device device);
std::vector<Tensor> run_on_meta(OpCall& call, std::vector<TensorMeta>& metas, Device device);
std::vector<Tensor> run_float16_in_float32(OpCall& call, const std::vector<TensorMeta>& metas);

std::vector<Tensor> run_op(OpCall& call) {
  const OpDef& op = *call.op;
  if (op.view) return {op.view(call)};
  if (op.composite) return op.composite(call);

  Device device = call_device(call);
  std::vector<TensorMeta> metas;
  if (!op.dynamic_shape) metas = op.meta(call);
  if (device.type == DeviceType::Meta) return run_on_meta(call, metas, device);
  DType dtype = key_dtype(call, metas);
  if (dtype == DType::F16 && device.type == DeviceType::CPU && !call.inputs.empty() &&
      !op.dynamic_shape && computes_float16_in_float32(op.name) && !float16_native(call))
    return run_float16_in_float32(call, metas);
  KernelFn kernel = find_kernel(op, device.type, dtype);
  if (!kernel) {
    const KernelEntry& own = kernel_entry(op, device.type, dtype);
    const KernelEntry& cpu = kernel_entry(op, DeviceType::CPU, dtype);
    bool cpu_has = cpu.fn && (cpu.dtypes & dtype_bit(dtype));
    if (device.type != DeviceType::CPU && cpu_has && cpu_fallback_enabled())
      return run_on_cpu_instead(call, device);
    if (own.fn || (device.type == DeviceType::CPU && cpu.fn))
      KILN_THROW(NotImplementedError, "\"", op.name, "\" not implemented for '", dtype_name(dtype),
                 "' on ", device_type_name(device.type), " (supported dtypes: ",
                 dtype_list(own.dtypes), ")");
    if (cpu_has && !default_kernel(device.type))
      KILN_THROW(NotImplementedError, "op '", op.name, "' has no kernel for device '",
                 device_type_name(device.type),
                 "'; set KILN_FALLBACK=cpu to run it on the CPU instead");
    KILN_THROW(NotImplementedError, "\"", op.name, "\" not implemented for '", dtype_name(dtype), "' on ",
               device_type_name(device.type));
  }
  DeviceGuard guard(device);
  if (!op.dynamic_shape) prepare_outputs(call, metas, device);
  kernel(call);
  return std::move(call.outs);  // no caller reads call.outs after dispatch
}

std::vector<Tensor> run_chain(OpCall& call, int slot) {
  unsigned active = detail::active_interceptors();
  for (; slot < kNumInterceptorSlots; ++slot) {
    if (!(active & (1u << slot))) continue;
    Interceptor* ic = get_interceptor(InterceptorSlot(slot));
    if (!ic) continue;
    int next_slot = slot + 1;
    return ic->intercept(call, [next_slot](OpCall& c) { return run_chain(c, next_slot); });
  }
  return run_op(call);
}

// KILN_FALLBACK=cpu: inputs are copied to the CPU, the CPU kernel runs, results are copied
// back to the device (into the caller's out= tensors when given). Warns once per op.
std::vector<Tensor> run_on_cpu_instead(OpCall& call, Device device) {
  const OpDef& op = *call.op;
  static std::mutex warned_mutex;
  static std::set<std::string> warned;
  {
    std::lock_guard lock(warned_mutex);
    if (warned.insert(op.name).second)
      std::cerr << "kiln warning: op '" << op.name << "' has no kernel for device '"
                << device_type_name(device.type)
                << "'; running it on the CPU (KILN_FALLBACK=cpu). This warning is shown once "
                   "per op.\n";
  }
  op.fallback_calls.fetch_add(1, std::memory_order_relaxed);
  g_total_fallbacks.fetch_add(1, std::memory_order_relaxed);
  Device cpu(DeviceType::CPU, 0);
  OpCall cpu_call;
  cpu_call.op = call.op;
  cpu_call.attrs = call.attrs;
  cpu_call.device = cpu;
  for (const auto& t : call.inputs) cpu_call.inputs.push_back(t.defined() ? t.to(cpu) : t);
  // out= and in-place forms: the CPU kernel writes into CPU copies of the outputs (they
  // start with the outputs' values, for ops that read them), which are copied back below.
  for (const auto& t : call.outs) cpu_call.outs.push_back(t.to(cpu));  // a fresh host copy
  std::vector<Tensor> results = run_op(cpu_call);
  if (call.outs.empty()) {
    for (auto& r : results) call.outs.push_back(r.to(device));
  } else {
    for (size_t i = 0; i < call.outs.size(); ++i) {
      call.outs[i].copy_(results[i]);
    }
  }
  return call.outs;
}

// The meta device (tensors without data): the meta function's outputs are the result; no
// kernel runs. Ops whose output shape depends on the values cannot say their shape.
std::vector<Tensor> run_on_meta(OpCall& call, std::vector<TensorMeta>& metas, Device device) {
  const OpDef& op = *call.op;
  KILN_CHECK(!op.dynamic_shape, NotImplementedError, "op '", op.name,
             "' has an output shape that depends on the input values, so it cannot run on the "
             "meta device (meta tensors have no values)");
  prepare_outputs(call, metas, device);
  return std::move(call.outs);
}

// t converted to dtype with t's strides when t is a permutation of a contiguous tensor (a
// transposed weight), so the conversion walks both as flat arrays (Tensor::to makes a
// contiguous copy: w.t() of [1024, 1024] float16 took 1.2 ms to widen, w 44 us).
Tensor to_keeping_layout(const Tensor& t, DType dtype) {
  const int64_t n = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) order[size_t(d)] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  const Tensor view = t.permute(order);
  if (t.is_contiguous() || !view.is_contiguous()) return t.to(dtype);
  std::vector<int64_t> back(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) back[size_t(order[size_t(d)])] = d;
  return view.to(dtype).permute(back);
}

// float16 inputs widened to float32, the float32 kernel, float16 outputs rounded once
// (computes_float16_in_float32 lists the ops where that is the op's definition). out= and
// in-place forms: the kernel writes float32 copies of the outputs (holding their values, for
// kernels that read them), copied back into the caller's tensors.
std::vector<Tensor> run_float16_in_float32(OpCall& call, const std::vector<TensorMeta>& metas) {
  auto widen = [](const Tensor& t) {
    return t.defined() && t.dtype() == DType::F16 ? to_keeping_layout(t, DType::F32) : t;
  };
  OpCall wide;
  wide.op = call.op;
  wide.attrs = call.attrs;
  wide.device = call.device;
  for (const auto& t : call.inputs) wide.inputs.push_back(widen(t));
  for (const auto& t : call.outs) wide.outs.push_back(widen(t));
  std::vector<Tensor> results = run_op(wide);
  if (call.outs.empty()) {
    for (size_t i = 0; i < results.size(); ++i) {
      const bool narrow = i < metas.size() && metas[i].dtype == DType::F16 &&
                          results[i].dtype() == DType::F32;
      call.outs.push_back(narrow ? results[i].to(DType::F16) : std::move(results[i]));
    }
  } else {
    for (size_t i = 0; i < call.outs.size(); ++i)
      if (call.outs[i].dtype() == DType::F16) call.outs[i].copy_(results[i]);
  }
  return std::move(call.outs);
}

}  // namespace

const KernelEntry& kernel_entry(const OpDef& op, DeviceType device, DType dtype) {
  const KernelEntry& complex = op.complex_kernels[size_t(device)];
  return is_complex(dtype) && complex.fn ? complex : op.kernels[size_t(device)];
}

KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype) {
  const KernelEntry& own = kernel_entry(op, device, dtype);
  if (own.fn) return (own.dtypes & dtype_bit(dtype)) ? own.fn : nullptr;
  if (device == DeviceType::CPU) return nullptr;
  KernelFn fallback = default_kernel(device);
  const KernelEntry& cpu = kernel_entry(op, DeviceType::CPU, dtype);
  if (fallback && cpu.fn && (cpu.dtypes & dtype_bit(dtype))) return fallback;
  return nullptr;
}

std::vector<Tensor> dispatch(OpCall& call) {
  if (__builtin_expect(detail::active_interceptors() == 0, 1)) return run_op(call);
  return run_chain(call, 0);
}

Tensor call_op(const OpDef& op, std::vector<Tensor> inputs, std::vector<AttrValue> attrs) {
  OpCall call;
  call.op = &op;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  auto outs = dispatch(call);
  KILN_INTERNAL_ASSERT(!outs.empty(), "op '", op.name, "' returned no output");
  return std::move(outs[0]);
}

std::vector<Tensor> call_op_multi(const OpDef& op, std::vector<Tensor> inputs,
                                  std::vector<AttrValue> attrs) {
  OpCall call;
  call.op = &op;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  return dispatch(call);
}

void call_op_out(const OpDef& op, std::vector<Tensor> inputs, std::vector<AttrValue> attrs,
                 std::vector<Tensor> outs) {
  OpCall call;
  call.op = &op;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  call.outs = std::move(outs);
  dispatch(call);
}

Tensor call_factory(const OpDef& op, Device device, std::vector<AttrValue> attrs) {
  OpCall call;
  call.op = &op;
  call.attrs = std::move(attrs);
  call.device = resolve_device(device);
  auto outs = dispatch(call);
  return std::move(outs[0]);
}

bool cpu_fallback_enabled() {
  int v = g_fallback.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("KILN_FALLBACK");
    v = env && std::strcmp(env, "cpu") == 0 ? 1 : 0;
    g_fallback.store(v);
  }
  return v == 1;
}
void set_cpu_fallback_enabled(bool enabled) { g_fallback.store(enabled ? 1 : 0); }
int64_t total_fallback_calls() { return g_total_fallbacks.load(); }

}  // namespace kiln
