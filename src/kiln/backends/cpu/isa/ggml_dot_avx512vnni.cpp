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

namespace kiln::cpu {

namespace {

inline float scale_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

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

// The 6-bit scale and minimum of sub-block j of a Q4_K super-block (12 packed bytes).
inline void k4_scale_min(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: sub-block j (32 values) is d * sc_j * q - dmin * m_j with q a nibble (Q5_K: plus
// a fifth bit from qh). The values are unsigned, so vpdpbusd takes them against the signed
// activations as they are; the minimum comes off through the activation block sums (xsum =
// dx * the sum of the block's int8 values).
template <int R, bool kFiveBits>
void q45_k_rows(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
                const float* xsum, int64_t x_stride, float* out) {
  constexpr int64_t kBlockBytes = kFiveBits ? 176 : 144;
  constexpr int kValuesAt = kFiveBits ? 48 : 16;  // after d, dmin, scales (and qh)
  __m256 acc[R][2];
  float offset[R] = {};
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m256i zero = _mm256_setzero_si256();
  const int64_t nb32 = nblocks * 8;
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = w + b * kBlockBytes;
    const float d = scale_at(blk), dmin = scale_at(blk + 2);
    float dsc[8], dm[8];
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      k4_scale_min(j, blk + 4, sc, mn);
      dsc[j] = d * float(sc);
      dm[j] = dmin * float(mn);
    }
    const __m256i high = kFiveBits ? load32(blk + 16) : zero;
    for (int c = 0; c < 4; ++c) {
      const __m256i bytes = load32(blk + kValuesAt + 32 * c);
      __m256i lo = _mm256_and_si256(bytes, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      if constexpr (kFiveBits) {  // bit 2c of qh[l] for the low values, 2c + 1 for the high
        const __m128i s_lo = _mm_cvtsi32_si128(2 * c), s_hi = _mm_cvtsi32_si128(2 * c + 1);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(high, s_lo), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(high, s_hi), one), 4));
      }
      const int64_t j = b * 8 + 2 * c;  // the activation block of the low values
      for (int r = 0; r < R; ++r) {
        const int8_t* x = qx + r * x_stride + j * 32;
        const __m256i p_lo = _mm256_dpbusd_epi32(zero, lo, load32(x));
        const __m256i p_hi = _mm256_dpbusd_epi32(zero, hi, load32(x + 32));
        acc[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_lo), _mm256_set1_ps(dsc[2 * c] * dx[r * nb32 + j]), acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_hi), _mm256_set1_ps(dsc[2 * c + 1] * dx[r * nb32 + j + 1]), acc[r][1]);
        offset[r] += dm[2 * c] * xsum[r * nb32 + j] + dm[2 * c + 1] * xsum[r * nb32 + j + 1];
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1])) - offset[r];
}

// Q6_K: 6-bit values (low 4 bits in ql, high 2 in qh) offset by 32, one int8 scale per 16
// values. Each 32-value group's products land in 8 lanes, lanes 0-3 from its first 16 values
// and 4-7 from its second, so one scale vector [s_a x4, s_b x4] applies both scales; the
// offset of 32 is taken off exactly per lane (vpdpbusd of 32s with the activations).
template <int R>
void q6_k_rows(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
               int64_t x_stride, float* out) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
  const __m256i k32 = _mm256_set1_epi8(32), zero = _mm256_setzero_si256();
  const int64_t nb32 = nblocks * 8;
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = w + b * 210;
    const float d = scale_at(blk + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    for (int n = 0; n < 2; ++n) {
      const __m256i A = load32(blk + 64 * n), B = load32(blk + 64 * n + 32);
      const __m256i H = load32(blk + 128 + 32 * n);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(A, low4), _mm256_slli_epi16(_mm256_and_si256(H, three), 4)),
          _mm256_or_si256(_mm256_and_si256(B, low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), three), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), three), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), three), 4))};
      for (int t = 0; t < 4; ++t) {
        const int64_t j = b * 8 + n * 4 + t;
        const float s_lo = d * float(sc[8 * n + 2 * t]), s_hi = d * float(sc[8 * n + 2 * t + 1]);
        for (int r = 0; r < R; ++r) {
          const __m256i xv = load32(qx + r * x_stride + j * 32);
          const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, q[t], xv),
                                             _mm256_dpbusd_epi32(zero, k32, xv));
          const float dxr = dx[r * nb32 + j];
          const __m256 scale = _mm256_set_m128(_mm_set1_ps(s_hi * dxr), _mm_set1_ps(s_lo * dxr));
          acc[r][t & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[r][t & 1]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
}

template <bool kFiveBits>
void q45_k(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float* xsum,
           int64_t xs, int rows, float* out) {
  switch (rows) {
    case 1: q45_k_rows<1, kFiveBits>(w, nb, qx, dx, xsum, xs, out); break;
    case 2: q45_k_rows<2, kFiveBits>(w, nb, qx, dx, xsum, xs, out); break;
    case 3: q45_k_rows<3, kFiveBits>(w, nb, qx, dx, xsum, xs, out); break;
    default: q45_k_rows<4, kFiveBits>(w, nb, qx, dx, xsum, xs, out); break;
  }
}

void q6_k(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float*,
          int64_t xs, int rows, float* out) {
  switch (rows) {
    case 1: q6_k_rows<1>(w, nb, qx, dx, xs, out); break;
    case 2: q6_k_rows<2>(w, nb, qx, dx, xs, out); break;
    case 3: q6_k_rows<3>(w, nb, qx, dx, xs, out); break;
    default: q6_k_rows<4>(w, nb, qx, dx, xs, out); break;
  }
}

void q8_0(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float*,
          int64_t xs, int rows, float* out) {
  switch (rows) {
    case 1: q8_0_rows<1>(w, nb, qx, dx, xs, out); break;
    case 2: q8_0_rows<2>(w, nb, qx, dx, xs, out); break;
    case 3: q8_0_rows<3>(w, nb, qx, dx, xs, out); break;
    default: q8_0_rows<4>(w, nb, qx, dx, xs, out); break;
  }
}

void q4_0(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float* xsum,
          int64_t xs, int rows, float* out) {
  switch (rows) {
    case 1: q4_0_rows<1>(w, nb, qx, dx, xsum, xs, out); break;
    case 2: q4_0_rows<2>(w, nb, qx, dx, xsum, xs, out); break;
    case 3: q4_0_rows<3>(w, nb, qx, dx, xsum, xs, out); break;
    default: q4_0_rows<4>(w, nb, qx, dx, xsum, xs, out); break;
  }
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
