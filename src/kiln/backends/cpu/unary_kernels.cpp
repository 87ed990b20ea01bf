// CPU kernels for unary elementwise ops: out = f(in), computed in float for 16-bit floats.
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "bf16_elementwise.h"
#include "dense_row_pairs.h"
#include "float16_blocks.h"
#include "isa/bit_loops.h"
#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "parallel_pieces.h"
#include "permuted_copy.h"
#include "scalar_math.h"
#include "special_functions.h"

namespace kiln::cpu {
namespace {

// Runs F::apply<C>(c) on every element, where C is the compute type of T.
template <typename F>
void unary_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_ALL(in.dtype(), call.op->name.c_str(), [&]<typename T>() {
    using C = opmath_t<T>;
    if constexpr (F::template supports<T>) {
      if constexpr (std::is_same_v<T, BFloat16>) {
        // float32 blocks with vector conversions (bf16_elementwise.h), bit-identical.
        auto f = [](float x) { return F::template apply<float>(x); };
        if (bf16_elementwise<1>(out, {&in}, f)) return;
      }
      elementwise_kernel<T, T>(out, {&in}, [](T v) { return T(F::template apply<C>(C(v))); });
    } else {
      KILN_THROW(NotImplementedError, "\"", call.op->name, "\" not implemented for '",
                 dtype_name(in.dtype()), "'");
    }
  });
}

template <typename F>
void bool_unary_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_ALL(in.dtype(), call.op->name.c_str(), [&]<typename T>() {
    using C = opmath_t<T>;
    elementwise_kernel<bool, T>(out, {&in}, [](T v) { return F::template apply<C>(C(v)); });
  });
}

template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<opmath_t<T>>;

#define KILN_FLOAT_UNARY(Name, expr)                                  \
  struct Name {                                                       \
    template <typename T>                                             \
    static constexpr bool supports = is_float_v<T>;                   \
    template <typename C>                                             \
    static C apply(C x) {                                             \
      if constexpr (std::is_floating_point_v<C>) return (expr);       \
      else return x;                                                  \
    }                                                                 \
  };

KILN_FLOAT_UNARY(Exp, std::exp(x))
KILN_FLOAT_UNARY(Exp2, std::exp2(x))
KILN_FLOAT_UNARY(Log, std::log(x))
KILN_FLOAT_UNARY(Log2, std::log2(x))
KILN_FLOAT_UNARY(Log1p, std::log1p(x))
KILN_FLOAT_UNARY(Expm1, std::expm1(x))
KILN_FLOAT_UNARY(Sqrt, std::sqrt(x))
KILN_FLOAT_UNARY(Rsqrt, C(1) / std::sqrt(x))
KILN_FLOAT_UNARY(Sin, std::sin(x))
KILN_FLOAT_UNARY(Cos, std::cos(x))
KILN_FLOAT_UNARY(Tan, std::tan(x))
KILN_FLOAT_UNARY(Tanh, std::tanh(x))
KILN_FLOAT_UNARY(Sigmoid, C(1) / (C(1) + std::exp(-x)))
KILN_FLOAT_UNARY(Silu, x / (C(1) + std::exp(-x)))
KILN_FLOAT_UNARY(Erf, std::erf(x))
KILN_FLOAT_UNARY(Erfc, std::erfc(x))
KILN_FLOAT_UNARY(Erfinv, C(cpu::erfinv(double(x))))
KILN_FLOAT_UNARY(Lgamma, C(cpu::log_gamma(double(x))))
KILN_FLOAT_UNARY(Digamma, C(cpu::digamma(double(x))))
KILN_FLOAT_UNARY(Trigamma, C(cpu::trigamma(double(x))))
KILN_FLOAT_UNARY(Reciprocal, C(1) / x)
KILN_FLOAT_UNARY(GeluErf, C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440))))
KILN_FLOAT_UNARY(GeluTanh, C(0.5) * x *
                               (C(1) + std::tanh(C(0.79788456080286535588) *
                                                 (x + C(0.044715) * x * x * x))))
#undef KILN_FLOAT_UNARY

template <typename T>
inline constexpr bool not_bool_v = !std::is_same_v<T, bool>;

