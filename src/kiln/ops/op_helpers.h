#pragma once
// Internal helpers shared by the op families: meta functions of common shapes, lookups of
// op definitions, and the in-place / out= plumbing.
#include <vector>

#include "kiln/dispatch/dispatcher.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/promotion.h"

namespace kiln::ops {

// Looks an op up once (the reference is cached in a function-local static by callers).
inline const OpDef& op(std::string_view name) { return get_op(name); }
#define KILN_OP(name)                                  \
  ([]() -> const ::kiln::OpDef& {                      \
    static const ::kiln::OpDef& def = ::kiln::get_op(name); \
    return def;                                        \
  }())

// One output's meta, its shape moved in (`return {{shape, dtype}}` copies the shape out of
// the initializer list: a malloc per op call).
std::vector<TensorMeta> one_meta(Shape shape, DType dtype);
// Meta: one output with inputs[0]'s shape and dtype.
std::vector<TensorMeta> same_as_first_meta(const OpCall& call);
// Meta: one output with the broadcast shape of all defined inputs and inputs[0]'s dtype.
std::vector<TensorMeta> broadcast_meta(const OpCall& call);
// Meta: broadcast shape, bool dtype (comparisons, isnan, ...).
std::vector<TensorMeta> broadcast_bool_meta(const OpCall& call);
// Meta: the output given by call.outs[0] (ops that are only called with out=).
std::vector<TensorMeta> out_meta(const OpCall& call);

Shape broadcast_all(const std::vector<Tensor>& ts);

// A 0-d tensor holding s, of the given dtype on device, marked as a wrapped number.
Tensor wrap_scalar(const Scalar& s, DType dtype, Device device);

// Writes result into out: checks the broadcast shape and castability and copies. Used by
// in-place and out= forms whose computation type differs from the output's dtype.
void write_result(const char* op_name, Tensor& out, const Tensor& result);

// True when a and b share storage but are not the same view (partial overlap that would
// let an elementwise kernel read what it already wrote).
bool partially_overlaps(const Tensor& a, const Tensor& b);

}  // namespace kiln::ops

namespace kiln {
// Whether a Linear on x may take float32 and bfloat16 operands mixed (fused_linear.cpp): under
// CPU autocast to bfloat16, whose interceptor unifies them (decision 0121).
bool fused_linear_mixed_ok(const Tensor& x);
// Whether autocast, on for x's device, will bring x and an operand of dtype `other` (both
// float32, bfloat16 or float16) to one dtype before a product or convolution runs, so that the
// op's argument check need not insist on equal dtypes (PyTorch casts before its checks).
bool autocast_unifies(const Tensor& x, DType other);
}  // namespace kiln
