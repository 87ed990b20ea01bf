// The tile model itself (amx_tile_model.h), against values worked out by hand from the SDM's
// pseudocode, so that the kernel tests (gemm_amx_model_test.cpp) rest on a model that follows
// the hardware's layout and arithmetic rather than the kernel's assumptions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "amx_tile_model.h"

namespace kiln::cpu::test {
namespace {

using Model = AmxTileModel;

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

TEST(AmxTileModelSemantics, Bf16PairsRowsAndColumns) {
  Model::configure(amx_full_tiles());
  // A row m holds pairs (A[m][2k], A[m][2k+1]) in its word k; B row k holds, in word n, the
  // pair (B[2k][n], B[2k+1][n]). C[m][n] += sum_k A[m][2k] B[2k][n] + A[m][2k+1] B[2k+1][n].
  uint16_t a[16][32] = {}, b[16][32] = {};
  a[0][0] = bf16_bits(2.0f);   // A[0][0]
  a[0][1] = bf16_bits(3.0f);   // A[0][1]
  a[0][3] = bf16_bits(5.0f);   // A[0][3]: pair word 1, second member
  a[1][0] = bf16_bits(-1.0f);  // A[1][0]
  b[0][2 * 4] = bf16_bits(7.0f);       // B[0][4]
  b[0][2 * 4 + 1] = bf16_bits(11.0f);  // B[1][4]
  b[1][2 * 4 + 1] = bf16_bits(13.0f);  // B[3][4]
  float c[16][16] = {};
  c[0][4] = 0.5f;
  Model::load<0>(c, 64);
  Model::load<4>(a, 64);
  Model::load<6>(b, 64);
  Model::dot_bf16<0, 4, 6>();
  Model::store<0>(c, 64);
  EXPECT_EQ(c[0][4], 0.5f + 2 * 7 + 3 * 11 + 5 * 13);
  EXPECT_EQ(c[1][4], -7.0f);
  EXPECT_EQ(c[0][3], 0.0f);
  Model::release();
}

TEST(AmxTileModelSemantics, Bf16DenormalsFlushAndRoundingPerProduct) {
  Model::configure(amx_full_tiles());
  uint16_t a[16][32] = {}, b[16][32] = {};
  // Column 0: a denormal input (2^-127) times 2^100 would be 2^-27; read as zero instead.
  a[0][0] = 0x0040;
  b[0][0] = bf16_bits(std::ldexp(1.0f, 100));
  // Column 1: C = 1, then + 2^-24 (a tie: rounds to 1), then + 2^-24 again (1 again), as the
  // SDM's two additions per pair say; one rounding of the exact sum would give 1 + 2^-23.
  a[1][0] = bf16_bits(1.0f);
  a[1][1] = bf16_bits(1.0f);
  b[0][2] = bf16_bits(std::ldexp(1.0f, -24));
  b[0][3] = bf16_bits(std::ldexp(1.0f, -24));
  float c[16][16] = {};
  c[1][1] = 1.0f;
  Model::load<0>(c, 64);
  Model::load<4>(a, 64);
  Model::load<6>(b, 64);
  Model::dot_bf16<0, 4, 6>();
  Model::store<0>(c, 64);
  EXPECT_EQ(c[0][0], 0.0f);
  EXPECT_EQ(c[1][1], 1.0f);
  // A product whose float32 result is denormal (2^-140) is flushed to zero.
  uint16_t a2[16][32] = {}, b2[16][32] = {};
  a2[0][0] = bf16_bits(std::ldexp(1.0f, -70));
  b2[0][0] = bf16_bits(std::ldexp(1.0f, -70));
  Model::zero<1>();
  Model::load<5>(a2, 64);
  Model::load<7>(b2, 64);
  Model::dot_bf16<1, 5, 7>();
  Model::store<1>(c, 64);
  EXPECT_EQ(c[0][0], 0.0f);
  Model::release();
}

TEST(AmxTileModelSemantics, Int8QuadruplesSignsAndWrap) {
  Model::configure(amx_full_tiles());
  uint8_t a[16][64] = {}, b[16][64] = {};
  for (int e = 0; e < 4; ++e) {
    a[0][e] = 0x80;             // -128 signed, 128 unsigned
    b[0][4 * 2 + e] = 0x80;     // column 2: -128
  }
  int32_t c[16][16] = {};
  c[0][2] = std::numeric_limits<int32_t>::max();
  Model::load<0>(c, 64);
  Model::load<4>(a, 64);
  Model::load<6>(b, 64);
  Model::dot_s8s8<0, 4, 6>();  // += 4 * (-128 * -128) = 65536: wraps
  Model::store<0>(c, 64);
  EXPECT_EQ(c[0][2], int32_t(uint32_t(std::numeric_limits<int32_t>::max()) + 65536u));
  Model::zero<1>();
  Model::dot_u8s8<1, 4, 6>();  // 4 * (128 * -128)
  Model::store<1>(c, 64);
  EXPECT_EQ(c[0][2], -65536);
  Model::release();
}

TEST(AmxTileModelSemantics, ShapesFromTheConfigurationAndFaults) {
  EXPECT_THROW(Model::zero<0>(), std::runtime_error);  // no configuration loaded
  AmxTileConfig cfg = amx_full_tiles();
  cfg.rows[2] = 3;
  cfg.colsb[2] = 8;
  Model::configure(cfg);
  uint8_t src[16][64];
  std::memset(src, 0x11, sizeof src);
  uint8_t dst[16][64];
  std::memset(dst, 0xee, sizeof dst);
  Model::load<2>(src, 64);
  Model::store<2>(dst, 64);
  for (int r = 0; r < 16; ++r)
    for (int j = 0; j < 64; ++j)
      ASSERT_EQ(dst[r][j], r < 3 && j < 8 ? 0x11 : 0xee) << r << "," << j;
  EXPECT_THROW((Model::dot_bf16<0, 2, 6>()), std::runtime_error);  // 3 rows against 16
  Model::release();
  cfg.palette = 0;
  EXPECT_THROW(Model::configure(cfg), std::runtime_error);
}

}  // namespace
}  // namespace kiln::cpu::test
