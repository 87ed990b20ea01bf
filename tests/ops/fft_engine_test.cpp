// The FFT engine (src/kiln/backends/cpu/fft_engine.*, decision 0092) against long double references:
// a naive O(n^2) DFT for every length up to 64 and for primes, prime powers, mixed and
// Bluestein lengths up to 4099; for longer lengths (up to 2^20) analytic transforms of shifted
// impulses, round trips, Parseval and spot bins. Both directions, float and double; strides,
// negative strides, in-place and overlapping buffers; one plan shared by several threads;
// the plan cache.
//
// Accuracy bound: ||y - ref|| / ||ref|| <= 5 u sqrt(max(1, log2 n)), u the unit roundoff of T
// (2^-24 float, 2^-53 double): 9.4e-7 float / 1.8e-15 double at n = 1024. The engine measures
// 1-1.3 u sqrt(log2 n) at worst (Bluestein), so the bound has about 4x margin and catches
// twiddles or a chirp computed in float for a double plan, or any indexing slip.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

// The engine's header lives under src/ (an internal header), which is not on the tests'
// include path; this relative include works in the CMake build and in a standalone one.
#include "../../src/kiln/backends/cpu/fft_engine.h"
#include "kiln/core/error.h"

namespace kiln::test {
namespace {

using fft::Plan;
using CL = std::complex<long double>;
const long double kPi = 3.141592653589793238462643383279502884L;

template <typename T>
double unit_roundoff() {
  return std::ldexp(1.0, -std::numeric_limits<T>::digits);
}

template <typename T>
double tolerance(int64_t n) {
  return 5.0 * unit_roundoff<T>() * std::sqrt(std::max(1.0, std::log2(double(n))));
}

// Worst error / tolerance seen per precision, printed at the end of each test that records it.
struct Worst {
  double ratio = 0, err = 0;
  int64_t n = 0;
  void add(double e, double tol, int64_t len) {
    if (e / tol > ratio) ratio = e / tol, err = e, n = len;
  }
  void print(const char* what) const {
    std::cout << "  [" << what << "] worst error " << err << " at n = " << n << " ("
              << ratio << " of the bound)\n";
  }
};

// Values in [-1, 1) rounded to float, so the same input is exact in both precisions.
std::vector<CL> random_input(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<CL> x(static_cast<size_t>(n));
  for (CL& v : x) v = CL(float(u(gen)), float(u(gen)));
  return x;
}

// e^{-2 pi i j / n} for j < n in long double.
std::vector<CL> roots(int64_t n) {
  std::vector<CL> w(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const long double a = 2 * kPi * (long double)j / (long double)n;
    w[size_t(j)] = CL(std::cos(a), -std::sin(a));
  }
  return w;
}

// Forward bin k of x, or the inverse bin when !forward.
CL dft_bin(const std::vector<CL>& x, const std::vector<CL>& w, int64_t k, bool forward) {
  const int64_t n = int64_t(x.size());
  CL s = 0;
  for (int64_t j = 0; j < n; ++j) {
    const CL r = w[size_t((j * k) % n)];
    s += x[size_t(j)] * (forward ? r : std::conj(r));
  }
  return s;
}

std::vector<CL> naive_dft(const std::vector<CL>& x) {
  const std::vector<CL> w = roots(int64_t(x.size()));
  std::vector<CL> y(x.size());
  for (size_t k = 0; k < x.size(); ++k) y[k] = dft_bin(x, w, int64_t(k), true);
  return y;
}

// The inverse DFT from the forward one: inverse(x)[k] = forward(x)[-k mod n].
std::vector<CL> reversed_bins(const std::vector<CL>& y) {
  std::vector<CL> r(y.size());
  for (size_t k = 0; k < y.size(); ++k) r[k] = y[(y.size() - k) % y.size()];
  return r;
}

template <typename T>
std::vector<std::complex<T>> to(const std::vector<CL>& x) {
  std::vector<std::complex<T>> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = std::complex<T>(T(x[i].real()), T(x[i].imag()));
  return r;
}

template <typename T>
std::vector<CL> run(const Plan<T>& plan, const std::vector<CL>& x, bool forward) {
  const std::vector<std::complex<T>> in = to<T>(x);
  std::vector<std::complex<T>> out(x.size());
  plan.execute(in.data(), 1, out.data(), 1, forward);
  return std::vector<CL>(out.begin(), out.end());
}

long double norm2(const std::vector<CL>& x) {
  long double s = 0;
  for (const CL& v : x) s += std::norm(v);
  return s;
}

double rel_err(const std::vector<CL>& y, const std::vector<CL>& ref) {
  long double num = 0;
  for (size_t i = 0; i < y.size(); ++i) num += std::norm(y[i] - ref[i]);
  const long double den = norm2(ref);
  return den == 0 ? double(std::sqrt(num)) : double(std::sqrt(num / den));
}

// Both precisions and both directions of one length against a full reference.
void check_against(int64_t n, const std::vector<CL>& x, const std::vector<CL>& fwd_ref,
                   Worst& wf, Worst& wd) {
  const std::vector<CL> inv_ref = reversed_bins(fwd_ref);
  auto one = [&](auto tag, Worst& worst) {
    using T = decltype(tag);
    const Plan<T> plan(n);
    ASSERT_EQ(plan.size(), n);
    const double tol = tolerance<T>(n);
    for (bool forward : {true, false}) {
      const double e = rel_err(run(plan, x, forward), forward ? fwd_ref : inv_ref);
      EXPECT_LE(e, tol) << "n " << n << (forward ? " forward " : " inverse ")
                        << (sizeof(T) == 4 ? "float" : "double");
      worst.add(e, tol, n);
    }
  };
  one(float(), wf);
  one(double(), wd);
}

TEST(FftEngine, EveryLengthUpTo64AgainstNaiveDft) {
  Worst wf, wd;
  for (int64_t n = 1; n <= 64; ++n) {
    const std::vector<CL> x = random_input(n, uint64_t(n));
    check_against(n, x, naive_dft(x), wf, wd);
  }
  wf.print("float");
  wd.print("double");
}

TEST(FftEngine, PrimesPowersMixedAndBluesteinLengthsAgainstNaiveDft) {
  // Direct primes up to 31 and their powers, Bluestein primes (37, 67, 97, 101, 127, 1009,
  // 4099) and composites with a Bluestein factor (74 = 2 * 37, 2368 = 64 * 37), smooth
  // composites (1000, 2310 = 2*3*5*7*11, 899 = 29 * 31), powers of two with an odd number of
  // halvings (128, 512, 2048: the lone radix-2 pass).
  Worst wf, wd;
  for (int64_t n : {67, 74, 97, 101, 125, 127, 128, 169, 243, 256, 289, 343, 361, 512, 625,
                    729, 899, 961, 1000, 1009, 1024, 1369, 2048, 2310, 2368, 3125, 4096, 4099}) {
    const std::vector<CL> x = random_input(n, uint64_t(n) * 7 + 1);
    check_against(n, x, naive_dft(x), wf, wd);
  }
  wf.print("float");
  wd.print("double");
}

TEST(FftEngine, BluesteinOnlyForPrimeFactorsAbove31) {
  for (int64_t n : {1, 2, 31, 62, 961, 2310, 30030, 65536, 78125})
    EXPECT_FALSE(Plan<float>(n).uses_bluestein()) << n;
  for (int64_t n : {37, 74, 1009, 4099, 10007, 262147})
    EXPECT_TRUE(Plan<double>(n).uses_bluestein()) << n;
}

// e^{-2 pi i j0 k / n} (forward) for x = delta at j0: a full analytic reference for lengths
// too long for the naive DFT.
TEST(FftEngine, ShiftedImpulsesOfLongLengths) {
  Worst wf, wd;
  for (int64_t n : {10007, 30030, 59049, 65536, 78125, 262147, 1 << 20}) {
    const std::vector<CL> w = roots(n);
    for (int64_t j0 : {int64_t(1), n / 3 + 1}) {
      std::vector<CL> x(static_cast<size_t>(n), 0), ref(static_cast<size_t>(n));
      x[size_t(j0)] = 1;
      for (int64_t k = 0; k < n; ++k) ref[size_t(k)] = w[size_t((j0 * k) % n)];
      auto one = [&](auto tag, Worst& worst) {
        using T = decltype(tag);
        const auto plan = fft::get_plan<T>(n);
        const double tol = tolerance<T>(n);
        const double ef = rel_err(run(*plan, x, true), ref);
        const double ei = rel_err(run(*plan, x, false), reversed_bins(ref));
        EXPECT_LE(ef, tol) << "n " << n << " j0 " << j0 << " forward";
        EXPECT_LE(ei, tol) << "n " << n << " j0 " << j0 << " inverse";
        worst.add(std::max(ef, ei), tol, n);
      };
      one(float(), wf);
      one(double(), wd);
    }
  }
  wf.print("float");
  wd.print("double");
}

// Random inputs of long lengths: inverse(forward(x)) / n == x, Parseval, and ten bins of
// each direction against long double sums.
TEST(FftEngine, LongLengthsRoundTripParsevalAndSpotBins) {
  Worst wf, wd;
  for (int64_t n : {10007, 30030, 65536, 262147, 1 << 20}) {
    const std::vector<CL> x = random_input(n, uint64_t(n));
    const std::vector<CL> w = roots(n);
    const long double xx = norm2(x);
    std::vector<int64_t> bins = {0, 1, 2, n / 2, n - 1};
    std::mt19937_64 gen(uint64_t(n) + 5);
    for (int i = 0; i < 5; ++i) bins.push_back(int64_t(gen() % uint64_t(n)));
    std::vector<CL> fwd_bins, inv_bins;
    for (int64_t k : bins) {
      fwd_bins.push_back(dft_bin(x, w, k, true));
      inv_bins.push_back(dft_bin(x, w, k, false));
    }
    auto one = [&](auto tag, Worst& worst) {
      using T = decltype(tag);
      const Plan<T> plan(n);
      const double tol = tolerance<T>(n);
      const std::vector<CL> y = run(plan, x, true);
      // Round trip (the inverse of the float-rounded spectrum, so its own rounding counts).
      std::vector<CL> z = run(plan, std::vector<CL>(y), false);
      for (CL& v : z) v /= (long double)n;
      const double e_rt = rel_err(z, x);
      EXPECT_LE(e_rt, 2 * tol) << "n " << n << " round trip";
      const double e_parseval = double(std::fabs(norm2(y) / ((long double)n * xx) - 1));
      EXPECT_LE(e_parseval, 2 * tol) << "n " << n << " Parseval";
      // A bin's error is about the relative error times ||X|| / sqrt(n) = ||x||.
      for (bool forward : {true, false}) {
        const std::vector<CL> yy = forward ? y : run(plan, x, false);
        for (size_t b = 0; b < bins.size(); ++b) {
          const CL want = forward ? fwd_bins[b] : inv_bins[b];
          const double e = double(std::abs(yy[size_t(bins[b])] - want) / std::sqrt(xx));
          EXPECT_LE(e, 2 * tol) << "n " << n << " bin " << bins[b] << (forward ? " fwd" : " inv");
          worst.add(e, 2 * tol, n);
        }
      }
      worst.add(e_rt, 2 * tol, n);
      worst.add(e_parseval, 2 * tol, n);
    };
    one(float(), wf);
    one(double(), wd);
  }
  wf.print("float");
  wd.print("double");
}

// Strides, negative strides, in place and overlap give bit for bit the contiguous result
// and write nothing but the output elements.
template <typename T>
void check_layouts(int64_t n) {
  using C = std::complex<T>;
  const Plan<T> plan(n);
  const std::vector<C> x = to<T>(random_input(n, uint64_t(n) + 99));
  std::vector<C> ref(static_cast<size_t>(n));
  plan.execute(x.data(), 1, ref.data(), 1, true);
  const C junk(T(12345), T(-6789));
  auto same = [&](const C* got, int64_t stride, const char* what) {
    for (int64_t k = 0; k < n; ++k)
      ASSERT_EQ(std::memcmp(&got[k * stride], &ref[size_t(k)], sizeof(C)), 0)
          << what << " n " << n << " bin " << k;
  };
  auto junk_kept = [&](const std::vector<C>& buf, int64_t stride, const char* what) {
    for (size_t i = 0; i < buf.size(); ++i)
      if (i % size_t(stride) != 0) {
        ASSERT_EQ(buf[i], junk) << what << " n " << n << " at " << i;
      }
  };
  {  // input stride 3, output stride 2
    std::vector<C> in(size_t(3 * n), junk), out(size_t(2 * n), junk);
    for (int64_t j = 0; j < n; ++j) in[size_t(3 * j)] = x[size_t(j)];
    plan.execute(in.data(), 3, out.data(), 2, true);
    same(out.data(), 2, "strided");
    junk_kept(out, 2, "strided");
  }
  {  // in place, contiguous and with stride 2
    std::vector<C> buf = x;
    plan.execute(buf.data(), 1, buf.data(), 1, true);
    same(buf.data(), 1, "in place");
    std::vector<C> buf2(size_t(2 * n), junk);
    for (int64_t j = 0; j < n; ++j) buf2[size_t(2 * j)] = x[size_t(j)];
    plan.execute(buf2.data(), 2, buf2.data(), 2, true);
    same(buf2.data(), 2, "in place stride 2");
    junk_kept(buf2, 2, "in place stride 2");
  }
  {  // negative strides: the input stored backwards, the output written backwards
    std::vector<C> in(size_t(3 * n), junk), out(size_t(n), junk);
    for (int64_t j = 0; j < n; ++j) in[size_t(3 * (n - 1 - j))] = x[size_t(j)];
    plan.execute(in.data() + 3 * (n - 1), -3, out.data() + (n - 1), -1, true);
    std::reverse(out.begin(), out.end());
    same(out.data(), 1, "negative strides");
  }
  {  // overlapping with different strides: read at stride 1, written at stride 2
    std::vector<C> buf(size_t(2 * n), junk);
    std::copy(x.begin(), x.end(), buf.begin());
    plan.execute(buf.data(), 1, buf.data(), 2, true);
    same(buf.data(), 2, "overlapping");
  }
}

TEST(FftEngine, StridesInPlaceAndOverlapGiveTheContiguousResult) {
  for (int64_t n : {1, 2, 12, 97, 1009, 1024, 2310}) {
    check_layouts<float>(n);
    check_layouts<double>(n);
  }
}

// One plan used from 8 threads at once gives each thread the serial results bit for bit.
template <typename T>
void check_threads(int64_t n) {
  using C = std::complex<T>;
  const auto plan = fft::get_plan<T>(n);
  constexpr int kThreads = 8, kPerThread = 12;
  std::vector<std::vector<C>> inputs, expected;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    inputs.push_back(to<T>(random_input(n, uint64_t(1000 + i))));
    expected.emplace_back(size_t(n));
    plan->execute(inputs.back().data(), 1, expected.back().data(), 1, i % 2 == 0);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<C> out(static_cast<size_t>(n));
      for (int rep = 0; rep < 3; ++rep) {
        for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
          plan->execute(inputs[size_t(i)].data(), 1, out.data(), 1, i % 2 == 0);
          if (std::memcmp(out.data(), expected[size_t(i)].data(), sizeof(C) * size_t(n)) != 0)
            ++mismatches;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0) << "n " << n;
}

TEST(FftEngine, OnePlanSharedByThreads) {
  for (int64_t n : {60, 4096, 1009}) {
    check_threads<float>(n);
    check_threads<double>(n);
  }
}

TEST(FftEngine, PlanCacheReturnsTheSamePlanAndEvictsTheOldest) {
  const auto a = fft::get_plan<float>(4321);
  EXPECT_EQ(a, fft::get_plan<float>(4321));
  EXPECT_EQ(a->size(), 4321);
  std::weak_ptr<const Plan<float>> weak = a;
  // 64 other lengths push it out; the caller's reference keeps it alive meanwhile.
  for (int64_t n = 2; n < 66; ++n) fft::get_plan<float>(n);
  EXPECT_FALSE(weak.expired());
  EXPECT_NE(a, fft::get_plan<float>(4321));  // rebuilt: the cache had dropped it
  // Recently used plans stay: 777 is touched between every other length.
  const Plan<double>* first = fft::get_plan<double>(777).get();
  for (int64_t n = 2; n < 200; ++n) {
    fft::get_plan<double>(n);
    EXPECT_EQ(fft::get_plan<double>(777).get(), first) << n;
  }
  // An unused one is dropped once 64 newer lengths came after it.
  std::weak_ptr<const Plan<double>> dropped = fft::get_plan<double>(5555);
  EXPECT_FALSE(dropped.expired());
  for (int64_t n = 300; n < 364; ++n) fft::get_plan<double>(n);
  EXPECT_TRUE(dropped.expired());
}

TEST(FftEngine, PlanCacheFromThreads) {
  // Threads asking for the same few lengths get one plan per length.
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<const Plan<float>>> hold;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const auto p = fft::get_plan<float>(1000 + (i + t) % 10);
        std::vector<std::complex<float>> buf(size_t(p->size()), {1.0f, 0.0f});
        p->execute(buf.data(), 1, buf.data(), 1, true);
        std::lock_guard<std::mutex> lock(mu);
        hold.push_back(p);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int64_t n = 1000; n < 1010; ++n) {
    const Plan<float>* one = nullptr;
    for (const auto& p : hold) {
      if (p->size() != n) continue;
      if (!one) one = p.get();
      EXPECT_EQ(p.get(), one) << n;
    }
  }
}

TEST(FftEngine, RejectsLengthsBelowOne) {
  EXPECT_THROW(Plan<float>(0), ValueError);
  EXPECT_THROW(Plan<double>(-3), ValueError);
  EXPECT_THROW(fft::get_plan<float>(0), ValueError);
}

}  // namespace
}  // namespace kiln::test
