// A matrix product's B used again unchanged is packed once into oneDNN's blocked layout and
// that copy reused (decision 0031). Every call must see B as it is now: changed in place, a new
// tensor at a freed one's address, views at different offsets, transposed; float32, bfloat16,
// addmm's bias row and int_mm, against float64 products of the values actually multiplied. The
// packed-copy count shows the cache at work (one copy per reused B, none for products of
// fewer than 64 rows in oneDNN, 16 in kiln's own kernels); without oneDNN, or with it switched
// off, kiln's own kernels keep the copy instead (decision 0043) where the level has a packed
// kernel.
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/backends/cpu/packed_weights.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// float64 product of a [M, K] and b [K, N], from the tensors' own (rounded) values.
std::vector<double> product(const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        c[size_t(i * N + j)] += av[size_t(i * K + k)] * bv[size_t(k * N + j)];
  return c;
}

Tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed, DType dtype = DType::F32) {
  return make(random_values(size_t(rows * cols), -1, 1, seed), {rows, cols}, dtype, kCpu);
}

// Tolerance of a float32-accumulated sum of K products of values in [-1, 1].
Tol sum_tol(int64_t K, DType out) {
  if (out == DType::BF16) return tol_for(DType::BF16);
  return {1e-5, 1e-6 * (4.0 + 2.0 * std::sqrt(double(K)))};
}

void expect_product(const Tensor& a, const Tensor& b, const std::string& what) {
  Tensor c = mm(a, b);
  expect_close(c, {a.size(0), b.size(1)}, product(a, b), sum_tol(a.size(1), c.dtype()), what);
}

// Packing happens only where oneDNN takes the product, and at AVX-512 (below it, oneDNN's
// float32 matmul keeps B's plain layout, so there is nothing to pack).
size_t packed_if_onednn(size_t n) {
  return cpu::onednn_enabled() && cpu::isa_level() >= cpu::IsaLevel::Avx512 ? n : 0;
}

// Where oneDNN does not take the float32 product (switched off, or at the AVX2 level), kiln's
// own kernel keeps the packed copy (decision 0043), from AVX2 up.
size_t packed_if_own_kernel(size_t n) {
  const bool onednn_takes = cpu::onednn_enabled() && cpu::isa_level() != cpu::IsaLevel::Avx2;
  return !onednn_takes && cpu::isa_level() >= cpu::IsaLevel::Avx2 ? n : 0;
}

TEST(MatmulReusedOperand, PackedOnceAndInPlaceChangesSeen) {
  cpu::onednn_clear_packed_weights();
  cpu::own_clear_packed_weights();
  Tensor a = random_matrix(96, 300, 1), b = random_matrix(300, 200, 2);
  for (int i = 0; i < 4; ++i) expect_product(a, b, "call " + std::to_string(i));
  EXPECT_EQ(cpu::onednn_packed_weight_count(), packed_if_onednn(1));
  EXPECT_EQ(cpu::own_packed_weight_count(), packed_if_own_kernel(1));
  b.mul_(full({1}, -3.0, TensorOptions(DType::F32, kCpu)));
  expect_product(a, b, "after mul_");
  expect_product(a, b, "after mul_, again");
  b.copy_(random_matrix(300, 200, 3));
  expect_product(a, b, "after copy_");
  expect_product(a, b, "after copy_, again");
  EXPECT_EQ(cpu::onednn_packed_weight_count(), packed_if_onednn(1));  // repacked in place
  EXPECT_EQ(cpu::own_packed_weight_count(), packed_if_own_kernel(1));
}

TEST(MatmulReusedOperand, NewTensorsViewsAndTransposesAreDistinct) {
  cpu::onednn_clear_packed_weights();
  Tensor a = random_matrix(80, 256, 4);
  for (uint32_t seed = 10; seed < 16; ++seed) {
    // Freed at the end of the iteration: the next B may get its memory.
    Tensor b = random_matrix(256, 128, seed);
    expect_product(a, b, "seed " + std::to_string(seed));
    expect_product(a, b, "seed " + std::to_string(seed) + ", again");
  }
  Tensor both = make(random_values(2 * 256 * 128, -1, 1, 20), {2, 256, 128}, DType::F32, kCpu);
  Tensor b0 = both.select(0, 0), b1 = both.select(0, 1);
  for (int i = 0; i < 3; ++i) {
    expect_product(a, b0, "view 0, call " + std::to_string(i));
    expect_product(a, b1, "view 1, call " + std::to_string(i));
  }
  Tensor w = random_matrix(128, 256, 21);  // a Linear weight [N, K], used as w.t()
  for (int i = 0; i < 3; ++i) expect_product(a, w.t(), "transposed, call " + std::to_string(i));
}

TEST(MatmulReusedOperand, AddmmBiasRowAndBfloat16) {
  Tensor a = random_matrix(72, 192, 30), b = random_matrix(192, 160, 31);
  Tensor bias = random_matrix(1, 160, 32).reshape({160});
  std::vector<double> want = product(a, b);
  const std::vector<double> bv = values(bias);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % 160];
  for (int i = 0; i < 3; ++i)
    expect_close(addmm(bias, a, b), {72, 160}, want, sum_tol(192, DType::F32),
                 "addmm call " + std::to_string(i));
  Tensor ab = random_matrix(72, 192, 33, DType::BF16), bb = random_matrix(192, 160, 34, DType::BF16);
  for (int i = 0; i < 3; ++i) expect_product(ab, bb, "bfloat16 call " + std::to_string(i));
  bb.mul_(full({1}, 0.5, TensorOptions(DType::BF16, kCpu)));
  expect_product(ab, bb, "bfloat16 after mul_");
}

