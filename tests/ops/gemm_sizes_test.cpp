// float32 matrix products at the sizes that exercise every edge of the blocked GEMM kernel
// (partial 6- or 8-row / 16- or 32-column tiles, K beyond one and two 512-deep blocks and not a
// multiple of the 16 x 16 transposing pack, N beyond one 512-wide block, the few-row streaming
// path, B packed or read in place) in row-major, transposed and strided layouts, against a
// float64 reference. ISA reruns (isa_*_ops in CTest) repeat them
// for every kernel variant.
#include <random>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// C = A @ B in double from row-major host arrays.
std::vector<double> ref_product(const std::vector<float>& a, const std::vector<float>& b,
                                int64_t M, int64_t N, int64_t K) {
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double av = a[size_t(i * K + k)];
      for (int64_t j = 0; j < N; ++j) c[size_t(i * N + j)] += av * double(b[size_t(k * N + j)]);
    }
  return c;
}

void check(int64_t M, int64_t N, int64_t K, int layout, uint32_t seed) {
  auto av = random_floats(size_t(M * K), seed), bv = random_floats(size_t(K * N), seed + 1);
  Tensor a = tensor_from(av, {M, K}), b = tensor_from(bv, {K, N});
  if (layout == 1) a = tensor_from(av, {M, K}).t().contiguous().t();  // column-major A
  if (layout == 2) b = tensor_from(bv, {K, N}).t().contiguous().t();  // column-major B
  if (layout == 3) {  // both strided: every other column of wider matrices
    std::vector<float> wide_a(size_t(M * K * 2)), wide_b(size_t(K * N * 2));
    for (size_t i = 0; i < av.size(); ++i) wide_a[2 * i] = av[i];
    for (size_t i = 0; i < bv.size(); ++i) wide_b[2 * i] = bv[i];
    a = tensor_from(wide_a, {M, K * 2}).slice(1, 0, K * 2, 2);
    b = tensor_from(wide_b, {K, N * 2}).slice(1, 0, N * 2, 2);
  }
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{M, N}));
  auto ref = ref_product(av, bv, M, N, K);
  auto got = c.to_vector<float>();
  // float32 accumulation of K products of values in [-1, 1]: error grows like sqrt(K) eps.
  const double tol = 1e-6 * (4.0 + 2.0 * std::sqrt(double(K)));
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 5; ++i)
    if (std::fabs(double(got[i]) - ref[i]) > tol * (1 + std::fabs(ref[i]))) {
      ADD_FAILURE() << "M=" << M << " N=" << N << " K=" << K << " layout " << layout
                    << " at (" << i / size_t(N) << ", " << i % size_t(N) << "): got " << got[i]
                    << ", want " << ref[i];
      ++bad;
    }
}

TEST(MatmulSizes, OddSizesAroundEveryBlockEdge) {
  const int64_t sizes[][3] = {
      {1, 1, 1},     {1, 257, 31},  {7, 17, 7},     {8, 33, 300},  {9, 16, 1},
      {17, 31, 257}, {31, 1, 17},   {12, 32, 256},  {13, 65, 513}, {97, 257, 31},
      {100, 600, 7}, {6, 513, 260}, {257, 33, 300}, {96, 512, 256}, {193, 1025, 40},
      {40, 70, 1100}, {8, 48, 1040}, {23, 47, 529},
      // row-major B packed (a row stride of 4 KiB; more than 512 rows per thread) and read
      // in place with a partial last panel
      {20, 1024, 70}, {600, 64, 50}, {64, 600, 90},
  };
  uint32_t seed = 1;
  for (const auto& s : sizes)
    for (int layout = 0; layout < 4; ++layout) check(s[0], s[1], s[2], layout, seed += 2);
}

