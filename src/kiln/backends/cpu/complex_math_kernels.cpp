// More CPU kernels for complex64 / complex128 (complex_kernels.cpp has the first set): pow, tan,
// sigmoid, expm1, log1p, log2, rsqrt, the reductions prod, cumsum, cumprod, and eye. Registered in
// the registry's complex slot like the others.
#include <cmath>
#include <complex>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "complex_reduce.h"

namespace kiln::cpu {

namespace {

// x^y. Exponents that are small integers or 1/2 take exact routes (repeated products, sqrt,
// reciprocal), as torch does for such scalar exponents: (1 + 2i)^2 is exactly -3 + 4i, where
// exp(2 log z) is off in the last bits. Otherwise std::pow's exp(y log x), 0 for x == 0.
template <typename C>
C complex_pow(C x, C y) {
  using R = typename C::value_type;
  if (y.imag() == R(0)) {
    const R e = y.real();
    if (e == R(0)) return C(1);
    if (e == R(1)) return x;
    if (e == R(2)) return x * x;
    if (e == R(3)) return x * x * x;
    if (e == R(0.5)) return std::sqrt(x);
    if (e == R(-1)) return C(1) / x;
    if (e == R(-2)) return C(1) / (x * x);
  }
  return std::pow(x, y);
}

void pow_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_COMPLEX(out.dtype(), "pow", [&]<typename C>() {
    elementwise_kernel<C, C, C>(out, {&call.inputs[0], &call.inputs[1]},
                                [](C x, C y) { return complex_pow(x, y); });
  });
}

// expm1(x + iy) = expm1(x) cos y - 2 sin^2(y / 2) + i e^x sin y: no cancellation near 0,
// where exp(z) - 1 loses the digits of a small z.
template <typename C>
C complex_expm1(C z) {
  using R = typename C::value_type;
  const R x = z.real(), y = z.imag(), s = std::sin(y / 2);
  return {std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y)};
}

// log1p(z) = log|1 + z| + i arg(1 + z), the modulus as log1p(2x + x^2 + y^2) / 2 when 1 + z
// is near the unit circle (small z), where log(abs(1 + z)) loses the digits of z.
template <typename C>
C complex_log1p(C z) {
  using R = typename C::value_type;
  const R x = z.real(), y = z.imag();
  const R arg = std::atan2(y, x + 1);
  if (std::abs(x) < R(0.5) && std::abs(y) < R(0.5))
    return {std::log1p(x * (2 + x) + y * y) / 2, arg};
  return {std::log(std::hypot(x + 1, y)), arg};
}

constexpr long double kLn2 = 0.693147180559945309417232121458176568L;

enum class Fn { Tan, Sigmoid, Expm1, Log1p, Log2, Rsqrt };
template <Fn F>
void unary_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_COMPLEX(out.dtype(), "complex function", [&]<typename C>() {
    using R = typename C::value_type;
    elementwise_kernel<C, C>(out, {&call.inputs[0]}, [](C x) -> C {
      if constexpr (F == Fn::Tan) return std::tan(x);
      else if constexpr (F == Fn::Sigmoid) return C(1) / (C(1) + std::exp(-x));
      else if constexpr (F == Fn::Expm1) return complex_expm1(x);
      else if constexpr (F == Fn::Log1p) return complex_log1p(x);
      else if constexpr (F == Fn::Log2) return std::log(x) / R(kLn2);
      else return C(1) / std::sqrt(x);
    });
  });
}

// prod over the dims in attrs[0] (all when empty), each output's product in complex<double>,
// inputs in memory order (complex_reduce.h's walk, shared with complex_kernels.cpp's sum).
void prod_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  std::vector<std::complex<double>> acc(size_t(out.numel()), 1.0);
  KILN_DISPATCH_COMPLEX(in.dtype(), "prod", [&]<typename C>() {
    using R = typename C::value_type;
    const C* p = static_cast<const C*>(in.raw_data());
    for_each_reduced("prod", in, out, call.ints_attr(0), call.bool_attr(1),
                     [&](int64_t o, int64_t i) {
                       acc[size_t(o)] *= std::complex<double>(p[i].real(), p[i].imag());
                     });
    C* o = static_cast<C*>(out.raw_data());  // fresh and contiguous
    for (size_t j = 0; j < acc.size(); ++j) o[j] = C(R(acc[j].real()), R(acc[j].imag()));
  });
}

// cumsum / cumprod along attrs[0]: each line's running value in complex<double>.
template <bool Prod>
void scan_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (in.numel() == 0) return;
  const int64_t nd = std::max<int64_t>(in.dim(), 1);
  const int64_t d = in.dim() == 0 ? 0 : wrap_dim(call.int_attr(0), in.dim());
  const int64_t L = in.dim() == 0 ? 1 : in.size(d);
  const int64_t lines = in.numel() / L;
  KILN_DISPATCH_COMPLEX(in.dtype(), Prod ? "cumprod" : "cumsum", [&]<typename C>() {
    using R = typename C::value_type;
    const C* x = static_cast<const C*>(in.raw_data());
    C* y = static_cast<C*>(out.raw_data());
    const int64_t xs = in.dim() == 0 ? 0 : in.stride(d), ys = in.dim() == 0 ? 0 : out.stride(d);
    for (int64_t l = 0; l < lines; ++l) {
      // The line's start: l as an index over every dim but d.
      int64_t rest = l, xo = 0, yo = 0;
      for (int64_t k = nd - 1; k >= 0 && in.dim() > 0; --k) {
        if (k == d) continue;
        const int64_t i = rest % in.size(k);
        rest /= in.size(k);
        xo += i * in.stride(k);
        yo += i * out.stride(k);
      }
      std::complex<double> a = Prod ? 1.0 : 0.0;
      for (int64_t j = 0; j < L; ++j) {
        const C v = x[xo + j * xs];
        const std::complex<double> vd(v.real(), v.imag());
        a = Prod ? a * vd : a + vd;
        y[yo + j * ys] = C(R(a.real()), R(a.imag()));
      }
    }
  });
}

// eye: ones on the diagonal of a fresh contiguous [rows, cols] output.
void eye_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  const int64_t rows = dst.size(0), cols = dst.size(1);
  KILN_DISPATCH_COMPLEX(dst.dtype(), "eye", [&]<typename C>() {
    C* p = static_cast<C*>(dst.raw_data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) p[i * cols + j] = C(i == j ? 1 : 0);
  });
}

}  // namespace

void register_complex_math_kernels() {
  const auto reg = [](const char* op, KernelFn fn) {
    register_kernel(op, DeviceType::CPU, fn, kComplexDTypes);
  };
  reg("eye", eye_kernel);
  reg("pow", pow_kernel);
  reg("tan", unary_kernel<Fn::Tan>);
  reg("sigmoid", unary_kernel<Fn::Sigmoid>);
  reg("expm1", unary_kernel<Fn::Expm1>);
  reg("log1p", unary_kernel<Fn::Log1p>);
  reg("log2", unary_kernel<Fn::Log2>);
  reg("rsqrt", unary_kernel<Fn::Rsqrt>);
  reg("prod", prod_kernel);
  reg("cumsum", scan_kernel<false>);
  reg("cumprod", scan_kernel<true>);
}

}  // namespace kiln::cpu
