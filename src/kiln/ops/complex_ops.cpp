// Complex tensors' ops: the part views (view_as_real / view_as_complex / real / imag), torch.complex,
// conj_physical, angle, sgn and the FFT ops' definitions (shape and dtype rules; the
// transforms are in backends/cpu/fft_kernels.cpp).
#include "kiln/ops/complex.h"

#include <algorithm>

#include "kiln/ops/copy.h"
#include "kiln/ops/views.h"
#include "op_helpers.h"

namespace kiln {

namespace {

Tensor view_as_real_fn(const OpCall& c) {
  const Tensor& t = c.inputs[0];
  KILN_CHECK(is_complex(t.dtype()), Error, "view_as_real is only supported for complex tensors, got ",
             dtype_name(t.dtype()));
  Shape shape = t.shape();
  Strides strides = t.strides();
  for (auto& s : strides) s *= 2;
  shape.push_back(2);
  strides.push_back(1);
  return make_view(t, shape, strides, t.storage_offset() * 2, real_part_dtype(t.dtype()));
}

Tensor view_as_complex_fn(const OpCall& c) {
  const Tensor& t = c.inputs[0];
  KILN_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, Error,
             "view_as_complex is only supported for float and double tensors, but got a tensor "
             "of scalar type: ", dtype_name(t.dtype()));
  KILN_CHECK(t.dim() > 0 && t.size(-1) == 2, Error, "Tensor must have a last dimension of size 2");
  KILN_CHECK(t.stride(-1) == 1, Error, "Tensor must have a last dimension with stride 1");
  Shape shape(t.shape().begin(), t.shape().end() - 1);
  Strides strides(t.strides().begin(), t.strides().end() - 1);
  for (auto& s : strides) {
    KILN_CHECK(s % 2 == 0, Error, "Tensor must have a stride divisible by 2 for all but last "
               "dimension");
    s /= 2;
  }
  KILN_CHECK(t.storage_offset() % 2 == 0, Error, "Tensor must have a storage_offset divisible by 2");
  return make_view(t, shape, strides, t.storage_offset() / 2, complex_dtype_for(t.dtype()));
}

std::vector<TensorMeta> real_of_first_meta(const OpCall& c) {
  return ops::one_meta(c.inputs[0].shape(), real_part_dtype(c.inputs[0].dtype()));
}

std::vector<TensorMeta> complex_meta(const OpCall& c) {
  const Tensor &re = c.inputs[0], &im = c.inputs[1];
  KILN_CHECK(re.dtype() == im.dtype(), Error, "complex(): expected both inputs to have the same "
             "dtype, got ", dtype_name(re.dtype()), " and ", dtype_name(im.dtype()));
  KILN_CHECK(re.dtype() == DType::F32 || re.dtype() == DType::F64, Error,
             "complex(): expected both inputs to be float or double tensors, got ",
             dtype_name(re.dtype()));
  return ops::one_meta(ops::broadcast_all(c.inputs), complex_dtype_for(re.dtype()));
}

// The dims of an FFT: wrapped, distinct, and each of nonzero size.
std::vector<int64_t> fft_dims(const char* name, const Tensor& t, const std::vector<int64_t>& dims) {
  KILN_CHECK(!dims.empty(), Error, name, ": expected at least one dim to transform");
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, t.dim());
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), Error, name,
               ": dims must be unique, got dim ", w, " twice");
    KILN_CHECK(t.size(w) > 0, Error, name, ": Invalid number of data points (0) specified");
    out.push_back(w);
  }
  return out;
}

void check_normalization(const char* name, int64_t norm) {
  KILN_CHECK(norm >= 0 && norm <= 2, ValueError, name,
             ": normalization must be 0 (none), 1 (by 1/sqrt(n)) or 2 (by 1/n), got ", norm);
}

std::vector<TensorMeta> fft_c2c_meta(const OpCall& c) {
  const Tensor& t = c.inputs[0];
  KILN_CHECK(is_complex(t.dtype()), Error, "_fft_c2c: expected a complex input, got ",
             dtype_name(t.dtype()));
  fft_dims("_fft_c2c", t, c.ints_attr(0));
  check_normalization("_fft_c2c", c.int_attr(1));
  return ops::one_meta(t.shape(), t.dtype());
}

