// CPU kernels for binary and ternary elementwise ops. Inputs arrive with one common dtype
// (the ops layer promotes); comparisons and logical ops write bool.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "aligned_scratch.h"
#include "bf16_elementwise.h"
#include "float16_blocks.h"
#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "parallel_pieces.h"
#include "row_loops.h"
#include "scalar_math.h"

namespace kiln::cpu {
namespace {

template <typename T>
using C_t = opmath_t<T>;

[[noreturn]] void unsupported(const OpCall& call, DType t) {
  KILN_THROW(NotImplementedError, "\"", call.op->name, "\" not implemented for '", dtype_name(t), "'");
}

struct Add;  // Add, Sub, Mul, DivMode: below; binary_kernel gives them bfloat16 fast paths
struct Sub;
struct Mul;
template <int kMode>
struct DivMode;
struct Pow;  // below; binary_kernel gives it branch-free loops for a constant exponent
struct Maximum;  // below; binary_kernel gives them vector loops (float32 and bfloat16)
struct Minimum;

// [R, C] op [C] (or [C] op [R, C]) with rows of at most 64, out and the full operand
// contiguous: a bias on a narrow Linear output, a per-channel operand of a channels-last
// tensor. Run by run the vector function ran once per C elements (x + r on [4096, 8]: 32.7
// us, torch 12.8); here the row is repeated into a buffer of whole periods and the tensor
// walked as one flat array in chunks of that buffer's length. False (nothing done) for any
// other layout.
bool periodic_rows_f32(const StridedLoop<3>& loop, VecBinaryF32 fn) {
  constexpr int64_t kEs = int64_t(sizeof(float)), kMaxRow = 64, kChunk = 1024;
  if (loop.shape.size() != 2) return false;
  const int64_t rows = loop.shape[0], c = loop.shape[1];
  if (c > kMaxRow || rows < 2) return false;
  const auto& outer = loop.strides[0];
  const auto& inner = loop.strides[1];
  const std::array<int64_t, 3> dense{c * kEs, c * kEs, c * kEs};
  if (inner[0] != kEs || inner[1] != kEs || inner[2] != kEs || outer[0] != dense[0])
    return false;
  int row_operand = 0;  // 1 or 2: the input repeated along the rows
  if (outer[1] == 0 && outer[2] == dense[2]) row_operand = 1;
  if (outer[2] == 0 && outer[1] == dense[1]) row_operand = 2;
  if (row_operand == 0) return false;
  // Whole periods, no more than the tensor holds.
  const int64_t per_chunk = std::min(std::max<int64_t>(1, kChunk / c), rows) * c;
  AlignedVector<float> period(static_cast<size_t>(per_chunk));
  const float* row = reinterpret_cast<const float*>(loop.data[size_t(row_operand)]);
  for (int64_t i = 0; i < per_chunk; i += c) std::memcpy(period.data() + i, row, size_t(c) * 4);
  const float* full = reinterpret_cast<const float*>(loop.data[size_t(3 - row_operand)]);
  float* out = reinterpret_cast<float*>(loop.data[0]);
  const int64_t n = rows * c, chunks = (n + per_chunk - 1) / per_chunk;
  auto chunk = [&](int64_t k) {
    const int64_t off = k * per_chunk, len = std::min(per_chunk, n - off);
    if (row_operand == 1) fn(period.data(), 1, full + off, 1, out + off, len);
    else fn(full + off, 1, period.data(), 1, out + off, len);
  };
  if (n >= detail::kParallelElements && chunks > 1) {
    detail::parallel_chunks(chunks, chunk);
  } else {
    for (int64_t k = 0; k < chunks; ++k) chunk(k);
  }
  return true;
}

// out = a op b for float32 through the ISA's vector loop fn (vec_math.h's add_f32 and
// friends) on every run where each input is unit-stride or one value; other runs (strided
// operands) take the generic loop's scalar op. Returns false, having done nothing, at the
// baseline level (no vector functions) or when an input partly overlaps the output.
template <typename ScalarOp>
bool f32_binary_vectorised(const Tensor& out, const Tensor& a, const Tensor& b,
                           VecBinaryF32 fn, VecBinaryF32 streamed_fn, ScalarOp op) {
  if (!fn) return false;
  for (const Tensor* in : {&a, &b}) {
    // Equal layouts (in-place ops) are fine; any other overlap would depend on the order.
    if (in->shares_storage_with(out) &&
        !(in->raw_data() == out.raw_data() && in->strides() == out.strides() &&
          in->shape() == out.shape()))
      return false;
  }
  auto loop = make_strided_loop<3>({&out, &a, &b}, out.shape(), /*memory_order=*/true);
  const bool stream = use_streaming_stores<2>(out, {&a, &b});
  constexpr int64_t kEs = int64_t(sizeof(float));
  if (!stream && periodic_rows_f32(loop, fn)) return true;
  auto run = [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    const bool steps_ok = s[0] == kEs && (s[1] == kEs || s[1] == 0) &&
                          (s[2] == kEs || s[2] == 0) && (s[1] != 0 || s[2] != 0);
    if (!steps_ok) {
      detail::elementwise_run<float, float, float>(p, s, n, op, std::index_sequence<0, 1>{});
      return;
    }
    float* o = reinterpret_cast<float*>(p[0]);
    const float* x = reinterpret_cast<const float*>(p[1]);
    const float* y = reinterpret_cast<const float*>(p[2]);
    const int64_t xs = s[1] / kEs, ys = s[2] / kEs;
    if (!stream) return fn(x, xs, y, ys, o, n);
    if (streamed_fn) {
      streamed_fn(x, xs, y, ys, o, n);
      return detail::stream_fence();
    }
    detail::run_streamed(o, n, [&](float* d, int64_t j, int64_t len) {
      if (xs) detail::prefetch_ahead(x + j, len * kEs);
      if (ys) detail::prefetch_ahead(y + j, len * kEs);
      fn(x + j * xs, xs, y + j * ys, ys, d, len);
    });
  };
  parallel_for_each_run(loop, run);
  return true;
}

// float32 / bfloat16 x ** y for the exponents with a vector form (2, 3, 0.5, -1; Pow's special
// cases), x and out of one dtype laid out alike in one dense block (the same memory or none
// shared): threaded pieces of the ISA's functions (bfloat16: converted in registers), the
// scalar formulas bit for bit (x * x, (x * x) * x, IEEE square root and division; bfloat16
// rounded once). x ** 3 through the baseline element loop took 78 us on float32 [2048, 512]
// against PyTorch's 48; bfloat16 x ** 2 as mul(x, x) read x twice (0.35 ms on the op sweep's
// shape against torch's 0.24).
template <typename E, typename Fn>
void run_pieces(const Tensor& x, const Tensor& out, Fn fn) {
  const E* src = static_cast<const E*>(x.raw_data());
  E* dst = static_cast<E*>(out.raw_data());
  parallel_pieces(out.numel(), [&](int64_t b, int64_t e) { fn(src + b, dst + b, e - b); });
}
// The table's function for x ** y (VecMathF32 or its bfloat16 table), or null.
template <typename Table>
auto pow_function(const Table& t, float y) {
  return y == 2.0f ? t.square : y == 3.0f ? t.cube : y == 0.5f ? t.sqrt
       : y == -1.0f ? t.reciprocal : nullptr;
}
bool pow_vectorised(const Tensor& x, const Tensor& out, float y) {
  if (x.dtype() != out.dtype() || x.shape() != out.shape() || x.strides() != out.strides() ||
      !is_non_overlapping_and_dense(x.shape(), x.strides()))
    return false;
  const char* src = static_cast<const char*>(x.raw_data());
  const char* dst = static_cast<const char*>(out.raw_data());
  const int64_t bytes = out.numel() * int64_t(element_size(out.dtype()));
  if (src != dst && src < dst + bytes && dst < src + bytes) return false;
  const VecMathF32& vm = vec_math_f32();
  if (x.dtype() == DType::F32) {
    const VecUnaryF32 fn = pow_function(vm, y);
    if (fn) run_pieces<float>(x, out, fn);
    return fn != nullptr;
  }
  if (x.dtype() == DType::BF16) {
    const VecUnaryBf16 fn = pow_function(vm.bf16, y);
    if (fn) run_pieces<uint16_t>(x, out, fn);
    return fn != nullptr;
  }
  return false;
}

// out = F::apply(a, b, call) in the compute type.
template <typename F>
void binary_kernel(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_ALL(a.dtype(), call.op->name.c_str(), [&]<typename T>() {
    using C = C_t<T>;
    if constexpr (F::template supports<T>) {
      auto f = F::template make<C>(call);
      auto run = [&](auto fn) {
        if constexpr (std::is_same_v<T, BFloat16>) {
          if (bf16_elementwise<2>(out, {&a, &b}, fn)) return;
        }
        elementwise_kernel<T, T, T>(out, {&a, &b}, [&fn](T x, T y) { return T(fn(C(x), C(y))); });
      };
      if constexpr (std::is_same_v<F, Pow> && std::is_floating_point_v<C>) {
        // x ** 2 and friends with one exponent for the whole tensor: Pow's functor tests the
        // exponent per element, which keeps the loop from vectorising (x ** 2 on 4M float32
        // took 1.35 ms against 0.48 for PyTorch); here the test is made once.
        if (b.numel() == 1) {
          const C y = C(*static_cast<const T*>(b.raw_data()));
          if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
            if (pow_vectorised(a, out, float(y))) return;
          }
          if constexpr (std::is_same_v<T, BFloat16>) {
            auto g = [](C x, C z) { return x * z; };  // x * x: mul_bf16 in registers
            if (y == C(2) && bf16_elementwise<2, decltype(g), Bf16Fast::Mul>(out, {&a, &a}, g))
              return;
          }
          if (y == C(2)) return run([](C x, C) { return x * x; });
          if (y == C(3)) return run([](C x, C) { return x * x * x; });
          if (y == C(1)) return run([](C x, C) { return x; });
          if (y == C(-1)) return run([](C x, C) { return C(1) / x; });
        }
      }
      if constexpr (std::is_same_v<T, BFloat16>) {
        if constexpr (std::is_same_v<F, Add> || std::is_same_v<F, Sub>) {
          // alpha 1: x +- alpha * y is x +- y exactly, which add_bf16 / sub_bf16 compute in
          // registers.
          if (call.scalar_attr(0).to<C>() == C(1)) {
            constexpr bool kAdd = std::is_same_v<F, Add>;
            auto g = [](C x, C y) { return kAdd ? x + y : x - y; };
            constexpr Bf16Fast kFast = kAdd ? Bf16Fast::Add : Bf16Fast::Sub;
            if (bf16_elementwise<2, decltype(g), kFast>(out, {&a, &b}, g)) return;
          }
        }
        if constexpr (std::is_same_v<F, Mul>) {
          auto g = [](C x, C y) { return x * y; };
          if (bf16_elementwise<2, decltype(g), Bf16Fast::Mul>(out, {&a, &b}, g)) return;
        }
        if constexpr (std::is_same_v<F, DivMode<0>>) {
          auto g = [](C x, C y) { return x / y; };
          if (bf16_elementwise<2, decltype(g), Bf16Fast::Div>(out, {&a, &b}, g)) return;
        }
        if constexpr (std::is_same_v<F, Maximum>) {
          if (bf16_elementwise<2, decltype(f), Bf16Fast::Max>(out, {&a, &b}, f)) return;
        }
        if constexpr (std::is_same_v<F, Minimum>) {
          if (bf16_elementwise<2, decltype(f), Bf16Fast::Min>(out, {&a, &b}, f)) return;
        }
        if (bf16_elementwise<2>(out, {&a, &b}, f)) return;
      }
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half>) {
        const VecMathF32& vm = vec_math_f32();
        VecBinaryF32 fn = nullptr;
        VecBinaryF16 fn16 = nullptr;  // the same operation on float16 in registers
        if constexpr (std::is_same_v<F, Add>) fn = vm.add_f32, fn16 = vm.add_f16;
        if constexpr (std::is_same_v<F, Sub>) fn = vm.sub_f32, fn16 = vm.sub_f16;
        if constexpr (std::is_same_v<F, Add> || std::is_same_v<F, Sub>) {
          if (call.scalar_attr(0).to<C>() != C(1)) fn = nullptr;  // x +- alpha * y: generic
        }
        if constexpr (std::is_same_v<F, Mul>) fn = vm.mul_f32, fn16 = vm.mul_f16;
        if constexpr (std::is_same_v<F, DivMode<0>>) fn = vm.div_f32, fn16 = vm.div_f16;
        if constexpr (std::is_same_v<F, Maximum>) {
          fn = vm.max_f32, fn16 = vm.max_f16;  // was 2.3-3.6x torch's time
        }
        if constexpr (std::is_same_v<F, Minimum>) fn = vm.min_f32, fn16 = vm.min_f16;
        if constexpr (std::is_same_v<T, Half>) {
          if (float16_binary_blocks(out, a, b, fn, fn16, f)) return;  // decision 0066
        } else {
          // The same operation writing with non-temporal stores (add / sub / mul / div).
          VecBinaryF32 streamed = nullptr;
          if (fn && vm.streamed) {
            const VecMathF32& st = *vm.streamed;
            if (fn == vm.add_f32) streamed = st.add_f32;
            if (fn == vm.sub_f32) streamed = st.sub_f32;
            if (fn == vm.mul_f32) streamed = st.mul_f32;
            if (fn == vm.div_f32) streamed = st.div_f32;
          }
          if (f32_binary_vectorised(out, a, b, fn, streamed, f)) return;
        }
      }
      elementwise_kernel<T, T, T>(out, {&a, &b}, [&f](T x, T y) { return T(f(C(x), C(y))); });
    } else {
      unsupported(call, a.dtype());
    }
  });
}

