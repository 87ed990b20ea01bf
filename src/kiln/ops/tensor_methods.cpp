// Tensor's methods and operators: thin forwards to the free functions of the op families.
#include "kiln/tensor/empty.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln {

Tensor Tensor::view(const Shape& s) const { return kiln::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return kiln::reshape(*this, s); }
Tensor Tensor::permute(const std::vector<int64_t>& d) const { return kiln::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return kiln::transpose(*this, a, b); }
Tensor Tensor::t() const { return kiln::t(*this); }
Tensor Tensor::expand(const Shape& s) const { return kiln::expand(*this, s); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return kiln::narrow(*this, d, s, l); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e,
                     int64_t step) const {
  return kiln::slice(*this, d, s, e, step);
}
Tensor Tensor::select(int64_t d, int64_t i) const { return kiln::select(*this, d, i); }
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, {d}); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return kiln::flatten(*this, s, e); }
Tensor Tensor::unflatten(int64_t d, const Shape& s) const { return kiln::unflatten(*this, d, s); }
Tensor Tensor::as_strided(const Shape& s, const Strides& st, std::optional<int64_t> o) const {
  return kiln::as_strided(*this, s, st, o);
}
Tensor Tensor::diagonal(int64_t o, int64_t a, int64_t b) const {
  return kiln::diagonal(*this, o, a, b);
}
Tensor Tensor::unfold(int64_t d, int64_t s, int64_t st) const {
  return kiln::unfold(*this, d, s, st);
}

Tensor Tensor::contiguous() const { return kiln::contiguous(*this); }
bool Tensor::is_contiguous(MemoryFormat format) const {
  switch (format) {
    case MemoryFormat::Contiguous: return is_contiguous();
    case MemoryFormat::ChannelsLast: return is_channels_last_geometry(shape(), strides());
    case MemoryFormat::Preserve: break;
  }
  KILN_THROW(ValueError, "is_contiguous: preserve_format is not a memory format to test for");
}
Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return contiguous();
  KILN_CHECK(format == MemoryFormat::ChannelsLast, ValueError,
             "contiguous: expected contiguous_format or channels_last, got preserve_format");
  KILN_CHECK(dim() == 4, ShapeError, "required rank 4 tensor to use channels_last format, got a ",
             dim(), "-D tensor of shape ", shape_str(shape()));
  if (is_contiguous(format)) return *this;
  Tensor out = empty_strided_tensor(shape(), channels_last_strides(shape()), dtype(), device());
  out.copy_(*this);  // recorded by autograd like any copy
  return out;
}
Tensor Tensor::clone() const { return kiln::clone(*this); }
Tensor& Tensor::copy_(const Tensor& src) { return kiln::copy_(*this, src); }
Tensor Tensor::to(DType d) const { return to_dtype(*this, d); }
Tensor Tensor::to(Device d) const { return to_device(*this, d); }
Tensor Tensor::to(Device d, DType t) const { return to_device(to_dtype(*this, t), d); }
Tensor& Tensor::fill_(const Scalar& v) { return kiln::fill_(*this, v); }
Tensor& Tensor::zero_() { return kiln::fill_(*this, 0); }

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return kiln::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return kiln::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return kiln::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return kiln::div(*this, o); }
Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }
Tensor Tensor::sum() const { return kiln::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& d, bool k) const { return kiln::sum(*this, d, k); }
Tensor Tensor::mean() const { return kiln::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& d, bool k) const { return kiln::mean(*this, d, k); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return kiln::add_(*this, o, alpha); }
Tensor& Tensor::mul_(const Tensor& o) { return kiln::mul_(*this, o); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return kiln::sub_(*this, o, alpha); }
Tensor& Tensor::div_(const Tensor& o) { return kiln::div_(*this, o); }

Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }

}  // namespace kiln