struct Neg {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static C apply(C x) { return wrap_neg(x); }
};
struct Abs {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static C apply(C x) {
    if constexpr (std::is_floating_point_v<C>) return std::fabs(x);
    else if constexpr (std::is_signed_v<C>) return x < 0 ? wrap_neg(x) : x;
    else return x;
  }
};
struct Relu {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static C apply(C x) {
    if constexpr (std::is_floating_point_v<C>)
      if (std::isnan(x)) return x;
    return x > C(0) ? x : C(0);
  }
};
#define KILN_ROUNDING(Name, fn)                                            \
  struct Name {                                                            \
    template <typename T> static constexpr bool supports = not_bool_v<T>;  \
    template <typename C> static C apply(C x) {                            \
      if constexpr (std::is_floating_point_v<C>) return fn(x);             \
      else return x;                                                       \
    }                                                                      \
  };
KILN_ROUNDING(Floor, std::floor)
KILN_ROUNDING(Ceil, std::ceil)
KILN_ROUNDING(Round, std::nearbyint)  // half to even under the default rounding mode
KILN_ROUNDING(Trunc, std::trunc)
#undef KILN_ROUNDING
struct Sign {
  template <typename T> static constexpr bool supports = true;
  template <typename C> static C apply(C x) {
    if constexpr (std::is_same_v<C, bool>) return x;
    else if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return C(0);
      return C((C(0) < x) - (x < C(0)));
    } else if constexpr (std::is_signed_v<C>) return C((C(0) < x) - (x < C(0)));
    else return C(x > 0);
  }
};

struct LogicalNot {
  template <typename C> static bool apply(C x) { return !(x != C(0)); }
};
struct IsNan {
  template <typename C> static bool apply(C x) {
    if constexpr (std::is_floating_point_v<C>) return std::isnan(x);
    else return false;
  }
};
struct IsInf {
  template <typename C> static bool apply(C x) {
    if constexpr (std::is_floating_point_v<C>) return std::isinf(x);
    else return false;
  }
};
struct IsFinite {
  template <typename C> static bool apply(C x) {
    if constexpr (std::is_floating_point_v<C>) return std::isfinite(x);
    else return true;
  }
};

// gelu(approximate): attrs[0] is "none" or "tanh".
void gelu_kernel(OpCall& call) {
  if (call.string_attr(0) == "tanh") unary_kernel<GeluTanh>(call);
  else unary_kernel<GeluErf>(call);
}

template <typename Fn, typename Bf16Fn>
bool run_vectorised_fn(OpCall& call, Fn fn, Bf16Fn bf16_fn,
                       VecUnaryF32 streamed = nullptr);  // below

// softplus(beta, threshold): log1p(exp(beta x)) / beta, linear above threshold.
void softplus_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  double beta = call.double_attr(0), threshold = call.double_attr(1);
  if (const VecUnaryParamF32 fn = vec_math_f32().softplus) {
    const VecUnaryParamBf16 fb = vec_math_f32().bf16.softplus;
    const float b = float(beta), th = float(threshold);
    if (run_vectorised_fn(
            call, [=](const float* x, float* y, int64_t n) { fn(x, y, n, b, th); },
            [=](const uint16_t* x, uint16_t* y, int64_t n) { fb(x, y, n, b, th); }))
      return;
  }
  KILN_DISPATCH_FLOAT(in.dtype(), "softplus", [&]<typename T>() {
    using C = opmath_t<T>;
    C b = C(beta), th = C(threshold);
    elementwise_kernel<T, T>(out, {&in}, [b, th](T v) {
      C x = C(v);
      return T(x * b > th ? x : std::log1p(std::exp(x * b)) / b);
    });
  });
}

// leaky_relu(negative_slope): x > 0 ? x : x * slope, computed in float for 16-bit floats.
void leaky_relu_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const double slope = call.double_attr(0);
  if (const VecUnaryParamF32 fn = vec_math_f32().leaky_relu) {
    const VecUnaryParamBf16 fb = vec_math_f32().bf16.leaky_relu;
    const float s = float(slope);
    if (run_vectorised_fn(
            call, [=](const float* x, float* y, int64_t n) { fn(x, y, n, s, 0); },
            [=](const uint16_t* x, uint16_t* y, int64_t n) { fb(x, y, n, s, 0); }))
      return;
  }
  KILN_DISPATCH_FLOAT(in.dtype(), "leaky_relu", [&]<typename T>() {
    using C = opmath_t<T>;
    const C s = C(slope);
    elementwise_kernel<T, T>(out, {&in}, [s](T v) {
      const C x = C(v);
      return T(x > C(0) ? x : x * s);
    });
  });
}

