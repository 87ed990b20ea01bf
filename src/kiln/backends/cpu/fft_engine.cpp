// kiln's own FFT engine (decision 0092). Written from the textbook algorithms, not taken from
// any library: FFTW's GPL would bind kiln, and Debian 12's one permissive CPU FFT (KissFFT) is
// float-only and O(n^2) on prime lengths.
//
// Smooth lengths (every prime factor <= kMaxDirectPrime) run a Stockham autosort
// Cooley-Tukey: one out-of-place pass per radix, ping-ponging between two buffers, which
// needs no bit reversal for mixed radices and keeps every pass's inner loop unit-stride.
// Other lengths run Bluestein's algorithm: the DFT as a chirp-weighted convolution, done
// with two power-of-two transforms of length M >= 2n - 1 and a precomputed filter spectrum.
#include "kiln/backends/cpu/fft_engine.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <list>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "isa/fft_lanes.h"
#include "kiln/core/error.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::fft {
namespace {

using u64 = uint64_t;
using cd = std::complex<double>;

// Above this a prime factor is handled by Bluestein: the generic butterfly costs about p / 2
// complex multiply-adds per point, which stays below Bluestein's three transforms of >= 2n
// points up to about here.
constexpr int kMaxDirectPrime = 31;
constexpr int64_t kMaxLength = int64_t(1) << 40;  // keeps 16 n (chirp angles) inside u64
constexpr size_t kCacheSize = 64;
// From this length a single transform runs the four-step split (Plan::Impl::run_split) when n
// has a divisor of at least kSplitMinSide up to sqrt(n), and threads it from kThreadedSplit.
constexpr int64_t kSplitMin = 2048;
constexpr int64_t kSplitMinSide = 16;
constexpr int64_t kThreadedSplit = int64_t(1) << 17;
constexpr long double kPiL = 3.141592653589793238462643383279502884L;

// ---------------------------------------------------------------------------------------
// Twiddle factors. e^{2 pi i j / n} is reduced to the first octant in exact integer
// arithmetic (units of 2 pi / 8n), so sin / cos only ever see angles in [0, pi/4] and the
// symmetric values are bit-for-bit the same; long double sin / cos then round once to
// double. (Repeated multiplication, or sin of an unreduced double angle, loses digits
// that grow with n.)
struct Octant {
  u64 a;  // angle in units of 2 pi / (8n), in [0, n]
  bool swap, rot, neg;
};

Octant reduce(u64 j, u64 n) {
  Octant o{8 * (j % n), false, false, false};
  if (o.a >= 4 * n) o.a -= 4 * n, o.neg = true;        // theta + pi
  if (o.a >= 2 * n) o.a -= 2 * n, o.rot = true;        // theta + pi/2
  if (o.a > n) o.a = 2 * n - o.a, o.swap = true;       // pi/2 - phi
  return o;
}

cd finish(const Octant& o, long double c, long double s) {
  if (o.swap) std::swap(c, s);
  if (o.rot) {  // (c, s) -> (-s, c)
    const long double t = c;
    c = -s;
    s = t;
  }
  if (o.neg) c = -c, s = -s;
  return {double(c), double(s)};
}

cd unit_root(u64 j, u64 n) {
  const Octant o = reduce(j, n);
  const long double phi = kPiL * (long double)o.a / (4.0L * (long double)n);
  return finish(o, std::cos(phi), std::sin(phi));
}

// All e^{2 pi i j / n}, j < n. When 4 | n every reduced angle is a multiple of 2 pi / n, so
// only the first octant is evaluated (n / 8 sin / cos calls instead of n).
std::vector<cd> root_table(u64 n) {
  std::vector<cd> t(n);
  if (n % 4 == 0) {
    std::vector<std::pair<long double, long double>> oct(n / 8 + 1);
    for (u64 i = 0; i < oct.size(); ++i) {
      const long double phi = 2.0L * kPiL * (long double)i / (long double)n;
      oct[i] = {std::cos(phi), std::sin(phi)};
    }
    for (u64 j = 0; j < n; ++j) {
      const Octant o = reduce(j, n);
      t[j] = finish(o, oct[o.a / 8].first, oct[o.a / 8].second);
    }
  } else {
    for (u64 j = 0; j < n; ++j) t[j] = j <= n / 2 ? unit_root(j, n) : std::conj(t[n - j]);
  }
  return t;
}

// ---------------------------------------------------------------------------------------
// Complex arithmetic written out: std::complex's operator* checks for NaN / inf (a call to
// __mulsc3) unless built with -ffast-math, which would dominate the butterflies.
template <bool Conj, typename T>
inline std::complex<T> mul(std::complex<T> a, std::complex<T> w) {
  const T wr = w.real(), wi = Conj ? -w.imag() : w.imag();
  return {a.real() * wr - a.imag() * wi, a.real() * wi + a.imag() * wr};
}
// x * (-i) forward, x * (+i) inverse: the sign of the transform's imaginary unit.
template <bool Fwd, typename T>
inline std::complex<T> mul_i(std::complex<T> x) {
  return Fwd ? std::complex<T>(x.imag(), -x.real()) : std::complex<T>(-x.imag(), x.real());
}
template <typename T>
inline std::complex<T> scale(T s, std::complex<T> x) {
  return {s * x.real(), s * x.imag()};
}

// Butterflies: the length-P DFT of a[0..P) in place (sign by Fwd).
template <int P, bool Fwd, typename T>
struct Butterfly;

template <bool Fwd, typename T>
struct Butterfly<2, Fwd, T> {
  static void run(std::complex<T>* a) {
    const std::complex<T> t = a[0] - a[1];
    a[0] += a[1];
    a[1] = t;
  }
};

template <bool Fwd, typename T>
struct Butterfly<3, Fwd, T> {
  static void run(std::complex<T>* a) {
    const T s3 = T(0.866025403784438646763723170752936183L);  // sin(2 pi / 3)
    const std::complex<T> t1 = a[1] + a[2], t2 = a[1] - a[2];
    const std::complex<T> m1 = a[0] - scale(T(0.5), t1), m2 = scale(s3, mul_i<Fwd>(t2));
    a[0] += t1;
    a[1] = m1 + m2;
    a[2] = m1 - m2;
  }
};

template <bool Fwd, typename T>
struct Butterfly<4, Fwd, T> {
  static void run(std::complex<T>* a) {
    const std::complex<T> t0 = a[0] + a[2], t1 = a[0] - a[2], t2 = a[1] + a[3];
    const std::complex<T> t3 = mul_i<Fwd>(a[1] - a[3]);
    a[0] = t0 + t2;
    a[1] = t1 + t3;
    a[2] = t0 - t2;
    a[3] = t1 - t3;
  }
};

template <bool Fwd, typename T>
struct Butterfly<5, Fwd, T> {
  static void run(std::complex<T>* a) {
    const T c1 = T(0.309016994374947424102293417182819059L);   // cos(2 pi / 5)
    const T c2 = T(-0.809016994374947424102293417182819059L);  // cos(4 pi / 5)
    const T s1 = T(0.951056516295153572116439333379382143L);   // sin(2 pi / 5)
    const T s2 = T(0.587785252292473129168705954639072769L);   // sin(4 pi / 5)
    const std::complex<T> t1 = a[1] + a[4], t2 = a[2] + a[3];
    const std::complex<T> t3 = a[1] - a[4], t4 = a[2] - a[3];
    const std::complex<T> b1 = a[0] + scale(c1, t1) + scale(c2, t2);
    const std::complex<T> b2 = a[0] + scale(c2, t1) + scale(c1, t2);
    const std::complex<T> d1 = mul_i<Fwd>(scale(s1, t3) + scale(s2, t4));
    const std::complex<T> d2 = mul_i<Fwd>(scale(s2, t3) - scale(s1, t4));
    a[0] += t1 + t2;
    a[1] = b1 + d1;
    a[4] = b1 - d1;
    a[2] = b2 + d2;
    a[3] = b2 - d2;
  }
};

// ---------------------------------------------------------------------------------------
// One Stockham pass of radix P. Before it, `in` holds m * P independent length-L DFTs
// (sequence q at in[q + mP * k]); after it, `out` holds m length-LP DFTs (sequence q at
// out[q + m * k]). Output k + L s of sequence q is
//   sum_r w_P^{rs} (w_{LP}^{rk} * in[q + m (r + P k)]),
// so for each k the twiddles are fixed and the inner loop runs over q with unit stride.
// tw holds the forward twiddles e^{-2 pi i r k / LP} as tw[(P - 1) k + r - 1].
template <int P, bool Fwd, typename T>
void pass(const std::complex<T>* in, std::complex<T>* out, const std::complex<T>* tw, size_t L,
          size_t m) {
  const size_t os = m * L;
  for (size_t k = 0; k < L; ++k) {
    const std::complex<T>* x = in + P * m * k;
    std::complex<T>* y = out + m * k;
    const std::complex<T>* w = tw + (P - 1) * k;
    if (k == 0) {  // all twiddles are 1 (and the whole first pass is k == 0)
      for (size_t q = 0; q < m; ++q) {
        std::complex<T> a[P];
        for (int r = 0; r < P; ++r) a[r] = x[q + m * r];
        Butterfly<P, Fwd, T>::run(a);
        for (int s = 0; s < P; ++s) y[q + os * s] = a[s];
      }
    } else {
      for (size_t q = 0; q < m; ++q) {
        std::complex<T> a[P];
        a[0] = x[q];
        for (int r = 1; r < P; ++r) a[r] = mul<!Fwd>(x[q + m * r], w[r - 1]);
        Butterfly<P, Fwd, T>::run(a);
        for (int s = 0; s < P; ++s) y[q + os * s] = a[s];
      }
    }
  }
}

// The same pass for an odd prime p <= kMaxDirectPrime. Pairs r and p - r share a cosine and
// have opposite sines, which halves the multiplications:
//   y_s, y_{p-s} = a_0 + sum_r cos(2 pi r s / p)(a_r + a_{p-r}) -/+ i sum_r sin(...)(a_r - a_{p-r})
// cs holds cos(2 pi j / p), sin(2 pi j / p) for j < p as cs[2j], cs[2j + 1].
template <bool Fwd, typename T>
void pass_prime(const std::complex<T>* in, std::complex<T>* out, const std::complex<T>* tw,
                const T* cs, int p, size_t L, size_t m) {
  const size_t os = m * L;
  const int h = (p - 1) / 2;
  std::complex<T> a[kMaxDirectPrime], sum[kMaxDirectPrime / 2 + 1], dif[kMaxDirectPrime / 2 + 1];
  for (size_t k = 0; k < L; ++k) {
    const std::complex<T>* x = in + p * m * k;
    std::complex<T>* y = out + m * k;
    const std::complex<T>* w = tw + (p - 1) * k;
    for (size_t q = 0; q < m; ++q) {
      a[0] = x[q];
      for (int r = 1; r < p; ++r) a[r] = k == 0 ? x[q + m * r] : mul<!Fwd>(x[q + m * r], w[r - 1]);
      std::complex<T> y0 = a[0];
      for (int r = 1; r <= h; ++r) {
        sum[r] = a[r] + a[p - r];
        dif[r] = a[r] - a[p - r];
        y0 += sum[r];
      }
      y[q] = y0;
      for (int s = 1; s <= h; ++s) {
        std::complex<T> b = a[0], d = 0;
        int j = 0;  // r s mod p, kept by addition
        for (int r = 1; r <= h; ++r) {
          j += s;
          if (j >= p) j -= p;
          b += scale(cs[2 * j], sum[r]);
          d += scale(cs[2 * j + 1], dif[r]);
        }
        d = mul_i<Fwd>(d);
        y[q + os * s] = b + d;
        y[q + os * (p - s)] = b - d;
      }
    }
  }
}

// The passes of one smooth length.
template <typename T>
struct Core {
  struct Stage {
    int p;
    size_t L, m, tw, cs;  // tw / cs: offsets into twiddles / prime_cs
  };
  size_t n = 1;
  std::vector<Stage> stages;
  std::vector<std::complex<T>> twiddles;
  std::vector<T> prime_cs;

