// CPU kernels of the FFT ops (_fft_c2c, _fft_r2c, _fft_c2r): transforms along each dim of
// a contiguous complex working buffer with kiln's FFT engine (ops/fft_engine.h), the lines of
// one dim spread over the threads, then the normalization.
#include <cmath>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/strided_loop.h"
#include "../../ops/fft_engine.h"

namespace kiln::cpu {

namespace {

// The lines along dim d of a contiguous tensor of shape `shape`: line l starts at
// (l / inner) * n * inner + l % inner and steps by inner.
struct Lines {
  int64_t n = 1, inner = 1, count = 1;
  Lines(const Shape& shape, int64_t d) : n(shape[size_t(d)]) {
    for (size_t k = size_t(d) + 1; k < shape.size(); ++k) inner *= shape[k];
    for (int64_t k = 0; k < d; ++k) count *= shape[size_t(k)];
    count *= inner;
  }
  int64_t start(int64_t l) const { return (l / inner) * n * inner + l % inner; }
};

// fn(i) for i in [0, count): over the threads when there are enough points in all.
template <typename Fn>
void for_lines(int64_t count, int64_t points_each, Fn&& fn) {
  if (count * points_each >= 4096) detail::parallel_chunks(count, fn);
  else for (int64_t i = 0; i < count; ++i) fn(i);
}

// Transforms every line along dim d of the contiguous buffer `data` of shape `shape`.
template <typename R>
void transform_dim(std::complex<R>* data, const Shape& shape, int64_t d, bool forward) {
  const Lines lines(shape, d);
  if (lines.n == 1) return;
  const auto plan = fft::get_plan<R>(lines.n);
  for_lines(lines.count, lines.n, [&](int64_t l) {
    std::complex<R>* base = data + lines.start(l);
    plan->execute(base, lines.inner, base, lines.inner, forward);
  });
}

// Forward transforms of the real lines along dim d of `data` (imaginary parts zero on entry),
// two lines per complex transform: z = a + i b gives A[k] = (Z[k] + conj Z[n-k]) / 2 and
// B[k] = (Z[k] - conj Z[n-k]) / 2i, half the work of transforming each line. DC and (even n)
// Nyquist bins come out exactly real, as a real transform gives them.
template <typename R>
void transform_real_dim(std::complex<R>* data, const Shape& shape, int64_t d) {
  using C = std::complex<R>;
  const Lines lines(shape, d);
  const int64_t n = lines.n, inner = lines.inner;
  const auto plan = fft::get_plan<R>(n);
  for_lines((lines.count + 1) / 2, 2 * n, [&](int64_t p) {
    C* a = data + lines.start(2 * p);
    if (2 * p + 1 == lines.count) {  // an odd line out: on its own
      plan->execute(a, inner, a, inner, true);
      a[0].imag(R(0));
      if (n % 2 == 0) a[(n / 2) * inner].imag(R(0));
      return;
    }
    C* b = data + lines.start(2 * p + 1);
    std::vector<C> z(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) z[size_t(j)] = C(a[j * inner].real(), b[j * inner].real());
    plan->execute(z.data(), 1, z.data(), 1, true);
    for (int64_t k = 0; k < n; ++k) {
      const C zk = z[size_t(k)], zc = std::conj(z[size_t((n - k) % n)]);
      a[k * inner] = C((zk.real() + zc.real()) * R(0.5), (zk.imag() + zc.imag()) * R(0.5));
      // (zk - zc) / 2i = ((zk - zc).imag, -(zk - zc).real) / 2
      b[k * inner] = C((zk.imag() - zc.imag()) * R(0.5), (zc.real() - zk.real()) * R(0.5));
    }
  });
}

// Transforms along dims[0, ndims) in turn; returns the product of their sizes (the point
// count that the normalization scales by).
template <typename R>
double transform_dims(std::complex<R>* data, const Shape& shape, const std::vector<int64_t>& dims,
                      size_t ndims, bool forward) {
  double count = 1;
  for (size_t j = 0; j < ndims; ++j) {
    const int64_t w = wrap_dim(dims[j], int64_t(shape.size()));
    transform_dim<R>(data, shape, w, forward);
    count *= double(shape[size_t(w)]);
  }
  return count;
}

// The scale of a normalization mode for transforms of `count` points in all.
double norm_scale(int64_t mode, double count) {
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(count) : 1.0 / count;
}

// dst (contiguous, complex<R>) <- t (float or complex, any strides), converted by the shared
// threaded strided walk.
template <typename R>
void convert_into(const Tensor& t, const Tensor& dst) {
  using C = std::complex<R>;
  auto run = [&]<typename From>() {
    elementwise_kernel<C, From>(dst, {&t}, [](From v) {
      if constexpr (is_complex_v<From>) return C(R(v.real()), R(v.imag()));
      else return C(R(v), R(0));
    });
  };
  switch (t.dtype()) {
    case DType::F32: return run.template operator()<float>();
    case DType::F64: return run.template operator()<double>();
    case DType::C64: return run.template operator()<std::complex<float>>();
    case DType::C128: return run.template operator()<std::complex<double>>();
    default: KILN_THROW(NotImplementedError, "fft: unsupported dtype ", t.dtype());
  }
}

// A contiguous complex<R> working copy of t.
template <typename R>
Tensor complex_buffer(const Tensor& t) {
  Tensor buf = empty_tensor(t.shape(), dtype_of<std::complex<R>>, Device(DeviceType::CPU, 0));
  convert_into<R>(t, buf);
  return buf;
}

template <typename R>
void scale_all(std::complex<R>* p, int64_t n, double s) {
  if (s == 1.0) return;
  for (int64_t i = 0; i < n; ++i) p[i] *= R(s);
}

void c2c_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(out.dtype(), "_fft_c2c", [&]<typename C>() {
    using R = typename C::value_type;
    C* o = static_cast<C*>(out.raw_data());  // fresh and contiguous: transformed in place
    convert_into<R>(in, out);
    const double count = transform_dims<R>(o, in.shape(), dims, dims.size(), call.bool_attr(2));
    scale_all(o, out.numel(), norm_scale(call.int_attr(1), count));
  });
}

// Real input: the transform over every dim (the real last dim first), of which the one-sided
// output keeps the first n/2 + 1 bins of the last dim.
void r2c_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(out.dtype(), "_fft_r2c", [&]<typename C>() {
    using R = typename C::value_type;
    Tensor work = complex_buffer<R>(in);
    C* buf = static_cast<C*>(work.raw_data());
    // The last dim first: the transform of real lines (two per complex transform), whose DC
    // and (even n) Nyquist bins are exactly real. Then the other dims.
    const int64_t last = wrap_dim(dims.back(), in.dim());
    const Lines lines(in.shape(), last);
    const int64_t n_in = lines.n, n_out = out.size(last), inner = lines.inner;
    transform_real_dim<R>(buf, in.shape(), last);
    const double count = double(n_in) * transform_dims<R>(buf, in.shape(), dims, dims.size() - 1, true);
    const R s = R(norm_scale(call.int_attr(1), count));
    // Copy the kept part: out has in's shape except (maybe) the last transformed dim.
    C* o = static_cast<C*>(out.raw_data());
    for (int64_t a = 0; a < lines.count / inner; ++a)
      for (int64_t k = 0; k < n_out; ++k)
        for (int64_t i = 0; i < inner; ++i)
          o[(a * n_out + k) * inner + i] = buf[(a * n_in + k) * inner + i] * s;
  });
}