// clamp(min?, max?) with Scalar bounds; NaN stays NaN.
void clamp_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  bool has_lo = call.has_attr(0), has_hi = call.has_attr(1);
  const VecMathF32& vm = vec_math_f32();
  if (vm.clamp &&
      (in.dtype() == DType::F32 || in.dtype() == DType::BF16 || in.dtype() == DType::F16)) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    const float lo = has_lo ? call.scalar_attr(0).to<float>() : -kInf;
    const float hi = has_hi ? call.scalar_attr(1).to<float>() : kInf;
    const VecUnaryParamF32 fn = vm.clamp;
    const VecUnaryParamBf16 fb = vm.bf16.clamp;
    if (run_vectorised_fn(
            call, [=](const float* x, float* y, int64_t n) { fn(x, y, n, lo, hi); },
            [=](const uint16_t* x, uint16_t* y, int64_t n) { fb(x, y, n, lo, hi); }))
      return;
  }
  KILN_DISPATCH_ALL(in.dtype(), "clamp", [&]<typename T>() {
    using C = opmath_t<T>;
    // An absent bound is the type's extreme (infinity for floats), so the loop has no
    // branches and vectorises; a NaN input fails both comparisons and stays NaN.
    constexpr bool kFloat = std::is_floating_point_v<C>;
    const C lowest = kFloat ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
    const C highest = kFloat ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
    const C lo = has_lo ? call.scalar_attr(0).to<C>() : lowest;
    const C hi = has_hi ? call.scalar_attr(1).to<C>() : highest;
    if constexpr (std::is_same_v<T, BFloat16>) {
      auto f = [=](float x) {
        x = x < lo ? lo : x;
        return x > hi ? hi : x;
      };
      if (bf16_elementwise<1>(out, {&in}, f)) return;
    }
    elementwise_kernel<T, T>(out, {&in}, [=](T v) {
      C x = C(v);
      x = x < lo ? lo : x;
      x = x > hi ? hi : x;  // min applied last, as PyTorch: min > max gives max
      return T(x);
    });
  });
}

bool same_dense_layout(const Tensor& in, const Tensor& out);  // below
bool stage_into_output(const Tensor& in, const Tensor& out);  // below

// Unary ops split over the threads from the size at which the binary ops do (dense inputs,
// and strided ones with contiguous rows, run row by row: dense_row_pairs.h). Splitting from
// 2^14 elements while the binary ops split from 2^16 made a unary op after a binary one that
// ran on one thread read half of its input from the other core's cache: relu(x + 1) of
// [8, 4096] float32 took 17.6 us that way against 7.4 with both on one thread (x + 1 alone
// 3.7), sin(x + 1) 38 against 20.
constexpr int64_t kUnaryParallelFrom = detail::kParallelElements;