TEST(MatmulSizes, AlphaAndAccumulationAcrossKBlocks) {
  // addmm: beta * self + alpha * (a @ b) with K spanning three 256-deep blocks.
  const int64_t M = 20, N = 40, K = 700;
  auto av = random_floats(size_t(M * K), 7), bv = random_floats(size_t(K * N), 8);
  auto sv = random_floats(size_t(M * N), 9);
  Tensor y = addmm(tensor_from(sv, {M, N}), tensor_from(av, {M, K}), tensor_from(bv, {K, N}),
                   0.5, -2.0);
  auto ref = ref_product(av, bv, M, N, K);
  auto got = y.to_vector<float>();
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(got[i], 0.5 * sv[i] - 2.0 * ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << i;
}

// bfloat16 operands (exact in bfloat16), float32 accumulation, one rounding to bfloat16.
TEST(MatmulSizes, BFloat16AtEdgeSizesAndLayouts) {
  const int64_t sizes[][3] = {{1, 1, 1},    {7, 17, 7},    {8, 33, 301},  {17, 31, 513},
                              {97, 257, 31}, {6, 513, 260}, {100, 40, 1030},
                              // beyond two 1024-deep blocks; an odd K past one block (A's
                              // rows read in place with an odd stride, then copied for the
                              // one-element block); whole and partial 16-pair transposes
                              {40, 70, 2100}, {33, 48, 1025}, {9, 64, 34},
                              // few rows x W.t(): the dot product's four-vector steps, one
                              // vector steps and scalar tail at every vector width
                              {1, 9, 77}, {3, 20, 141}, {5, 12, 1000},
                              // the AMX kernel's cache blocks (256 rows x 512 columns, K in
                              // blocks of 512): two of each with partial ones after them
                              {300, 600, 1100}};
  uint32_t seed = 100;
  for (const auto& s : sizes)
    for (int layout = 0; layout < 3; ++layout) {
      const int64_t M = s[0], N = s[1], K = s[2];
      Tensor a32 = tensor_from(random_floats(size_t(M * K), seed++), {M, K}).to(DType::BF16);
      Tensor b32 = tensor_from(random_floats(size_t(K * N), seed++), {K, N}).to(DType::BF16);
      auto av = a32.to_vector<float>(), bv = b32.to_vector<float>();  // the exact bf16 values
      Tensor a = a32, b = b32;
      if (layout == 1) a = a32.t().contiguous().t();
      if (layout == 2) b = b32.t().contiguous().t();
      Tensor c = matmul(a, b);
      ASSERT_EQ(c.dtype(), DType::BF16);
      auto ref = ref_product(av, bv, M, N, K);
      auto got = c.to_vector<float>();
      int bad = 0;
      for (size_t i = 0; i < ref.size() && bad < 5; ++i) {
        const double tol = std::ldexp(1.0, -8) * std::fabs(ref[i]) + 1e-5 * std::sqrt(double(K));
        if (std::fabs(double(got[i]) - ref[i]) > tol) {
          ADD_FAILURE() << "bf16 M=" << M << " N=" << N << " K=" << K << " layout " << layout
                        << " at " << i << ": got " << got[i] << ", want " << ref[i];
          ++bad;
        }
      }
    }
}

// int_mm: int8 / uint8 x int8 -> int32, exact, against a 64-bit reference (extreme values
// included: the signed path shifts A by 128 and corrects with B's column sums).
// Tall products (the oneDNN path when kiln is built with it; kiln's kernels otherwise):
// Linear's bias row (addmm with beta = 1), other alpha / beta, bfloat16 rounding once, and a
// batched x @ W whose batch folds into rows, against float64.
TEST(MatmulSizes, TallProductsWithBiasAlphaBetaAndFoldedBatch) {
  const int64_t M = 70, N = 96, K = 130;
  auto av = random_floats(size_t(M * K), 21), wv = random_floats(size_t(N * K), 22);
  auto bv = random_floats(size_t(N), 23);
  std::vector<double> ref(size_t(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(av[size_t(i * K + k)]) * double(wv[size_t(j * K + k)]);
      ref[size_t(i * N + j)] = s;
    }
  Tensor x = tensor_from(av, {M, K}), w = tensor_from(wv, {N, K}), bias = tensor_from(bv, {N});
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor xt = x.to(t), wt = w.to(t), bt = bias.to(t);
    // References from the rounded operands, as the kernels see them.
    std::vector<double> xr = xt.to_vector<double>(), wr = wt.to_vector<double>(), br = bt.to_vector<double>();
    std::vector<double> prod(size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += xr[size_t(i * K + k)] * wr[size_t(j * K + k)];
        prod[size_t(i * N + j)] = s;
      }
    const Tol tol = t == DType::F32 ? Tol{1e-5, 1e-4} : Tol{1e-2, 2e-2};
    std::vector<double> want(prod.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = prod[i] + br[i % size_t(N)];
    expect_close(addmm(bt, xt, wt.t()), {M, N}, want, tol, "bias row");
    for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * br[i % size_t(N)] + 2.0 * prod[i];
    expect_close(addmm(bt, xt, wt.t(), 0.5, 2.0), {M, N}, want, tol, "alpha beta");
    for (size_t i = 0; i < want.size(); ++i) want[i] = 3.0 * prod[i] + br[i % size_t(N)];
    expect_close(addmm(bt, xt, wt.t(), 1.0, 3.0), {M, N}, want, tol, "alpha only");
    // [2, 35, K] @ W.t(): the batch folds into the 70 rows.
    expect_close(matmul(xt.reshape({2, 35, K}), wt.t()), {2, 35, N}, prod, tol, "folded batch");
  }
  (void)ref;
  // Attention-shaped batches: [2, 4, 32, 48] @ [2, 4, 48, 40] (one merged batch dim of 8) and
  // the same with the second operand transposed in its last two dims and broadcast over dim 1.
  const int64_t Bb = 2, H = 4, T = 32, D = 48, S = 40;
  auto qv = random_floats(size_t(Bb * H * T * D), 31), kv = random_floats(size_t(Bb * H * D * S), 32);
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor q = tensor_from(qv, {Bb, H, T, D}).to(t), k = tensor_from(kv, {Bb, H, D, S}).to(t);
    std::vector<double> qr = q.to_vector<double>(), kr = k.to_vector<double>(), want;
    for (int64_t b = 0; b < Bb * H; ++b)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += qr[size_t((b * T + i) * D + d)] * kr[size_t((b * D + d) * S + j)];
          want.push_back(s);
        }
    const Tol tol = t == DType::F32 ? Tol{1e-5, 1e-4} : Tol{1e-2, 2e-2};
    expect_close(matmul(q, k), {Bb, H, T, S}, want, tol, "batched");
    Tensor kt = k.transpose(-1, -2).contiguous().transpose(-1, -2);  // same values, [.., S, D] storage
    expect_close(matmul(q, kt), {Bb, H, T, S}, want, tol, "batched, transposed operand");
    Tensor k0 = k.narrow(1, 0, 1);  // broadcast over the heads
    std::vector<double> k0r = k0.contiguous().to_vector<double>(), want0;
    for (int64_t b = 0; b < Bb; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d)
              s += qr[size_t(((b * H + h) * T + i) * D + d)] * k0r[size_t((b * D + d) * S + j)];
            want0.push_back(s);
          }
    expect_close(matmul(q, k0), {Bb, H, T, S}, want0, tol, "broadcast over heads");
    // Decoding: few query rows against the transposed keys (the batched matrix-vector path),
    // also with the keys broadcast over the heads.
    Tensor k0t = kt.narrow(1, 0, 1);
    for (int64_t rows : {int64_t(1), int64_t(3)}) {
      std::vector<double> want_r, want0_r;
      for (int64_t b = 0; b < Bb * H; ++b)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < S; ++j) {
            want_r.push_back(want[size_t((b * T + i) * S + j)]);
            want0_r.push_back(want0[size_t((b * T + i) * S + j)]);
          }
      Tensor qr_rows = q.narrow(2, 0, rows);
      const std::string what = "decoding rows " + std::to_string(rows);
      expect_close(matmul(qr_rows, kt), {Bb, H, rows, S}, want_r, tol, what);
      expect_close(matmul(qr_rows, k0t), {Bb, H, rows, S}, want0_r, tol, what + ", broadcast keys");
    }
  }
}

