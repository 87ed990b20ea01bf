#pragma once
// A software model of the AMX tile registers with the interface of AmxHardwareTiles
// (src/kiln/backends/cpu/isa/amx_tiles.h), following the pseudocode of the Intel SDM (vol. 2,
// LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TDPBF16PS, TDPBSSD, TDPBUSD): per thread, eight
// tiles of up to 16 rows x 64 bytes shaped by the loaded configuration; loads zero the bytes
// beyond a tile's shape; bfloat16 products take denormal inputs as zero, add the two products
// of a pair one after the other in float32 (round to nearest even) and flush denormal results
// to zero; int8 products add four byte products into a wrapping int32. Instructions the
// hardware would fault on (no configuration, mismatched tile shapes) throw instead.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "amx_tiles.h"

namespace kiln::cpu::test {

struct AmxTileModel {
  struct State {
    AmxTileConfig config;
    bool configured = false;
    uint8_t tile[8][16][64] = {};
    int64_t products = 0;  // tile products executed (tests check the kernel ran on tiles)
  };
  static State& state() {
    thread_local State s;
    return s;
  }

  static void configure(const AmxTileConfig& c) {
    if (c.palette != 1) throw std::runtime_error("AMX model: palette must be 1");
    for (int t = 0; t < 8; ++t)
      if (c.rows[t] > 16 || c.colsb[t] > 64 || c.colsb[t] % 4 != 0)
        throw std::runtime_error("AMX model: tile shape beyond 16 rows x 64 bytes");
    State& s = state();
    s.config = c;
    s.configured = true;
    std::memset(s.tile, 0, sizeof s.tile);  // LDTILECFG zeroes the tiles
  }
  static void release() {
    State& s = state();
    s.configured = false;
    std::memset(s.tile, 0, sizeof s.tile);
  }
  template <int T>
  static void zero() {
    std::memset(checked(T), 0, 16 * 64);
  }
  template <int T>
  static void load(const void* p, int64_t stride) {
    uint8_t(*t)[64] = reinterpret_cast<uint8_t(*)[64]>(checked(T));
    const AmxTileConfig& c = state().config;
    std::memset(t, 0, 16 * 64);
    for (int r = 0; r < c.rows[T]; ++r)
      std::memcpy(t[r], static_cast<const uint8_t*>(p) + r * stride, c.colsb[T]);
  }
  // tileloaddt1: the same load, with a hint the hardware may use to keep the data out of caches.
  template <int T>
  static void load_stream(const void* p, int64_t stride) {
    load<T>(p, stride);
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    uint8_t(*t)[64] = reinterpret_cast<uint8_t(*)[64]>(checked(T));
    const AmxTileConfig& c = state().config;
    for (int r = 0; r < c.rows[T]; ++r)
      std::memcpy(static_cast<uint8_t*>(p) + r * stride, t[r], c.colsb[T]);
  }
  template <int C, int A, int B>
  static void dot_bf16() {
    dot(C, A, B, [](const uint8_t* a, const uint8_t* b, uint8_t* c) {
      float acc;
      std::memcpy(&acc, c, 4);
      for (int e = 0; e < 2; ++e) {
        acc += widen_daz(a + 2 * e) * widen_daz(b + 2 * e);
        if (std::fpclassify(acc) == FP_SUBNORMAL) acc = std::copysign(0.0f, acc);
      }
      std::memcpy(c, &acc, 4);
    });
  }
  template <int C, int A, int B>
  static void dot_s8s8() {
    dot(C, A, B, [](const uint8_t* a, const uint8_t* b, uint8_t* c) { bytes<true>(a, b, c); });
  }
  template <int C, int A, int B>
  static void dot_u8s8() {
    dot(C, A, B, [](const uint8_t* a, const uint8_t* b, uint8_t* c) { bytes<false>(a, b, c); });
  }

 private:
  static uint8_t* checked(int t) {
    State& s = state();
    if (!s.configured) throw std::runtime_error("AMX model: tile instruction before ldtilecfg");
    return &s.tile[t][0][0];
  }
  static float widen_daz(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    uint32_t u = uint32_t(h) << 16;
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;  // denormal (or zero) input: zero
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  template <bool kSignedA>
  static void bytes(const uint8_t* a, const uint8_t* b, uint8_t* c) {
    uint32_t acc;
    std::memcpy(&acc, c, 4);
    for (int e = 0; e < 4; ++e) {
      const int32_t av = kSignedA ? int32_t(int8_t(a[e])) : int32_t(a[e]);
      acc += uint32_t(av * int32_t(int8_t(b[e])));
    }
    std::memcpy(c, &acc, 4);
  }
  // C[m][n] op= A[m][k] (4 bytes) x B[k][n] (4 bytes), shapes as the SDM requires.
  template <typename Step>
  static void dot(int ci, int ai, int bi, Step step) {
    const AmxTileConfig& cf = state().config;
    uint8_t(*c)[64] = reinterpret_cast<uint8_t(*)[64]>(checked(ci));
    uint8_t(*a)[64] = reinterpret_cast<uint8_t(*)[64]>(checked(ai));
    uint8_t(*b)[64] = reinterpret_cast<uint8_t(*)[64]>(checked(bi));
    const int m_rows = cf.rows[ci], k_words = cf.colsb[ai] / 4, n_words = cf.colsb[ci] / 4;
    if (cf.rows[ai] != m_rows || cf.rows[bi] != k_words || cf.colsb[bi] != cf.colsb[ci])
      throw std::runtime_error("AMX model: tile shapes do not match for a tile product");
    for (int m = 0; m < m_rows; ++m)
      for (int k = 0; k < k_words; ++k)
        for (int n = 0; n < n_words; ++n) step(&a[m][4 * k], &b[k][4 * n], &c[m][4 * n]);
    ++state().products;
  }
};

}  // namespace kiln::cpu::test
