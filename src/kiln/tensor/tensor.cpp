// Tensor accessors and host reads. View and arithmetic methods forward to ops/ (see
// src/kiln/ops/tensor_methods.cpp).
#include "kiln/tensor/tensor.h"

#include "kiln/core/convert.h"
#include "kiln/ops/copy.h"

namespace kiln {

// (wrap_dim accepts 0 and -1 for a 0-d tensor, as reductions do; a 0-d tensor has no size.)
int64_t Tensor::size(int64_t d) const {
  KILN_CHECK(dim() > 0, IndexError, "Dimension specified as ", d, " but tensor has no dimensions");
  return shape()[size_t(wrap_dim(d, dim()))];
}
int64_t Tensor::stride(int64_t d) const {
  KILN_CHECK(dim() > 0, IndexError, "Dimension specified as ", d, " but tensor has no dimensions");
  return strides()[size_t(wrap_dim(d, dim()))];
}

void* Tensor::raw_data() const {
  auto* i = checked();
  char* base = static_cast<char*>(i->storage()->data());
  if (!base) return nullptr;
  return base + i->storage_offset() * int64_t(kiln::element_size(i->dtype()));
}

namespace {
// A contiguous CPU copy of t (t itself when already so); synchronises with the device.
Tensor host_contiguous(const Tensor& t) {
  Tensor h = to_device(t, Device(DeviceType::CPU, 0));
  return contiguous(h);
}
}  // namespace

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, ValueError, "a Tensor with ", numel(),
             " elements cannot be converted to Scalar");
  Tensor h = host_contiguous(*this);
  if (dtype() == DType::C64) {
    const float* p = static_cast<const float*>(h.raw_data());
    return Scalar::complex(p[0], p[1]);
  }
  if (dtype() == DType::C128) {
    const double* p = static_cast<const double*>(h.raw_data());
    return Scalar::complex(p[0], p[1]);
  }
  return KILN_DISPATCH_ALL(dtype(), "item", [&]<typename T>() -> Scalar {
    T v = *static_cast<const T*>(h.raw_data());
    if constexpr (std::is_same_v<T, bool>) return Scalar(v);
    else if constexpr (std::is_integral_v<T>) return Scalar(int64_t(v));
    else return Scalar(double(v));
  });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor h = host_contiguous(*this);
  std::vector<T> out(size_t(h.numel()));
  KILN_DISPATCH_ALL(dtype(), "to_vector", [&]<typename S>() {
    const S* p = static_cast<const S*>(h.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert_value<T>(p[i]);
  });
  return out;
}

template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<int8_t> Tensor::to_vector<int8_t>() const;
template std::vector<int16_t> Tensor::to_vector<int16_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;

}  // namespace kiln
