// Factories that fill new tensors with constants, ranges and host data.
#include "kiln/ops/factory.h"

#include <cmath>
#include <cstring>

#include "kiln/core/convert.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

int64_t arange_length(const Scalar& start, const Scalar& end, const Scalar& step) {
  double s = start.to_double(), e = end.to_double(), d = step.to_double();
  KILN_CHECK(d != 0, Error, "arange: step must be nonzero");
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), Error,
             "arange: unsupported range: ", s, " -> ", e);
  KILN_CHECK((d > 0 && e >= s) || (d < 0 && e <= s), Error,
             "arange: upper bound and larger bound inconsistent with step sign (start=", s,
             ", end=", e, ", step=", d, ")");
  if (start.is_floating() || end.is_floating() || step.is_floating())
    return int64_t(std::ceil((e - s) / d));
  int64_t si = start.to_int(), ei = end.to_int(), di = step.to_int();
  return di > 0 ? (ei - si + di - 1) / di : (si - ei - di - 1) / (-di);
}

std::vector<TensorMeta> arange_meta(const OpCall& call) {
  int64_t n = arange_length(call.scalar_attr(0), call.scalar_attr(1), call.scalar_attr(2));
  return {{{n}, call.dtype_attr(3)}};
}
std::vector<TensorMeta> linspace_meta(const OpCall& call) {
  int64_t steps = call.int_attr(2);
  KILN_CHECK(steps >= 0, Error, "linspace: number of steps must be non-negative, got ",
             steps);
  return {{{steps}, call.dtype_attr(3)}};
}
std::vector<TensorMeta> eye_meta(const OpCall& call) {
  int64_t n = call.int_attr(0), m = call.int_attr(1);
  KILN_CHECK(n >= 0 && m >= 0, Error, "eye: n and m must be non-negative, got n=", n,
             ", m=", m);
  return {{{n, m}, call.dtype_attr(2)}};
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions opts) {
  return empty_tensor(shape, opts.dtype_or_default(), opts.device);
}

Tensor full(const Shape& shape, const Scalar& value, TensorOptions opts) {
  Tensor t = empty_tensor(shape, opts.dtype.value_or(value.default_dtype()), opts.device);
  return t.fill_(value);
}

Tensor zeros(const Shape& shape, TensorOptions opts) {
  return full(shape, 0, TensorOptions(opts.dtype_or_default(), opts.device));
}
Tensor ones(const Shape& shape, TensorOptions opts) {
  return full(shape, 1, TensorOptions(opts.dtype_or_default(), opts.device));
}
Tensor scalar_tensor(const Scalar& value, TensorOptions opts) {
  return full({}, value, TensorOptions(opts.dtype_or_default(), opts.device));
}

Tensor arange(const Scalar& end, TensorOptions opts) { return arange(0, end, 1, opts); }
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions opts) {
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  DType dtype = opts.dtype.value_or(integral ? DType::I64 : default_float_dtype());
  return call_factory(KILN_OP("arange"), opts.device, {start, end, step, dtype});
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions opts) {
  return call_factory(KILN_OP("linspace"), opts.device,
                      {start.to_double(), end.to_double(), steps, opts.dtype_or_default()});
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions opts) {
  return call_factory(KILN_OP("eye"), opts.device, {n, m.value_or(n), opts.dtype_or_default()});
}

Tensor empty_like(const Tensor& t, std::optional<DType> dtype) {
  return empty_tensor(t.shape(), dtype.value_or(t.dtype()), t.device());
}
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype) {
  return full(t.shape(), 0, TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor ones_like(const Tensor& t, std::optional<DType> dtype) {
  return full(t.shape(), 1, TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<DType> dtype) {
  return full(t.shape(), value, TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor rand_like(const Tensor& t, std::optional<DType> dtype) {
  return rand(t.shape(), TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor randn_like(const Tensor& t, std::optional<DType> dtype) {
  return randn(t.shape(), TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor randint_like(const Tensor& t, int64_t low, int64_t high, std::optional<DType> dtype) {
  return randint(low, high, t.shape(), TensorOptions(dtype.value_or(t.dtype()), t.device()));
}

Tensor from_blob_copy(const void* data, const Shape& shape, DType dtype, Device device) {
  Tensor host = empty_tensor(shape, dtype, Device(DeviceType::CPU, 0));
  if (host.nbytes()) std::memcpy(host.raw_data(), data, host.nbytes());
  return to_device(host, device);
}

template <typename T>
Tensor tensor_from(const std::vector<T>& values, const Shape& shape, TensorOptions opts) {
  KILN_CHECK(int64_t(values.size()) == numel_of(shape), ShapeError, "tensor_from: ",
             values.size(), " values can't fill a tensor of shape ", shape_str(shape), " (",
             numel_of(shape), " elements)");
  Tensor t;
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    t = from_blob_copy(bytes.data(), shape, DType::Bool, Device(DeviceType::CPU, 0));
  } else {
    t = from_blob_copy(values.data(), shape, dtype_of<T>, Device(DeviceType::CPU, 0));
  }
  return to_device(opts.dtype ? to_dtype(t, *opts.dtype) : t, opts.device);
}

#define KILN_INSTANTIATE_TENSOR_FROM(T) \
  template Tensor tensor_from<T>(const std::vector<T>&, const Shape&, TensorOptions);
KILN_INSTANTIATE_TENSOR_FROM(bool)
KILN_INSTANTIATE_TENSOR_FROM(uint8_t)
KILN_INSTANTIATE_TENSOR_FROM(int8_t)
KILN_INSTANTIATE_TENSOR_FROM(int16_t)
KILN_INSTANTIATE_TENSOR_FROM(int32_t)
KILN_INSTANTIATE_TENSOR_FROM(int64_t)
KILN_INSTANTIATE_TENSOR_FROM(Half)
KILN_INSTANTIATE_TENSOR_FROM(BFloat16)
KILN_INSTANTIATE_TENSOR_FROM(float)
KILN_INSTANTIATE_TENSOR_FROM(double)

namespace ops {
void register_factory_ops() {
  register_op("fill_", "fill_(Tensor(a!) self, Scalar value) -> Tensor(a!)", out_meta);
  register_op("arange", "arange(Scalar start, Scalar end, Scalar step, ScalarType dtype) -> Tensor",
              arange_meta);
  register_op("linspace", "linspace(float start, float end, int steps, ScalarType dtype) -> Tensor",
              linspace_meta);
  register_op("eye", "eye(int n, int m, ScalarType dtype) -> Tensor", eye_meta);
}
}  // namespace ops

}  // namespace kiln
