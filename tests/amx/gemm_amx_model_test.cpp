// The AMX tile GEMMs (src/kiln/backends/cpu/isa/gemm_amx_body.inc) run on a software model of
// the tiles (amx_tile_model.h), so that their blocking, packing, K / M / N edges, strided and
// transposed operands and threading are checked on CPUs without AMX, against a float64 (bfloat16)
// or exact int64 (int8) reference, with the number of tile products the blocking implies. On a
// CPU with AMX the same kernels run on the hardware through the op tests (CTest's isa_amx_*
// reruns with KILN_ONEDNN=0).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "amx_model_kernels.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/core/half.h"

namespace kiln::cpu::test {
namespace {

bool can_run() { return cpu_features().avx512f && cpu_features().avx512bw; }
#define REQUIRE_AVX512()                                                              \
  if (!can_run()) GTEST_SKIP() << "the packers shared with the AVX-512 kernels need " \
                                  "AVX-512 F/BW, which this CPU lacks"

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);  // truncation: any bfloat16 value will do as test data
}
double widen(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Tile products the blocking implies: per 32-row block and 32-column panel, four per K step
// (32 bfloat16 / 64 int8 values) of each K block (kc values).
int64_t expected_products(int64_t M, int64_t N, int64_t K, int64_t step, int64_t kc) {
  int64_t steps = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kc) steps += (std::min(kc, K - k0) + step - 1) / step;
  return ((M + 31) / 32) * ((N + 31) / 32) * steps * 4;
}

// layout 0: A [M, K] and B [K, N] row-major; 1: B stored as [N, K] (a Linear weight); 2: A
// column-major; 3: A rows padded (row stride K + 5) and C rows padded (N + 3); 4: B with
// column stride 2.
void check_bf16(int64_t M, int64_t N, int64_t K, int layout, uint32_t seed,
                bool prepacked = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  int64_t a_rs = K, a_cs = 1, b_rs = N, b_cs = 1, c_rs = N;
  if (layout == 1) b_rs = 1, b_cs = K;
  if (layout == 2) a_rs = 1, a_cs = M;
  if (layout == 3) a_rs = K + 5, c_rs = N + 3;
  if (layout == 4) b_rs = 2 * N, b_cs = 2;
  std::vector<uint16_t> a(size_t(std::max(a_rs * M, a_cs * K) + 8)), b(size_t(2 * K * N + 8));
  for (auto& x : a) x = to_bf16(d(rng));
  for (auto& x : b) x = to_bf16(d(rng));
  const float sentinel = 12345.0f;
  std::vector<float> c(size_t(M * c_rs), sentinel);
  const int64_t products =
      prepacked ? model_gemm_bf16_prepacked(M, N, K, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs,
                                            c.data(), c_rs)
                : model_gemm_bf16(M, N, K, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs, c.data(),
                                  c_rs);
  EXPECT_EQ(products, expected_products(M, N, K, 32, 512));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < c_rs; ++j) {
      const float got = c[size_t(i * c_rs + j)];
      if (j >= N) {  // padding columns of C are never written
        ASSERT_EQ(got, sentinel) << "wrote C padding at " << i << "," << j;
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p =
            widen(a[size_t(i * a_rs + k * a_cs)]) * widen(b[size_t(k * b_rs + j * b_cs)]);
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(got, ref, (double(K) + 2) * 1.2e-7 * mag + 1e-30)
          << "M=" << M << " N=" << N << " K=" << K << " layout " << layout
          << (prepacked ? " prepacked" : "") << " at " << i << "," << j;
    }
}

