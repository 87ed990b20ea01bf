#pragma once
// kiln's own FFT engine (decision 0092): complex transforms of any length n >= 1 in float or
// double, standard library only. Lengths whose prime factors are all <= 31 run a mixed-radix
// Stockham Cooley-Tukey (radix 4, 2, 3, 5 butterflies and a generic odd-prime one); any other
// length runs Bluestein's chirp-z algorithm over a power-of-two convolution, so every length
// is O(n log n). The tensor ops (fft / rfft / ...) build on this; it knows nothing of tensors.
#include <complex>
#include <cstdint>
#include <memory>

namespace kiln::fft {

// A plan for complex transforms of one length n >= 1 in precision T (float or double).
// Plans are immutable after construction and safe to use from several threads at once
// (each call gets its own scratch). Twiddles are computed in double precision (from long
// double sin / cos on an exactly reduced angle) and rounded once to T.
template <typename T>
class Plan {
 public:
  // Throws kiln::ValueError when n < 1 or n > 2^40.
  explicit Plan(int64_t n);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  int64_t size() const;
  // Whether this length runs Bluestein's algorithm (it has a prime factor above 31); for
  // tests and diagnostics.
  bool uses_bluestein() const;

  // out[k] = sum_j in[j] * exp(sign * 2*pi*i*j*k/n), sign = -1 when forward, +1 otherwise.
  // No scaling. Strides are in elements of std::complex<T> and may be any value, negative
  // included. The input is read in full before any output is written, so in and out may
  // overlap in any way (in == out with the same stride is the in-place transform).
  void execute(const std::complex<T>* in, int64_t in_stride, std::complex<T>* out,
               int64_t out_stride, bool forward) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A cached plan: a thread-safe cache keyed by n, one per T, keeping the 64 most recently used
// plans (a plan held by a caller outlives its eviction).
template <typename T>
std::shared_ptr<const Plan<T>> get_plan(int64_t n);

extern template class Plan<float>;
extern template class Plan<double>;
extern template std::shared_ptr<const Plan<float>> get_plan<float>(int64_t);
extern template std::shared_ptr<const Plan<double>> get_plan<double>(int64_t);

}  // namespace kiln::fft
