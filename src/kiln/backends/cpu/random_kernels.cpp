// CPU kernels of the random ops (the testing backend runs them on its streams).
//
// A kernel never touches a Generator: the op's public function reserved the Philox blocks
// and passed the generator's seed and the first reserved counter as the last two int attrs.
// Values depend only on (seed, offset) and the element's row-major logical index i, never on
// the output's memory layout or on threads. The mapping (the contract for every backend):
//
//   32-bit draw k = word k % 4 of philox4x32(seed, offset + k / 4)
//   64-bit draw k = word 2*(k%2) | word 2*(k%2)+1 << 32 of philox4x32(seed, offset + k / 2)
//
//   uniform_    f16/bf16/f32: the top `digits` bits (11 / 8 / 24) of 32-bit draw i, as u in
//               [0, 1); f64: the top 53 bits of 64-bit draw i. x = from + u * (to - from)
//               computed in double and rounded to the dtype; a value that rounds up to `to`
//               becomes `from`, so results stay in [from, to).
//   normal_     Box-Muller on the pair of draws 2*(i/2), 2*(i/2)+1 (32-bit draws with 24-bit
//               uniforms, math in float, for f16/bf16/f32; 64-bit draws with 53-bit uniforms,
//               math in double, for f64): u1 = 1 - U(2*(i/2)) in (0, 1], u2 = U(2*(i/2)+1),
//               r = sqrt(-2 ln u1); even i gets r cos(2 pi u2), odd i gets r sin(2 pi u2);
//               x = z * std + mean.
//   bernoulli_, bernoulli: 1 when 32-bit draw i * 2^-32 < p, else 0.
//   dropout     element i is kept when 32-bit draw i * 2^-32 < 1 - p; kept elements are
//               multiplied by 1/(1-p) rounded to the dtype (as PyTorch's noise tensor), in
//               float for f16/bf16/f32 and double for f64; dropped ones are 0.
//   random_     range = to - from; 32-bit draw i when range <= 2^32, giving
//               from + (draw * range >> 32), else 64-bit draw i giving
//               from + (draw * range >> 64) (128-bit product): multiply-shift, no modulo.
//   multinomial with replacement: sample j of row r is the first category whose running sum
//               of probabilities exceeds U(r * num_samples + j) * (row sum), U from 64-bit
//               draws; without replacement: category c of row r gets the key p / q with
//               q = -ln(1 - U(r * categories + c)) ~ Exp(1) (the Gumbel-top-k trick that
//               PyTorch uses); the num_samples largest keys are taken in decreasing order
//               (ties by lower index; zero-probability categories come last).
//   randperm    64-bit draw i is the sort key of index i; the permutation lists the indices
//               in increasing (key, index) order.
//
// Transcendental results (normal_, multinomial without replacement) are bit-identical on
// backends that share these kernels; another backend implementing this mapping gets the same
// draws and the same values up to its libm's rounding.
#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include "index_loops.h"
#include "isa/philox_blocks.h"
#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/runtime/generator.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {
namespace {

// Draws of one op call: the Philox stream (seed, offset + block), generated kBufferBlocks
// blocks at a time by the ISA's bulk generator (isa/philox_blocks.h). Draws are read in
// increasing order within a piece, so one refill serves the next 128 32-bit draws: one block
// at a time, the scalar generator and its cache check cost about 4 ns per uniform value.
class PhiloxDraws {
 public:
  // seed_attr: the index of the `seed` attr; `offset` follows it.
  PhiloxDraws(const OpCall& call, size_t seed_attr)
      : seed_(uint64_t(call.int_attr(seed_attr))), offset_(uint64_t(call.int_attr(seed_attr + 1))) {}

  uint32_t draw32(uint64_t k) { return block(k / 4)[k % 4]; }
  uint64_t draw64(uint64_t k) {
    const uint32_t* w = block(k / 2);
    size_t j = 2 * size_t(k % 2);
    return uint64_t(w[j]) | uint64_t(w[j + 1]) << 32;
  }
  // Uniform in [0, 1) with 53 bits (from 64-bit draw k).
  double unit_double(uint64_t k) { return uint64_to_unit_double(draw64(k)); }
  // Uniform in [0, 1) with 32 bits (from 32-bit draw k), for comparisons with probabilities.
  double unit_32(uint64_t k) { return double(draw32(k)) * (1.0 / 4294967296.0); }

