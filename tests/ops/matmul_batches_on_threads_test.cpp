// Small bfloat16 batched products with whole batches per thread (batched_small_gemm.h):
// attention's per-head products from strided views (q @ k^T, att @ v), baddbmm with alpha,
// odd sizes, and batch counts the path takes (a multiple of the threads, at least four per
// thread) or leaves to oneDNN / the per-batch loop (3 batches on 2 threads), each against a
// float64 product; float32 (oneDNN's batched call) the same way. Run on two threads so the
// path is taken on any machine.
#include <cmath>
#include <string>

#include "kiln/runtime/threads.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// want[b, i, j] = alpha * sum_k a(b, i, k) * bt(b, j, k) from float64 copies of the operands
// (a [B, M, K], bt [B, N, K] as the kernel sees them after any transposes).
std::vector<double> batched_product(const Tensor& a, const Tensor& bt, double alpha) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = bt.size(1);
  const std::vector<double> av = a.contiguous().to_vector<double>();
  const std::vector<double> bv = bt.contiguous().to_vector<double>();
  std::vector<double> c(size_t(B * M * N), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += av[size_t((b * M + i) * K + k)] * bv[size_t((b * N + j) * K + k)];
        c[size_t((b * M + i) * N + j)] = alpha * s;
      }
  return c;
}

// float32 sums of K products of values in [-1, 1]; bfloat16 results also rounded once.
void expect_close(const Tensor& got, const std::vector<double>& want, int64_t K,
                  const std::string& what) {
  const std::vector<double> g = got.contiguous().to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  const double rel = got.dtype() == DType::BF16 ? std::ldexp(1.0, -8) : 0.0;
  const double abs_tol = 1e-5 * (1.0 + std::sqrt(double(K)));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::fabs(g[i] - want[i]), rel * std::fabs(want[i]) + abs_tol)
        << what << " at " << i << ": got " << g[i] << ", want " << want[i];
}

class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(get_num_threads()) { set_num_threads(n); }
  ~ThreadsScope() { set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(MatmulBatchesOnThreads, AttentionProductsFromStridedViews) {
  ThreadsScope threads(2);
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t heads : {12, 9, 3}) {
      const int64_t T = 40, D = 24;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " heads=" + std::to_string(heads));
      auto proj = [&](uint32_t seed) {  // [1, T, H * D] as a linear layer's output
        return make(random_values(size_t(T * heads * D), -1, 1, seed), {1, T, heads * D}, dt,
                    kCpu)
            .view({1, T, heads, D})
            .transpose(1, 2);  // [1, H, T, D], row stride H * D
      };
      const Tensor q = proj(1), k = proj(2), v = proj(3);
      const Tensor scores = matmul(q, k.transpose(-1, -2));  // [1, H, T, T]
      expect_close(scores, batched_product(q[0], k[0], 1.0), D, "q @ k^T");
      const Tensor att = softmax(scores, -1);
      const Tensor y = matmul(att, v);  // [1, H, T, D]
      expect_close(y, batched_product(att[0], v[0].transpose(-1, -2), 1.0), T, "att @ v");
    }
  }
}

TEST(MatmulBatchesOnThreads, BaddbmmWithAlphaAndOddSizes) {
  ThreadsScope threads(2);
  for (DType dt : {DType::F32, DType::BF16}) {
    for (auto [B, M, K, N] : {std::array<int64_t, 4>{8, 17, 31, 33}, {4, 8, 1, 1},
                              {6, 128, 64, 128}, {5, 9, 7, 5}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " B=" + std::to_string(B) + " M=" +
                   std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
      const Tensor a = make(random_values(size_t(B * M * K), -1, 1, 11), {B, M, K}, dt, kCpu);
      const Tensor bt = make(random_values(size_t(B * N * K), -1, 1, 12), {B, N, K}, dt, kCpu);
      const Tensor self = zeros({B, M, N}, TensorOptions(dt));
      // B as a transposed view ([B, K, N] with unit row stride) and as a contiguous copy.
      for (const Tensor& b : {bt.transpose(1, 2), bt.transpose(1, 2).contiguous()}) {
        const Tensor out = baddbmm(self, a, b, Scalar(0.0), Scalar(0.125));
        expect_close(out, batched_product(a, bt, 0.125), K, "baddbmm");
        expect_close(bmm(a, b), batched_product(a, bt, 1.0), K, "bmm");
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
