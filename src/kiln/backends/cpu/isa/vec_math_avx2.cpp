// Vectorised float32 math, AVX2 + FMA variant (compiler flags set in CMakeLists.txt).
#include <immintrin.h>
#include <array>
#include <cmath>
#include <type_traits>
#include <utility>
#include <sleef.h>

#include "gelu_table.h"
#include "kiln/core/convert.h"
#include "transpose_f32_avx2.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "activation_grads.h"
#include "norm_grad_rows.h"
#include "softmax_grad_rows.h"
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
// Round to nearest even (u + 0x7fff + the kept lsb), NaN lanes replaced by u with the quiet
// bit set (the sign and payload kept, as float_to_bf16_bits) before the shift: 8 operations
// per vector of 8; the 16-bit results are still in 32-bit lanes.
inline __m256i round_bf16_avx2(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_srli_epi32(_mm256_blendv_epi8(r, quiet, nan), 16);
}
inline void store_bf16_avx2(uint16_t* p, __m256 v) {
  const __m256i w = round_bf16_avx2(v);
  const __m256i packed = _mm256_packus_epi32(w, w);  // [w0..3 w0..3 | w4..7 w4..7]
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
}
// Two vectors into 16 values: one pack and one permute for both.
inline void store2_bf16_avx2(uint16_t* p, __m256 v0, __m256 v1) {
  // packus per 128-bit half: [v0 0..3, v1 0..3 | v0 4..7, v1 4..7]
  const __m256i packed = _mm256_packus_epi32(round_bf16_avx2(v0), round_bf16_avx2(v1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_permute4x64_epi64(packed, 0xd8));
}
// The first k (< 8) lanes of v stored to p, the memory after them untouched.
inline void store_first_avx2(float* p, int64_t k, __m256 v) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(k)), lanes), v);
}
inline bool any_outside_avx2(__m256 x, float lo, float hi) {
  const __m256 out = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_set1_ps(lo), _CMP_LT_OQ),
                                  _mm256_cmp_ps(x, _mm256_set1_ps(hi), _CMP_NLE_UQ));
  return !_mm256_testz_ps(out, out);
}
// float16 -> float32 with vcvtph2ps, NaN lanes rebuilt from the bits as Half::to_float (the
// instruction quiets a signalling NaN; see vec_math_avx512.cpp).
inline __m256 load_f16_avx2(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256 f = _mm256_cvtph_ps(h);
  const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  if (_mm256_testz_ps(nan, nan)) return f;
  const __m256i x = _mm256_cvtepu16_epi32(h);
  const __m256i bits = _mm256_or_si256(
      _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x8000)), 16),
                      _mm256_set1_epi32(0x7f800000)),
      _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x3ff)), 13));
  return _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), nan);
}
}  // namespace

#define V __m256
#define VW 8
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VLOAD_BF16(p) load_bf16_avx2(p)
#define VSTORE_BF16(p, v) store_bf16_avx2((p), (v))
#define VSTORE2_BF16(p, v0, v1) store2_bf16_avx2((p), (v0), (v1))
#define VSTREAM(p, v) _mm256_stream_ps((p), (v))
#define VLOAD_F16(p) load_f16_avx2(p)
// The plain conversion (a signalling NaN quieted): for products, where a NaN's payload is lost.
#define VLOAD_F16_VALUE(p) _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
#define VSTORE_F16(p, v)                                   \
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),          \
                   _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VSET1(x) _mm256_set1_ps(x)
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VSUB(a, b) _mm256_sub_ps((a), (b))
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define VDIV(a, b) _mm256_div_ps((a), (b))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VMAX(a, b) _mm256_max_ps((a), (b))
#define VREDUCE_ADD(v) reduce_add_avx2(v)
#define VREDUCE_MAX(v) reduce_max_avx2(v)
#define VANY_NAN(v) (_mm256_movemask_ps(_mm256_cmp_ps((v), (v), _CMP_UNORD_Q)) != 0)
#define VMIN(a, b) _mm256_min_ps((a), (b))
#define VSEL_NAN(x, a, b) _mm256_blendv_ps((b), (a), _mm256_cmp_ps((x), (x), _CMP_UNORD_Q))
#define VRCP(a) _mm256_rcp_ps(a)
#define VABS(a) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (a))
// x where a > b, else y (NaN compares false: y).
#define VSEL_GT(a, b, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (b), _CMP_GT_OQ))
#define VSQRT(a) _mm256_sqrt_ps(a)
#define VFLOOR(a) _mm256_floor_ps(a)
#define VCEIL(a) _mm256_ceil_ps(a)
#define VTRUNC(a) _mm256_round_ps((a), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
// 1 where x > 0, -1 where x < 0, +0 for zeros and NaN (the scalar kernel's rule).
#define VSIGN(x)                                                                            \
  _mm256_sub_ps(                                                                            \
      _mm256_and_ps(_mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_GT_OQ), _mm256_set1_ps(1.0f)), \
      _mm256_and_ps(_mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_LT_OQ), _mm256_set1_ps(1.0f)))
#define VNEG(a) _mm256_xor_ps((a), _mm256_set1_ps(-0.0f))
#define VCOPYSIGN(m, s) _mm256_or_ps((m), _mm256_and_ps((s), _mm256_set1_ps(-0.0f)))
#define VSEL_NEG(x, a, b) \
  _mm256_blendv_ps((b), (a), _mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_LT_OQ))