 private:
  static constexpr uint64_t kBufferBlocks = 32;
  static_assert(kBufferBlocks % uint64_t(kPhiloxBlocksStep) == 0);

  const uint32_t* block(uint64_t b) {
    if (!valid_ || b - first_ >= kBufferBlocks) {  // (unsigned: also b < first_)
      first_ = b;
      philox_blocks()(seed_, offset_ + b, int64_t(kBufferBlocks), words_);  // wraps mod 2^64
      valid_ = true;
    }
    return words_ + 4 * (b - first_);
  }

  uint64_t seed_, offset_;
  uint64_t first_ = 0;
  bool valid_ = false;
  alignas(64) uint32_t words_[4 * kBufferBlocks];
};

// Significand bits of each float type: the precision of its uniforms.
template <typename T>
constexpr int uniform_digits() {
  if constexpr (std::is_same_v<T, double>) return 53;
  else if constexpr (std::is_same_v<T, float>) return 24;
  else if constexpr (std::is_same_v<T, Half>) return 11;
  else return 8;  // BFloat16
}

// Contiguous outputs of at least kParallelElements elements are filled by the threads, each
// piece with its own copy of f (and of the Philox block cache f holds): values depend on i
// only, so the pieces give what one thread gives. normal_ of 1M float32 took 14.7 ms on one
// thread (torch 3.5 ms). Pieces start on multiples of 4, one Philox block.
template <typename F>
bool fill_in_pieces(int64_t n, const F& f, const std::vector<const Tensor*>& dense) {
  if (n < detail::kParallelElements || detail::elementwise_threads() <= 1) return false;
  for (const Tensor* t : dense)
    if (!t->is_contiguous()) return false;
  const int64_t blocks = (n + 3) / 4, pieces = 4 * int64_t(detail::elementwise_threads());
  detail::parallel_chunks(pieces, [&](int64_t p) {
    F local = f;
    const int64_t b = std::min(n, 4 * (blocks * p / pieces));
    const int64_t e = std::min(n, 4 * (blocks * (p + 1) / pieces));
    local(b, e);
  });
  return true;
}

// out[i] = f(i) for every element, i the row-major logical index. The strided loop never
// reorders dims (it only merges and drops size-1 dims), so its runs come in row-major order.
template <typename T, typename F>
void fill_logical(const Tensor& out, F&& f) {
  T* dst = static_cast<T*>(out.raw_data());
  auto piece = [dst, f](int64_t b, int64_t e) mutable {
    for (int64_t i = b; i < e; ++i) dst[i] = f(uint64_t(i));
  };
  if (fill_in_pieces(out.numel(), piece, {&out})) return;
  if (out.is_contiguous()) return piece(0, out.numel());  // one flat loop, no stride walk
  auto loop = make_strided_loop<1>({&out}, out.shape());
  uint64_t i = 0;
  for_each_run<1>(loop, [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& s,
                            int64_t n) {
    for (int64_t j = 0; j < n; ++j) *reinterpret_cast<T*>(p[0] + j * s[0]) = f(i++);
  });
}

// out[i] = f(i, in[i]) (in viewed at out's shape).
// parallel: pieces over the threads (each with a copy of f) where the layouts allow.
template <typename T, typename In, typename F>
void map_logical(const Tensor& out, const Tensor& in, bool parallel, F&& f) {
  T* dst = static_cast<T*>(out.raw_data());
  const In* src = static_cast<const In*>(in.raw_data());
  auto piece = [dst, src, f](int64_t b, int64_t e) mutable {
    for (int64_t i = b; i < e; ++i) dst[i] = f(uint64_t(i), src[i]);
  };
  if (parallel && in.shape() == out.shape() && fill_in_pieces(out.numel(), piece, {&out, &in}))
    return;
  // Below the threaded size, dense operands take the flat loop as well: the stride walk kept
  // the functor's values on the stack (dropout of 32K float32: 150 us, PyTorch 200 on two
  // threads; bfloat16 330 against 315).
  if (in.shape() == out.shape() && in.is_contiguous() && out.is_contiguous())
    return piece(0, out.numel());
  auto loop = make_strided_loop<2>({&out, &in}, out.shape());
  uint64_t i = 0;
  for_each_run<2>(loop, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s,
                            int64_t n) {
    for (int64_t j = 0; j < n; ++j)
      *reinterpret_cast<T*>(p[0] + j * s[0]) =
          f(i++, *reinterpret_cast<const In*>(p[1] + j * s[1]));
  });
}