void check_s8(int64_t M, int64_t N, int64_t K, bool a_signed, bool b_transposed, uint32_t seed,
              bool prepacked = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> a(size_t(M * K));
  std::vector<int8_t> b(size_t(K * N));
  for (auto& x : a) x = uint8_t(d(rng));
  for (auto& x : b) x = int8_t(uint8_t(d(rng)));
  // Extremes in the first row and column: -128 x -128 and 255 x -128 at every k.
  for (int64_t k = 0; k < K; ++k) {
    a[size_t(k)] = a_signed ? uint8_t(0x80) : uint8_t(255);
    b[size_t(b_transposed ? k : k * N)] = int8_t(-128);
  }
  std::vector<int32_t> c(size_t(M * N), 0x5a5a5a5a);
  const int64_t products =
      prepacked ? model_gemm_s8_prepacked(M, N, K, a.data(), a_signed, b.data(), c.data())
                : model_gemm_s8(M, N, K, a.data(), a_signed, b.data(), b_transposed, c.data());
  EXPECT_EQ(products, expected_products(M, N, K, 64, 1024));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int64_t ref = 0;
      for (int64_t k = 0; k < K; ++k) {
        const uint8_t raw = a[size_t(i * K + k)];
        const int64_t av = a_signed ? int64_t(int8_t(raw)) : int64_t(raw);
        ref += av * int64_t(b[size_t(b_transposed ? j * K + k : k * N + j)]);
      }
      ASSERT_EQ(c[size_t(i * N + j)], int32_t(ref))
          << "M=" << M << " N=" << N << " K=" << K << " signed " << a_signed << " transposed "
          << b_transposed << (prepacked ? " prepacked" : "") << " at " << i << "," << j;
    }
}

struct Size {
  int64_t M, N, K;
};

TEST(AmxTileModel, Bf16SizesAndLayouts) {
  REQUIRE_AVX512();
  // Whole tiles; one-element edges; partial row blocks and panels; K within a step, at and
  // beyond one 512-value block and two; N beyond one 256-column block; large enough to thread.
  const Size sizes[] = {{16, 16, 32},  {32, 32, 32},   {17, 1, 1},     {33, 33, 33},
                        {16, 35, 2},   {31, 47, 511},  {64, 300, 512}, {40, 257, 513},
                        {96, 64, 1100}, {100, 300, 600}};
  uint32_t seed = 1;
  for (const Size& s : sizes)
    for (int layout = 0; layout < 5; ++layout) check_bf16(s.M, s.N, s.K, layout, seed++);
}

TEST(AmxTileModel, Int8SizesSignsAndLayouts) {
  REQUIRE_AVX512();
  const Size sizes[] = {{16, 16, 64},    {32, 32, 64},  {17, 1, 1},       {33, 33, 3},
                        {31, 47, 1023},  {64, 300, 1024}, {40, 257, 1025}, {48, 64, 2200},
                        {100, 300, 700}};
  uint32_t seed = 100;
  for (const Size& s : sizes)
    for (bool a_signed : {false, true})
      for (bool transposed : {false, true}) check_s8(s.M, s.N, s.K, a_signed, transposed, seed++);
}

// B packed whole once (a Linear weight's cached copy, decision 0043): the same products.
TEST(AmxTileModel, PrepackedWeights) {
  REQUIRE_AVX512();
  // N = 600: three 256-column blocks; 16 x 1100 x 300 splits the columns between threads.
  const Size bf16_sizes[] = {{16, 16, 32},    {33, 33, 33},  {31, 300, 511}, {40, 257, 1100},
                             {100, 300, 600}, {24, 600, 96}, {16, 1100, 300}};
  uint32_t seed = 300;
  for (const Size& s : bf16_sizes)
    for (int layout : {0, 1, 3}) check_bf16(s.M, s.N, s.K, layout, seed++, true);
  const Size s8_sizes[] = {{16, 16, 64},    {33, 33, 3},    {31, 300, 1023}, {40, 257, 2200},
                           {100, 300, 700}, {24, 600, 200}, {16, 1100, 300}};
  for (const Size& s : s8_sizes)
    for (bool a_signed : {false, true}) check_s8(s.M, s.N, s.K, a_signed, true, seed++, true);
}

// Past the cache blocks of C (256 rows x 512 columns, decision 0116) with partial ones after
// them, and K in three blocks: the partial sums wait in the per-thread buffer between blocks.
TEST(AmxTileModel, CacheBlocksOfC) {
  REQUIRE_AVX512();
  check_bf16(290, 530, 1030, 0, 500);
  check_bf16(290, 530, 1030, 1, 501, true);
  check_s8(270, 545, 2100, false, true, 502);
  check_s8(270, 545, 2100, true, true, 503, true);
}