template <typename F>
void compare_kernel(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  KILN_DISPATCH_ALL(a.dtype(), call.op->name.c_str(), [&]<typename T>() {
    using C = C_t<T>;
    if constexpr (std::is_same_v<T, Half>) {  // widened blocks (decision 0066)
      auto cmp = [](float x, float y) { return F::apply(x, y); };
      if (float16_compare_blocks(call.outs[0], a, b, cmp)) return;
    }
    elementwise_kernel<bool, T, T>(call.outs[0], {&a, &b},
                                   [](T x, T y) { return F::apply(C(x), C(y)); });
  });
}

template <typename T> inline constexpr bool any_v = true;
template <typename T> inline constexpr bool not_bool_v = !std::is_same_v<T, bool>;
template <typename T> inline constexpr bool float_v = std::is_floating_point_v<C_t<T>>;
template <typename T> inline constexpr bool int_bool_v = std::is_integral_v<T>;

// add/sub carry alpha (attrs[0]); bool add is logical or, as PyTorch.
struct Add {
  template <typename T> static constexpr bool supports = true;
  template <typename C> static auto make(const OpCall& call) {
    C alpha = call.scalar_attr(0).to<C>();
    return [alpha](C x, C y) -> C {
      if constexpr (std::is_same_v<C, bool>) return x || (alpha && y);
      else return wrap_add(x, wrap_mul(alpha, y));
    };
  }
};
struct Sub {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static auto make(const OpCall& call) {
    C alpha = call.scalar_attr(0).to<C>();
    return [alpha](C x, C y) { return wrap_sub(x, wrap_mul(alpha, y)); };
  }
};
struct Mul {
  template <typename T> static constexpr bool supports = true;
  template <typename C> static auto make(const OpCall&) {
    return [](C x, C y) -> C {
      if constexpr (std::is_same_v<C, bool>) return x && y;
      else return wrap_mul(x, y);
    };
  }
};
// div with rounding mode attrs[0]: "" (true; floats only), "trunc", "floor". One functor per
// mode, so the element loop has no branch on the mode and vectorises.
template <int kMode>  // 0: true division, 1: trunc, 2: floor
struct DivMode {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static auto make(const OpCall&) {
    return [](C x, C y) -> C {
      if constexpr (std::is_floating_point_v<C>) {
        if constexpr (kMode == 1) return std::trunc(x / y);
        else if constexpr (kMode == 2) return float_div_floor(x, y);
        else return x / y;
      } else {
        return kMode == 2 ? int_div_floor(x, y) : int_div_trunc(x, y);
      }
    };
  }
};
void div_kernel(OpCall& call) {
  const std::string& mode = call.string_attr(0);
  if (mode == "trunc") binary_kernel<DivMode<1>>(call);
  else if (mode == "floor") binary_kernel<DivMode<2>>(call);
  else binary_kernel<DivMode<0>>(call);
}
struct Pow {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static auto make(const OpCall&) {
    return [](C x, C y) -> C {
      if constexpr (std::is_floating_point_v<C>) {
        // The exponents PyTorch special-cases (x ** 2 in GELU and variance formulas): plain
        // arithmetic, as torch computes them, instead of a libm call per element.
        if (y == C(2)) return x * x;
        if (y == C(3)) return x * x * x;
        if (y == C(0.5)) return std::sqrt(x);
        if (y == C(-1)) return C(1) / x;
        if (y == C(-2)) return C(1) / (x * x);
        return std::pow(x, y);
      } else {
        return int_pow(x, y);
      }
    };
  }
};
struct Maximum {
  template <typename T> static constexpr bool supports = true;
  template <typename C> static auto make(const OpCall&) { return [](C x, C y) { return nan_max(x, y); }; }
};
struct Minimum {
  template <typename T> static constexpr bool supports = true;
  template <typename C> static auto make(const OpCall&) { return [](C x, C y) { return nan_min(x, y); }; }
};
struct Fmod {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static auto make(const OpCall&) {
    return [](C x, C y) -> C {
      if constexpr (std::is_floating_point_v<C>) return std::fmod(x, y);
      else return int_mod(x, y);
    };
  }
};
struct Remainder {
  template <typename T> static constexpr bool supports = not_bool_v<T>;
  template <typename C> static auto make(const OpCall&) {
    return [](C x, C y) -> C {
      if constexpr (std::is_floating_point_v<C>) return float_remainder(x, y);
      else return int_remainder(x, y);
    };
  }
};
struct Atan2 {
  template <typename T> static constexpr bool supports = float_v<T>;
  template <typename C> static auto make(const OpCall&) {
    return [](C x, C y) -> C {
      if constexpr (std::is_floating_point_v<C>) return std::atan2(x, y);
      else return x;
    };
  }
};
#define KILN_BITWISE(Name, op)                                                \
  struct Name {                                                               \
    template <typename T> static constexpr bool supports = int_bool_v<T>;     \
    template <typename C> static auto make(const OpCall&) {                   \
      return [](C x, C y) -> C {                                              \
        if constexpr (std::is_integral_v<C>) return C(x op y);                \
        else return x;                                                        \
      };                                                                      \
    }                                                                         \
  };