// attrs: from, to, seed, offset.
void uniform_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  double from = call.double_attr(0), to = call.double_attr(1);
  PhiloxDraws d(call, 2);
  KILN_DISPATCH_FLOAT(out.dtype(), "uniform_", [&]<typename T>() {
    constexpr int digits = uniform_digits<T>();
    const T low = convert_value<T>(from);
    fill_logical<T>(out, [=](uint64_t i) mutable {
      double u;
      if constexpr (digits == 53) {
        u = d.unit_double(i);
      } else {
        u = double(d.draw32(i) >> (32 - digits)) * (1.0 / double(uint64_t(1) << digits));
      }
      T v = convert_value<T>(from + u * (to - from));
      if (from < to && convert_value<double>(v) >= to) v = low;  // rounded up to `to`
      return v;
    });
  });
}

// normal_ in float math (float32 / bfloat16 / float16) through the ISA's vector Box-Muller
// (SLEEF's log, sin and cos) for every element at every size and layout, so a value depends
// on its index only: pairs of draws in blocks, pieces over the threads for large outputs; a
// strided output is filled through a contiguous buffer. The libm loop took 14.7 ns per value
// on one thread (1M float32: 14.7 ms, torch 3.5 ms). False below AVX2 (the scalar loop).
template <typename T>
bool normal_vectorised(const Tensor& out, const PhiloxDraws& draws, double mean, double std) {
  const VecBoxMullerF32 box_muller = vec_math_f32().box_muller;
  if (!box_muller) return false;
  const Tensor dst =
      out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  T* values = static_cast<T*>(dst.raw_data());
  const int64_t n = dst.numel();
  auto piece = [&, d = draws](int64_t b, int64_t e) mutable {
    constexpr int64_t kPairs = 256;
    alignas(64) float u1[kPairs], u2[kPairs], z0[kPairs], z1[kPairs];
    // Element i is half of pair i / 2; a piece may start or end inside a pair.
    for (int64_t p0 = b / 2; p0 < (e + 1) / 2; p0 += kPairs) {
      const int64_t m = std::min(kPairs, (e + 1) / 2 - p0);
      for (int64_t k = 0; k < m; ++k) {
        const uint64_t first = 2 * uint64_t(p0 + k);
        u1[k] = 1.0f - uint32_to_unit_float(d.draw32(first));
        u2[k] = uint32_to_unit_float(d.draw32(first + 1));
      }
      box_muller(u1, u2, z0, z1, m);
      for (int64_t k = 0; k < m; ++k) {
        const int64_t i = 2 * (p0 + k);
        if (i >= b) values[i] = convert_value<T>(double(z0[k]) * std + mean);
        if (i + 1 < e) values[i + 1] = convert_value<T>(double(z1[k]) * std + mean);
      }
    }
  };
  if (!fill_in_pieces(n, piece, {&dst})) piece(0, n);
  if (!out.is_contiguous()) copy_same_shape(out, dst);
  return true;
}

// attrs: mean, std, seed, offset.
void normal_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  double mean = call.double_attr(0), std = call.double_attr(1);
  PhiloxDraws d(call, 2);
  KILN_DISPATCH_FLOAT(out.dtype(), "normal_", [&]<typename T>() {
    if constexpr (!std::is_same_v<T, double>) {
      if (normal_vectorised<T>(out, d, mean, std)) return;
    }
    // Acc: the type of the Box-Muller math.
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    // The pair's radius and angle are kept for its second element (per copy of the functor).
    auto f = [=, pair = ~uint64_t(0), r = Acc(0), theta = Acc(0)](uint64_t i) mutable {
      uint64_t k = 2 * (i / 2);
      if (k != pair) {
        Acc u1, u2;
        if constexpr (std::is_same_v<Acc, double>) {
          u1 = 1.0 - d.unit_double(k);
          u2 = d.unit_double(k + 1);
        } else {
          u1 = 1.0f - uint32_to_unit_float(d.draw32(k));
          u2 = uint32_to_unit_float(d.draw32(k + 1));
        }
        r = std::sqrt(Acc(-2) * std::log(u1));
        theta = Acc(2) * std::numbers::pi_v<Acc> * u2;
        pair = k;
      }
      Acc z = (i % 2 == 0) ? r * std::cos(theta) : r * std::sin(theta);
      return convert_value<T>(double(z) * std + mean);
    };
    fill_logical<T>(out, f);
  });
}