// Half spectrum -> real: inverse complex transforms over the other dims first, then each
// line of the last dim extended by Hermitian symmetry (X[n-k] = conj X[k]) to n points and
// transformed; the real parts are the output (imaginary parts of the DC and Nyquist bins,
// which a real signal cannot have, only feed the discarded imaginary output).
void c2r_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(in.dtype(), "_fft_c2r", [&]<typename C>() {
    using R = typename C::value_type;
    Tensor work = complex_buffer<R>(in);
    C* buf = static_cast<C*>(work.raw_data());
    double count = transform_dims<R>(buf, in.shape(), dims, dims.size() - 1, false);
    const int64_t last = wrap_dim(dims.back(), in.dim());
    const Lines lines(in.shape(), last);
    const int64_t n = out.size(last), m = lines.n, inner = lines.inner;
    count *= double(n);
    const R s = R(norm_scale(call.int_attr(1), count));
    const auto plan = fft::get_plan<R>(n);
    R* o = static_cast<R*>(out.raw_data());
    const int64_t half = std::min(m, n / 2 + 1);
    for_lines(lines.count, n, [&](int64_t l) {
      const int64_t a = l / inner, i = l % inner;
      std::vector<C> y(size_t(n), C(0));
      for (int64_t k = 0; k < half; ++k) y[size_t(k)] = buf[(a * m + k) * inner + i];
      for (int64_t k = 1; k < half; ++k)
        if (n - k >= half) y[size_t(n - k)] = std::conj(y[size_t(k)]);
      plan->execute(y.data(), 1, y.data(), 1, false);
      for (int64_t k = 0; k < n; ++k) o[(a * n + k) * inner + i] = y[size_t(k)].real() * s;
    });
  });
}

}  // namespace

void register_fft_kernels() {
  register_kernel("_fft_c2c", DeviceType::CPU, c2c_kernel, kComplexDTypes);
  register_kernel("_fft_r2c", DeviceType::CPU, r2c_kernel, kComplexDTypes);
  register_kernel("_fft_c2r", DeviceType::CPU, c2r_kernel, kComplexDTypes);
}

}  // namespace kiln::cpu
