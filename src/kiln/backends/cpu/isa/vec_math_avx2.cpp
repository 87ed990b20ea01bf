// Vectorised float32 math, AVX2 + FMA variant (compiler flags set in CMakeLists.txt).
#include <immintrin.h>
#include <cmath>
#include <sleef.h>

#include "vec_math.h"

namespace {
// Horizontal sum and maximum of the eight lanes: halves folded with shuffles.
inline float reduce_add_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float reduce_max_avx2(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
// bfloat16 <-> float32 in registers, as in vec_math_avx512.cpp; the rounded 32-bit lanes
// (all below 65536) are packed to 16 bits by packus, which works per 128-bit half, and the
// two halves' results joined by a cross-lane permute.
inline __m256 load_bf16_avx2(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline void store_bf16_avx2(uint16_t* p, __m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i w = _mm256_blendv_epi8(r, quiet, nan);
  const __m256i packed = _mm256_packus_epi32(w, w);  // [w0..3 w0..3 | w4..7 w4..7]
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
}

// Two ymm registers per vector (16 lanes): every operation below issues its two halves next
// to each other, so the two independent dependency chains interleave in program order. One
// register per vector left the long chains of gelu / exp / tanh latency-bound, the core's
// schedulers filled with operations of a single chain (decision 0041).
struct V2 {
  __m256 lo, hi;
};
#define KILN_V2_1(name, expr)                                    \
  inline V2 name(V2 a) {                                          \
    auto f = [](__m256 x) { return expr; };                       \
    return {f(a.lo), f(a.hi)};                                    \
  }
#define KILN_V2_2(name, expr)                                    \
  inline V2 name(V2 a, V2 b) {                                    \
    auto f = [](__m256 x, __m256 y) { return expr; };             \
    return {f(a.lo, b.lo), f(a.hi, b.hi)};                        \
  }
KILN_V2_2(v2_add, _mm256_add_ps(x, y))
KILN_V2_2(v2_sub, _mm256_sub_ps(x, y))
KILN_V2_2(v2_mul, _mm256_mul_ps(x, y))
KILN_V2_2(v2_div, _mm256_div_ps(x, y))
KILN_V2_2(v2_max, _mm256_max_ps(x, y))
KILN_V2_2(v2_min, _mm256_min_ps(x, y))
KILN_V2_2(v2_copysign, _mm256_or_ps(x, _mm256_and_ps(y, _mm256_set1_ps(-0.0f))))
KILN_V2_1(v2_rcp, _mm256_rcp_ps(x))
KILN_V2_1(v2_abs, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x))
KILN_V2_1(v2_sqrt, _mm256_sqrt_ps(x))
KILN_V2_1(v2_floor, _mm256_floor_ps(x))
KILN_V2_1(v2_ceil, _mm256_ceil_ps(x))
KILN_V2_1(v2_trunc, _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC))
KILN_V2_1(v2_round, _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
KILN_V2_1(v2_neg, _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)))
// 1 where x > 0, -1 where x < 0, +0 for zeros and NaN (the scalar kernel's rule).
KILN_V2_1(v2_sign, _mm256_sub_ps(
    _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), _mm256_set1_ps(1.0f)),
    _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ), _mm256_set1_ps(1.0f))))
KILN_V2_1(v2_pow2i, _mm256_castsi256_ps(_mm256_slli_epi32(
    _mm256_add_epi32(_mm256_cvtps_epi32(x), _mm256_set1_epi32(127)), 23)))