KILN_BITWISE(BitAnd, &)
KILN_BITWISE(BitOr, |)
KILN_BITWISE(BitXor, ^)
#undef KILN_BITWISE

#define KILN_COMPARE(Name, expr) \
  struct Name {                  \
    template <typename C> static bool apply(C x, C y) { return (expr); } \
  };
KILN_COMPARE(Eq, x == y)
KILN_COMPARE(Ne, x != y)
KILN_COMPARE(Lt, x < y)
KILN_COMPARE(Le, x <= y)
KILN_COMPARE(Gt, x > y)
KILN_COMPARE(Ge, x >= y)
KILN_COMPARE(LogicalAnd, (x != C(0)) && (y != C(0)))
KILN_COMPARE(LogicalOr, (x != C(0)) || (y != C(0)))
KILN_COMPARE(LogicalXor, (x != C(0)) != (y != C(0)))
#undef KILN_COMPARE

// where(cond, a, b): inputs {cond(bool), a, b}.
void where_kernel(OpCall& call) {
  const Tensor& c = call.inputs[0];
  const Tensor& a = call.inputs[1];
  const Tensor& b = call.inputs[2];
  // A select through a mask on the element's bits: `p ? x : y` compiled to a branch that a
  // random condition mispredicts half the time (where over 1M float32: 2.3 ms; torch 2.1).
  // The values are moved, never computed with, so every dtype of the size is the same.
  auto select = [&]<typename W>() {
    elementwise_kernel<W, bool, W, W>(call.outs[0], {&c, &a, &b}, [](bool p, W x, W y) {
      const W m = W(W(0) - W(p));
      return W((x & m) | (y & W(~m)));
    });
  };
  if (a.dtype() == b.dtype() && a.dtype() == call.outs[0].dtype() &&
      with_word_of_size(a.element_size(), select))
    return;
  KILN_DISPATCH_ALL(a.dtype(), "where", [&]<typename T>() {
    elementwise_kernel<T, bool, T, T>(call.outs[0], {&c, &a, &b},
                                      [](bool p, T x, T y) { return p ? x : y; });
  });
}

