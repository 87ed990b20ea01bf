// AVX-512 VNNI variant of the ggml block dot products (ggml_dot.h). vpdpbusd multiplies
// unsigned by signed bytes, four products per int32 lane:
// - Q8_0: the activations are shifted to unsigned (x + 128, an xor of the sign bit) and the
//   shift's contribution, 128 * (the weights' lane sums), computed once per weight block and
//   shared by the activation rows, is subtracted: exact for every byte value.
// - Q4_0: the nibbles are already unsigned; their offset of 8 is taken off in float through
//   the activation block sums (xsum).
// One 32-value block per 256-bit register. Compiled with AVX-512 F/BW/VL/VNNI and F16C.
#include <immintrin.h>

#include <cstring>

#include "ggml_dot.h"
#include "ggml_simd_helpers.h"

namespace kiln::cpu {

namespace {

using ggml_simd::hsum;
using ggml_simd::load32;
using ggml_simd::scale_at;


// R activation rows against one weight row. Each row keeps kChains accumulators that take
// the blocks in turn, so consecutive blocks do not wait on one another's fmadd (with a single
// accumulator the latency chain capped one row at about one block per 4 cycles).
template <int R>
void q8_0_rows(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
               int64_t x_stride, float* out) {
  constexpr int kChains = R == 1 ? 4 : R == 2 ? 2 : 1;
  __m256 acc[R][kChains];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < kChains; ++c) acc[r][c] = _mm256_setzero_ps();
  const __m256i sign = _mm256_set1_epi8(char(0x80)), zero = _mm256_setzero_si256();
  int64_t b = 0;
  for (; b + kChains <= nblocks; b += kChains) {
    for (int c = 0; c < kChains; ++c) {
      const uint8_t* blk = w + (b + c) * 34;
      const float dw = scale_at(blk);
      const __m256i wv = load32(blk + 2);
      const __m256i shift = _mm256_dpbusd_epi32(zero, sign, wv);  // 128 * lane sums of w
      for (int r = 0; r < R; ++r) {
        const __m256i xu = _mm256_xor_si256(load32(qx + r * x_stride + (b + c) * 32), sign);
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, xu, wv), shift);
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                    _mm256_set1_ps(dw * dx[r * nblocks + b + c]), acc[r][c]);
      }
    }
  }
  for (; b < nblocks; ++b) {
    const uint8_t* blk = w + b * 34;
    const float dw = scale_at(blk);
    const __m256i wv = load32(blk + 2);
    const __m256i shift = _mm256_dpbusd_epi32(zero, sign, wv);
    for (int r = 0; r < R; ++r) {
      const __m256i xu = _mm256_xor_si256(load32(qx + r * x_stride + b * 32), sign);
      const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, xu, wv), shift);
      acc[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[r * nblocks + b]), acc[r][0]);
    }
  }
  for (int r = 0; r < R; ++r) {
    __m256 sum = acc[r][0];
    for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[r][c]);
    out[r] = hsum(sum);
  }
}

template <int R>
void q4_0_rows(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
               const float* xsum, int64_t x_stride, float* out) {
  constexpr int kChains = R == 1 ? 4 : R == 2 ? 2 : 1;  // as q8_0_rows
  __m256 acc[R][kChains];
  float offset[R] = {};
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < kChains; ++c) acc[r][c] = _mm256_setzero_ps();
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m256i zero = _mm256_setzero_si256();
  // One block into chain c (c a compile-time constant after unrolling: a register).
  auto block = [&](int64_t b, int c) {
    const uint8_t* blk = w + b * 18;
    const float dw = scale_at(blk);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4),
                                         _mm_and_si128(q, low4));
    for (int r = 0; r < R; ++r) {
      const __m256i p = _mm256_dpbusd_epi32(zero, nib, load32(qx + r * x_stride + b * 32));
      acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[r * nblocks + b]), acc[r][c]);
      offset[r] += dw * xsum[r * nblocks + b];
    }
  };
  int64_t b = 0;
  for (; b + kChains <= nblocks; b += kChains)
    for (int c = 0; c < kChains; ++c) block(b + c, c);
  for (; b < nblocks; ++b) block(b, 0);
  for (int r = 0; r < R; ++r) {
    __m256 sum = acc[r][0];
    for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[r][c]);
    out[r] = hsum(sum) - 8.0f * offset[r];
  }
}

inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "ggml_kquant_dot.inc"

void q8_0(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float*,
          int64_t xs, int rows, float* out) {
  ggml_simd::by_rows(rows, [&](auto R) { q8_0_rows<decltype(R)::value>(w, nb, qx, dx, xs, out); });
}

void q4_0(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float* xsum,
          int64_t xs, int rows, float* out) {
  ggml_simd::by_rows(rows, [&](auto R) { q4_0_rows<decltype(R)::value>(w, nb, qx, dx, xsum, xs, out); });
}

}  // namespace

GGMLDotKernels ggml_dot_kernels_avx512vnni() {
  GGMLDotKernels k = ggml_dot_kernels_avx2();  // its dequantisers (memory-bound: enough)
  k.q8_0 = &q8_0;
  k.q4_0 = &q4_0;
  k.q4_k = &q45_k<false>;
  k.q5_k = &q45_k<true>;
  k.q6_k = &q6_k;
  k.isa = "avx512_vnni";
  return k;
}

}  // namespace kiln::cpu
