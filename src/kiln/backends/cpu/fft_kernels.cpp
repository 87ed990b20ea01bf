// CPU kernels of the FFT ops (_fft_c2c, _fft_r2c, _fft_c2r): transforms along each dim of
// a contiguous complex working buffer with kiln's FFT engine (ops/fft_engine.h), the lines of
// one dim spread over the threads, then the normalization.
#include <cmath>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "../../ops/fft_engine.h"

namespace kiln::cpu {

namespace {

// Transforms every line along dim d of the contiguous buffer `data` of shape `shape`.
template <typename R>
void transform_dim(std::complex<R>* data, const Shape& shape, int64_t d, bool forward) {
  int64_t inner = 1;
  for (size_t k = size_t(d) + 1; k < shape.size(); ++k) inner *= shape[k];
  int64_t outer = 1;
  for (int64_t k = 0; k < d; ++k) outer *= shape[size_t(k)];
  const int64_t n = shape[size_t(d)];
  if (n == 1) return;
  const auto plan = fft::get_plan<R>(n);
  const int64_t lines = outer * inner;
  auto line = [&](int64_t l) {
    std::complex<R>* base = data + (l / inner) * n * inner + l % inner;
    plan->execute(base, inner, base, inner, forward);
  };
  if (lines * n >= 4096) detail::parallel_chunks(lines, line);
  else for (int64_t l = 0; l < lines; ++l) line(l);
}

// Forward transforms of the real lines along dim d of `data` (imaginary parts zero on entry),
// two lines per complex transform: z = a + i b gives A[k] = (Z[k] + conj Z[n-k]) / 2 and
// B[k] = (Z[k] - conj Z[n-k]) / 2i, half the work of transforming each line. DC and (even n)
// Nyquist bins come out exactly real, as a real transform gives them.
template <typename R>
void transform_real_dim(std::complex<R>* data, const Shape& shape, int64_t d) {
  using C = std::complex<R>;
  int64_t inner = 1;
  for (size_t k = size_t(d) + 1; k < shape.size(); ++k) inner *= shape[k];
  int64_t outer = 1;
  for (int64_t k = 0; k < d; ++k) outer *= shape[size_t(k)];
  const int64_t n = shape[size_t(d)];
  const int64_t lines = outer * inner;
  const auto plan = fft::get_plan<R>(n);
  auto line_at = [&](int64_t l) { return data + (l / inner) * n * inner + l % inner; };
  auto pair = [&](int64_t p) {
    const int64_t la = 2 * p;
    C* a = line_at(la);
    if (la + 1 == lines) {  // an odd line out: on its own
      plan->execute(a, inner, a, inner, true);
      a[0].imag(R(0));
      if (n % 2 == 0) a[(n / 2) * inner].imag(R(0));
      return;
    }
    C* b = line_at(la + 1);
    std::vector<C> z(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) z[size_t(j)] = C(a[j * inner].real(), b[j * inner].real());
    plan->execute(z.data(), 1, z.data(), 1, true);
    for (int64_t k = 0; k < n; ++k) {
      const C zk = z[size_t(k)], zc = std::conj(z[size_t((n - k) % n)]);
      a[k * inner] = C((zk.real() + zc.real()) * R(0.5), (zk.imag() + zc.imag()) * R(0.5));
      // (zk - zc) / 2i = ((zk - zc).imag, -(zk - zc).real) / 2
      b[k * inner] = C((zk.imag() - zc.imag()) * R(0.5), (zc.real() - zk.real()) * R(0.5));
    }
  };
  const int64_t pairs = (lines + 1) / 2;
  if (lines * n >= 4096) detail::parallel_chunks(pairs, pair);
  else for (int64_t p = 0; p < pairs; ++p) pair(p);
}

// The scale of a normalization mode for transforms of `count` points in all.
double norm_scale(int64_t mode, double count) {
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(count) : 1.0 / count;
}

// t (float or complex, any strides) as contiguous complex<R> at buf (t.numel() elements).
template <typename R>
void gather_complex_into(const Tensor& t, std::complex<R>* buf) {
  const size_t count = size_t(t.numel());
  const int64_t nd = t.dim();
  std::vector<int64_t> idx(size_t(nd), 0);
  auto walk = [&]<typename From>() {
    const From* p = static_cast<const From*>(t.raw_data());
    if (t.is_contiguous()) {  // the common case: one pass without index bookkeeping
      for (size_t i = 0; i < count; ++i) {
        if constexpr (is_complex_v<From>) buf[i] = {R(p[i].real()), R(p[i].imag())};
        else buf[i] = {R(p[i]), R(0)};
      }
      return;
    }
    int64_t off = 0;
    for (size_t i = 0; i < count; ++i) {
      if constexpr (is_complex_v<From>) buf[i] = {R(p[off].real()), R(p[off].imag())};
      else buf[i] = {R(p[off]), R(0)};
      for (int64_t d = nd - 1; d >= 0; --d) {
        if (++idx[size_t(d)] < t.size(d)) {
          off += t.stride(d);
          break;
        }
        off -= t.stride(d) * (t.size(d) - 1);
        idx[size_t(d)] = 0;
      }
    }
  };
  switch (t.dtype()) {
    case DType::F32: walk.template operator()<float>(); break;
    case DType::F64: walk.template operator()<double>(); break;
    case DType::C64: walk.template operator()<std::complex<float>>(); break;
    case DType::C128: walk.template operator()<std::complex<double>>(); break;
    default: KILN_THROW(NotImplementedError, "fft: unsupported dtype ", t.dtype());
  }
}

template <typename R>
std::vector<std::complex<R>> gather_complex(const Tensor& t) {
  std::vector<std::complex<R>> buf(size_t(t.numel()));
  gather_complex_into<R>(t, buf.data());
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
    gather_complex_into<R>(in, o);
    double count = 1;
    for (int64_t d : dims) {
      const int64_t w = wrap_dim(d, in.dim());
      transform_dim<R>(o, in.shape(), w, call.bool_attr(2));
      count *= double(in.size(w));
    }
    scale_all(o, out.numel(), norm_scale(call.int_attr(1), count));
  });
}