// lerp(start, end, weight): inputs {start, end, weight}; PyTorch's two-sided formula keeps
// lerp(a, b, 1) == b exactly, and its fused multiply-add its rounding.
// o = lerp(a, b, t) over m floats (o may be a or b: lerp_). A function of its own: the same
// loops inlined into the caller's lambda stayed scalar (19 us for 32K floats against 5 for
// PyTorch); here the compiler versions them for aliasing and vectorises.
// PyTorch's form with its single rounding (fma), as the ISA loops (vec_math_body.inc).
__attribute__((noinline)) void lerp_block(const float* a, const float* b, float t, float* o,
                                          int64_t m) {
  if (std::fabs(t) < 0.5f) {
    for (int64_t i = 0; i < m; ++i) o[i] = std::fma(t, b[i] - a[i], a[i]);
  } else {
    const float c = t - 1.0f;
    for (int64_t i = 0; i < m; ++i) o[i] = std::fma(c, b[i] - a[i], b[i]);
  }
}

// float32 / bfloat16 start and end of the output's contiguous shape with one weight for all
// (an EMA update): the formula's branch is taken once, the loop runs over plain arrays in
// threaded pieces (bfloat16 widened a block at a time by the ISA's converter and rounded
// back as BFloat16(float)). The iterator with a broadcast third operand took 4.5x torch's
// time in float32 and 3-4.6x in bfloat16.
bool lerp_scalar_weight(const Tensor& s, const Tensor& e, const Tensor& w, const Tensor& out) {
  const DType dt = out.dtype();
  // (a bfloat16 lerp may carry its number weight as float32: ops/binary.cpp)
  const bool f32_weight = w.dtype() == DType::F32;
  if ((dt != DType::F32 && dt != DType::BF16) || s.dtype() != dt || e.dtype() != dt ||
      (w.dtype() != dt && !f32_weight) || !s.is_contiguous() || !e.is_contiguous() ||
      !out.is_contiguous() || s.shape() != out.shape() || e.shape() != out.shape() ||
      w.numel() != 1)
    return false;
  const VecMathF32& vm = vec_math_f32();
  const float t = f32_weight ? *static_cast<const float*>(w.raw_data())
                             : float(*static_cast<const BFloat16*>(w.raw_data()));
  const bool converters = vm.widen_bf16 && vm.narrow_bf16;
  if (dt == DType::BF16 && !converters && !f32_weight) return false;
  // The ISA's vectorised loop where there is one (same results: the same formula, products
  // rounded before their sums).
  const VecLerpF32 lerp = vm.lerp_f32 ? vm.lerp_f32 : &lerp_block;
  auto blend = [t, lerp](const float* a, const float* b, float* o, int64_t m) {
    lerp(a, b, t, o, m);
  };
  const int64_t n = out.numel();
  if (dt == DType::F32) {
    const float* a = static_cast<const float*>(s.raw_data());
    const float* b = static_cast<const float*>(e.raw_data());
    float* o = static_cast<float*>(out.raw_data());
    parallel_pieces(n, [&](int64_t lo, int64_t hi) { blend(a + lo, b + lo, o + lo, hi - lo); });
    return true;
  }
  const uint16_t* a = static_cast<const uint16_t*>(s.raw_data());
  const uint16_t* b = static_cast<const uint16_t*>(e.raw_data());
  uint16_t* o = static_cast<uint16_t*>(out.raw_data());
  if (!converters) {  // (baseline level) element by element, rounded once
    const BFloat16* a16 = reinterpret_cast<const BFloat16*>(a);
    const BFloat16* b16 = reinterpret_cast<const BFloat16*>(b);
    BFloat16* o16 = reinterpret_cast<BFloat16*>(o);
    parallel_pieces(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const float x = float(a16[i]), y = float(b16[i]);
        float r;
        lerp_block(&x, &y, t, &r, 1);
        o16[i] = BFloat16(r);
      }
    });
    return true;
  }
  if (vm.lerp_bf16) {  // converted in registers: [2048, 512] 350 -> 154 us (PyTorch 187-205)
    parallel_pieces(n, [&](int64_t lo, int64_t hi) {
      vm.lerp_bf16(a + lo, b + lo, t, o + lo, hi - lo);
    });
    return true;
  }
  parallel_pieces(n, [&](int64_t lo, int64_t hi) {
    constexpr int64_t kBlock = 256;
    alignas(64) float fa[kBlock], fb[kBlock], fo[kBlock];
    for (int64_t i = lo; i < hi; i += kBlock) {
      const int64_t m = std::min(kBlock, hi - i);
      vm.widen_bf16(a + i, fa, m);
      vm.widen_bf16(b + i, fb, m);
      blend(fa, fb, fo, m);
      vm.narrow_bf16(fo, o + i, m);
    }
  });
  return true;
}