template <typename T, typename U>
U bits_of(T v) {
  U u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// The bit loop of the ISA level (isa/bit_loops.h) for U's width.
template <typename U>
void nan_to_num_bits(const U* in, U* out, int64_t n, U inf, U nan_b, U pos_b, U neg_b) {
  if constexpr (sizeof(U) == 4) bit_loops().nan_to_num_b32(in, out, n, inf, nan_b, pos_b, neg_b);
  else bit_loops().nan_to_num_b16(in, out, n, inf, nan_b, pos_b, neg_b);
}

// Float32 / bfloat16 / float16 outputs by the bit loop: strided inputs with contiguous rows
// row by row, other strided inputs copied into a dense output first (stage_into_output), dense
// ones over the flat array, in threaded pieces. The element loop (a conversion, two
// classifications and branches per element) took 2.5-3.9x PyTorch's time.
template <typename T, typename U>
bool nan_to_num_dense(const Tensor& in, const Tensor& out, T nan_v, T pos_v, T neg_v, U inf) {
  const U nb = bits_of<T, U>(nan_v), pb = bits_of<T, U>(pos_v), gb = bits_of<T, U>(neg_v);
  const bool staged = !same_dense_layout(in, out);
  if (staged && run_on_dense_rows<U>(in, out, kUnaryParallelFrom,
                                     [&](const U* s, U* d, int64_t m) {
                                       nan_to_num_bits<U>(s, d, m, inf, nb, pb, gb);
                                     }))
    return true;
  if (staged && !stage_into_output(in, out)) return false;
  const U* src = static_cast<const U*>((staged ? out : in).raw_data());
  U* dst = static_cast<U*>(out.raw_data());
  const int64_t n = out.numel();
  if (src != dst && src < dst + n && dst < src + n) return false;  // partly shared: the element loop
  parallel_pieces(n, [&](int64_t b, int64_t e) {
    nan_to_num_bits<U>(src + b, dst + b, e - b, inf, nb, pb, gb);
  });
  return true;
}

// nan_to_num(nan, posinf, neginf): absent replacements are 0, the dtype's max and lowest.
void nan_to_num_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_FLOAT(in.dtype(), "nan_to_num", [&]<typename T>() {
    using C = opmath_t<T>;
    C big = C(std::is_same_v<T, Half> ? 65504.0
              : std::is_same_v<T, BFloat16> ? 3.3895313892515355e38
                                            : double(std::numeric_limits<C>::max()));
    C nan_v = call.has_attr(0) ? C(call.double_attr(0)) : C(0);
    C pos_v = call.has_attr(1) ? C(call.double_attr(1)) : big;
    C neg_v = call.has_attr(2) ? C(call.double_attr(2)) : -big;
    if (in.dtype() == out.dtype()) {
      if constexpr (std::is_same_v<T, float>) {
        if (nan_to_num_dense<T, int32_t>(in, out, nan_v, pos_v, neg_v, 0x7f800000)) return;
      } else if constexpr (std::is_same_v<T, BFloat16>) {
        if (nan_to_num_dense<T, int16_t>(in, out, T(nan_v), T(pos_v), T(neg_v), 0x7f80))
          return;
      } else if constexpr (std::is_same_v<T, Half>) {
        if (nan_to_num_dense<T, int16_t>(in, out, T(nan_v), T(pos_v), T(neg_v), 0x7c00))
          return;
      }
    }
    elementwise_kernel<T, T>(out, {&in}, [=](T v) {
      C x = C(v);
      if (std::isnan(x)) return T(nan_v);
      if (std::isinf(x)) return T(x > 0 ? pos_v : neg_v);
      return v;
    });
  });
}

// Both tensors one dense block of numel elements in the same element order: contiguous, or
// any permuted dense layout with identical strides (the result of a pointwise op on a
// transposed or channels-last input), so the op can run over the flat arrays.
bool same_dense_layout(const Tensor& in, const Tensor& out) {
  if (in.is_contiguous() && out.is_contiguous()) return in.numel() == out.numel();
  return in.shape() == out.shape() && in.strides() == out.strides() &&
         is_non_overlapping_and_dense(in.shape(), in.strides());
}

// The bytes [first, last) a tensor's elements span.
std::pair<const char*, const char*> byte_span(const Tensor& t) {
  const char* base = static_cast<const char*>(t.raw_data());
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t es = int64_t(t.element_size());
  return {base + lo * es, base + (hi + 1) * es};
}

// A strided input (a slice, a row step, a permuted view) of a dense, disjoint output of the
// same dtype: the input is copied into the output's layout by the blocked copy
// (permuted_copy.h), and the caller then runs the vector function over the output in place,
// so the result is the one a contiguous input gets. The element loop it replaces computed
// each element through the scalar function (decision 0131).
bool stage_into_output(const Tensor& in, const Tensor& out) {
  if (in.numel() != out.numel() || in.numel() == 0 ||
      !is_non_overlapping_and_dense(out.shape(), out.strides()))
    return false;
  const auto [in_lo, in_hi] = byte_span(in);
  const auto [out_lo, out_hi] = byte_span(out);
  if (in_lo < out_hi && out_lo < in_hi) return false;  // shared memory: the element loop
  return copy_permuted(in, out);
}

