#pragma once
// Factories: new tensors from shapes, values, ranges and random distributions.
#include <optional>
#include <vector>

#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

// Where and what type a factory creates. dtype unset: the default float dtype (or, for
// integer ranges and values, what the values imply).
struct TensorOptions {
  std::optional<DType> dtype;
  Device device{DeviceType::CPU, 0};

  TensorOptions() = default;
  TensorOptions(DType t) : dtype(t) {}    // NOLINT: zeros({2}, DType::I32)
  TensorOptions(Device d) : device(d) {}  // NOLINT
  TensorOptions(DType t, Device d) : dtype(t), device(d) {}
  DType dtype_or_default() const { return dtype.value_or(default_float_dtype()); }
};

Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
// full: without a dtype the value's kind decides (bool, int64 or the default float).
Tensor full(const Shape& shape, const Scalar& value, TensorOptions opts = {});
Tensor scalar_tensor(const Scalar& value, TensorOptions opts = {});
// arange: without a dtype, int64 if all arguments are integral, else the default float.
Tensor arange(const Scalar& end, TensorOptions opts = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              TensorOptions opts = {});
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions opts = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opts = {});

Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
// Integers uniformly in [low, high); dtype defaults to int64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = {},
               Generator* gen = nullptr);

// *_like: same shape, dtype and device as t unless overridden.
Tensor empty_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<DType> dtype = std::nullopt);
Tensor rand_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor randn_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor randint_like(const Tensor& t, int64_t low, int64_t high,
                    std::optional<DType> dtype = std::nullopt);

// A tensor holding a copy of values (row-major) with the given shape; values.size() must
// equal the number of elements. T is any kiln element type.
template <typename T>
Tensor tensor_from(const std::vector<T>& values, const Shape& shape, TensorOptions opts = {});
template <typename T>
Tensor tensor_from(const std::vector<T>& values, TensorOptions opts = {}) {
  return tensor_from(values, Shape{int64_t(values.size())}, opts);
}
// Wraps host memory of a CPU tensor-to-be (copied).
Tensor from_blob_copy(const void* data, const Shape& shape, DType dtype, Device device);

}  // namespace kiln