// int_mm with a contiguous int8 B used again (the transposed-weight case is in
// gemm_sizes_test.cpp): exact int32 sums on every call, before and after B changes in place.
TEST(MatmulReusedOperand, IntMmContiguousB) {
  cpu::onednn_clear_packed_weights();
  cpu::own_clear_packed_weights();
  const int64_t M = 80, N = 96, K = 320;
  auto ints = [](size_t n, double lo, double hi, uint32_t seed) {
    return random_values(n, lo, hi, seed, /*integers=*/true);
  };
  std::vector<double> av = ints(size_t(M * K), 0, 256, 50), bv = ints(size_t(K * N), -128, 128, 51);
  Tensor a = tensor_from(av, {M, K}).to(DType::U8), b = tensor_from(bv, {K, N}).to(DType::I8);
  auto check = [&](const std::string& what) {
    const std::vector<double> got = values(int_mm(a, b));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;  // exact: |sum| < 2^53
        for (int64_t k = 0; k < K; ++k) want += av[size_t(i * K + k)] * bv[size_t(k * N + j)];
        ASSERT_EQ(got[size_t(i * N + j)], want) << what << " at " << i << ", " << j;
      }
  };
  for (int i = 0; i < 3; ++i) check("call " + std::to_string(i));
  // At the VNNI level oneDNN takes it and packs the reused B once; with AMX kiln's tile kernels
  // take it (decision 0042).
  const bool vnni = cpu::onednn_enabled() && cpu::isa_level() >= cpu::IsaLevel::Avx512Vnni &&
                    cpu::isa_level() < cpu::IsaLevel::Amx;
  EXPECT_EQ(cpu::onednn_packed_weight_count(), vnni ? 1u : 0u);
  // On the AMX tiles the reused row-major B is packed once too, from its second call
  // (decision 0119).
  const bool tiles = cpu::isa_level() >= cpu::IsaLevel::Amx && cpu::cpu_features().amx_int8;
  EXPECT_EQ(cpu::own_packed_weight_count(), tiles ? 1u : 0u);
  bv = ints(size_t(K * N), -128, 128, 52);
  b.copy_(tensor_from(bv, {K, N}).to(DType::I8));
  check("after copy_");
  check("after copy_, again");
}

TEST(MatmulReusedOperand, FewRowsAreNotPacked) {
  cpu::onednn_clear_packed_weights();
  cpu::own_clear_packed_weights();
  Tensor a = random_matrix(12, 512, 40), b = random_matrix(512, 256, 41);
  for (int i = 0; i < 3; ++i) expect_product(a, b, "12 rows, call " + std::to_string(i));
  EXPECT_EQ(cpu::onednn_packed_weight_count(), 0u);
  EXPECT_EQ(cpu::own_packed_weight_count(), 0u);
  // From 16 rows kiln's own kernel keeps a copy (oneDNN only from 64).
  Tensor a32 = random_matrix(32, 512, 42);
  for (int i = 0; i < 3; ++i) expect_product(a32, b, "32 rows, call " + std::to_string(i));
  EXPECT_EQ(cpu::onednn_packed_weight_count(), 0u);
  EXPECT_EQ(cpu::own_packed_weight_count(), packed_if_own_kernel(1));
}

// An activation with batch dims times one 2-D weight (an ONNX MatMul of x[B, T, K] by W[K, N])
// folds into one product whose B is that weight: packed once like a plain mm's, and every
// batch's rows still right after the weight changes in place.
TEST(MatmulReusedOperand, BatchedActivationTimesWeight) {
  cpu::onednn_clear_packed_weights();
  cpu::own_clear_packed_weights();
  const int64_t B = 3, T = 12, K = 200, N = 136;
  Tensor x = make(random_values(size_t(B * T * K), -1, 1, 60), {B, T, K}, DType::F32, kCpu);
  Tensor w = random_matrix(K, N, 61);
  auto check = [&](const Tensor& xs, const std::string& what) {
    const int64_t rows = xs.numel() / K;
    Tensor y = matmul(xs, w);
    Shape shape = xs.shape();
    shape.back() = N;
    expect_close(y, shape, product(xs.reshape({rows, K}), w), sum_tol(K, DType::F32), what);
  };
  for (int i = 0; i < 3; ++i) check(x, "[3, 12, 200] call " + std::to_string(i));
  EXPECT_EQ(cpu::onednn_packed_weight_count(), 0u);  // 36 rows: below oneDNN's 64
  EXPECT_EQ(cpu::own_packed_weight_count(), packed_if_own_kernel(1));
  w.mul_(full({1}, -2.0, TensorOptions(DType::F32, kCpu)));
  check(x, "after mul_");
  check(x, "after mul_, again");
  // A leading batch dim of 1 is dropped: 96 rows, which oneDNN packs too.
  Tensor x1 = make(random_values(size_t(96 * K), -1, 1, 62), {1, 96, K}, DType::F32, kCpu);
  for (int i = 0; i < 3; ++i) check(x1, "[1, 96, 200] call " + std::to_string(i));
  EXPECT_EQ(cpu::onednn_packed_weight_count(), packed_if_onednn(1));
  EXPECT_EQ(cpu::own_packed_weight_count(), packed_if_own_kernel(1));
}

}  // namespace
}  // namespace kiln::test