// fn / bf16_fn (see run_vectorised_fn) once per row of a strided input or output with
// contiguous rows (dense_row_pairs.h); false where that layout does not apply.
template <typename Fn, typename Bf16Fn>
bool run_rows_vectorised(const Tensor& in, const Tensor& out, Fn fn, Bf16Fn bf16_fn) {
  switch (in.dtype()) {
    case DType::F32:
      return run_on_dense_rows<float>(in, out, kUnaryParallelFrom, fn);
    case DType::BF16:
      return run_on_dense_rows<uint16_t>(in, out, kUnaryParallelFrom, bf16_fn);
    case DType::F16:
      return float16_blocks_available() &&
             run_on_dense_rows<uint16_t>(in, out, kUnaryParallelFrom,
                                         [&](const uint16_t* s, uint16_t* d, int64_t m) {
                                           f16_detail::unary_run(s, d, m, fn);
                                         });
    default:
      return false;
  }
}

// fn(in, out, len) over the n elements of a dense input and output (equal or disjoint): on
// the calling thread, with no OpenMP region at all (even a serialised one costs about a
// microsecond, the whole op for batch norm's per-channel vectors), below kUnaryParallelFrom;
// else in the binary ops' split (parallel_pieces), so that a unary op after a binary one of
// the same size reads what the same thread wrote (fixed chunks of 2^14 elements, shared out
// statically, gave [12, 4096] two chunks on one thread and one on the other: tanh 13.8 us
// alone, PyTorch 8.8). Large outputs are written with streaming stores, except in place (the
// line is in the cache already): each streamed block is read, computed and stored before the
// next is read; reading a whole piece first, then storing it, alternates bursts of loads and
// of non-temporal stores (streaming_store.h): relu on [16, 256, 56, 56] channels-last
// bfloat16 took 1.80 ms that way against 1.46 ms (two threads, both timed alternately).
// streamed (float32, where given): fn's form with non-temporal stores of its own
// (VecMathF32::streamed), called on each piece directly, without the block buffer.
template <typename E, typename Fn>
void run_dense_unary(const E* src, E* dst, int64_t n, Fn fn, VecUnaryF32 streamed = nullptr) {
  static_assert(detail::kParallelElements == kUnaryParallelFrom);  // parallel_pieces' bound
  const bool stream = static_cast<const void*>(src) != static_cast<void*>(dst) &&
                      n * int64_t(sizeof(E)) >= detail::kStreamingStoreBytes;
  parallel_pieces(n, [&](int64_t begin, int64_t end) {
    if (!stream) {
      fn(src + begin, dst + begin, end - begin);
      return;
    }
    if constexpr (std::is_same_v<E, float>) {
      if (streamed) {
        streamed(src + begin, dst + begin, end - begin);
        detail::stream_fence();
        return;
      }
    }
    detail::run_streamed(dst + begin, end - begin, [&](E* d, int64_t j, int64_t m) {
      detail::prefetch_ahead(src + begin + j, m * int64_t(sizeof(E)));
      fn(src + begin + j, d, m);
    });
  });
}

// Dense float32 / bfloat16 / float16 tensors (the output equal to or disjoint from the
// input) go through a vector function: fn(in, out, n) over float32 arrays (float16: over
// widened blocks, float16_blocks.h), bf16_fn(in, out, n) over bfloat16 ones (the same
// function converting in registers, vec_math.h); long arrays are split over the threads.
template <typename Fn, typename Bf16Fn>
bool run_vectorised_fn(OpCall& call, Fn fn, Bf16Fn bf16_fn, VecUnaryF32 streamed) {
  const Tensor& out = call.outs[0];
  const VecMathF32& vm = vec_math_f32();
  if (!vm.widen_bf16 || call.inputs[0].dtype() != out.dtype()) return false;
  const bool staged = !same_dense_layout(call.inputs[0], out);
  if (staged && run_rows_vectorised(call.inputs[0], out, fn, bf16_fn)) return true;
  if (staged && (call.inputs[0].dtype() == DType::F16 || !stage_into_output(call.inputs[0], out)))
    return false;
  const Tensor& in = staged ? out : call.inputs[0];
  if (in.dtype() == DType::BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(in.raw_data());
    uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
    const int64_t n = in.numel();
    run_dense_unary(src, dst, n, bf16_fn);
    return true;
  }
  if (in.dtype() == DType::F16) {  // float32 blocks, decision 0066
    const uint16_t* src = static_cast<const uint16_t*>(in.raw_data());
    uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
    const int64_t n = in.numel();
    if (!float16_blocks_available() || (src != dst && src < dst + n && dst < src + n))
      return false;
    float16_unary_blocks(src, dst, n, fn);
    return true;
  }
  if (in.dtype() != DType::F32) return false;
  const float* src = static_cast<const float*>(in.raw_data());
  float* dst = static_cast<float*>(out.raw_data());
  if (src != dst && src < dst + out.numel() && dst < src + in.numel()) return false;
  run_dense_unary(src, dst, in.numel(), fn, streamed);
  return true;
}