// C rounded to bfloat16 inside the kernel, with the bias, against the model's float32 sums
// rounded as kiln::BFloat16 rounds (nearest even, NaN kept); the padding of C's rows left alone.
void check_bf16_rounded(const Size& s, bool prepacked, bool with_bias, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<uint16_t> a(size_t(s.M * s.K)), b(size_t(s.K * s.N));
  for (auto& x : a) x = to_bf16(d(rng));
  for (auto& x : b) x = to_bf16(d(rng));
  std::vector<float> bias(size_t(s.N));
  for (auto& x : bias) x = 4.0f * d(rng);
  std::vector<float> sums(size_t(s.M * s.N));
  model_gemm_bf16(s.M, s.N, s.K, a.data(), s.K, 1, b.data(), s.N, 1, sums.data(), s.N);
  const int64_t c_rs = s.N + 3;
  std::vector<uint16_t> c(size_t(s.M * c_rs), 0xABCD);
  model_gemm_bf16_rounded(s.M, s.N, s.K, a.data(), s.K, 1, b.data(), s.N, 1, c.data(), c_rs,
                          with_bias ? bias.data() : nullptr, prepacked);
  for (int64_t i = 0; i < s.M; ++i) {
    for (int64_t j = 0; j < s.N; ++j) {
      const float sum = sums[size_t(i * s.N + j)];
      const float v = with_bias ? sum + bias[size_t(j)] : sum;
      const BFloat16 want(v);
      uint16_t want_bits;
      std::memcpy(&want_bits, &want, 2);
      ASSERT_EQ(c[size_t(i * c_rs + j)], want_bits)
          << s.M << "x" << s.N << "x" << s.K << " prepacked " << prepacked << " bias "
          << with_bias << " at (" << i << ", " << j << ")";
    }
    for (int64_t j = s.N; j < c_rs; ++j) ASSERT_EQ(c[size_t(i * c_rs + j)], 0xABCD);
  }
}

// Rounded inside the kernel (decision 0119): bit for bit the float32 product plus the bias;
// partial tiles, several K blocks and cache blocks, both B forms.
TEST(AmxTileModel, Bf16RoundedInTheKernel) {
  REQUIRE_AVX512();
  const Size sizes[] = {{16, 16, 32}, {17, 1, 1}, {33, 47, 600}, {100, 300, 513}, {290, 530, 40}};
  uint32_t seed = 700;
  for (const Size& s : sizes)
    for (bool prepacked : {false, true})
      for (bool with_bias : {false, true}) check_bf16_rounded(s, prepacked, with_bias, seed++);
}

// Runs f with one OpenMP thread, so that the thread's columns span several 512-column blocks.
template <typename F>
void on_one_thread(F f) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  f();
  omp_set_num_threads(threads);
}

// A row block's A tiles copied once for all of a thread's column blocks (amx_part's kept_a:
// B packed beforehand, or packed per K block for one row block; the order row block / column
// block / K block), and bfloat16 C rounded during the next block's tile products: B's column
// blocks larger than 1 MiB (K past 1024 bfloat16 / 2048 int8 values), one row block of at most
// 256 rows, partial column blocks and tiles, and more rows (1050-1100) than one block of kept
// tiles holds (kAmxKeptMC, 1024).
TEST(AmxTileModel, ATilesKeptAcrossColumnBlocks) {
  REQUIRE_AVX512();
  on_one_thread([] {
    check_bf16(300, 1100, 1100, 1, 900, true);
    check_bf16(40, 1100, 600, 0, 901);
    check_bf16(40, 1100, 600, 3, 902, true);
    check_s8(270, 1100, 2100, true, true, 903, true);
    check_s8(40, 1100, 1100, false, false, 904);
    check_bf16_rounded({300, 1100, 1100}, true, true, 905);
    check_bf16_rounded({40, 1100, 600}, false, false, 906);
    check_bf16_rounded({33, 1060, 1030}, true, false, 907);
    // Past kAmxKeptMC (1024) rows: two row blocks of kept tiles, each reading all of B.
    check_bf16(1100, 600, 1100, 1, 908, true);
    check_bf16_rounded({1060, 560, 1030}, true, true, 909);
    check_s8(1050, 560, 2100, false, true, 910, true);
  });
}

TEST(AmxTileModel, EmptyK) {
  REQUIRE_AVX512();
  std::vector<float> c(32 * 20, 7.0f);
  model_gemm_bf16(32, 20, 0, nullptr, 0, 1, nullptr, 20, 1, c.data(), 20);
  for (float v : c) ASSERT_EQ(v, 0.0f);
  std::vector<int32_t> ci(32 * 20, 7);
  model_gemm_s8(32, 20, 0, nullptr, true, nullptr, false, ci.data());
  for (int32_t v : ci) ASSERT_EQ(v, 0);
}

}  // namespace
}  // namespace kiln::cpu::test
