// The testing device runs the CPU kernels (its memory is host memory of its own) on its
// streams' worker threads, so every op works asynchronously on it and the runtime's
// ordering, events and synchronisation are exercised by the whole op suite.
#include "kiln/dispatch/registry.h"
#include "kiln/runtime/backend.h"

namespace kiln::testing_backend {
namespace {

Device call_device(const OpCall& call) {
  for (const auto& t : call.outs)
    if (t.defined()) return t.device();
  for (const auto& t : call.inputs)
    if (t.defined()) return t.device();
  return *call.device;
}

// The CPU kernel the call would run on the CPU: the complex-only one when the call touches a
// complex tensor (as the dispatcher keys it), else the main one.
KernelFn cpu_kernel_for(const OpCall& call) {
  bool complex = false;
  for (const auto& t : call.inputs) complex = complex || (t.defined() && is_complex(t.dtype()));
  for (const auto& t : call.outs) complex = complex || (t.defined() && is_complex(t.dtype()));
  const KernelEntry& c = call.op->complex_kernels[size_t(DeviceType::CPU)];
  return complex && c.fn ? c.fn : call.op->kernels[size_t(DeviceType::CPU)].fn;
}

void run_cpu_kernel_on_stream(OpCall& call) {
  KernelFn cpu = cpu_kernel_for(call);
  Device device = call_device(call);
  Stream stream = current_stream(device);
  if (call.op->dynamic_shape) {
    // The output size depends on the data: wait for the inputs, then run on this thread.
    stream.synchronize();
    cpu(call);
    return;
  }
  get_backend(DeviceType::Testing).launch(stream, [cpu, captured = call]() mutable {
    cpu(captured);
  });
}

}  // namespace

void register_testing_kernels() { set_default_kernel(DeviceType::Testing, run_cpu_kernel_on_stream); }

}  // namespace kiln::testing_backend
