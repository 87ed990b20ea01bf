// CPU kernels of the samplers with a variable number of draws per value: _standard_gamma,
// poisson, binomial (rejection_samplers.h), and _standard_gamma_grad (not random: the
// derivative of a Gamma sample with respect to its concentration).
//
// Draw contract (every backend): element i (row-major index of the contiguous output) takes
// its uniforms from ElementStream(seed, offset + i), the op having reserved one Philox block
// per element; see rejection_samplers.h. Values depend on (seed, offset, i) only.
//
// The parameters are checked in a first serial pass, so the error names the first bad
// element whatever the thread count; the sampling pass runs in pieces over the threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "rejection_samplers.h"

namespace kiln::cpu {
namespace {

// A rejection sampler costs 50-200 ns a value: threads pay off from a few thousand values.
constexpr int64_t kThreadedValues = 4096;

// f(begin, end) over pieces of [0, n) spread over the threads.
template <typename F>
void for_each_range(int64_t n, const F& f) {
  const int threads = detail::elementwise_threads();
  if (n < kThreadedValues || threads <= 1) return f(int64_t(0), n);
  const int64_t pieces = 8 * int64_t(threads);  // uneven costs (loops) even out over pieces
  detail::parallel_chunks(pieces, [&](int64_t p) { f(n * p / pieces, n * (p + 1) / pieces); });
}

// out[i] = f(i) for the contiguous output, in pieces over the threads.
template <typename F>
void for_each_value(int64_t n, const F& f) {
  for_each_range(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// The smallest positive normal value of each float type.
template <typename T>
constexpr double smallest_normal() {
  if constexpr (std::is_same_v<T, double>) return std::numeric_limits<double>::min();
  else if constexpr (std::is_same_v<T, Half>) return 6.103515625e-05;  // 2^-14
  else return double(std::numeric_limits<float>::min());  // float, bfloat16: 2^-126
}

template <typename T>
double value_at(const Tensor& t, int64_t i) {
  return convert_value<double>(static_cast<const T*>(t.raw_data())[i]);
}

// inputs: alpha (contiguous); attrs: seed, offset.
void standard_gamma_kernel(OpCall& call) {
  const Tensor& alpha = call.inputs[0];
  const Tensor& out = call.outs[0];
  const uint64_t seed = uint64_t(call.int_attr(0)), offset = uint64_t(call.int_attr(1));
  KILN_DISPATCH_FLOAT(out.dtype(), "_standard_gamma", [&]<typename T>() {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double a = value_at<T>(alpha, i);
      KILN_CHECK(a > 0, Error, "_standard_gamma expects every concentration (alpha) to be > 0, "
                 "but got ", a, " at flat index ", i);
    }
    // Samples that underflow become the smallest normal value, as PyTorch: log(x) stays finite.
    const double tiny = smallest_normal<T>();
    T* o = static_cast<T*>(out.raw_data());
    for_each_value(n, [&](int64_t i) {
      ElementStream s(seed, offset + uint64_t(i));
      o[i] = convert_value<T>(std::max(sample_standard_gamma(value_at<T>(alpha, i), s), tiny));
    });
  });
}

// inputs: rates (contiguous); attrs: seed, offset.
void poisson_kernel(OpCall& call) {
  const Tensor& rates = call.inputs[0];
  const Tensor& out = call.outs[0];
  const uint64_t seed = uint64_t(call.int_attr(0)), offset = uint64_t(call.int_attr(1));
  KILN_DISPATCH_FLOAT(out.dtype(), "poisson", [&]<typename T>() {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double r = value_at<T>(rates, i);
      KILN_CHECK(r >= 0 && std::isfinite(r), Error,
                 "invalid Poisson rate, expected every rate to be finite and non-negative, but "
                 "got ", r, " at flat index ", i);
    }
    T* o = static_cast<T*>(out.raw_data());
    for_each_value(n, [&](int64_t i) {
      ElementStream s(seed, offset + uint64_t(i));
      o[i] = convert_value<T>(sample_poisson(value_at<T>(rates, i), s));
    });
  });
}

// inputs: count, prob (contiguous, same shape); attrs: seed, offset.
void binomial_kernel(OpCall& call) {
  const Tensor& count = call.inputs[0];
  const Tensor& prob = call.inputs[1];
  const Tensor& out = call.outs[0];
  const uint64_t seed = uint64_t(call.int_attr(0)), offset = uint64_t(call.int_attr(1));
  KILN_DISPATCH_FLOAT(out.dtype(), "binomial", [&]<typename T>() {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double c = value_at<T>(count, i), p = value_at<T>(prob, i);
      KILN_CHECK(c >= 0 && c == std::floor(c) && c <= 9007199254740992.0, Error,
                 "binomial expects every count to be a non-negative integer (at most 2^53), but "
                 "got ", c, " at flat index ", i);
      KILN_CHECK(p >= 0 && p <= 1, Error,
                 "binomial expects every probability to be in [0, 1], but got ", p,
                 " at flat index ", i);
    }
    T* o = static_cast<T*>(out.raw_data());
    for_each_range(n, [&](int64_t b, int64_t e) {
      std::optional<BinomialSampler> sampler;  // rebuilt when the parameters change
      for (int64_t i = b; i < e; ++i) {
        const double c = value_at<T>(count, i), p = value_at<T>(prob, i);
        if (!sampler || !sampler->same(c, p)) sampler.emplace(c, p);
        ElementStream s(seed, offset + uint64_t(i));
        o[i] = convert_value<T>((*sampler)(s));
      }
    });
  });
}

// inputs: alpha, sample (contiguous, same shape). Not random.
void standard_gamma_grad_kernel(OpCall& call) {
  const Tensor& alpha = call.inputs[0];
  const Tensor& sample = call.inputs[1];
  const Tensor& out = call.outs[0];
  KILN_DISPATCH_FLOAT(out.dtype(), "_standard_gamma_grad", [&]<typename T>() {
    T* o = static_cast<T*>(out.raw_data());
    for_each_value(out.numel(), [&](int64_t i) {
      o[i] = convert_value<T>(standard_gamma_grad(value_at<T>(alpha, i), value_at<T>(sample, i)));
    });
  });
}

}  // namespace

void register_random_sampling_kernels() {
  register_kernel("_standard_gamma", DeviceType::CPU, standard_gamma_kernel, kFloatDTypes);
  register_kernel("poisson", DeviceType::CPU, poisson_kernel, kFloatDTypes);
  register_kernel("binomial", DeviceType::CPU, binomial_kernel, kFloatDTypes);
  register_kernel("_standard_gamma_grad", DeviceType::CPU, standard_gamma_grad_kernel,
                  kFloatDTypes);
}

}  // namespace kiln::cpu