KILN_V2_1(v2_sleef_exp, Sleef_expf8_u10avx2(x))
KILN_V2_1(v2_sleef_log, Sleef_logf8_u10avx2(x))
KILN_V2_1(v2_sleef_sin, Sleef_sinf8_u10avx2(x))
KILN_V2_1(v2_sleef_cos, Sleef_cosf8_u10avx2(x))
KILN_V2_1(v2_sleef_tan, Sleef_tanf8_u10avx2(x))
KILN_V2_1(v2_sleef_exp2, Sleef_exp2f8_u10avx2(x))
KILN_V2_1(v2_sleef_expm1, Sleef_expm1f8_u10avx2(x))
KILN_V2_1(v2_sleef_log2, Sleef_log2f8_u10avx2(x))
KILN_V2_1(v2_sleef_log1p, Sleef_log1pf8_u10avx2(x))
#undef KILN_V2_1
#undef KILN_V2_2
inline V2 v2_fma(V2 a, V2 b, V2 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline V2 v2_set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
inline V2 v2_load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void v2_store(float* p, V2 v) {
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + 8, v.hi);
}
inline void v2_stream(float* p, V2 v) {
  _mm256_stream_ps(p, v.lo);
  _mm256_stream_ps(p + 8, v.hi);
}
inline V2 v2_load_bf16(const uint16_t* p) { return {load_bf16_avx2(p), load_bf16_avx2(p + 8)}; }
inline void v2_store_bf16(uint16_t* p, V2 v) {
  store_bf16_avx2(p, v.lo);
  store_bf16_avx2(p + 8, v.hi);
}
// x where a > b, else y (NaN compares false: y).
inline V2 v2_sel_gt(V2 a, V2 b, V2 x, V2 y) {
  return {_mm256_blendv_ps(y.lo, x.lo, _mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ)),
          _mm256_blendv_ps(y.hi, x.hi, _mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ))};
}
// a where x < 0, else b.
inline V2 v2_sel_neg(V2 x, V2 a, V2 b) {
  const __m256 z = _mm256_setzero_ps();
  return {_mm256_blendv_ps(b.lo, a.lo, _mm256_cmp_ps(x.lo, z, _CMP_LT_OQ)),
          _mm256_blendv_ps(b.hi, a.hi, _mm256_cmp_ps(x.hi, z, _CMP_LT_OQ))};
}
inline float v2_reduce_add(V2 v) { return reduce_add_avx2(_mm256_add_ps(v.lo, v.hi)); }
inline float v2_reduce_max(V2 v) { return reduce_max_avx2(_mm256_max_ps(v.lo, v.hi)); }
inline bool v2_any_nan(V2 v) {
  return _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(v.lo, v.lo, _CMP_UNORD_Q),
                                         _mm256_cmp_ps(v.hi, v.hi, _CMP_UNORD_Q))) != 0;
}
}  // namespace

#define V V2
#define VW 16
#define VLOAD(p) v2_load(p)
#define VSTORE(p, v) v2_store((p), (v))
#define VLOAD_BF16(p) v2_load_bf16(p)
#define VSTORE_BF16(p, v) v2_store_bf16((p), (v))
#define VSTREAM(p, v) v2_stream((p), (v))
#define VSET1(x) v2_set1(x)
#define VADD(a, b) v2_add((a), (b))
#define VSUB(a, b) v2_sub((a), (b))
#define VMUL(a, b) v2_mul((a), (b))
#define VDIV(a, b) v2_div((a), (b))
#define VFMA(a, b, c) v2_fma((a), (b), (c))
#define VMAX(a, b) v2_max((a), (b))
#define VREDUCE_ADD(v) v2_reduce_add(v)
#define VREDUCE_MAX(v) v2_reduce_max(v)
#define VANY_NAN(v) v2_any_nan(v)
#define VMIN(a, b) v2_min((a), (b))
#define VRCP(a) v2_rcp(a)
#define VABS(a) v2_abs(a)
#define VSEL_GT(a, b, x, y) v2_sel_gt((a), (b), (x), (y))
#define VSQRT(a) v2_sqrt(a)
#define VFLOOR(a) v2_floor(a)
#define VCEIL(a) v2_ceil(a)
#define VTRUNC(a) v2_trunc(a)
#define VSIGN(x) v2_sign(x)
#define VNEG(a) v2_neg(a)
#define VCOPYSIGN(m, s) v2_copysign((m), (s))
#define VSEL_NEG(x, a, b) v2_sel_neg((x), (a), (b))
#define VROUND(a) v2_round(a)
#define VPOW2I(n) v2_pow2i(n)
#define SLEEF_EXP v2_sleef_exp
#define SLEEF_LOG v2_sleef_log
#define SLEEF_SIN v2_sleef_sin
#define SLEEF_COS v2_sleef_cos
#define SLEEF_TAN v2_sleef_tan
#define SLEEF_EXP2 v2_sleef_exp2
#define SLEEF_EXPM1 v2_sleef_expm1
#define SLEEF_LOG2 v2_sleef_log2
#define SLEEF_LOG1P v2_sleef_log1p
#define VEC_MATH_NAME vec_math_avx2
#include "vec_math_body.inc"
