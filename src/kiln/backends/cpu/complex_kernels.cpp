// CPU kernels for complex64 / complex128 tensors: conversions to and from every dtype, fill,
// arithmetic, the complex functions (exp, log, sqrt, ...), abs / angle to real results, and
// sum / mean. Registered in the registry's complex slot (see dispatch/registry.h), so the
// real kernels never meet std::complex. Plain element loops: complex math here is for FFT
// pipelines and spectral code, whose cost is the transform (fft_kernels.cpp), not these.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "complex_reduce.h"

namespace kiln::cpu {

namespace {

// v as complex<R> from any dtype's C++ type (real values get a zero imaginary part).
template <typename R, typename From>
std::complex<R> to_complex(From v) {
  if constexpr (is_complex_v<From>) return {R(v.real()), R(v.imag())};
  else return {convert_value<R>(v), R(0)};
}

// outs[0] = op(inputs...) with every operand of the call's complex dtype C.
template <typename F>
void complex_map(OpCall& call, const char* name, F&& f) {
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_COMPLEX(out.dtype(), name, [&]<typename C>() { f.template operator()<C>(out); });
}

void fill_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  const Scalar& v = call.scalar_attr(0);
  KILN_DISPATCH_COMPLEX(dst.dtype(), "fill_", [&]<typename C>() {
    using R = typename C::value_type;
    const C value = scalar_to_complex<R>(v);
    elementwise_kernel<C>(dst, {}, [value]() { return value; });
  });
}

// One binary arithmetic kernel per op: both inputs already have the output's complex dtype
// (binary.cpp converts them).
enum class Arith { Add, Sub, Mul, Div };
template <Arith A>
void arith_kernel(OpCall& call) {
  complex_map(call, "complex arithmetic", [&]<typename C>(const Tensor& out) {
    using R = typename C::value_type;
    const Tensor &a = call.inputs[0], &b = call.inputs[1];
    if constexpr (A == Arith::Add || A == Arith::Sub) {
      const C alpha = call.has_attr(0) ? scalar_to_complex<R>(call.scalar_attr(0)) : C(1);
      const C s = A == Arith::Sub ? -alpha : alpha;
      elementwise_kernel<C, C, C>(out, {&a, &b}, [s](C x, C y) { return x + s * y; });
    } else if constexpr (A == Arith::Mul) {
      elementwise_kernel<C, C, C>(out, {&a, &b}, [](C x, C y) { return x * y; });
    } else {
      KILN_CHECK(!call.has_attr(0) || call.string_attr(0).empty(), NotImplementedError,
                 "div with a rounding_mode is not implemented for complex tensors");
      elementwise_kernel<C, C, C>(out, {&a, &b}, [](C x, C y) { return x / y; });
    }
  });
}

template <bool Equal>
void compare_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_COMPLEX(call.inputs[0].dtype(), "eq / ne", [&]<typename C>() {
    elementwise_kernel<bool, C, C>(out, {&call.inputs[0], &call.inputs[1]},
                                   [](C x, C y) { return (x == y) == Equal; });
  });
}

// Unary complex -> complex functions, with std::complex's branch cuts (those of C99's
// cexp / clog / csqrt, which torch's CPU kernels also follow).
enum class Fn { Neg, Conj, Exp, Log, Sqrt, Reciprocal, Sin, Cos, Tanh, Sgn };
template <Fn F>
void unary_kernel(OpCall& call) {
  complex_map(call, "complex function", [&]<typename C>(const Tensor& out) {
    using R = typename C::value_type;
    elementwise_kernel<C, C>(out, {&call.inputs[0]}, [](C x) -> C {
      if constexpr (F == Fn::Neg) return -x;
      else if constexpr (F == Fn::Conj) return std::conj(x);
      else if constexpr (F == Fn::Exp) return std::exp(x);
      else if constexpr (F == Fn::Log) return std::log(x);
      else if constexpr (F == Fn::Sqrt) return std::sqrt(x);
      else if constexpr (F == Fn::Reciprocal) return C(1) / x;
      else if constexpr (F == Fn::Sin) return std::sin(x);
      else if constexpr (F == Fn::Cos) return std::cos(x);
      else if constexpr (F == Fn::Tanh) return std::tanh(x);
      else {  // sgn: x / |x|, 0 at 0
        const R m = std::abs(x);
        return m == R(0) ? C(0) : x / m;
      }
    });
  });
}

// abs / angle: complex input, real output of the parts' type.
template <bool Abs>
void to_real_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  KILN_CHECK(!is_complex(out.dtype()), Error, "In-place ", Abs ? "abs" : "angle",
             " is not supported for complex tensors.");
  KILN_DISPATCH_COMPLEX(call.inputs[0].dtype(), Abs ? "abs" : "angle", [&]<typename C>() {
    using R = typename C::value_type;
    elementwise_kernel<R, C>(out, {&call.inputs[0]}, [](C x) -> R {
      if constexpr (Abs) return std::abs(x);  // hypot: no overflow for large parts
      else return std::arg(x);
    });
  });
}