// attrs: p, seed, offset. Any dtype: writes 0 or 1.
void bernoulli_scalar_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  double p = call.double_attr(0);
  PhiloxDraws d(call, 1);
  KILN_DISPATCH_ALL(out.dtype(), "bernoulli_", [&]<typename T>() {
    const T one = convert_value<T>(1), zero = convert_value<T>(0);
    fill_logical<T>(out, [=](uint64_t i) mutable { return d.unit_32(i) < p ? one : zero; });
  });
}

// inputs: probs; attrs: seed, offset. out has probs' shape and dtype.
void bernoulli_tensor_kernel(OpCall& call) {
  const Tensor& probs = call.inputs[0];
  const Tensor& out = call.outs[0];
  PhiloxDraws d(call, 0);
  KILN_DISPATCH_FLOAT(out.dtype(), "bernoulli", [&]<typename T>() {
    const T one = convert_value<T>(1), zero = convert_value<T>(0);
    // In order on one thread: the error names the first bad probability.
    map_logical<T, T>(out, probs, /*parallel=*/false, [&](uint64_t i, T pv) {
      double p = convert_value<double>(pv);
      KILN_CHECK(p >= 0 && p <= 1, Error,
                 "bernoulli expects all probabilities to be in [0, 1] (p_in >= 0 && p_in <= 1), "
                 "but got p=", p, " at flat index ", i);
      return d.unit_32(i) < p ? one : zero;
    });
  });
}

// inputs: x; attrs: p, seed, offset. 0 < p < 1 (the public function handles the rest).
void dropout_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  double p = call.double_attr(0);
  double keep = 1.0 - p;
  PhiloxDraws d(call, 1);
  KILN_DISPATCH_FLOAT(out.dtype(), "dropout", [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    // The scale rounded to the dtype first, as PyTorch's noise tensor holds it.
    const Acc scale = Acc(convert_value<double>(convert_value<T>(1.0 / keep)));
    const T zero = convert_value<T>(0);
    map_logical<T, T>(out, x, /*parallel=*/true, [=](uint64_t i, T v) mutable {
      return d.unit_32(i) < keep ? convert_value<T>(Acc(convert_value<double>(v)) * scale) : zero;
    });
  });
}

// attrs: from, to, seed, offset. Any dtype (the public function checked the bounds).
void random_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  int64_t from = call.int_attr(0), to = call.int_attr(1);
  uint64_t range = uint64_t(to) - uint64_t(from);
  bool wide = range > (uint64_t(1) << 32);
  PhiloxDraws d(call, 2);
  KILN_DISPATCH_ALL(out.dtype(), "random_", [&]<typename T>() {
    fill_logical<T>(out, [=](uint64_t i) mutable {
      uint64_t step = wide ? uint64_t((unsigned __int128)d.draw64(i) * range >> 64)
                           : (uint64_t(d.draw32(i)) * range) >> 32;
      return convert_value<T>(int64_t(uint64_t(from) + step));
    });
  });
}