TEST(MatmulSizes, Int8ProductsAreExact) {
  // Sizes for the blocked kernel and, with B given as W.t() of a [N, K] weight, for the
  // few-rows streaming kernel (M < 16, in groups of up to 4 rows; K tails 1, 63, 65, 130 around its 64-byte steps).
  const int64_t sizes[][3] = {{1, 1, 1},   {7, 17, 5},  {8, 33, 301}, {97, 70, 1030}, {13, 513, 64},
                              {1, 40, 63}, {2, 9, 65},  {4, 31, 130}, {3, 5, 64},     {5, 33, 70},
                              {6, 11, 250},  // groups of 4 and 2 rows; 128-, 64- and 58-byte steps
                              // one row: B rows 4 at a time, then the rest one by one
                              {1, 7, 33}, {1, 9, 64}, {1, 130, 97}, {1, 5, 1},
                              // tall: oneDNN's matmul at the VNNI level (decision 0022)
                              {16, 31, 600}, {40, 257, 31}, {33, 17, 1023},
                              // more than two 1024-deep blocks with a tail of 2, more than one
                              // 256-wide block with a partial panel, a partial row tile
                              {20, 300, 2050}, {9, 520, 1100},
                              // the AMX kernel's cache blocks (256 x 512, K blocks of 1024)
                              {264, 530, 2100}};
  std::mt19937 rng(5);
  for (const auto& s : sizes)
    for (bool weight_layout : {false, true})
    for (DType at : {DType::I8, DType::U8}) {
      const int64_t M = s[0], N = s[1], K = s[2];
      std::vector<int64_t> av(size_t(M * K)), bv(size_t(K * N));
      std::uniform_int_distribution<int> da(at == DType::I8 ? -128 : 0, at == DType::I8 ? 127 : 255);
      std::uniform_int_distribution<int> db(-128, 127);
      for (auto& v : av) v = da(rng);
      for (auto& v : bv) v = db(rng);
      av[0] = at == DType::I8 ? -128 : 255;  // extremes
      bv[0] = -128;
      Tensor a = tensor_from(av, {M, K}).to(at), b = tensor_from(bv, {K, N}).to(DType::I8);
      if (weight_layout) b = b.t().contiguous().t();  // same values, stored as [N, K]
      Tensor c = int_mm(a, b);
      ASSERT_EQ(c.dtype(), DType::I32);
      ASSERT_EQ(c.shape(), (Shape{M, N}));
      auto got = c.to_vector<int64_t>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t want = 0;
          for (int64_t k = 0; k < K; ++k) want += av[size_t(i * K + k)] * bv[size_t(k * N + j)];
          ASSERT_EQ(got[size_t(i * N + j)], want) << dtype_name(at) << (weight_layout ? " W.t()" : "")
                                                  << " M=" << M << " N=" << N
                                                  << " K=" << K << " at " << i << "," << j;
        }
    }
  // A weight given as W.t() is packed once and cached with W (oneDNN path): a change to W in
  // place, or a new weight in the same place, must be seen by the next product.
  {
    const int64_t M = 48, N = 40, K = 200;
    std::uniform_int_distribution<int> d(-128, 127);
    std::vector<int64_t> av(size_t(M * K)), wv(size_t(N * K));
    for (auto& v : av) v = d(rng);
    for (auto& v : wv) v = d(rng);
    Tensor a = tensor_from(av, {M, K}).to(DType::I8), w = tensor_from(wv, {N, K}).to(DType::I8);
    auto check = [&](const Tensor& got, const char* what) {
      auto g = got.to_vector<int64_t>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t want = 0;
          for (int64_t k = 0; k < K; ++k) want += av[size_t(i * K + k)] * wv[size_t(j * K + k)];
          ASSERT_EQ(g[size_t(i * N + j)], want) << what << " at " << i << "," << j;
        }
    };
    check(int_mm(a, w.t()), "first call");
    check(int_mm(a, w.t()), "cached weight");
    for (auto& v : wv) v = v / 2;  // the same change in place: w.copy_(w_half)
    w.copy_(tensor_from(wv, {N, K}).to(DType::I8));
    check(int_mm(a, w.t()), "weight changed in place");
    check(int_mm(a, w.narrow(0, 0, N).t()), "a view of the changed weight");
  }
  EXPECT_THROW(int_mm(zeros({2, 3}, DType::I8), zeros({4, 2}, DType::I8)), ShapeError);
  EXPECT_THROW(int_mm(zeros({2, 3}, DType::F32), zeros({3, 2}, DType::I8)), Error);
  EXPECT_THROW(int_mm(zeros({2, 3}, DType::I8), zeros({3, 2}, DType::U8)), Error);
}

}  // namespace
}  // namespace kiln::test