  Core() = default;
  // radices multiply to n; roots is root_table(n).
  Core(size_t n_, const std::vector<int>& radices, const std::vector<cd>& roots) : n(n_) {
    twiddles.reserve(n - 1);  // sum of (p - 1) L over the passes telescopes to n - 1
    size_t L = 1;
    for (int p : radices) {
      const size_t Lp = L * p, stride = n / Lp;  // w_{Lp}^{rk} = w_n^{rk n / Lp}
      Stage st{p, L, n / Lp, twiddles.size(), prime_cs.size()};
      for (size_t k = 0; k < L; ++k)
        for (int r = 1; r < p; ++r)
          twiddles.push_back(std::complex<T>(std::conj(roots[r * k * stride])));
      if (p > 5) {
        for (int j = 0; j < p; ++j) {
          const cd c = unit_root(u64(j), u64(p));
          prime_cs.push_back(T(c.real()));
          prime_cs.push_back(T(c.imag()));
        }
      }
      stages.push_back(st);
      L = Lp;
    }
  }

  // Transforms buf (n contiguous values) with work as the other buffer; returns whichever of
  // the two holds the result.
  template <bool Fwd>
  std::complex<T>* run(std::complex<T>* buf, std::complex<T>* work) const {
    std::complex<T>*src = buf, *dst = work;
    for (const Stage& s : stages) {
      const std::complex<T>* tw = twiddles.data() + s.tw;
      switch (s.p) {
        case 2: pass<2, Fwd>(src, dst, tw, s.L, s.m); break;
        case 3: pass<3, Fwd>(src, dst, tw, s.L, s.m); break;
        case 4: pass<4, Fwd>(src, dst, tw, s.L, s.m); break;
        case 5: pass<5, Fwd>(src, dst, tw, s.L, s.m); break;
        default: pass_prime<Fwd>(src, dst, tw, prime_cs.data() + s.cs, s.p, s.L, s.m);
      }
      std::swap(src, dst);
    }
    return src;
  }
};

// Radices for n (4s first, then one 2, then odd primes ascending); false when n has a
// prime factor above kMaxDirectPrime. n == 1 gives no radices and is smooth. (A radix-8
// pass was tried and was 1.5-1.8x slower from 2^12 up, probably because its 8 read and 8
// write streams sit power-of-two strides apart and overflow the 8-way L1 sets.)
bool factor(u64 n, std::vector<int>& radices) {
  radices.clear();
  while (n % 4 == 0) radices.push_back(4), n /= 4;
  if (n % 2 == 0) radices.push_back(2), n /= 2;
  for (int p = 3; p <= kMaxDirectPrime; p += 2)
    while (n % p == 0) radices.push_back(p), n /= p;
  return n == 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// fn(lo, hi) over [0, n): in pieces over the threads when n is long enough to pay for them
// (the O(n) steps around a long real transform, whose complex part is threaded).
template <typename Fn>
void over_range(int64_t n, Fn&& fn) {
  constexpr int64_t kPiece = int64_t(1) << 14;
  if (n < kThreadedSplit) return fn(int64_t(0), n);
  detail::parallel_chunks((n + kPiece - 1) / kPiece,
                          [&](int64_t c) { fn(c * kPiece, std::min(n, (c + 1) * kPiece)); });
}

template <typename T>
struct Plan<T>::Impl {
  using C = std::complex<T>;
  size_t n = 0;
  Core<T> core;  // length n, or M under Bluestein
  bool bluestein = false;
  size_t M = 0;
  std::vector<C> chirp;   // e^{-pi i j^2 / n}, j < n
  std::vector<C> filter;  // FFT_M of the padded conjugate chirp, divided by M

  // Bluestein: with jk = (j^2 + k^2 - (k - j)^2) / 2 the forward DFT is
  //   X_k = conj(b_k) sum_j (x_j conj(b_j)) b_{k-j},   b_j = e^{pi i j^2 / n},
  // a linear convolution that a cyclic one of length M >= 2n - 1 computes exactly. The
  // inverse is conj(forward(conj(x))).
  template <bool Fwd>
  void run_bluestein(const C* in, int64_t is, C* out, int64_t os, C* a, C* work) const {
    for (size_t j = 0; j < n; ++j) {
      const C x = in[int64_t(j) * is];
      a[j] = mul<false>(Fwd ? x : std::conj(x), chirp[j]);
    }
    for (size_t j = n; j < M; ++j) a[j] = 0;
    C* A = a;
    if (conv) conv->execute(a, 1, a, 1, true);
    else A = core.template run<true>(a, work);
    for (size_t k = 0; k < M; ++k) A[k] = mul<false>(A[k], filter[k]);
    const C* c = A;
    if (conv) conv->execute(A, 1, A, 1, false);
    else c = core.template run<false>(A, A == a ? work : a);
    for (size_t k = 0; k < n; ++k) {
      const C y = mul<false>(c[k], chirp[k]);
      out[int64_t(k) * os] = Fwd ? y : std::conj(y);
    }
  }

  // Long smooth lengths: n = n1 * n2 as the four-step FFT, n2 transforms of n1 points
  // (columns of the n1 x n2 row-major view), twiddles, n1 transforms of n2 points (rows,
  // written transposed). Both steps are batches for the lanes and can be threaded, where the
  // passes over one whole line are scalar and single-threaded.
  std::shared_ptr<const Plan<T>> cols, rows;  // n1 and n2 points
  std::vector<C> split_tw;                     // e^{-2 pi i k1 j2 / n} at k1 * n2 + j2
  // Bluestein with a long convolution: its two transforms of M points through that plan.
  std::shared_ptr<const Plan<T>> conv;

  template <bool Fwd>
  void run_split(const C* in, int64_t is, C* out, int64_t os) const {
    const int64_t n1 = cols->size(), n2 = rows->size();
    std::unique_ptr<C[]> tmp(new C[n]);
    const bool threaded = n >= kThreadedSplit;
    // Columns, each output k1 of column j2 times split_tw[k1 * n2 + j2] on the way out.
    batch(*cols, in, is * n2, is, tmp.get(), n2, 1, n2, Fwd, threaded, split_tw.data(), n2);
    batch(*rows, tmp.get(), 1, n2, out, n1 * os, os, n1, Fwd, threaded, nullptr, 0);
  }

  // plan.c2c over `count` lines, in runs of full lane groups spread over the threads.
  // With out_tw, output element j of line l is multiplied by out_tw[j * tw_stride + l].
  static void batch(const Plan<T>& plan, const C* in, int64_t is, int64_t idist, C* out,
                    int64_t os, int64_t odist, int64_t count, bool fwd, bool threaded,
                    const C* out_tw, int64_t tw_stride) {
    const int64_t run = plan.group_lines(), runs = (count + run - 1) / run;
    auto one = [&](int64_t r) {
      const int64_t first = r * run, cnt = std::min(run, count - first);
      plan.c2c_twiddled(in + first * idist, is, idist, out + first * odist, os, odist, cnt, fwd,
                        out_tw ? out_tw + first : nullptr, tw_stride);
    };
    if (threaded && runs > 1) detail::parallel_chunks(runs, one);
    else for (int64_t r = 0; r < runs; ++r) one(r);
  }

  // Real transforms of even n (Plan::real_half): the plan of n / 2 points and
  // e^{-2 pi i k / n} for k <= n / 2, made on first use.
  std::once_flag half_once;
  std::shared_ptr<const Plan<T>> half;
  std::vector<C> real_tw;

  // The tables as the lane kernels see them (set once the plan is built).
  std::vector<cpu::fft_lanes::Stage<T>> lane_stages;
  cpu::fft_lanes::PlanView<T> view{};

  void make_view() {
    for (const auto& st : core.stages)
      lane_stages.push_back({st.p, st.L, st.m, core.twiddles.data() + st.tw,
                             core.prime_cs.data() + st.cs});
    view = {n, lane_stages.data(), lane_stages.size(), bluestein ? M : 0, chirp.data(),
            filter.data()};
  }

  // Whether `lanes_needed` lines fill enough of a lane group to beat one line at a time, with
  // a group's two buffers small enough for the L2 cache (beyond it each pass streams from
  // memory and separate lines, or the split, do better).
  bool use_lanes(int64_t lanes_needed) const {
    const int lanes = cpu::fft_lanes::kernels<T>().lanes;
    const size_t group_bytes = 2 * (bluestein ? M : n) * size_t(lanes) * sizeof(C);
    return n > 1 && 2 * lanes_needed >= lanes && group_bytes <= (size_t(1) << 21);
  }

  template <bool Fwd>
  void run_direct(const C* in, int64_t is, C* out, int64_t os, C* buf, C* work) const {
    for (size_t j = 0; j < n; ++j) buf[j] = in[int64_t(j) * is];  // also makes aliasing safe
    const C* y = core.template run<Fwd>(buf, work);
    for (size_t k = 0; k < n; ++k) out[int64_t(k) * os] = y[k];
  }
};

template <typename T>
Plan<T>::Plan(int64_t n) : impl_(std::make_unique<Impl>()) {
  KILN_CHECK(n >= 1 && n <= kMaxLength, ValueError, "fft: length must be in [1, 2^40], got ", n);
  Impl& im = *impl_;
  im.n = size_t(n);
  std::vector<int> radices;
  if (factor(u64(n), radices)) {
    const std::vector<cd> roots = root_table(u64(n));
    im.core = Core<T>(im.n, radices, roots);
    im.make_view();
    if (n >= kSplitMin) {
      // n1: the largest divisor <= sqrt(n), so that neither step has few long lines.
      int64_t n1 = 1;
      for (int64_t d = 1; d * d <= n; ++d)
        if (n % d == 0) n1 = d;
      if (n1 >= kSplitMinSide) {
        const int64_t n2 = n / n1;
        im.cols = get_plan<T>(n1);
        im.rows = get_plan<T>(n2);
        im.split_tw.resize(im.n);
        for (int64_t k1 = 0; k1 < n1; ++k1)
          for (int64_t j2 = 0; j2 < n2; ++j2)
            im.split_tw[size_t(k1 * n2 + j2)] = std::complex<T>(std::conj(roots[size_t(k1 * j2)]));
      }
    }
    return;
  }
  im.bluestein = true;
  im.M = 1;
  while (im.M < 2 * im.n - 1) im.M *= 2;
  factor(u64(im.M), radices);
  const std::vector<cd> roots = root_table(u64(im.M));
  im.core = Core<T>(im.M, radices, roots);
  // j^2 mod 2n by the recurrence (j + 1)^2 = j^2 + 2j + 1: no overflow, exact angles.
  std::vector<cd> b(im.n);
  u64 sq = 0;
  const u64 two_n = 2 * u64(n);
  for (size_t j = 0; j < im.n; ++j) {
    b[j] = unit_root(sq, two_n);
    sq = (sq + 2 * u64(j) + 1) % two_n;
  }
  im.chirp.resize(im.n);
  for (size_t j = 0; j < im.n; ++j) im.chirp[j] = std::complex<T>(std::conj(b[j]));
  // The filter's spectrum is computed in double whatever T is, then rounded once.
  std::vector<cd> h(im.M, cd(0)), work(im.M);
  h[0] = b[0];
  for (size_t d = 1; d < im.n; ++d) h[d] = h[im.M - d] = b[d];
  Core<double> own;  // a double plan already has the double passes of length M
  const Core<double>* dcore = &own;
  if constexpr (std::is_same_v<T, double>) dcore = &im.core;
  else own = Core<double>(im.M, radices, roots);
  const cd* H = dcore->template run<true>(h.data(), work.data());
  const double inv_m = 1.0 / double(im.M);  // exact: M is a power of two
  im.filter.resize(im.M);
  for (size_t k = 0; k < im.M; ++k) im.filter[k] = std::complex<T>(H[k] * inv_m);
  im.make_view();
  if (int64_t(im.M) >= kSplitMin) im.conv = get_plan<T>(int64_t(im.M));
}

template <typename T>
Plan<T>::~Plan() = default;

template <typename T>
int64_t Plan<T>::size() const {
  return int64_t(impl_->n);
}

template <typename T>
bool Plan<T>::uses_bluestein() const {
  return impl_->bluestein;
}

template <typename T>
void Plan<T>::execute(const std::complex<T>* in, int64_t in_stride, std::complex<T>* out,
                      int64_t out_stride, bool forward) const {
  const Impl& im = *impl_;
  if (im.cols) {
    if (forward) im.template run_split<true>(in, in_stride, out, out_stride);
    else im.template run_split<false>(in, in_stride, out, out_stride);
    return;
  }
  // One scratch of two buffers per call (on the stack for short rows, which batched callers
  // run many times): this is what makes a shared plan thread-safe. Raw bytes rather than a
  // std::complex array, whose constructor would zero it first: every element is written
  // before it is read, and std::complex (trivially copyable) lives in bytes implicitly.
  const size_t len = im.bluestein ? im.M : im.n;
  constexpr size_t kStack = 128;
  alignas(std::complex<T>) std::byte local[2 * kStack * sizeof(std::complex<T>)];
  std::unique_ptr<std::byte[]> heap;
  std::byte* raw = local;
  if (len > kStack) {
    heap.reset(new std::byte[2 * len * sizeof(std::complex<T>)]);
    raw = heap.get();
  }
  std::complex<T>* s = reinterpret_cast<std::complex<T>*>(raw);
  if (im.bluestein) {
    if (forward) im.template run_bluestein<true>(in, in_stride, out, out_stride, s, s + len);
    else im.template run_bluestein<false>(in, in_stride, out, out_stride, s, s + len);
  } else {
    if (forward) im.template run_direct<true>(in, in_stride, out, out_stride, s, s + len);
    else im.template run_direct<false>(in, in_stride, out, out_stride, s, s + len);
  }
}

template <typename T>
int64_t Plan<T>::group_lines() const {
  return 2 * cpu::fft_lanes::kernels<T>().lanes;
}

template <typename T>
void Plan<T>::c2c(const std::complex<T>* in, int64_t is, int64_t idist, std::complex<T>* out,
                  int64_t os, int64_t odist, int64_t count, bool forward) const {
  c2c_twiddled(in, is, idist, out, os, odist, count, forward, nullptr, 0);
}

template <typename T>
void Plan<T>::c2c_twiddled(const std::complex<T>* in, int64_t is, int64_t idist,
                           std::complex<T>* out, int64_t os, int64_t odist, int64_t count,
                           bool forward, const std::complex<T>* out_tw,
                           int64_t tw_stride) const {
  if (impl_->use_lanes(count)) {
    cpu::fft_lanes::kernels<T>().c2c(impl_->view, in, is, idist, out, os, odist, count, forward,
                                     out_tw, tw_stride);
    return;
  }
  for (int64_t l = 0; l < count; ++l) {
    std::complex<T>* y = out + l * odist;
    execute(in + l * idist, is, y, os, forward);
    if (!out_tw) continue;
    const int64_t n = size();
    for (int64_t j = 0; j < n; ++j) {
      const std::complex<T> w = out_tw[j * tw_stride + l];
      y[j * os] = forward ? mul<false>(y[j * os], w) : mul<true>(y[j * os], w);
    }
  }
}

// Real transforms of even n run a complex transform of n / 2 points (isa/fft_lanes.h's r2c
// and c2r give the identities); odd n a complex transform of n with zero imaginary parts.
template <typename T>
const Plan<T>* Plan<T>::real_half(const std::complex<T>** tw) const {
  Impl& im = *impl_;
  if (im.n % 2) {
    *tw = nullptr;
    return this;
  }
  std::call_once(im.half_once, [&] {
    im.half = get_plan<T>(int64_t(im.n / 2));
    im.real_tw.resize(im.n / 2 + 1);
    for (size_t k = 0; k <= im.n / 2; ++k)
      im.real_tw[k] = std::complex<T>(std::conj(unit_root(u64(k), u64(im.n))));
  });
  *tw = im.real_tw.data();
  return im.half.get();
}

template <typename T>
void Plan<T>::r2c(const T* in, int64_t is, int64_t idist, std::complex<T>* out, int64_t os,
                  int64_t odist, int64_t count, int64_t nout) const {
  using C = std::complex<T>;
  const std::complex<T>* tw = nullptr;
  const Plan<T>* core = real_half(&tw);
  if (core->impl_->use_lanes(count)) {
    cpu::fft_lanes::kernels<T>().r2c(core->impl_->view, tw, in, is, idist, out, os, odist, count,
                                     nout);
    return;
  }
  const int64_t n = size(), m = core->size(), direct = std::min(nout, n / 2 + 1);
  std::vector<C> z(static_cast<size_t>(m));
  for (int64_t l = 0; l < count; ++l) {
    const T* x = in + l * idist;
    C* X = out + l * odist;
    over_range(m, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j)
        z[size_t(j)] = tw ? C(x[2 * j * is], x[(2 * j + 1) * is]) : C(x[j * is], 0);
    });
    core->execute(z.data(), 1, z.data(), 1, true);
    if (tw) {
      X[0] = C(z[0].real() + z[0].imag(), 0);
      // Real and imaginary parts as separate scalars: GCC builds a std::complex<float> result
      // from two 4-byte stores and reloads it as 8 bytes, a store-forwarding stall per bin
      // that made this loop 3x the transform's time.
      const T* zp = reinterpret_cast<const T*>(z.data());
      const T* wp = reinterpret_cast<const T*>(tw);
      T* xp = reinterpret_cast<T*>(X);
      over_range(std::min(direct, m), [&](int64_t lo, int64_t hi) {
        for (int64_t k = std::max<int64_t>(lo, 1); k < hi; ++k) {
          const T zr = zp[2 * k], zi = zp[2 * k + 1];
          const T cr = zp[2 * (m - k)], ci = -zp[2 * (m - k) + 1];
          const T ar = (zr + cr) * T(0.5), ai = (zi + ci) * T(0.5);
          const T br = (zi - ci) * T(0.5), bi = (cr - zr) * T(0.5);
          const T wr = wp[2 * k], wi = wp[2 * k + 1];
          xp[2 * k * os] = ar + (br * wr - bi * wi);
          xp[2 * k * os + 1] = ai + (br * wi + bi * wr);
        }
      });
      if (direct > m) X[m * os] = C(z[0].real() - z[0].imag(), 0);
    } else {
      for (int64_t k = 0; k < direct; ++k) X[k * os] = z[size_t(k)];
      X[0].imag(0);
    }
    for (int64_t k = direct; k < nout; ++k) X[k * os] = std::conj(X[(n - k) * os]);
  }
}