void isfinite_like(OpCall& call, int which) {  // 0 isnan, 1 isinf, 2 isfinite
  KILN_DISPATCH_COMPLEX(call.inputs[0].dtype(), "isnan / isinf / isfinite", [&]<typename C>() {
    elementwise_kernel<bool, C>(call.outs[0], {&call.inputs[0]}, [which](C x) {
      const bool nan = std::isnan(x.real()) || std::isnan(x.imag());
      const bool inf = std::isinf(x.real()) || std::isinf(x.imag());
      return which == 0 ? nan : which == 1 ? inf : !nan && !inf;
    });
  });
}
void isnan_kernel(OpCall& call) { isfinite_like(call, 0); }
void isinf_kernel(OpCall& call) { isfinite_like(call, 1); }
void isfinite_kernel(OpCall& call) { isfinite_like(call, 2); }

// sum / mean over the dims in attrs[0] (all when empty): each output accumulates its inputs
// in complex<double>, input elements visited in memory order.
template <bool Mean>
void reduce_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const char* name = Mean ? "mean" : "sum";
  std::vector<std::complex<double>> acc(size_t(out.numel()), 0.0);
  const int64_t count = reduced_count(name, in, call.ints_attr(0));
  KILN_DISPATCH_COMPLEX(in.dtype(), name, [&]<typename C>() {
    const C* p = static_cast<const C*>(in.raw_data());
    for_each_reduced(name, in, out, call.ints_attr(0), call.bool_attr(1),
                     [&](int64_t o, int64_t i) {
                       acc[size_t(o)] += std::complex<double>(p[i].real(), p[i].imag());
                     });
    C* o = static_cast<C*>(out.raw_data());  // fresh contiguous output (meta shape)
    using R = typename C::value_type;
    for (size_t j = 0; j < acc.size(); ++j) {
      std::complex<double> v = Mean ? acc[j] / double(count) : acc[j];
      if (Mean && count == 0) v = {std::nan(""), std::nan("")};
      o[j] = C(R(v.real()), R(v.imag()));
    }
  });
}

// mm / bmm / matmul: out[..., m, n] = sum_k a[..., m, k] b[..., k, n] with torch's matmul
// rules (a 1-D a is a row, a 1-D b a column, batch dims broadcast), each output accumulated
// in complex<double>; rows of all batches spread over the threads.
void matmul_kernel(OpCall& call) {
  const Tensor &a = call.inputs[0], &b = call.inputs[1];
  const Tensor& out = call.outs[0];
  Shape as = a.shape(), bs = b.shape();
  Strides ast = a.strides(), bst = b.strides();
  if (a.dim() == 1) as.insert(as.begin(), 1), ast.insert(ast.begin(), 0);
  if (b.dim() == 1) bs.push_back(1), bst.push_back(0);
  const size_t nb = std::max(as.size(), bs.size()) - 2;  // broadcast batch dims
  // Batch dims right-aligned, broadcast dims stepping by 0.
  std::vector<int64_t> batch(nb, 1), a_step(nb, 0), b_step(nb, 0);
  for (size_t i = 0; i < nb; ++i) {
    const size_t ai = i + as.size() - 2 - nb, bi = i + bs.size() - 2 - nb;  // may wrap
    const bool ah = i + as.size() >= nb + 2, bh = i + bs.size() >= nb + 2;
    const int64_t asz = ah ? as[ai] : 1, bsz = bh ? bs[bi] : 1;
    batch[i] = std::max(asz, bsz);
    if (ah && asz != 1) a_step[i] = ast[ai];
    if (bh && bsz != 1) b_step[i] = bst[bi];
  }
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const int64_t am = ast[ast.size() - 2], ak = ast.back(), bk = bst[bst.size() - 2], bn = bst.back();
  int64_t batches = 1;
  for (int64_t s : batch) batches *= s;
  KILN_DISPATCH_COMPLEX(out.dtype(), "matmul", [&]<typename C>() {
    using R = typename C::value_type;
    const C* pa = static_cast<const C*>(a.raw_data());
    const C* pb = static_cast<const C*>(b.raw_data());
    C* po = static_cast<C*>(out.raw_data());  // fresh and contiguous: [batch..., M, N]
    detail::parallel_chunks(batches * M, [&](int64_t row) {
      int64_t z = row / M, m = row % M, a_off = 0, b_off = 0;
      for (size_t i = nb; i-- > 0;) {  // the batch index's offsets, last dim fastest
        const int64_t idx = z % batch[i];
        z /= batch[i];
        a_off += idx * a_step[i];
        b_off += idx * b_step[i];
      }
      const C* ar = pa + a_off + m * am;
      C* o = po + row * N;
      for (int64_t n = 0; n < N; ++n) {
        std::complex<double> s = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const C x = ar[k * ak], y = pb[b_off + k * bk + n * bn];
          s += std::complex<double>(x.real(), x.imag()) * std::complex<double>(y.real(), y.imag());
        }
        o[n] = C(R(s.real()), R(s.imag()));
      }
    });
  });
}

