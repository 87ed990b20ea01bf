#pragma once
// The dispatcher: runs an OpCall through the interceptors and then the kernel of the inputs'
// device: checks devices agree, computes output metadata, allocates outputs, and handles
// missing kernels (an error naming op and device, or — with KILN_FALLBACK=cpu — a run on the
// CPU with inputs copied there and results copied back, warning once per op).
#include <string_view>
#include <vector>

#include "kiln/dispatch/op_call.h"
#include "kiln/dispatch/registry.h"

namespace kiln {

std::vector<Tensor> dispatch(OpCall& call);

// Helpers for the ops layer: build and dispatch a call with one output.
Tensor call_op(const OpDef& op, std::vector<Tensor> inputs, std::vector<AttrValue> attrs = {});
std::vector<Tensor> call_op_multi(const OpDef& op, std::vector<Tensor> inputs,
                                  std::vector<AttrValue> attrs = {});
// Writes into preallocated outputs (out= and in-place forms).
void call_op_out(const OpDef& op, std::vector<Tensor> inputs, std::vector<AttrValue> attrs,
                 std::vector<Tensor> outs);
// Factories: no tensor inputs, the device comes from the argument.
Tensor call_factory(const OpDef& op, Device device, std::vector<AttrValue> attrs);

// The registry entry that serves dtype on a device: the complex-only entry for complex
// dtypes where one is registered, else the op's main entry (whose mask may still refuse it).
const KernelEntry& kernel_entry(const OpDef& op, DeviceType device, DType dtype);
// The kernel a call would use (ignoring fallback), or nullptr.
KernelFn find_kernel(const OpDef& op, DeviceType device, DType dtype);

// Fallback policy: read from KILN_FALLBACK at first use ("cpu" enables); settable in tests.
bool cpu_fallback_enabled();
void set_cpu_fallback_enabled(bool enabled);
int64_t total_fallback_calls();

}  // namespace kiln
