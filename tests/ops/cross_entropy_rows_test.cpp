// cross_entropy of [N, C] logits with class indices under autograd, which runs as the fused
// cross_entropy_rows op and its backward (decision 0126), against float64 host references:
// float32 and bfloat16, rows of 1-3000 classes (vector loops and their tails), ignored
// targets, each reduction. The op test binary re-runs at each ISA level (CTest) and under the
// sanitizers.
#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

TEST(CrossEntropyRows, LossAndGradientMatchFloat64) {
  namespace F = nn::functional;
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t c : {int64_t(1), int64_t(17), int64_t(64), int64_t(3001)}) {
      for (F::Reduction red : {F::Reduction::Mean, F::Reduction::Sum, F::Reduction::None}) {
        const int64_t n = 37;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " C=" + std::to_string(c) + " reduction " +
                     std::to_string(int(red)));
        Tensor x = make(random_values(size_t(n * c), -4, 4, uint32_t(c)), {n, c}, dt, kCpu);
        const std::vector<double> xv = x.to_vector<double>();
        std::vector<double> tv(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) tv[size_t(i)] = i % 5 == 0 ? -100 : double((i * 7) % c);
        Tensor t = make(tv, {n}, DType::I64, kCpu);
        autograd::set_requires_grad(x);
        F::CrossEntropyOptions o;
        o.reduction = red;
        Tensor loss = F::cross_entropy(x, t, o);
        // References: per row lse - x[t], and d loss / dx = (softmax - one-hot) * share.
        std::vector<double> per(static_cast<size_t>(n), 0.0), lse(static_cast<size_t>(n));
        double sum = 0, count = 0;
        for (int64_t i = 0; i < n; ++i) {
          double m = -INFINITY, s = 0;
          for (int64_t j = 0; j < c; ++j) m = std::max(m, xv[size_t(i * c + j)]);
          for (int64_t j = 0; j < c; ++j) s += std::exp(xv[size_t(i * c + j)] - m);
          lse[size_t(i)] = m + std::log(s);
          if (tv[size_t(i)] < 0) continue;
          per[size_t(i)] = lse[size_t(i)] - xv[size_t(i * c + int64_t(tv[size_t(i)]))];
          sum += per[size_t(i)];
          count += 1;
        }
        const double tol = dt == DType::F32 ? 1e-5 : 2e-2;
        if (red == F::Reduction::None) {
          expect_close(loss, {n}, per, Tol{tol, tol});
        } else {
          const double want = red == F::Reduction::Sum ? sum : sum / count;
          EXPECT_NEAR(loss.item<double>(), want, tol * (1 + std::fabs(want)));
        }
        Tensor g = red == F::Reduction::None ? make(random_values(size_t(n), -1, 1, 5), {n}, dt, kCpu)
                                             : full({}, 0.5, TensorOptions(dt));
        const std::vector<double> gv = g.to_vector<double>();
        auto grads = autograd::grad({loss}, {x}, {g});
        std::vector<double> want(static_cast<size_t>(n * c), 0.0);
        for (int64_t i = 0; i < n; ++i) {
          if (tv[size_t(i)] < 0) continue;
          const double share = red == F::Reduction::None ? gv[size_t(i)]
                               : red == F::Reduction::Sum ? gv[0]
                                                          : gv[0] / count;
          for (int64_t j = 0; j < c; ++j)
            want[size_t(i * c + j)] =
                (std::exp(xv[size_t(i * c + j)] - lse[size_t(i)]) - (j == tv[size_t(i)])) * share;
        }
        expect_close(grads[0], {n, c}, want, Tol{tol, dt == DType::F32 ? 1e-6 : 4e-3});
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