// torch.complex(real, imag): two real tensors of the output's part type.
void complex_from_parts_kernel(OpCall& call) {
  complex_map(call, "complex", [&]<typename C>(const Tensor& out) {
    using R = typename C::value_type;
    elementwise_kernel<C, R, R>(out, {&call.inputs[0], &call.inputs[1]},
                                [](R re, R im) { return C(re, im); });
  });
}

// where(cond, a, b) with complex a and b (promoted to the output's dtype by the caller).
void where_kernel(OpCall& call) {
  complex_map(call, "where", [&]<typename C>(const Tensor& out) {
    elementwise_kernel<C, bool, C, C>(out, {&call.inputs[0], &call.inputs[1], &call.inputs[2]},
                                      [](bool c, C a, C b) { return c ? a : b; });
  });
}

// outs[0] <- inputs[0] where either is complex (the dispatcher keys such copies by the
// complex dtype).
void copy_kernel(OpCall& call) {
  const Tensor& src = call.inputs[0];
  const Tensor& dst = call.outs[0];
  if (is_complex(dst.dtype())) {
    KILN_DISPATCH_COMPLEX(dst.dtype(), "copy_", [&]<typename C>() {
      using R = typename C::value_type;
      if (is_complex(src.dtype())) {
        KILN_DISPATCH_COMPLEX(src.dtype(), "copy_", [&]<typename From>() {
          elementwise_kernel<C, From>(dst, {&src}, [](From v) { return to_complex<R>(v); });
        });
      } else {
        KILN_DISPATCH_ALL(src.dtype(), "copy_", [&]<typename From>() {
          elementwise_kernel<C, From>(dst, {&src}, [](From v) { return to_complex<R>(v); });
        });
      }
    });
    return;
  }
  // complex -> real keeps the real part, as torch (which warns once that the imaginary part
  // is discarded).
  KILN_DISPATCH_ALL(dst.dtype(), "copy_", [&]<typename To>() {
    KILN_DISPATCH_COMPLEX(src.dtype(), "copy_", [&]<typename From>() {
      elementwise_kernel<To, From>(dst, {&src}, [](From v) {
        if constexpr (std::is_same_v<To, bool>) return v != From(0);
        else return convert_value<To>(v.real());
      });
    });
  });
}

}  // namespace

void register_complex_kernels() {
  const auto reg = [](const char* op, KernelFn fn) {
    register_kernel(op, DeviceType::CPU, fn, kComplexDTypes);
  };
  reg("_copy_strided", copy_kernel);
  reg("fill_", fill_kernel);
  reg("complex", complex_from_parts_kernel);
  reg("where", where_kernel);
  reg("add", arith_kernel<Arith::Add>);
  reg("sub", arith_kernel<Arith::Sub>);
  reg("mul", arith_kernel<Arith::Mul>);
  reg("div", arith_kernel<Arith::Div>);
  reg("eq", compare_kernel<true>);
  reg("ne", compare_kernel<false>);
  reg("neg", unary_kernel<Fn::Neg>);
  reg("conj_physical", unary_kernel<Fn::Conj>);
  reg("exp", unary_kernel<Fn::Exp>);
  reg("log", unary_kernel<Fn::Log>);
  reg("sqrt", unary_kernel<Fn::Sqrt>);
  reg("reciprocal", unary_kernel<Fn::Reciprocal>);
  reg("sin", unary_kernel<Fn::Sin>);
  reg("cos", unary_kernel<Fn::Cos>);
  reg("tanh", unary_kernel<Fn::Tanh>);
  reg("sgn", unary_kernel<Fn::Sgn>);
  reg("abs", to_real_kernel<true>);
  reg("angle", to_real_kernel<false>);
  reg("isnan", isnan_kernel);
  reg("isinf", isinf_kernel);
  reg("isfinite", isfinite_kernel);
  reg("sum", reduce_kernel<false>);
  reg("mean", reduce_kernel<true>);
  reg("mm", matmul_kernel);
  reg("bmm", matmul_kernel);
  reg("matmul", matmul_kernel);
}

}  // namespace kiln::cpu