void lerp_kernel(OpCall& call) {
  const Tensor& s = call.inputs[0];
  const Tensor& e = call.inputs[1];
  const Tensor& w = call.inputs[2];
  if (lerp_scalar_weight(s, e, w, call.outs[0])) return;
  KILN_DISPATCH_FLOAT(s.dtype(), "lerp", [&]<typename T>() {
    using C = C_t<T>;
    auto f = [](C x, C y, C t) {  // one rounding, as PyTorch's vectorised lerp
      return std::fabs(t) < C(0.5) ? std::fma(t, y - x, x) : std::fma(t - C(1), y - x, y);
    };
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (w.dtype() == DType::F32) {  // a number weight kept in float32 (ops/binary.cpp)
        elementwise_kernel<T, T, T, float>(
            call.outs[0], {&s, &e, &w},
            [&f](T a, T b, float wt) { return T(f(C(a), C(b), wt)); });
        return;
      }
      if (bf16_elementwise<3>(call.outs[0], {&s, &e, &w}, f)) return;
    }
    elementwise_kernel<T, T, T, T>(call.outs[0], {&s, &e, &w},
                                   [&f](T a, T b, T wt) { return T(f(C(a), C(b), C(wt))); });
  });
}

// addcmul(shift, t1, t2) with value 1 in float32, one of t1 / t2 (x) laid out as the output
// and the other (scale) and shift one value along each run or unit-stride along it: the
// ISA's muladd_f32 run by run (planar eval batch norm: one scale and shift per run), or, for
// [R, C] rows of at most 64 with a repeated scale and shift row (channels-last per-channel
// arrays), over the whole tensor with both rows repeated into whole periods. The generic
// loop ran eval batch norm of [8, 32, 28, 28] channels-last at 1.75x PyTorch's time. Runs of
// other layouts take the generic functor. False (nothing done) at the baseline ISA level,
// when an input partly overlaps the output, or when neither factor is laid out as the output.
bool addcmul_f32_vectorised(const Tensor& out, const Tensor& shift, const Tensor& t1,
                            const Tensor& t2) {
  const VecMulAddF32 fn = vec_math_f32().muladd_f32;
  if (!fn || out.dtype() != DType::F32) return false;
  for (const Tensor* in : {&shift, &t1, &t2}) {
    if (in->dtype() != DType::F32) return false;
    if (in->shares_storage_with(out) &&
        !(in->raw_data() == out.raw_data() && in->strides() == out.strides() &&
          in->shape() == out.shape()))
      return false;
  }
  constexpr int64_t kEs = int64_t(sizeof(float));
  auto loop = make_strided_loop<4>({&out, &shift, &t1, &t2}, out.shape(), /*memory_order=*/true);
  if (use_streaming_stores<3>(out, {&shift, &t1, &t2})) return false;
  // x: the factor that steps with the output in every dim.
  auto like_out = [&](size_t k) {
    for (const auto& st : loop.strides)
      if (st[k] != st[0]) return false;
    return true;
  };
  const size_t xk = like_out(2) ? 2 : like_out(3) ? 3 : 0;
  if (xk == 0 || loop.shape.empty()) return false;
  const size_t mk = xk == 2 ? 3 : 2;
  if (loop.shape.size() == 2 && loop.shape[1] <= 64 && loop.shape[0] >= 2 &&
      loop.strides[1][0] == kEs && loop.strides[0][0] == loop.shape[1] * kEs &&
      loop.strides[0][1] == 0 && loop.strides[1][1] == kEs && loop.strides[0][mk] == 0 &&
      loop.strides[1][mk] == kEs) {
    const int64_t rows = loop.shape[0], c = loop.shape[1];
    const int64_t per_chunk = std::min<int64_t>(std::max<int64_t>(1, 1024 / c), rows) * c;
    AlignedVector<float> mul(static_cast<size_t>(per_chunk)), add(static_cast<size_t>(per_chunk));
    for (int64_t i = 0; i < per_chunk; i += c) {
      std::memcpy(mul.data() + i, loop.data[mk], size_t(c * kEs));
      std::memcpy(add.data() + i, loop.data[1], size_t(c * kEs));
    }
    const float* x = reinterpret_cast<const float*>(loop.data[xk]);
    float* o = reinterpret_cast<float*>(loop.data[0]);
    const int64_t n = rows * c, chunks = (n + per_chunk - 1) / per_chunk;
    auto chunk = [&](int64_t k) {
      const int64_t off = k * per_chunk, len = std::min(per_chunk, n - off);
      fn(x + off, mul.data(), 1, add.data(), 1, o + off, len);
    };
    if (n >= detail::kParallelElements && chunks > 1) {
      detail::parallel_chunks(chunks, chunk);
    } else {
      for (int64_t k = 0; k < chunks; ++k) chunk(k);
    }
    return true;
  }
  auto generic = [](float a, float b, float c) { return a + 1.0f * (b * c); };
  auto run = [&](const std::array<char*, 4>& p, const std::array<int64_t, 4>& st, int64_t n) {
    const bool ok = st[0] == kEs && st[xk] == kEs && (st[1] == 0 || st[1] == kEs) &&
                    (st[mk] == 0 || st[mk] == kEs);
    if (!ok) {
      detail::elementwise_run<float, float, float, float>(p, st, n, generic,
                                                          std::index_sequence<0, 1, 2>{});
      return;
    }
    fn(reinterpret_cast<const float*>(p[xk]), reinterpret_cast<const float*>(p[mk]),
       st[mk] / kEs, reinterpret_cast<const float*>(p[1]), st[1] / kEs,
       reinterpret_cast<float*>(p[0]), n);
  };
  parallel_for_each_run(loop, run);
  return true;
}