// The float32 and bfloat16 entries of one vector function, as arguments.
#define KILN_VEC(name) &VecMathF32::name, &VecUnaryBf16Table::name

// The ISA-selected vector function `which` (and its bfloat16 form), when the level has one.
bool run_vectorised(OpCall& call, VecUnaryF32 VecMathF32::*which,
                    VecUnaryBf16 VecUnaryBf16Table::*which_bf16) {
  const VecMathF32& vm = vec_math_f32();
  const VecUnaryF32 fn = vm.*which;
  const VecUnaryBf16 fb = vm.bf16.*which_bf16;
  return fn && fb && run_vectorised_fn(call, fn, fb, vm.streamed ? vm.streamed->*which : nullptr);
}

template <VecUnaryF32 VecMathF32::*Which, VecUnaryBf16 VecUnaryBf16Table::*WhichBf16,
          typename F>
void vectorised_unary_kernel(OpCall& call) {
  if (!run_vectorised(call, Which, WhichBf16)) unary_kernel<F>(call);
}

// abs / neg of 16-bit floats (bfloat16, float16) as one bit operation on the sign (clear /
// flip bit 15), the ISA level's loop (isa/bit_loops.h) over the flat array or row by row:
// exact, NaN payloads kept, and no widening (bfloat16 abs widened, took the float32 function
// and narrowed: twice PyTorch's time).
template <bool kAbs, VecUnaryF32 VecMathF32::*Which, VecUnaryBf16 VecUnaryBf16Table::*WhichBf16,
          typename F>
void sign_bit_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const bool half = in.dtype() == DType::BF16 || in.dtype() == DType::F16;
  const uint16_t* src = static_cast<const uint16_t*>(in.raw_data());
  uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
  const int64_t n = in.numel();
  const bool overlap = src != dst && src < dst + n && dst < src + n;
  const BitLoops& bits = bit_loops();
  const auto sign_bits = kAbs ? bits.abs_b16 : bits.neg_b16;
  if (half && in.dtype() == out.dtype() && !same_dense_layout(in, out) &&
      run_on_dense_rows<uint16_t>(in, out, kUnaryParallelFrom, sign_bits))
    return;
  if (!half || in.dtype() != out.dtype() || !same_dense_layout(in, out) || overlap) {
    vectorised_unary_kernel<Which, WhichBf16, F>(call);
    return;
  }
  parallel_pieces(n, [&](int64_t b, int64_t e) {
    sign_bits(src + b, dst + b, e - b);
  });
}

// gelu(approximate) with the vector path for float32 and bfloat16.
void fast_gelu_kernel(OpCall& call) {
  const bool tanh_form = call.string_attr(0) == "tanh";
  if (tanh_form ? run_vectorised(call, KILN_VEC(gelu_tanh))
                : run_vectorised(call, KILN_VEC(gelu_erf)))
    return;
  gelu_kernel(call);
}

}  // namespace

void register_gelu_backward_kernel();  // gelu_backward_kernel.cpp
void register_silu_backward_kernel();  // silu_backward_kernel.cpp