template <typename T>
void Plan<T>::c2r(const std::complex<T>* in, int64_t is, int64_t idist, int64_t nin, T* out,
                  int64_t os, int64_t odist, int64_t count) const {
  using C = std::complex<T>;
  const std::complex<T>* tw = nullptr;
  const Plan<T>* core = real_half(&tw);
  if (core->impl_->use_lanes(count)) {
    cpu::fft_lanes::kernels<T>().c2r(core->impl_->view, tw, in, is, idist, nin, out, os, odist,
                                     count);
    return;
  }
  const int64_t n = size(), m = core->size(), half = std::min<int64_t>(nin, n / 2 + 1);
  std::vector<C> z(static_cast<size_t>(m));
  for (int64_t l = 0; l < count; ++l) {
    const C* X = in + l * idist;
    auto bin = [&](int64_t k) -> C {  // the Hermitian spectrum's bin k < n
      if (k < half) return (k == 0 || 2 * k == n) ? C(X[k * is].real(), 0) : X[k * is];
      if (n - k < half) return std::conj(X[(n - k) * is]);
      return C(0);
    };
    T* zp = reinterpret_cast<T*>(z.data());  // separate real and imaginary parts: see r2c
    over_range(m, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        if (!tw) {
          z[size_t(k)] = bin(k);
          continue;
        }
        const C xk = bin(k), c = std::conj(bin(m - k));
        const T dr = xk.real() - c.real(), di = xk.imag() - c.imag();
        const T wr = tw[k].real(), wi = -tw[k].imag();  // d * conj(w^k), then times i
        const T er = dr * wr - di * wi, ei = dr * wi + di * wr;
        zp[2 * k] = xk.real() + c.real() - ei;
        zp[2 * k + 1] = xk.imag() + c.imag() + er;
      }
    });
    core->execute(z.data(), 1, z.data(), 1, false);
    T* x = out + l * odist;
    over_range(m, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        if (tw) x[2 * j * os] = zp[2 * j], x[(2 * j + 1) * os] = zp[2 * j + 1];
        else x[j * os] = zp[2 * j];
      }
    });
  }
}

