#pragma once
// bfloat16 elementwise ops computed in float32 blocks. The generic loop converts every element
// on its own (shift in, round-to-nearest-even out) in code built for baseline x86-64, which
// ran bfloat16 add / addcmul at a quarter of float32's speed per element (ResNet-50's
// batch norms and residual adds in bfloat16). Here each unit-stride run is cut into blocks of
// kBlock: inputs are widened with the ISA's vector converter (vec_math.h), the float32
// functor runs over plain float arrays (a broadcast input is one repeated value), and the
// block is narrowed back with the same rounding as BFloat16(float), so results are
// bit-identical to the generic path.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "isa/vec_math.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {

namespace bf16_detail {

constexpr int64_t kBlock = 256;

// Runs up to this long whose operand repeats in every run (a per-channel scale along
// channels-last runs) have that operand widened once per call instead of once per run.
constexpr int64_t kMaxInvariantRun = 4096;

// out[i] = f(in...[i]) where bit I of Mask marks input I as one value for the whole block
// (index fixed at 0, so the compiler hoists it), as strided_loop.h's run_masked.
template <unsigned Mask, size_t NIn, typename F, size_t... I>
void apply_masked(float* out, const std::array<const float*, NIn>& in, int64_t m, F& f,
                  std::index_sequence<I...>) {
  for (int64_t i = 0; i < m; ++i) out[i] = f(in[I][((Mask >> I) & 1u) ? 0 : i]...);
}

template <size_t NIn, typename F, size_t... I, unsigned... Masks>
void apply_block(unsigned mask, float* out, const std::array<const float*, NIn>& in, int64_t m,
                 F& f, std::index_sequence<I...> is, std::integer_sequence<unsigned, Masks...>) {
  ((mask == Masks ? (apply_masked<Masks, NIn>(out, in, m, f, is), true) : false) || ...);
}

template <size_t NIn, typename F, size_t... I>
float apply_strided(const std::array<char*, NIn + 1>& p, const std::array<int64_t, NIn + 1>& s,
                    int64_t j, F& f, std::index_sequence<I...>) {
  return f(float(*reinterpret_cast<const BFloat16*>(p[I + 1] + j * s[I + 1]))...);
}

}  // namespace bf16_detail

