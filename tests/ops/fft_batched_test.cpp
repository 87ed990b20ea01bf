// The FFT engine's batched transforms (Plan::c2c / r2c / c2r, decision 0094) against a long
// double naive DFT of every line: batches that fill the vector lanes, partial groups, single
// lines; rows (adjacent elements, tiles transposed into lanes), columns (adjacent lines) and
// other strides, negative ones included; smooth, generic-prime and Bluestein lengths; real
// lines of very different sizes side by side; one-sided and full r2c output; c2r from fewer,
// exactly and more than n/2 + 1 bins. The CTest ISA reruns run it at every level
// (KILN_CPU_ISA).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "../../src/kiln/backends/cpu/fft_engine.h"

namespace kiln::test {
namespace {

using CL = std::complex<long double>;
const long double kPi = 3.141592653589793238462643383279502884L;

// sum_j x[j] e^{sign 2 pi i j k / n} for every k (the roots of the last n kept).
std::vector<CL> dft(const std::vector<CL>& x, bool forward) {
  const int64_t n = int64_t(x.size());
  static std::vector<CL> w;
  if (int64_t(w.size()) != n) {
    w.resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) {
      const long double a = 2 * kPi * (long double)j / (long double)n;
      w[size_t(j)] = CL(std::cos(a), std::sin(a));
    }
  }
  std::vector<CL> y(x.size());
  for (int64_t k = 0; k < n; ++k) {
    CL s = 0;
    for (int64_t j = 0; j < n; ++j) {
      const CL r = w[size_t((j * k) % n)];
      s += x[size_t(j)] * (forward ? std::conj(r) : r);
    }
    y[size_t(k)] = s;
  }
  return y;
}

template <typename T>
double tolerance(int64_t n) {
  const double u = std::ldexp(1.0, -std::numeric_limits<T>::digits);
  return 5.0 * u * std::sqrt(std::max(1.0, std::log2(double(n))));
}

// ||got - ref|| / ||ref|| over one line.
double rel_err(const std::vector<CL>& got, const std::vector<CL>& ref) {
  long double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += std::norm(got[i] - ref[i]);
    den += std::norm(ref[i]);
  }
  return double(std::sqrt(num / std::max(den, 1e-300L)));
}

// A batch layout: line l's element j at l * dist + j * stride + offset (offset keeps negative
// strides inside the buffer), in a buffer of `size` elements.
struct Layout {
  const char* name;
  int64_t stride, dist, offset, size;
};

std::vector<Layout> layouts(int64_t n, int64_t count) {
  return {
      {"rows", 1, n, 0, n * count},
      {"padded rows", 1, n + 3, 0, (n + 3) * count},
      {"columns", count, 1, 0, n * count},
      {"reversed rows", -1, n, n - 1, n * count},
      {"strided columns", 2 * count + 1, 2, 0, (2 * count + 1) * n},
  };
}

const std::vector<int64_t> kLengths = {1, 2, 3, 5, 8, 12, 16, 17, 30, 37, 64, 100, 127, 243, 256};
const std::vector<int64_t> kCounts = {1, 7, 16, 33};

template <typename T>
void check_c2c() {
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t n : kLengths) {
    const auto plan = fft::get_plan<T>(n);
    for (int64_t count : kCounts) {
      const std::vector<Layout> all = layouts(n, count);
      for (size_t li = 0; li < all.size(); ++li) {
        const Layout& in_l = all[li];
        const Layout& out_l = all[(li + 2) % all.size()];  // every layout in and out
        std::vector<std::complex<T>> in(size_t(in_l.size)), out(size_t(out_l.size));
        for (auto& v : in) v = {T(u(gen)), T(u(gen))};
        for (bool forward : {true, false}) {
          plan->c2c(in.data() + in_l.offset, in_l.stride, in_l.dist, out.data() + out_l.offset,
                    out_l.stride, out_l.dist, count, forward);
          for (int64_t l = 0; l < count; ++l) {
            std::vector<CL> x(static_cast<size_t>(n)), got(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j) {
              const auto a = in[size_t(in_l.offset + l * in_l.dist + j * in_l.stride)];
              const auto b = out[size_t(out_l.offset + l * out_l.dist + j * out_l.stride)];
              x[size_t(j)] = CL(a.real(), a.imag());
              got[size_t(j)] = CL(b.real(), b.imag());
            }
            ASSERT_LE(rel_err(got, dft(x, forward)), tolerance<T>(n))
                << "n " << n << " count " << count << " line " << l << " in " << in_l.name
                << " out " << out_l.name << " forward " << forward;
          }
        }
      }
    }
  }
}

TEST(FftBatched, ComplexLinesFloat) { check_c2c<float>(); }
TEST(FftBatched, ComplexLinesDouble) { check_c2c<double>(); }