// Real input: the full complex transform, of which the one-sided output keeps the first
// n/2 + 1 bins of the last dim.
void r2c_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(out.dtype(), "_fft_r2c", [&]<typename C>() {
    using R = typename C::value_type;
    auto buf = gather_complex<R>(in);
    // The last dim first: the transform of real lines (two per complex transform), whose DC
    // and (even n) Nyquist bins are exactly real. Then the other dims.
    const int64_t last = wrap_dim(dims.back(), in.dim());
    int64_t inner = 1;
    for (int64_t k = last + 1; k < in.dim(); ++k) inner *= in.size(k);
    const int64_t n_in = in.size(last), n_out = out.size(last);
    const int64_t outer = in.numel() / (n_in * inner);
    transform_real_dim<R>(buf.data(), in.shape(), last);
    double count = double(n_in);
    for (size_t j = 0; j + 1 < dims.size(); ++j) {
      const int64_t w = wrap_dim(dims[j], in.dim());
      transform_dim<R>(buf.data(), in.shape(), w, true);
      count *= double(in.size(w));
    }
    const double s = norm_scale(call.int_attr(1), count);
    // Copy the kept part: out has in's shape except (maybe) the last transformed dim.
    C* o = static_cast<C*>(out.raw_data());
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t k = 0; k < n_out; ++k)
        for (int64_t i = 0; i < inner; ++i)
          o[(a * n_out + k) * inner + i] = buf[size_t((a * n_in + k) * inner + i)] * R(s);
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
    auto buf = gather_complex<R>(in);
    double count = 1;
    for (size_t j = 0; j + 1 < dims.size(); ++j) {
      const int64_t w = wrap_dim(dims[j], in.dim());
      transform_dim<R>(buf.data(), in.shape(), w, false);
      count *= double(in.size(w));
    }
    const int64_t last = wrap_dim(dims.back(), in.dim());
    const int64_t n = out.size(last), m = in.size(last);
    count *= double(n);
    const R s = R(norm_scale(call.int_attr(1), count));
    int64_t inner = 1;
    for (int64_t k = last + 1; k < in.dim(); ++k) inner *= in.size(k);
    const int64_t outer = in.numel() / (m * inner);
    const auto plan = fft::get_plan<R>(n);
    R* o = static_cast<R*>(out.raw_data());
    const int64_t half = std::min(m, n / 2 + 1);
    auto line = [&](int64_t l) {
      const int64_t a = l / inner, i = l % inner;
      std::vector<C> y(size_t(n), C(0));
      for (int64_t k = 0; k < half; ++k) y[size_t(k)] = buf[size_t((a * m + k) * inner + i)];
      for (int64_t k = 1; k < half; ++k)
        if (n - k >= half) y[size_t(n - k)] = std::conj(y[size_t(k)]);
      plan->execute(y.data(), 1, y.data(), 1, false);
      for (int64_t k = 0; k < n; ++k) o[(a * n + k) * inner + i] = y[size_t(k)].real() * s;
    };
    const int64_t lines = outer * inner;
    if (lines * n >= 4096) detail::parallel_chunks(lines, line);
    else for (int64_t l = 0; l < lines; ++l) line(l);
  });
}

}  // namespace

void register_fft_kernels() {
  register_kernel("_fft_c2c", DeviceType::CPU, c2c_kernel, kComplexDTypes);
  register_kernel("_fft_r2c", DeviceType::CPU, r2c_kernel, kComplexDTypes);
  register_kernel("_fft_c2r", DeviceType::CPU, c2r_kernel, kComplexDTypes);
}

}  // namespace kiln::cpu