// inputs: probs (1-D or 2-D, any layout); attrs: num_samples, replacement, seed, offset.
void multinomial_kernel(OpCall& call) {
  const Tensor& probs = call.inputs[0];
  const Tensor& out = call.outs[0];
  int64_t n = call.int_attr(0);
  bool replacement = call.bool_attr(1);
  PhiloxDraws d(call, 2);
  int64_t rows = probs.dim() == 1 ? 1 : probs.size(0);
  int64_t cats = probs.size(-1);
  int64_t row_stride = probs.dim() == 1 ? 0 : probs.stride(0);
  int64_t cat_stride = probs.stride(-1);
  int64_t* o = out.data_ptr<int64_t>();
  KILN_DISPATCH_FLOAT(probs.dtype(), "multinomial", [&]<typename T>() {
    const T* base = static_cast<const T*>(probs.raw_data());
    std::vector<double> w(static_cast<size_t>(cats));
    std::vector<double> key(replacement ? 0 : size_t(cats));
    std::vector<int64_t> order(replacement ? 0 : size_t(cats));
    for (int64_t r = 0; r < rows; ++r) {
      double total = 0, largest = 0;
      for (int64_t c = 0; c < cats; ++c) {
        double p = convert_value<double>(base[r * row_stride + c * cat_stride]);
        if (replacement) {
          KILN_CHECK(p >= 0 || std::isnan(p), Error,
                     "invalid multinomial distribution (encountering probability entry < 0)");
          KILN_CHECK(std::isfinite(p), Error,
                     "invalid multinomial distribution (encountering probability entry = "
                     "infinity or NaN)");
        } else {
          KILN_CHECK(std::isfinite(p) && p >= 0, Error,
                     "probability tensor contains either `inf`, `nan` or element < 0");
        }
        w[size_t(c)] = p;
        total += p;
        largest = std::max(largest, p);
      }
      KILN_CHECK(total > 0, Error,
                 "invalid multinomial distribution (sum of probabilities <= 0)");
      if (!std::isfinite(total)) {  // finite entries whose sum overflows: rescale the row
        total = 0;
        for (auto& p : w) total += (p /= largest);
      }
      int64_t* dst = o + r * n;
      if (replacement) {
        double run = 0;
        for (auto& p : w) p = (run += p);  // running sums; w.back() is the row total
        total = w.back();
        for (int64_t j = 0; j < n; ++j) {
          double target = d.unit_double(uint64_t(r * n + j)) * total;
          auto it = std::upper_bound(w.begin(), w.end(), target);
          // target < total unless the product rounded up: take the last positive category.
          if (it == w.end()) it = std::lower_bound(w.begin(), w.end(), total);
          dst[j] = int64_t(it - w.begin());
        }
      } else {
        for (int64_t c = 0; c < cats; ++c) {
          double p = w[size_t(c)];
          double q = -std::log1p(-d.unit_double(uint64_t(r * cats + c)));  // Exp(1), >= 0
          key[size_t(c)] = p == 0 ? -1.0 : p / q;  // q == 0 gives +inf: taken first
        }
        std::iota(order.begin(), order.end(), int64_t(0));
        std::partial_sort(order.begin(), order.begin() + n, order.end(),
                          [&](int64_t a, int64_t b) {
                            double ka = key[size_t(a)], kb = key[size_t(b)];
                            return ka != kb ? ka > kb : a < b;
                          });
        std::copy(order.begin(), order.begin() + n, dst);
      }
    }
  });
}

// attrs: n, dtype, seed, offset. out: the contiguous 1-D output.
void randperm_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  int64_t n = call.int_attr(0);
  PhiloxDraws d(call, 2);
  std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keyed[size_t(i)] = {d.draw64(uint64_t(i)), i};
  std::sort(keyed.begin(), keyed.end());
  KILN_DISPATCH_ALL(out.dtype(), "randperm", [&]<typename T>() {
    fill_logical<T>(out, [&](uint64_t j) { return convert_value<T>(keyed[j].second); });
  });
}

}  // namespace

void register_random_kernels() {
  register_kernel("uniform_", DeviceType::CPU, uniform_kernel, kFloatDTypes);
  register_kernel("normal_", DeviceType::CPU, normal_kernel, kFloatDTypes);
  register_kernel("bernoulli_", DeviceType::CPU, bernoulli_scalar_kernel, kAllDTypes);
  register_kernel("bernoulli", DeviceType::CPU, bernoulli_tensor_kernel, kFloatDTypes);
  register_kernel("dropout", DeviceType::CPU, dropout_kernel, kFloatDTypes);
  register_kernel("random_", DeviceType::CPU, random_kernel, kAllDTypes);
  register_kernel("multinomial", DeviceType::CPU, multinomial_kernel, kFloatDTypes);
  register_kernel("randperm", DeviceType::CPU, randperm_kernel, kNumericDTypes);
}

}  // namespace kiln::cpu