// addcmul/addcdiv(self, t1, t2, value): self + value * t1 (*|/) t2.
template <bool kDivide>
void addc_kernel(OpCall& call) {
  const Tensor& s = call.inputs[0];
  const Tensor& t1 = call.inputs[1];
  const Tensor& t2 = call.inputs[2];
  KILN_DISPATCH_ALL(s.dtype(), kDivide ? "addcdiv" : "addcmul", [&]<typename T>() {
    using C = C_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      unsupported(call, s.dtype());
    } else {
      C v = call.scalar_attr(0).to<C>();
      if constexpr (std::is_same_v<T, float> && !kDivide) {
        if (v == 1.0f && addcmul_f32_vectorised(call.outs[0], s, t1, t2)) return;
      }
      if constexpr (std::is_same_v<T, Half> && !kDivide) {  // decision 0066
        if (v == 1.0f && float16_muladd_blocks(call.outs[0], s, t1, t2)) return;
      }
      if constexpr (std::is_same_v<T, BFloat16>) {
        auto f = [v](C a, C b, C c) { return kDivide ? a + v * (b / c) : a + v * (b * c); };
        if constexpr (!kDivide) {
          // value 1: f is a + b * c exactly (1 * p == p), which the muladd path computes.
          if (v == C(1)) {
            auto g = [](C a, C b, C c) { return a + b * c; };
            if (bf16_elementwise<3, decltype(g), Bf16Fast::MulAdd>(call.outs[0], {&s, &t1, &t2}, g))
              return;
          }
        }
        if (bf16_elementwise<3>(call.outs[0], {&s, &t1, &t2}, f)) return;
      }
      elementwise_kernel<T, T, T, T>(call.outs[0], {&s, &t1, &t2}, [v](T a, T b, T c) {
        if constexpr (kDivide) {
          if constexpr (std::is_integral_v<C>) return T(wrap_add(C(a), wrap_mul(v, int_div_trunc(C(b), C(c)))));
          else return T(C(a) + v * (C(b) / C(c)));
        } else {
          return T(wrap_add(C(a), wrap_mul(v, wrap_mul(C(b), C(c)))));
        }
      });
    }
  });
}

}  // namespace

