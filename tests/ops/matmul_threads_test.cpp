// oneDNN's matrix products called from several threads at once, each cycling through more
// shapes than the per-thread cache of argument memory objects holds (onednn_runtime.h:
// onednn_bound_memory keeps eight plans per thread) and alternating the operands bound to one
// plan, so a call that ran on a stale binding (the previous call's data, or another plan's
// descriptor) would give a wrong product. mm (plain and packed B), addmm with a bias row,
// linear with a bias and int_mm, each against float64 (or exact int64) products.
#include <atomic>
#include <thread>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b,
                            int64_t M, int64_t K, int64_t N) {
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        c[size_t(i * N + j)] += a[size_t(i * K + k)] * b[size_t(k * N + j)];
  return c;
}

// Largest |got - want| relative to the tolerance of a float32 sum of K products in [-1, 1];
// above 1 is a failure.
double error_ratio(const Tensor& got, const std::vector<double>& want, int64_t K) {
  const std::vector<double> g = got.to_vector<double>();
  if (g.size() != want.size()) return 1e9;
  const double tol = 1e-5 + 1e-6 * (4.0 + 2.0 * std::sqrt(double(K)));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::fabs(g[i] - want[i]) / (tol * (1 + std::fabs(want[i]))));
  return worst;
}

struct Case {
  int64_t M, K, N;
  std::vector<double> a[2], b, bias;
  std::vector<double> want[2], want_bias[2];
  Tensor ta[2], tb, tbias;
};

TEST(MatmulThreads, ManyPlansFromSeveralThreads) {
  // 12 shapes, all large enough for oneDNN (2^18+ multiply-adds, 64+ rows: B gets packed).
  std::vector<Case> cases(12);
  for (size_t s = 0; s < cases.size(); ++s) {
    Case& c = cases[s];
    c.M = 64 + 8 * int64_t(s);
    c.K = 72;
    c.N = 64 + 4 * int64_t(s % 3);
    for (int v = 0; v < 2; ++v) {
      c.a[v] = random_values(size_t(c.M * c.K), -1, 1, uint32_t(100 * s + v));
      c.ta[v] = make(c.a[v], {c.M, c.K}, DType::F32, kCpu);
    }
    c.b = random_values(size_t(c.K * c.N), -1, 1, uint32_t(100 * s + 7));
    c.bias = random_values(size_t(c.N), -1, 1, uint32_t(100 * s + 8));
    c.tb = make(c.b, {c.K, c.N}, DType::F32, kCpu);
    c.tbias = make(c.bias, {c.N}, DType::F32, kCpu);
    for (int v = 0; v < 2; ++v) {
      c.want[v] = product(c.a[v], c.b, c.M, c.K, c.N);
      c.want_bias[v] = c.want[v];
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j) c.want_bias[v][size_t(i * c.N + j)] += c.bias[size_t(j)];
    }
  }
  std::atomic<int> failures{0};
  std::atomic<int> products{0};
  // Rounds 0-3 use two shapes (six plans: every call after the first finds its memory
  // objects and rebinds them to the other operand); rounds 4-5 use all twelve (36 plans per
  // thread: entries are replaced).
  auto worker = [&](int id) {
    for (int round = 0; round < 6; ++round) {
      const size_t shapes = round < 4 ? 2 : cases.size();
      for (size_t s = 0; s < shapes; ++s) {
        const Case& c = cases[(s + size_t(id) * 5) % cases.size()];
        const int v = (round + id) % 2;
        const Tensor wt = c.tb.t();  // linear's weight [N, K]
        const double errs[] = {
            error_ratio(mm(c.ta[v], c.tb), c.want[v], c.K),
            error_ratio(addmm(c.tbias, c.ta[v], c.tb), c.want_bias[v], c.K),
            error_ratio(linear(c.ta[v], wt, c.tbias), c.want_bias[v], c.K),
        };
        for (double e : errs) {
          if (!(e <= 1.0)) ++failures;
          ++products;
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < 4; ++id) threads.emplace_back(worker, id);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << "of " << products.load() << " products";
  EXPECT_EQ(products.load(), 4 * (4 * 2 + 2 * 12) * 3);
}

TEST(MatmulThreads, IntMmFromSeveralThreads) {
  constexpr int kShapes = 10;
  std::vector<Tensor> as[2], bs;
  std::vector<std::vector<double>> want[2];
  for (int s = 0; s < kShapes; ++s) {
    const int64_t M = 64 + 16 * s, K = 128, N = 64;
    const std::vector<double> bv = random_values(size_t(K * N), -64, 64, 50 + s, true);
    bs.push_back(make(bv, {K, N}, DType::I8, kCpu));
    for (int v = 0; v < 2; ++v) {
      const std::vector<double> av = random_values(size_t(M * K), 0, 128, 60 + 2 * s + v, true);
      as[v].push_back(make(av, {M, K}, DType::U8, kCpu));
      want[v].push_back(product(av, bv, M, K, N));
    }
  }
  std::atomic<int> failures{0};
  auto worker = [&](int id) {
    for (int round = 0; round < 6; ++round)  // three shapes, then all ten (as above)
      for (int s = 0; s < (round < 4 ? 3 : kShapes); ++s) {
        const int k = (s + id * 3) % kShapes, v = (round + id) % 2;
        if (int_mm(as[v][size_t(k)], bs[size_t(k)]).to_vector<double>() != want[v][size_t(k)])
          ++failures;
      }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < 3; ++id) threads.emplace_back(worker, id);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace kiln::test
