#pragma once
// The op registry. Each op has one schema, one meta function (output shapes and dtypes from
// the inputs, without touching data) and kernels per device type. The registry is data:
// it can list every op and, per device type and dtype, whether a kernel exists.
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dispatch/op_call.h"

namespace kiln {

using MetaFn = std::vector<TensorMeta> (*)(const OpCall& call);
// A kernel computes call.outs from call.inputs. Outputs are already allocated with the meta
// shapes, except for ops with data-dependent output shapes (OpDef::dynamic_shape), whose
// kernels allocate call.outs themselves. Kernels never call other ops.
using KernelFn = void (*)(OpCall& call);
// A view kernel makes the outputs as views of inputs[0] (metadata only, any device).
using ViewFn = Tensor (*)(const OpCall& call);
// A composite op is implemented by other ops or by the runtime (device-to-device copies),
// but still reaches interceptors as one op.
using CompositeFn = std::vector<Tensor> (*)(OpCall& call);

using DTypeMask = uint32_t;
inline constexpr DTypeMask dtype_bit(DType t) { return DTypeMask(1) << unsigned(t); }
// Every real dtype (bool, integers, floats). Complex dtypes are opted into one kernel at a
// time with kComplexDTypes: a kernel written for real types never meets std::complex.
inline constexpr DTypeMask kAllDTypes = (DTypeMask(1) << unsigned(DType::C64)) - 1;
inline constexpr DTypeMask kComplexDTypes = dtype_bit(DType::C64) | dtype_bit(DType::C128);
inline constexpr DTypeMask kFloatDTypes =
    dtype_bit(DType::F16) | dtype_bit(DType::BF16) | dtype_bit(DType::F32) | dtype_bit(DType::F64);
inline constexpr DTypeMask kIntDTypes = dtype_bit(DType::U8) | dtype_bit(DType::I8) |
                                        dtype_bit(DType::I16) | dtype_bit(DType::I32) |
                                        dtype_bit(DType::I64);
inline constexpr DTypeMask kIntBoolDTypes = kIntDTypes | dtype_bit(DType::Bool);
inline constexpr DTypeMask kNumericDTypes = kFloatDTypes | kIntDTypes;

struct KernelEntry {
  KernelFn fn = nullptr;
  DTypeMask dtypes = 0;  // dtypes of inputs[0] (or of the output for factories) it accepts
};

struct OpDef {
  std::string name;
  std::string schema;  // e.g. "add(Tensor self, Tensor other, Scalar alpha=1) -> Tensor"
  MetaFn meta = nullptr;
  ViewFn view = nullptr;       // set for view ops: no kernel, no allocation
  CompositeFn composite = nullptr;  // set for composite ops: runs instead of meta+kernel
  bool dynamic_shape = false;  // output shape depends on data (nonzero, unique, ...)
  bool random = false;         // consumes the generator
  // Fresh 4-D outputs are laid out channels-last when the inputs are (convolution, pooling,
  // cat, as PyTorch's memory-format propagation); the kernels read output strides.
  bool keeps_channels_last = false;
  // Pointwise ops: fresh outputs take the layout the inputs' strides give, any rank (PyTorch's
  // TensorIterator; kiln/tensor/pointwise_layout.h).
  bool pointwise_layout = false;
  std::array<KernelEntry, kNumDeviceTypes> kernels{};
  // Kernels for complex dtypes only, registered apart from the real ones (a register_kernel
  // whose mask holds only complex dtypes lands here); find_kernel looks here first for them.
  std::array<KernelEntry, kNumDeviceTypes> complex_kernels{};
  mutable std::atomic<int64_t> fallback_calls{0};  // calls that ran on the CPU instead
};

// Registers an op definition; the name must be new. Returns the stored definition (stable).
OpDef& register_op(std::string name, std::string schema, MetaFn meta);
OpDef& register_view_op(std::string name, std::string schema, ViewFn view);
OpDef& register_composite_op(std::string name, std::string schema, CompositeFn fn);
// Adds a kernel for a device type.
void register_kernel(std::string_view op, DeviceType device, KernelFn fn, DTypeMask dtypes);

const OpDef* find_op(std::string_view name) noexcept;
const OpDef& get_op(std::string_view name);  // Error naming the op when unknown
std::vector<const OpDef*> all_ops();

// A kernel used for every op that has no kernel of its own for a device type (the testing
// backend runs the CPU kernels asynchronously on its streams this way).
void set_default_kernel(DeviceType device, KernelFn fn);
KernelFn default_kernel(DeviceType device);

// Ensures all built-in ops and kernels are registered (idempotent, thread-safe).
void ensure_ops_registered();

}  // namespace kiln
