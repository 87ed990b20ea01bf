#pragma once
// Helpers for op tests: random inputs in every layout (contiguous, transposed, strided,
// broadcast, 0-d, empty), a float64 reference computed on host vectors, and comparisons
// with tolerances per dtype. Every op test runs on each registered device type.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <type_traits>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

// Tolerances per dtype for results computed in that dtype vs a float64 reference.
struct Tol {
  double rtol, atol;
};
inline Tol tol_for(DType t) {
  switch (t) {
    case DType::F64: return {1e-12, 1e-12};
    case DType::F32: return {1e-5, 1e-6};
    case DType::F16: return {2e-3, 1e-3};
    case DType::BF16: return {1.6e-2, 1e-2};
    default: return {0, 0};
  }
}

// Host values of t (any device/dtype/layout) in row-major order, as double.
// The Python exception class a kiln error becomes (see python/src/errors.cpp): tests that
// expect kiln::Error itself check that the error is a RuntimeError in Python (which includes
// NotImplementedError), not one of the subclasses that map to ValueError, TypeError or
// IndexError.
inline const char* python_exception_name(const std::exception& e) {
  if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
  if (dynamic_cast<const ValueError*>(&e)) return "ValueError";
  if (dynamic_cast<const TypeError*>(&e)) return "TypeError";
  if (dynamic_cast<const NotImplementedError*>(&e)) return "NotImplementedError";
  return "RuntimeError";
}
template <typename E>
void expect_python_class_of(const std::exception& e) {
  if constexpr (std::is_same_v<E, Error>)
    EXPECT_TRUE(std::string(python_exception_name(e)) == "RuntimeError" ||
                std::string(python_exception_name(e)) == "NotImplementedError")
        << python_exception_name(e) << ", message: " << e.what();
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Expects t to have the given shape and values within tolerance (NaN matches NaN,
// infinities must match exactly).
inline void expect_close(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                         Tol tol, const std::string& what = "") {
  ASSERT_EQ(t.shape(), shape) << what;
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(g)) << what << " at " << i << ": expected nan, got " << g;
    } else if (std::isinf(e)) {
      EXPECT_EQ(g, e) << what << " at " << i;
    } else {
      EXPECT_NEAR(g, e, tol.atol + tol.rtol * std::fabs(e)) << what << " at flat index " << i;
    }
  }
}
inline void expect_close(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                         const std::string& what = "") {
  expect_close(t, shape, expected, tol_for(t.dtype()), what);
}

// Deterministic random host data.
inline std::vector<double> random_values(size_t n, double lo, double hi, uint32_t seed,
                                         bool integers = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = integers ? std::floor(d(rng)) : d(rng);
  return v;
}

// A tensor of shape with the given host values (row-major), dtype and device.
inline Tensor make(const std::vector<double>& vals, const Shape& shape, DType dtype,
                   Device device) {
  return tensor_from(vals, shape, TensorOptions(dtype, device));
}

// The layouts every elementwise op is tested in. make_layout returns a tensor whose logical
// value is `vals` at `shape` but laid out as described.
enum class Layout { Contiguous, Transposed, Strided };
inline Tensor make_layout(const std::vector<double>& vals, const Shape& shape, DType dtype,
                          Device device, Layout layout) {
  if (layout == Layout::Strided && !shape.empty()) {
    // Every other element of a twice-as-long last dim.
    Shape big = shape;
    big.back() *= 2;
    std::vector<double> bv(size_t(numel_of(big)), -777.0);
    int64_t inner = shape.back();
    for (size_t i = 0; i < vals.size(); ++i)
      bv[(i / size_t(inner)) * size_t(inner) * 2 + (i % size_t(inner)) * 2] = vals[i];
    return make(bv, big, dtype, device).slice(-1, 0, std::nullopt, 2);
  }
  if (layout == Layout::Transposed && shape.size() >= 2) {
    // Store the transpose of the last two dims contiguously, then transpose back.
    Tensor c = make(vals, shape, DType::F64, Device(DeviceType::CPU, 0));
    Tensor stored = c.transpose(-1, -2).contiguous();
    return stored.to(device, dtype).transpose(-1, -2);
  }
  return make(vals, shape, dtype, device);
}

// Device types to run op tests on: every registered backend with a device, except meta
// (its tensors have no values to compare).
inline std::vector<DeviceType> test_device_types() {
  std::vector<DeviceType> out;
  for (DeviceType t : registered_device_types())
    if (is_available(t) && t != DeviceType::Meta) out.push_back(t);
  return out;
}
inline std::string device_param_name(const ::testing::TestParamInfo<DeviceType>& info) {
  return std::string(device_type_name(info.param));
}

// Fixture base: parameterised by device type.
class OnEachDevice : public ::testing::TestWithParam<DeviceType> {
 protected:
  Device device() const { return Device(GetParam(), 0); }
};

#define KILN_INSTANTIATE_ON_EACH_DEVICE(Suite)                                          \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::kiln::test::test_device_types()), \
                           ::kiln::test::device_param_name)

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::Bool, DType::U8,   DType::I8,  DType::I16,
                                       DType::I32,  DType::I64,  DType::F16, DType::BF16,
                                       DType::F32,  DType::F64};
  return v;
}
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v = {DType::F16, DType::BF16, DType::F32, DType::F64};
  return v;
}

// Rounds v to what dtype can hold (the reference inputs must equal the stored inputs).
inline double round_to(double v, DType t) {
  switch (t) {
    case DType::F32: return double(float(v));
    case DType::F16: return double(float(Half(float(v))));
    case DType::BF16: return double(float(BFloat16(float(v))));
    case DType::Bool: return v != 0 ? 1.0 : 0.0;
    // Integers: truncate, then wrap into the type's range (two's complement), as kiln does.
    case DType::U8: return double(uint8_t(int64_t(std::trunc(v))));
    case DType::I8: return double(int8_t(int64_t(std::trunc(v))));
    case DType::I16: return double(int16_t(int64_t(std::trunc(v))));
    case DType::I32: return double(int32_t(int64_t(std::trunc(v))));
    case DType::I64: return std::trunc(v);
    default: return v;
  }
}
inline std::vector<double> rounded(std::vector<double> v, DType t) {
  for (auto& x : v) x = round_to(x, t);
  return v;
}

}  // namespace kiln::test
