#pragma once
// Batched FFTs "in lanes" (decision 0094): a group of lines (as many as one vector register
// holds values of T) is transformed at once, element j of the group being one register of
// real parts and one of imaginary parts. Every butterfly then works on whole registers with no
// shuffles, whatever the radix or the pass, which is what the scalar passes of fft_engine.cpp
// cannot do. Compiled per ISA level (fft_lanes_<level>.cpp); the plan's tables come from
// fft_engine.cpp, which decides when lanes pay off.
#include <complex>
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::fft_lanes {

// One Stockham pass (fft_engine.cpp): radix p; before it, m * p interleaved DFTs of length L;
// tw[(p - 1) k + r - 1] = e^{-2 pi i r k / (L p)}; cs[2j], cs[2j + 1] = cos, sin(2 pi j / p)
// (used for p > 5).
template <typename T>
struct Stage {
  int p;
  size_t L, m;
  const std::complex<T>* tw;
  const T* cs;
};

// What the lane kernels need of a plan of length n.
template <typename T>
struct PlanView {
  size_t n;
  const Stage<T>* stages;  // the passes of length n, or of M under Bluestein
  size_t nstages;
  size_t M;                       // 0 unless Bluestein
  const std::complex<T>* chirp;   // Bluestein: e^{-pi i j^2 / n}, j < n
  const std::complex<T>* filter;  // Bluestein: spectrum of the conjugate chirp / M
};

// Line l's element j is at base[l * dist + j * stride] (strides in elements of the pointed-to
// type, any sign). No scaling anywhere. The input of a group of lines is read in full before
// its output is written, and groups touch disjoint lines, so in == out works.
template <typename T>
struct Kernels {
  int lanes;  // lines per group
  // Complex transforms of `count` lines, sign -1 when forward. With out_tw, output element j
  // of line l is first multiplied by out_tw[j * tw_stride + l] (its conjugate when inverse):
  // the four-step split's twiddles, applied in registers instead of in a pass of their own.
  void (*c2c)(const PlanView<T>& plan, const std::complex<T>* in, int64_t is, int64_t idist,
              std::complex<T>* out, int64_t os, int64_t odist, int64_t count, bool forward,
              const std::complex<T>* out_tw, int64_t tw_stride);
  // Forward transforms of `count` real lines of n points, bins [0, nout) of each (nout <= n;
  // DC and Nyquist bins exactly real). Even n: `plan` is of n / 2 points and
  // tw[k] = e^{-2 pi i k / n} for k <= n / 2; odd n: tw is null and `plan` is of n points.
  void (*r2c)(const PlanView<T>& plan, const std::complex<T>* tw, const T* in, int64_t is,
              int64_t idist, std::complex<T>* out, int64_t os, int64_t odist, int64_t count,
              int64_t nout);
  // Inverse transforms to `count` real lines of n points (plan and tw as for r2c) from nin
  // bins each: bins below half = min(nin, n / 2 + 1) and their mirror images
  // (X[n - k] = conj X[k]) make the Hermitian spectrum; the imaginary parts of the DC and
  // Nyquist bins are ignored.
  void (*c2r)(const PlanView<T>& plan, const std::complex<T>* tw, const std::complex<T>* in,
              int64_t is, int64_t idist, int64_t nin, T* out, int64_t os, int64_t odist,
              int64_t count);
};

Kernels<float> kernels_f32_baseline();
Kernels<float> kernels_f32_avx2();
Kernels<float> kernels_f32_avx512();
Kernels<double> kernels_f64_baseline();
Kernels<double> kernels_f64_avx2();
Kernels<double> kernels_f64_avx512();

// The current ISA level's.
template <typename T>
const Kernels<T>& kernels();

}  // namespace kiln::cpu::fft_lanes
