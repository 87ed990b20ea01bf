#pragma once
// Tensor: a reference-counted handle to a TensorImpl (copying a Tensor shares the data, as
// in PyTorch). Methods are thin forwards to the free functions of include/kiln/ops/.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/scalar.h"
#include "kiln/tensor/memory_format.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // Geometry.
  const Shape& shape() const { return checked()->shape(); }
  const Shape& sizes() const { return shape(); }
  int64_t size(int64_t dim) const;
  const Strides& strides() const { return checked()->strides(); }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t numel() const { return checked()->numel(); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  // In the given layout (MemoryFormat::ChannelsLast: 4-D with channels innermost).
  bool is_contiguous(MemoryFormat format) const;
  // 4-D and laid out channels-last but not also plainly contiguous (where the two layouts
  // coincide, e.g. one channel, the tensor counts as contiguous): the layout that kernels
  // and output allocation treat specially.
  bool is_channels_last() const {
    return dim() == 4 && !is_contiguous() && is_contiguous(MemoryFormat::ChannelsLast);
  }
  DType dtype() const { return checked()->dtype(); }
  Device device() const { return checked()->device(); }
  size_t element_size() const { return kiln::element_size(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_view() const { return checked()->view_base != nullptr; }
  uint64_t version() const { return checked()->version(); }
  bool shares_storage_with(const Tensor& o) const {
    return defined() && o.defined() && impl_->storage() == o.impl_->storage();
  }

  // Raw element pointer (storage offset applied). Device memory: only meaningful to
  // kernels of that device; no synchronisation happens here.
  void* raw_data() const;
  template <typename T>
  T* data_ptr() const {
    KILN_CHECK(dtype_of<T> == dtype(), TypeError, "data_ptr: tensor has dtype ", dtype(),
               " but the requested element type is ", dtype_of<T>);
    return static_cast<T*>(raw_data());
  }

  // Host reads (synchronise with the device).
  Scalar item() const;
  template <typename T>
  T item() const {
    return item().to<T>();
  }
  template <typename T>
  std::vector<T> to_vector() const;  // all elements in row-major order, converted to T
  std::string str() const;           // PyTorch-style printing

  // Views (share storage and version counter).
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor as_strided(const Shape& shape, const Strides& strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;

  // Copies and conversions.
  Tensor contiguous() const;
  // A tensor with the same values laid out in `format` (itself when it already is).
  Tensor contiguous(MemoryFormat format) const;
  Tensor clone() const;
  Tensor& copy_(const Tensor& src);
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(Device device, DType dtype) const;
  Tensor cpu() const { return to(Device(DeviceType::CPU, 0)); }
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();

  // A few arithmetic methods; the full set lives in ops/ as free functions.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& div_(const Tensor& other);

 private:
  TensorImpl* checked() const {
    KILN_CHECK(impl_ != nullptr, ValueError, "operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Operators (broadcasting, PyTorch promotion).
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);

}  // namespace kiln