#define VROUND(a) _mm256_round_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VTOINT(a) _mm256_cvttps_epi32(a)
// table[idx] for an 8-entry table (one register) and indices in [0, 8).
#define VLOOKUP8(idx, table) _mm256_permutevar8x32_ps(_mm256_load_ps(table), (idx))
#define VZERO_UNLESS_LT(a, b, v) _mm256_and_ps(_mm256_cmp_ps((a), (b), _CMP_LT_OQ), (v))
#define VPOW2I(n) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
// exp's table step (vec_math_body.inc): t's float bits end in k + 8 * 127 for k = 8 n + j.
// vpermps reads only the low 3 bits of each index, so the bits index the 8-entry table as they
// are; (bits >> 3) << 23 is n + 127 in the exponent field, 2^n.
#define VLOOKUP8_BITS(t, table) \
  _mm256_permutevar8x32_ps(_mm256_load_ps(table), _mm256_castps_si256(t))
#define VPOW2_OF_BITS_DIV8(t) \
  _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(t), 3), 23))
// Whether any lane of x is below lo, above hi or NaN.
#define VANY_OUTSIDE(x, lo, hi) any_outside_avx2((x), (lo), (hi))
// v where a >= b or a is NaN, else 0.
#define VZERO_WHERE_LT(a, b, v) _mm256_and_ps(_mm256_cmp_ps((a), (b), _CMP_NLT_UQ), (v))
// x = m 2^e with m in [1, 2) from the float's bits; subnormals are scaled by 2^23 first
// (log's argument split; the sign and the special values are the caller's to fix up).
#define VLOG_SPLIT(x, m, e)                                                                  \
  do {                                                                                       \
    const __m256 sub_ = _mm256_cmp_ps((x), _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);   \
    const __m256i bits_ = _mm256_castps_si256(                                               \
        _mm256_blendv_ps((x), _mm256_mul_ps((x), _mm256_set1_ps(8388608.0f)), sub_));        \
    (m) = _mm256_castsi256_ps(_mm256_or_si256(                                               \
        _mm256_and_si256(bits_, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000))); \
    (e) = _mm256_sub_ps(                                                                     \
        _mm256_cvtepi32_ps(_mm256_sub_epi32(                                                 \
            _mm256_and_si256(_mm256_srli_epi32(bits_, 23), _mm256_set1_epi32(0xff)),         \
            _mm256_set1_epi32(127))),                                                        \
        _mm256_and_ps(sub_, _mm256_set1_ps(23.0f)));                                         \
  } while (0)
#define SLEEF_EXP Sleef_expf8_u10avx2
#define SLEEF_LOG Sleef_logf8_u10avx2
#define SLEEF_SIN Sleef_sinf8_u10avx2
#define SLEEF_COS Sleef_cosf8_u10avx2
#define SLEEF_SIN_U35 Sleef_sinf8_u35avx2
#define SLEEF_COS_U35 Sleef_cosf8_u35avx2
#define SLEEF_TAN Sleef_tanf8_u10avx2
#define SLEEF_EXP2 Sleef_exp2f8_u10avx2
#define SLEEF_EXPM1 Sleef_expm1f8_u10avx2
#define SLEEF_LOG2 Sleef_log2f8_u10avx2
#define SLEEF_LOG1P Sleef_log1pf8_u10avx2
#define VEC_MATH_NAME vec_math_avx2
#define VTRANSPOSE_VW(r) ::kiln::cpu::transpose8x8(r)
#define VSTORE_FIRST(p, k, v) store_first_avx2((p), (k), (v))
namespace kiln::cpu {
namespace {
// Truncating conversions with decision 0005's rule (NaN and values out of the type's range
// give its minimum). vcvttps2dq returns exactly that for int32. int64 has no AVX2
// instruction: eight values go through int32 and are sign-extended when none gave the
// "integer indefinite" INT32_MIN (out of int32's range, NaN, or -2^31 itself); otherwise those
// eight take the scalar rule (convert_value). The element loop took 1.9x PyTorch's AVX2 time.
void v_to_i32(const float* in, int32_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_cvttps_epi32(_mm256_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = convert_value<int32_t>(in[i]);
}
void v_to_i64(const float* in, int64_t* out, int64_t n) {
  const __m256i indefinite = _mm256_set1_epi32(INT32_MIN);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i t = _mm256_cvttps_epi32(_mm256_loadu_ps(in + i));
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(t, indefinite)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) out[j] = convert_value<int64_t>(in[j]);
      continue;
    }
    auto* o = reinterpret_cast<__m256i*>(out + i);
    _mm256_storeu_si256(o, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(t)));
    _mm256_storeu_si256(o + 1, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(t, 1)));
  }
  for (; i < n; ++i) out[i] = convert_value<int64_t>(in[i]);
}
}  // namespace
}  // namespace kiln::cpu
#define VEC_MATH_TO_INT
#include "vec_math_body.inc"
#define SOFTMAX_GRAD_ROWS_NAME softmax_grad_rows_avx2
#include "softmax_grad_rows_body.inc"
#define NORM_GRAD_ROWS_NAME norm_grad_rows_avx2
#include "norm_grad_rows_body.inc"
#define ACTIVATION_GRADS_NAME activation_grads_avx2
#include "activation_grads_body.inc"