// out = f(ins...) elementwise for bfloat16 out and inputs (all of one shape after
// broadcasting), f taking and returning float. Returns false, having done nothing, at the
// baseline ISA level (no vector converter): the caller's generic loop runs there.
// Fast: what the caller promises f computes, for the vector functions that convert in
// registers instead of widening blocks into buffers (bit-identical to f):
//   MulAdd  f(a, b, c) == a + b * c: runs where a and one of b, c are one value or
//           per-channel (eval-mode batch norm: shift + x * scale) use muladd_bf16;
//   Add, Sub, Mul, Div  f(a, b) == a op b: runs of two unit-stride arrays (residual adds,
//           products of activations) use add_bf16 / sub_bf16 / mul_bf16 / div_bf16;
//           Mul by one value along the run (x * scale) uses muladd_bf16 with a -0.0 shift
//           (-0.0 + y == y for every y, the sign of a zero included), Add / Sub of one
//           value (a + b[:, :1]) muladd_bf16 with a scale of +-1 (exact);
//   Max, Min  f(a, b) == nan_max / nan_min (a, b): max_bf16 / min_bf16 likewise.
enum class Bf16Fast { None, MulAdd, Add, Sub, Mul, Div, Max, Min };
template <size_t NIn, typename F, Bf16Fast kFast = Bf16Fast::None>
bool bf16_elementwise(const Tensor& out, const std::array<const Tensor*, NIn>& ins, F& f) {
  static_assert(kFast != Bf16Fast::MulAdd || NIn == 3, "MulAdd needs f(a, b, c) = a + b * c");
  static_assert(kFast == Bf16Fast::None || kFast == Bf16Fast::MulAdd || NIn == 2,
                "Add / Sub / Mul / Div / Max / Min need f(a, b) = a op b");
  using bf16_detail::kBlock;
  const VecMathF32& vm = vec_math_f32();
  if (!vm.widen_bf16 || !vm.narrow_bf16) return false;
  constexpr size_t N = NIn + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < NIn; ++k) ops[k + 1] = ins[k];
  auto loop = make_strided_loop<N>(ops, out.shape(), /*memory_order=*/true);
  const bool stream = use_streaming_stores(out, ins);
  constexpr int64_t kEs = int64_t(sizeof(BFloat16));
  // Inputs that are the same in every run (zero outer strides, unit stride along a short
  // run: a per-channel scale along channels-last runs) are widened once here into a buffer
  // that repeats them periodically, shared read-only by the threads.
  std::array<std::vector<float>, NIn> invariant;
  int64_t period = 0;
  if (loop.shape.size() >= 2 && loop.shape.back() <= bf16_detail::kMaxInvariantRun) {
    period = loop.shape.back();
    for (size_t k = 0; k < NIn; ++k) {
      bool same = loop.strides.back()[k + 1] == kEs;
      for (size_t d = 0; d + 1 < loop.shape.size(); ++d) same = same && loop.strides[d][k + 1] == 0;
      if (!same) continue;
      invariant[k].resize(size_t(period + kBlock));
      vm.widen_bf16(reinterpret_cast<const uint16_t*>(loop.data[k + 1]), invariant[k].data(),
                    period);
      for (size_t i = size_t(period); i < invariant[k].size(); ++i)
        invariant[k][i] = invariant[k][i - size_t(period)];
    }
    // [runs, period] where every other operand is contiguous across runs (or a scalar): one
    // flat run of runs * period elements, so short runs cost no per-run overhead; the
    // periodic buffers supply the invariant inputs at any flat offset.
    bool flat = loop.shape.size() == 2;
    for (size_t k = 0; k < N && flat; ++k) {
      const bool inv = k > 0 && !invariant[k - 1].empty();
      const auto outer = loop.strides[0][k], inner = loop.strides[1][k];
      flat = inv || (inner == kEs && outer == period * kEs) || (inner == 0 && outer == 0);
    }
    if (flat) {
      loop.shape = {loop.shape[0] * period};
      loop.strides = {loop.strides[1]};
    }
  }
  auto run = [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
    bool blocked = s[0] == kEs;
    for (size_t k = 1; k < N; ++k) blocked = blocked && (s[k] == kEs || s[k] == 0);
    if (!blocked) {  // strided operands: element by element
      for (int64_t j = 0; j < n; ++j)
        *reinterpret_cast<BFloat16*>(p[0] + j * s[0]) = BFloat16(
            bf16_detail::apply_strided<NIn>(p, s, j, f, std::make_index_sequence<NIn>{}));
      return;
    }
    BFloat16* o = reinterpret_cast<BFloat16*>(p[0]);
    if constexpr (kFast != Bf16Fast::None && kFast != Bf16Fast::MulAdd) {
      const VecBinaryBf16 op = kFast == Bf16Fast::Add   ? vm.add_bf16
                            : kFast == Bf16Fast::Sub ? vm.sub_bf16
                            : kFast == Bf16Fast::Mul ? vm.mul_bf16
                            : kFast == Bf16Fast::Div ? vm.div_bf16
                            : kFast == Bf16Fast::Max ? vm.max_bf16
                                                     : vm.min_bf16;
      const uint16_t* a = reinterpret_cast<const uint16_t*>(p[1]);
      const uint16_t* b = reinterpret_cast<const uint16_t*>(p[2]);
      if (op && s[1] == kEs && s[2] == kEs && invariant[0].empty() && invariant[1].empty()) {
        auto fast = [&](BFloat16* dst, int64_t j, int64_t len) {
          op(a + j, b + j, reinterpret_cast<uint16_t*>(dst), len);
        };
        if (stream) detail::run_streamed(o, n, fast);
        else fast(o, 0, n);
        return;
      }
      constexpr bool kMulAddForm =
          kFast == Bf16Fast::Mul || kFast == Bf16Fast::Add || kFast == Bf16Fast::Sub;
      if (kMulAddForm && vm.muladd_bf16 && (s[1] == 0) != (s[2] == 0) && invariant[0].empty() &&
          invariant[1].empty()) {
        // One operand is one value c along the run (x * scale; a + b[:, :1]): shift + x * scale
        // in registers (muladd_bf16), each form exact but for the one rounding of the op:
        // x * c = -0.0 + x * c; x + c = c + x * 1; x - c = -c + x * 1; c - x = c + x * -1.
        const bool a_scalar = s[1] == 0;
        const uint16_t* x = a_scalar ? b : a;
        const float c = float(*reinterpret_cast<const BFloat16*>(a_scalar ? p[1] : p[2]));
        float scale = 1.0f, shift = c;
        if (kFast == Bf16Fast::Mul) {
          scale = c;
          shift = -0.0f;
        } else if (kFast == Bf16Fast::Sub) {
          scale = a_scalar ? -1.0f : 1.0f;
          shift = a_scalar ? c : -c;
        }
        auto fast = [&](BFloat16* dst, int64_t j, int64_t len) {
          vm.muladd_bf16(x + j, &scale, 0, &shift, 0, reinterpret_cast<uint16_t*>(dst), len);
        };
        if (stream) detail::run_streamed(o, n, fast);
        else fast(o, 0, n);
        return;
      }
      // One operand an invariant buffer (a row broadcast down the rows: x * b[0], x + bias),
      // the other a bfloat16 array along the run: muladd_bf16 with the buffer as the per-element
      // scale (Mul) or shift (Add; c - x for Sub). x - c would need the buffer negated: the
      // generic blocks below.
      const bool inv_a = !invariant[0].empty(), inv_b = !invariant[1].empty();
      const bool one_invariant = inv_a != inv_b && s[inv_a ? 2 : 1] == kEs;
      if (kMulAddForm && vm.muladd_bf16 && one_invariant &&
          !(kFast == Bf16Fast::Sub && inv_b)) {
        const size_t ik = inv_a ? 0 : 1;
        const uint16_t* x = inv_a ? b : a;
        const float unit = kFast == Bf16Fast::Sub ? -1.0f : 1.0f, minus_zero = -0.0f;
        auto fast = [&](BFloat16* dst, int64_t j, int64_t len) {
          for (int64_t k = 0; k < len; k += kBlock) {
            const int64_t m = std::min(kBlock, len - k);
            const float* c = invariant[ik].data() +
                             ((p[ik + 1] - loop.data[ik + 1]) / kEs + j + k) % period;
            if constexpr (kFast == Bf16Fast::Mul)
              vm.muladd_bf16(x + j + k, c, 1, &minus_zero, 0,
                             reinterpret_cast<uint16_t*>(dst + k), m);
            else
              vm.muladd_bf16(x + j + k, &unit, 0, c, 1, reinterpret_cast<uint16_t*>(dst + k), m);
          }
        };
        if (stream) detail::run_streamed(o, n, fast);
        else fast(o, 0, n);
        return;
      }
    }
    if constexpr (kFast == Bf16Fast::MulAdd) {
      // Operand k is a "value" when it is one scalar along the run or a periodic invariant
      // buffer; x (the one bfloat16 array among b, c) is then multiplied and shifted.
      auto is_value = [&](size_t k) { return s[k + 1] == 0 || !invariant[k].empty(); };
      const int xk = !is_value(1) && is_value(2) ? 1 : (!is_value(2) && is_value(1) ? 2 : -1);
      if (vm.muladd_bf16 && xk > 0 && is_value(0)) {
        const size_t mk = xk == 1 ? 2 : 1;
        const uint16_t* x = reinterpret_cast<const uint16_t*>(p[xk + 1]);
        // The float32 value(s) of operand k for the block starting at flat offset at.
        auto operand = [&](size_t k, int64_t at, float& scalar, int64_t& step) -> const float* {
          if (s[k + 1] == 0) {
            scalar = float(*reinterpret_cast<const BFloat16*>(p[k + 1]));
            step = 0;
            return &scalar;
          }
          step = 1;
          return invariant[k].data() + ((p[k + 1] - loop.data[k + 1]) / kEs + at) % period;
        };
        auto fast = [&](BFloat16* dst, int64_t j, int64_t len) {
          for (int64_t b = 0; b < len; b += kBlock) {
            const int64_t m = std::min(kBlock, len - b);
            float mul_value, add_value;
            int64_t mul_step, add_step;
            const float* mul = operand(mk, j + b, mul_value, mul_step);
            const float* add = operand(0, j + b, add_value, add_step);
            vm.muladd_bf16(x + j + b, mul, mul_step, add, add_step,
                           reinterpret_cast<uint16_t*>(dst + b), m);
          }
        };
        if (stream) detail::run_streamed(o, n, fast);
        else fast(o, 0, n);
        return;
      }
    }
    // dst[0, len) = out[j, j + len): dst is out itself or run_streamed's buffer.
    auto compute = [&](BFloat16* dst, int64_t j, int64_t len) {
      alignas(64) float buf[NIn][kBlock];
      alignas(64) float res[kBlock];
      std::array<const float*, NIn> in;
      unsigned scalars = 0;  // inputs with one value along the run (x * scale[C, 1, 1])
      for (size_t k = 0; k < NIn; ++k) {
        in[k] = buf[k];
        if (s[k + 1] != 0) continue;
        buf[k][0] = float(*reinterpret_cast<const BFloat16*>(p[k + 1]));
        scalars |= 1u << k;
      }
      for (int64_t b = 0; b < len; b += kBlock) {
        const int64_t m = std::min(kBlock, len - b);
        for (size_t k = 0; k < NIn; ++k) {
          if (s[k + 1] == 0) continue;
          if (!invariant[k].empty()) {  // p[k + 1] - its base is the offset along the run
            in[k] = invariant[k].data() + ((p[k + 1] - loop.data[k + 1]) / kEs + j + b) % period;
            continue;
          }
          vm.widen_bf16(reinterpret_cast<const uint16_t*>(p[k + 1]) + j + b, buf[k], m);
        }
        bf16_detail::apply_block<NIn>(scalars, res, in, m, f, std::make_index_sequence<NIn>{},
                                      std::make_integer_sequence<unsigned, (1u << NIn)>{});
        vm.narrow_bf16(res, reinterpret_cast<uint16_t*>(dst + b), m);
      }
    };
    if (stream) {
      detail::run_streamed(o, n, compute);
    } else {
      compute(o, 0, n);
    }
  };
  parallel_for_each_run(loop, run);
  return true;
}

}  // namespace kiln::cpu