void register_unary_kernels() {
  auto reg = [](const char* name, KernelFn fn, DTypeMask mask) {
    register_kernel(name, DeviceType::CPU, fn, mask);
  };
  const DTypeMask numeric = kNumericDTypes;
  // float32 / bfloat16 through the vector table (sign-bit operations), other dtypes scalar.
  reg("neg", sign_bit_kernel<false, KILN_VEC(neg), Neg>, numeric);
  reg("abs", sign_bit_kernel<true, KILN_VEC(abs), Abs>, numeric);
  reg("exp", vectorised_unary_kernel<KILN_VEC(exp), Exp>, kFloatDTypes);
  reg("exp2", vectorised_unary_kernel<KILN_VEC(exp2), Exp2>, kFloatDTypes);
  reg("log", vectorised_unary_kernel<KILN_VEC(log), Log>, kFloatDTypes);
  reg("log2", vectorised_unary_kernel<KILN_VEC(log2), Log2>, kFloatDTypes);
  reg("log1p", vectorised_unary_kernel<KILN_VEC(log1p), Log1p>, kFloatDTypes);
  reg("expm1", vectorised_unary_kernel<KILN_VEC(expm1), Expm1>, kFloatDTypes);
  reg("sqrt", vectorised_unary_kernel<KILN_VEC(sqrt), Sqrt>, kFloatDTypes);
  reg("rsqrt", vectorised_unary_kernel<KILN_VEC(rsqrt), Rsqrt>, kFloatDTypes);
  reg("sin", vectorised_unary_kernel<KILN_VEC(sin), Sin>, kFloatDTypes);
  reg("cos", vectorised_unary_kernel<KILN_VEC(cos), Cos>, kFloatDTypes);
  reg("tan", vectorised_unary_kernel<KILN_VEC(tan), Tan>, kFloatDTypes);
  reg("tanh", vectorised_unary_kernel<KILN_VEC(tanh), Tanh>, kFloatDTypes);
  reg("sigmoid", vectorised_unary_kernel<KILN_VEC(sigmoid), Sigmoid>, kFloatDTypes);
  reg("relu", vectorised_unary_kernel<KILN_VEC(relu), Relu>, numeric);
  reg("silu", vectorised_unary_kernel<KILN_VEC(silu), Silu>, kFloatDTypes);
  reg("erf", vectorised_unary_kernel<KILN_VEC(erf), Erf>, kFloatDTypes);
  reg("reciprocal", vectorised_unary_kernel<KILN_VEC(reciprocal), Reciprocal>, kFloatDTypes);
  // Special functions: scalar (libm's erfc / lgamma, special_functions.h for the others).
  reg("erfc", unary_kernel<Erfc>, kFloatDTypes);
  reg("erfinv", unary_kernel<Erfinv>, kFloatDTypes);
  reg("lgamma", unary_kernel<Lgamma>, kFloatDTypes);
  reg("digamma", unary_kernel<Digamma>, kFloatDTypes);
  reg("trigamma", unary_kernel<Trigamma>, kFloatDTypes);
  reg("floor", vectorised_unary_kernel<KILN_VEC(floor), Floor>, numeric);
  reg("ceil", vectorised_unary_kernel<KILN_VEC(ceil), Ceil>, numeric);
  reg("round", vectorised_unary_kernel<KILN_VEC(round), Round>, numeric);
  reg("trunc", vectorised_unary_kernel<KILN_VEC(trunc), Trunc>, numeric);
  reg("sign", vectorised_unary_kernel<KILN_VEC(sign), Sign>, kAllDTypes);
  reg("logical_not", bool_unary_kernel<LogicalNot>, kAllDTypes);
  reg("isnan", bool_unary_kernel<IsNan>, kAllDTypes);
  reg("isinf", bool_unary_kernel<IsInf>, kAllDTypes);
  reg("isfinite", bool_unary_kernel<IsFinite>, kAllDTypes);
  reg("gelu", fast_gelu_kernel, kFloatDTypes);
  register_gelu_backward_kernel();
  register_silu_backward_kernel();
  reg("softplus", softplus_kernel, kFloatDTypes);
  reg("leaky_relu", leaky_relu_kernel, kFloatDTypes);
  reg("clamp", clamp_kernel, kAllDTypes);
  reg("nan_to_num", nan_to_num_kernel, kFloatDTypes);
}

#undef KILN_VEC

}  // namespace kiln::cpu