template <typename T>
std::shared_ptr<const Plan<T>> get_plan(int64_t n) {
  // Most recently used first; a linear scan of 64 entries costs nothing next to a transform.
  // Never destroyed, so threads still transforming during static destruction stay safe.
  struct Cache {
    std::mutex mu;
    std::list<std::pair<int64_t, std::shared_ptr<const Plan<T>>>> lru;
  };
  static Cache& cache = *new Cache;
  std::mutex& mu = cache.mu;
  auto& lru = cache.lru;
  auto lookup = [&]() -> std::shared_ptr<const Plan<T>> {
    for (auto it = lru.begin(); it != lru.end(); ++it) {
      if (it->first == n) {
        lru.splice(lru.begin(), lru, it);
        return it->second;
      }
    }
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto p = lookup()) return p;
  }
  // Built outside the lock so that a large plan does not stall other lengths; if another
  // thread built the same length meanwhile, its plan wins and this one is dropped.
  auto plan = std::make_shared<const Plan<T>>(n);
  std::lock_guard<std::mutex> lock(mu);
  if (auto p = lookup()) return p;
  lru.emplace_front(n, plan);
  if (lru.size() > kCacheSize) lru.pop_back();
  return plan;
}

template class Plan<float>;
template class Plan<double>;
template std::shared_ptr<const Plan<float>> get_plan<float>(int64_t);
template std::shared_ptr<const Plan<double>> get_plan<double>(int64_t);

}  // namespace kiln::fft