template <typename T>
void check_r2c() {
  std::mt19937_64 gen(2);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t n : kLengths) {
    const auto plan = fft::get_plan<T>(n);
    for (int64_t count : kCounts) {
      for (int64_t nout : {n / 2 + 1, n}) {
        for (const Layout& in_l : layouts(n, count)) {
          // the output lines hold nout bins
          const Layout out_l = in_l.stride == 1 ? Layout{"rows", 1, nout, 0, nout * count}
                                                : Layout{"columns", count, 1, 0, nout * count};
          std::vector<T> in(size_t(in_l.size));
          std::vector<std::complex<T>> out(size_t(out_l.size));
          // Odd lines a million times smaller: each line's error must stay relative to its
          // own size (two real lines sharing one complex transform would fail this).
          for (int64_t l = 0; l < count; ++l)
            for (int64_t j = 0; j < n; ++j)
              in[size_t(in_l.offset + l * in_l.dist + j * in_l.stride)] =
                  T(u(gen) * (l % 2 ? 1e-6 : 1));
          plan->r2c(in.data() + in_l.offset, in_l.stride, in_l.dist, out.data(), out_l.stride,
                    out_l.dist, count, nout);
          for (int64_t l = 0; l < count; ++l) {
            std::vector<CL> x(static_cast<size_t>(n)), got(static_cast<size_t>(nout));
            for (int64_t j = 0; j < n; ++j)
              x[size_t(j)] = in[size_t(in_l.offset + l * in_l.dist + j * in_l.stride)];
            for (int64_t k = 0; k < nout; ++k) {
              const auto b = out[size_t(l * out_l.dist + k * out_l.stride)];
              got[size_t(k)] = CL(b.real(), b.imag());
            }
            std::vector<CL> ref = dft(x, true);
            ref.resize(size_t(nout));
            ASSERT_LE(rel_err(got, ref), tolerance<T>(n))
                << "n " << n << " count " << count << " nout " << nout << " line " << l
                << " in " << in_l.name;
            ASSERT_EQ(got[0].imag(), 0) << "DC bin not real, n " << n;
            if (n % 2 == 0) ASSERT_EQ(got[size_t(n / 2)].imag(), 0) << "Nyquist not real";
          }
        }
      }
    }
  }
}

TEST(FftBatched, RealLinesFloat) { check_r2c<float>(); }
TEST(FftBatched, RealLinesDouble) { check_r2c<double>(); }

template <typename T>
void check_c2r() {
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t n : kLengths) {
    const auto plan = fft::get_plan<T>(n);
    for (int64_t count : kCounts) {
      for (int64_t nin : {std::max<int64_t>(1, n / 3), n / 2 + 1, n / 2 + 4}) {
        const Layout in_l = count % 2 ? Layout{"rows", 1, nin, 0, nin * count}
                                      : Layout{"columns", count, 1, 0, nin * count};
        for (const Layout& out_l : layouts(n, count)) {
          std::vector<std::complex<T>> in(size_t(in_l.size));
          std::vector<T> out(size_t(out_l.size));
          for (int64_t l = 0; l < count; ++l)  // odd lines a million times smaller, as above
            for (int64_t k = 0; k < nin; ++k)
              in[size_t(l * in_l.dist + k * in_l.stride)] =
                  std::complex<T>(T(u(gen)), T(u(gen))) * T(l % 2 ? 1e-6 : 1);
          plan->c2r(in.data(), in_l.stride, in_l.dist, nin, out.data() + out_l.offset,
                    out_l.stride, out_l.dist, count);
          const int64_t half = std::min(nin, n / 2 + 1);
          for (int64_t l = 0; l < count; ++l) {
            // The Hermitian spectrum as the header defines it.
            std::vector<CL> X(static_cast<size_t>(n), CL(0)), got(static_cast<size_t>(n));
            for (int64_t k = 0; k < half; ++k) {
              const auto v = in[size_t(l * in_l.dist + k * in_l.stride)];
              X[size_t(k)] = CL(v.real(), (k == 0 || 2 * k == n) ? 0 : v.imag());
            }
            for (int64_t k = 1; k < half; ++k)
              if (n - k >= half) X[size_t(n - k)] = std::conj(X[size_t(k)]);
            std::vector<CL> ref = dft(X, false);
            for (CL& v : ref) v = CL(v.real(), 0);
            for (int64_t j = 0; j < n; ++j)
              got[size_t(j)] = out[size_t(out_l.offset + l * out_l.dist + j * out_l.stride)];
            ASSERT_LE(rel_err(got, ref), tolerance<T>(n))
                << "n " << n << " count " << count << " nin " << nin << " line " << l
                << " out " << out_l.name;
          }
        }
      }
    }
  }
}

TEST(FftBatched, HermitianToRealFloat) { check_c2r<float>(); }
TEST(FftBatched, HermitianToRealDouble) { check_c2r<double>(); }

}  // namespace
}  // namespace kiln::test