std::vector<TensorMeta> fft_r2c_meta(const OpCall& c) {
  const Tensor& t = c.inputs[0];
  KILN_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, Error,
             "_fft_r2c: expected a float or double input, got ", dtype_name(t.dtype()));
  const auto dims = fft_dims("_fft_r2c", t, c.ints_attr(0));
  check_normalization("_fft_r2c", c.int_attr(1));
  Shape shape = t.shape();
  if (c.bool_attr(2)) shape[size_t(dims.back())] = shape[size_t(dims.back())] / 2 + 1;
  return ops::one_meta(std::move(shape), complex_dtype_for(t.dtype()));
}

std::vector<TensorMeta> fft_c2r_meta(const OpCall& c) {
  const Tensor& t = c.inputs[0];
  KILN_CHECK(is_complex(t.dtype()), Error, "_fft_c2r: expected a complex input, got ",
             dtype_name(t.dtype()));
  const auto dims = fft_dims("_fft_c2r", t, c.ints_attr(0));
  check_normalization("_fft_c2r", c.int_attr(1));
  const int64_t n = c.int_attr(2);
  KILN_CHECK(n >= 1, Error, "_fft_c2r: Invalid number of data points (", n, ") specified");
  Shape shape = t.shape();
  shape[size_t(dims.back())] = n;
  return ops::one_meta(std::move(shape), real_part_dtype(t.dtype()));
}

}  // namespace

Tensor view_as_real(const Tensor& t) { return call_op(KILN_OP("view_as_real"), {t}, {}); }
Tensor view_as_complex(const Tensor& t) { return call_op(KILN_OP("view_as_complex"), {t}, {}); }

Tensor real(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  return select(view_as_real(t), -1, 0);
}

Tensor imag(const Tensor& t) {
  KILN_CHECK(is_complex(t.dtype()), Error,
             "imag is not implemented for tensors with non-complex dtypes.");
  return select(view_as_real(t), -1, 1);
}

Tensor complex(const Tensor& re, const Tensor& im) {
  return call_op(KILN_OP("complex"), {re, im}, {});
}
Tensor conj_physical(const Tensor& t) {
  if (!is_complex(t.dtype())) return clone(t);
  return call_op(KILN_OP("conj_physical"), {t}, {});
}
Tensor conj_if_complex(const Tensor& t) { return is_complex(t.dtype()) ? conj_physical(t) : t; }
Tensor angle(const Tensor& t) { return call_op(KILN_OP("angle"), {t}, {}); }
Tensor sgn(const Tensor& t) { return call_op(KILN_OP("sgn"), {t}, {}); }

Tensor fft_c2c(const Tensor& t, const std::vector<int64_t>& dims, int64_t norm, bool forward) {
  return call_op(KILN_OP("_fft_c2c"), {t}, {dims, norm, forward});
}
Tensor fft_r2c(const Tensor& t, const std::vector<int64_t>& dims, int64_t norm, bool onesided) {
  return call_op(KILN_OP("_fft_r2c"), {t}, {dims, norm, onesided});
}
Tensor fft_c2r(const Tensor& t, const std::vector<int64_t>& dims, int64_t norm, int64_t n) {
  return call_op(KILN_OP("_fft_c2r"), {t}, {dims, norm, n});
}

namespace ops {
void register_complex_ops() {
  register_view_op("view_as_real", "view_as_real(Tensor(a) self) -> Tensor(a)", view_as_real_fn);
  register_view_op("view_as_complex", "view_as_complex(Tensor(a) self) -> Tensor(a)",
                   view_as_complex_fn);
  register_op("complex", "complex(Tensor real, Tensor imag) -> Tensor", complex_meta);
  register_op("conj_physical", "conj_physical(Tensor self) -> Tensor", same_as_first_meta);
  register_op("sgn", "sgn(Tensor self) -> Tensor", same_as_first_meta);
  register_op("angle", "angle(Tensor self) -> Tensor", real_of_first_meta);
  register_op("_fft_c2c", "_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor",
              fft_c2c_meta);
  register_op("_fft_r2c", "_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor",
              fft_r2c_meta);
  register_op("_fft_c2r",
              "_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor",
              fft_c2r_meta);
}
}  // namespace ops

}  // namespace kiln
