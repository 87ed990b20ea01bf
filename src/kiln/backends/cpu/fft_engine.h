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

  // Batched transforms of `count` lines, line l's element j at base[l * dist + j * stride]
  // (in elements of the pointed-to type, any sign). Enough lines of a short enough length go
  // through the vector lanes (isa/fft_lanes.h: a register's worth of lines per butterfly),
  // others one at a time. A line's input is read before its output is written and lines are
  // handled in disjoint groups, so in == out (same geometry) is the in-place transform.
  void c2c(const std::complex<T>* in, int64_t is, int64_t idist, std::complex<T>* out,
           int64_t os, int64_t odist, int64_t count, bool forward) const;
  // Forward transforms of real lines, bins [0, nout) of each (1 <= nout <= n); the DC and
  // (even n) Nyquist bins are exactly real.
  void r2c(const T* in, int64_t is, int64_t idist, std::complex<T>* out, int64_t os,
           int64_t odist, int64_t count, int64_t nout) const;
  // Inverse transforms to real lines of n points from nin >= 1 bins each: bins below
  // min(nin, n / 2 + 1) and their mirror images (X[n - k] = conj X[k]) make the Hermitian
  // spectrum; other bins are zero; the imaginary parts of DC and Nyquist bins are ignored.
  void c2r(const std::complex<T>* in, int64_t is, int64_t idist, int64_t nin, T* out,
           int64_t os, int64_t odist, int64_t count) const;
  // Lines per batched call that keeps the lane groups full (callers that split a batch over
  // threads hand out multiples of it).
  int64_t group_lines() const;

 private:
  // c2c with output element j of line l multiplied by out_tw[j * tw_stride + l] (conjugated
  // when inverse): the four-step split's twiddles, fused into its first step.
  void c2c_twiddled(const std::complex<T>* in, int64_t is, int64_t idist, std::complex<T>* out,
                    int64_t os, int64_t odist, int64_t count, bool forward,
                    const std::complex<T>* out_tw, int64_t tw_stride) const;

  // The plan that runs real transforms of this length: the plan of n / 2 points with tw set to
  // e^{-2 pi i k / n}, k <= n / 2, when n is even; this plan with tw null when n is odd.
  const Plan* real_half(const std::complex<T>** tw) const;

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
