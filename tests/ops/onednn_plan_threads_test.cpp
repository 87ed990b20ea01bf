// oneDNN splits a primitive's work among the threads it sees when the primitive is made, so
// kiln keeps its plans per thread count: a Linear or mm first run under set_num_threads(1)
// must get a new plan when the count rises, and find the old one again when it returns.
// Results are checked against float64 sums at every step.
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/runtime/threads.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// Restores the thread count the test started with.
struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

struct Operands {
  int64_t M, K, N;
  std::vector<double> x, w;  // x [M, K], w [N, K], values rounded to dtype
  Tensor tx, tw;
};

Operands operands(int64_t M, int64_t K, int64_t N, DType dtype, uint32_t seed) {
  Operands o{M, K, N, {}, {}, {}, {}};
  o.x = rounded(random_values(size_t(M * K), -1, 1, seed), dtype);
  o.w = rounded(random_values(size_t(N * K), -1, 1, seed + 1), dtype);
  o.tx = make(o.x, {M, K}, dtype, kCpu);
  o.tw = make(o.w, {N, K}, dtype, kCpu);
  return o;
}

// x @ w.T in float64.
std::vector<double> reference(const Operands& o) {
  std::vector<double> c(size_t(o.M * o.N), 0.0);
  for (int64_t i = 0; i < o.M; ++i)
    for (int64_t j = 0; j < o.N; ++j)
      for (int64_t k = 0; k < o.K; ++k)
        c[size_t(i * o.N + j)] += o.x[size_t(i * o.K + k)] * o.w[size_t(j * o.K + k)];
  return c;
}

Tol product_tol(DType dtype, int64_t K) {
  if (dtype == DType::BF16) return tol_for(DType::BF16);
  return {1e-5, 1e-6 * (4.0 + 2.0 * std::sqrt(double(K)))};
}

// Runs `op` at 1 (twice), 2, 1 and 2 threads. Where oneDNN takes the product (its first call
// makes a plan: the shape is new to the process) the first 2-thread call must make one more
// and the later calls none; where it does not (kiln's own kernels at this ISA level), none may
// be made. Returns whether oneDNN took it.
template <typename Op>
bool expect_plan_per_thread_count(const Operands& o, DType dtype, Op op, const char* what) {
  const std::vector<double> want = reference(o);
  const Tol tol = product_tol(dtype, o.K);
  ThreadCountGuard guard;
  const size_t before = cpu::onednn_plans_made();
  set_num_threads(1);
  // Twice: mm packs a B it sees again unchanged (decision 0031), a plan of its own.
  expect_close(op(), {o.M, o.N}, want, tol, std::string(what) + " at 1 thread");
  expect_close(op(), {o.M, o.N}, want, tol, std::string(what) + " at 1 thread, B reused");
  const size_t made_at_one = cpu::onednn_plans_made();
  const bool onednn_took = made_at_one > before;
  set_num_threads(2);
  expect_close(op(), {o.M, o.N}, want, tol, std::string(what) + " at 2 threads");
  EXPECT_EQ(cpu::onednn_plans_made(), made_at_one + (onednn_took ? 1 : 0))
      << what << ": a plan for 2 threads expected where oneDNN runs the product";
  set_num_threads(1);
  expect_close(op(), {o.M, o.N}, want, tol, std::string(what) + " at 1 thread again");
  set_num_threads(2);
  expect_close(op(), {o.M, o.N}, want, tol, std::string(what) + " at 2 threads again");
  EXPECT_EQ(cpu::onednn_plans_made(), made_at_one + (onednn_took ? 1 : 0))
      << what << ": plans not reused";
  return onednn_took;
}

TEST(OnednnPlanThreads, LinearGetsAPlanPerThreadCount) {
  if (!cpu::onednn_enabled()) GTEST_SKIP() << "oneDNN not built in or switched off";
  // oneDNN runs float32 Linear layers at every level but AVX2, except those of 32 rows and
  // more at the AVX-512 levels, which kiln's packed kernel takes (onednn_runtime.h,
  // decision 0119).
  const bool onednn_level = cpu::isa_level() != cpu::IsaLevel::Avx2;
  const bool avx512 = cpu::isa_level() >= cpu::IsaLevel::Avx512;
  for (DType dtype : {DType::F32, DType::BF16}) {
    // A shape no other test uses, so its first call here makes its plan.
    const Operands o = operands(112, 136, 88 + (dtype == DType::BF16 ? 8 : 0), dtype, 31);
    const bool took =
        expect_plan_per_thread_count(o, dtype, [&] { return fused_linear(o.tx, o.tw); },
                                     dtype == DType::F32 ? "linear float32" : "linear bfloat16");
    if (dtype == DType::F32)
      EXPECT_EQ(took, onednn_level && !avx512) << "float32 Linear of 112 rows";
  }
  const Operands few = operands(24, 136, 88, DType::F32, 37);
  EXPECT_EQ(expect_plan_per_thread_count(few, DType::F32,
                                         [&] { return fused_linear(few.tx, few.tw); },
                                         "linear float32, 24 rows"),
            onednn_level)
      << "float32 Linear of 24 rows";
}

TEST(OnednnPlanThreads, MatmulGetsAPlanPerThreadCount) {
  if (!cpu::onednn_enabled()) GTEST_SKIP() << "oneDNN not built in or switched off";
  const Operands o = operands(120, 152, 104, DType::F32, 41);
  const Tensor wt = o.tw.t();
  const bool took =
      expect_plan_per_thread_count(o, DType::F32, [&] { return mm(o.tx, wt); }, "mm float32");
  EXPECT_EQ(took, cpu::isa_level() != cpu::IsaLevel::Avx2) << "mm not on oneDNN";
}

// Decision 0118: at the AVX-512 levels float32 products of 2^28 multiply-adds and more with a
// row-major A, or a row-major B of 2560+ columns, run on kiln's blocked kernel; a column-major
// A with fewer columns stays on oneDNN.
TEST(OnednnPlanThreads, LargeFloat32ProductsByLayout) {
  if (!cpu::onednn_enabled()) GTEST_SKIP() << "oneDNN not built in or switched off";
  const bool avx512 = cpu::isa_level() >= cpu::IsaLevel::Avx512;
  const bool onednn_level = cpu::isa_level() != cpu::IsaLevel::Avx2;
  {
    const Operands o = operands(1024, 512, 512, DType::F32, 51);  // 2^28 multiply-adds
    const Tensor wt = o.tw.t();
    EXPECT_EQ(expect_plan_per_thread_count(o, DType::F32, [&] { return mm(o.tx, wt); },
                                           "mm float32, row-major A"),
              onednn_level && !avx512);
    const Tensor xt = o.tx.t().contiguous().t();
    EXPECT_EQ(expect_plan_per_thread_count(o, DType::F32, [&] { return mm(xt, wt); },
                                           "mm float32, column-major A"),
              onednn_level);
  }
  {
    const Operands o = operands(64, 1664, 2560, DType::F32, 53);
    const Tensor xt = o.tx.t().contiguous().t();
    const Tensor w_rows = o.tw.t().contiguous();  // [K, N] row-major
    EXPECT_EQ(expect_plan_per_thread_count(o, DType::F32, [&] { return mm(xt, w_rows); },
                                           "mm float32, column-major A, row-major B of 2560"),
              onednn_level && !avx512);
  }
}

}  // namespace
}  // namespace kiln::test