void register_binary_kernels() {
  auto reg = [](const char* name, KernelFn fn, DTypeMask mask) {
    register_kernel(name, DeviceType::CPU, fn, mask);
  };
  const DTypeMask numeric = kNumericDTypes;
  reg("add", binary_kernel<Add>, kAllDTypes);
  reg("sub", binary_kernel<Sub>, numeric);
  reg("mul", binary_kernel<Mul>, kAllDTypes);
  reg("div", div_kernel, numeric);
  reg("pow", binary_kernel<Pow>, numeric);
  reg("maximum", binary_kernel<Maximum>, kAllDTypes);
  reg("minimum", binary_kernel<Minimum>, kAllDTypes);
  reg("fmod", binary_kernel<Fmod>, numeric);
  reg("remainder", binary_kernel<Remainder>, numeric);
  reg("atan2", binary_kernel<Atan2>, kFloatDTypes);
  reg("bitwise_and", binary_kernel<BitAnd>, kIntBoolDTypes);
  reg("bitwise_or", binary_kernel<BitOr>, kIntBoolDTypes);
  reg("bitwise_xor", binary_kernel<BitXor>, kIntBoolDTypes);
  reg("eq", compare_kernel<Eq>, kAllDTypes);
  reg("ne", compare_kernel<Ne>, kAllDTypes);
  reg("lt", compare_kernel<Lt>, kAllDTypes);
  reg("le", compare_kernel<Le>, kAllDTypes);
  reg("gt", compare_kernel<Gt>, kAllDTypes);
  reg("ge", compare_kernel<Ge>, kAllDTypes);
  reg("logical_and", compare_kernel<LogicalAnd>, kAllDTypes);
  reg("logical_or", compare_kernel<LogicalOr>, kAllDTypes);
  reg("logical_xor", compare_kernel<LogicalXor>, kAllDTypes);
  reg("where", where_kernel, kAllDTypes);  // keyed on cond (bool); a/b any dtype
  reg("lerp", lerp_kernel, kFloatDTypes);
  reg("addcmul", addc_kernel<false>, numeric);
  reg("addcdiv", addc_kernel<true>, numeric);
}

}  // namespace kiln::cpu
