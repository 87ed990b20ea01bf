// Vectorised float32 math, AVX-512 variant (compiler flags set in CMakeLists.txt).
#include <immintrin.h>
#include <array>
#include <cmath>
#include <type_traits>
#include <utility>
#include <sleef.h>

#include "bf16_vectors_avx512.h"  // load_bf16_avx512, store_bf16_avx512, store2_bf16_avx512
#include "transpose_f32_avx512.h"  // transpose16x16
#include "gelu_table.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/core/half.h"
#include "activation_grads.h"
#include "norm_grad_rows.h"
#include "softmax_grad_rows.h"
#include "vec_math.h"

namespace {
// Horizontal sum and maximum of the sixteen lanes: halves folded with shuffles. The halves are
// extracted with a zero merge source: GCC 12's _mm512_reduce_add_ps, _mm512_castps512_ps256
// and unmasked extracts use an undefined one, which -Wuninitialized reports.
template <int kHalf>
inline __m256 half(__m512 v) {
  return _mm256_castpd_ps(
      _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, _mm512_castps_pd(v), kHalf));
}
inline float reduce_add_avx512(__m512 v) {
  const __m256 h = _mm256_add_ps(half<0>(v), half<1>(v));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float reduce_max_avx512(__m512 v) {
  const __m256 h = _mm256_max_ps(half<0>(v), half<1>(v));
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
// float16 -> float32 with vcvtph2ps, whose only departure from kiln::Half is a signalling NaN
// (it sets the quiet bit): NaN lanes are rebuilt from the bits (sign, all-ones exponent, the
// payload shifted up), as Half::to_float, so contiguous and strided conversions agree.
inline __m512 load_f16_avx512(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m512 f = _mm512_cvtph_ps(h);
  const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
  if (!nan) return f;
  const __m512i x = _mm512_cvtepu16_epi32(h);
  const __m512i bits = _mm512_or_si512(
      _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x8000)), 16),
                      _mm512_set1_epi32(0x7f800000)),
      _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x3ff)), 13));
  return _mm512_mask_mov_ps(f, nan, _mm512_castsi512_ps(bits));
}
}  // namespace

#define V __m512
#define VW 16
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VLOAD_BF16(p) load_bf16_avx512(p)
#define VSTORE_BF16(p, v) store_bf16_avx512((p), (v))
#define VSTORE2_BF16(p, v0, v1) store2_bf16_avx512((p), (v0), (v1))
#define VSTREAM(p, v) _mm512_stream_ps((p), (v))
#define VLOAD_F16(p) load_f16_avx512(p)
// The plain conversion (a signalling NaN quieted): for products, where a NaN's payload is lost.
#define VLOAD_F16_VALUE(p) _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))
#define VSTORE_F16(p, v)                                        \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),            \
                      _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VSET1(x) _mm512_set1_ps(x)
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VSUB(a, b) _mm512_sub_ps((a), (b))
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define VDIV(a, b) _mm512_div_ps((a), (b))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VMAX(a, b) _mm512_max_ps((a), (b))
#define VREDUCE_ADD(v) reduce_add_avx512(v)
#define VREDUCE_MAX(v) reduce_max_avx512(v)
#define VANY_NAN(v) (_mm512_cmp_ps_mask((v), (v), _CMP_UNORD_Q) != 0)
#define VMIN(a, b) _mm512_min_ps((a), (b))
#define VSEL_NAN(x, a, b) \
  _mm512_mask_mov_ps((b), _mm512_cmp_ps_mask((x), (x), _CMP_UNORD_Q), (a))
#define VRCP(a) _mm512_rcp14_ps(a)
#define VABS(a) _mm512_abs_ps(a)
// x where a > b, else y (NaN compares false: y).
#define VSEL_GT(a, b, x, y) \
  _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ), (y), (x))
#define VSQRT(a) _mm512_sqrt_ps(a)
#define VCEIL(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define VTRUNC(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
// 1 where x > 0, -1 where x < 0, +0 for zeros and NaN (the scalar kernel's rule).
#define VSIGN(x)                                                                           \
  _mm512_sub_ps(                                                                           \
      _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_GT_OQ),        \
                          _mm512_set1_ps(1.0f)),                                           \
      _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_LT_OQ),        \
                          _mm512_set1_ps(1.0f)))
#define VNEG(a) _mm512_xor_ps((a), _mm512_set1_ps(-0.0f))
#define VCOPYSIGN(m, s) _mm512_or_ps((m), _mm512_and_ps((s), _mm512_set1_ps(-0.0f)))
#define VSEL_NEG(x, a, b) \
  _mm512_mask_blend_ps(_mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_LT_OQ), (b), (a))
#define VROUND(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2I(n) \
  _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#define VSCALEF(a, n) _mm512_scalef_ps((a), (n))
#define VZERO_WHERE_LT(a, b, v) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((a), (b), _CMP_NLT_UQ), (v))
#define VFLOOR(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define VTOINT(a) _mm512_cvttps_epi32(a)
// table[idx] for a 32-entry table (two registers) and indices in [0, 32).
#define VLOOKUP32(idx, table) \
  _mm512_permutex2var_ps(_mm512_load_ps(table), (idx), _mm512_load_ps((table) + 16))
// table[j] for a 16-entry table (one register), j the low 4 bits of t's bit pattern.
#define VLOOKUP16_BITS(t, table) \
  _mm512_permutexvar_ps(_mm512_castps_si512(t), _mm512_load_ps(table))
// 2^n from bits 4 to 12 of t's pattern (n + 127 there), put in the exponent field.
#define VPOW2_OF_BITS_DIV16(t) \
  _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_srli_epi32(_mm512_castps_si512(t), 4), 23))
// Whether any lane of x is below lo, above hi or NaN.
#define VANY_OUTSIDE(x, lo, hi)                                                              \
  (_mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask((x), _mm512_set1_ps(lo), _CMP_GE_OQ), (x), \
                           _mm512_set1_ps(hi), _CMP_LE_OQ) != 0xFFFF)
#define VZERO_UNLESS_LT(a, b, v) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ), (v))
// x = m 2^e with m in [1, 2), subnormals included (log's argument split; the sign and the
// special values are the caller's to fix up).
#define VLOG_SPLIT(x, m, e)                                              \
  do {                                                                   \
    (m) = _mm512_getmant_ps((x), _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero); \
    (e) = _mm512_getexp_ps(x);                                           \
  } while (0)
#define SLEEF_EXP Sleef_expf16_u10avx512f
#define SLEEF_LOG Sleef_logf16_u10avx512f
#define SLEEF_SIN Sleef_sinf16_u10avx512f
#define SLEEF_COS Sleef_cosf16_u10avx512f
#define SLEEF_TAN Sleef_tanf16_u10avx512f
#define SLEEF_EXP2 Sleef_exp2f16_u10avx512f
#define SLEEF_EXPM1 Sleef_expm1f16_u10avx512f
#define SLEEF_LOG2 Sleef_log2f16_u10avx512f
#define SLEEF_LOG1P Sleef_log1pf16_u10avx512f
#define VEC_MATH_NAME vec_math_avx512
// Short rows (softmax over up to 32 values) transposed in registers, 16 rows at a time: without
// it this level filled and emptied its tile one value at a time, and bfloat16 rounded each
// value in scalar code (softmax(-1) of [6272, 32] bfloat16: 195 us, PyTorch 111).
#define VTRANSPOSE_VW(r) ::kiln::cpu::transpose16x16(r)
#define VSTORE_FIRST(p, k, v) _mm512_mask_storeu_ps((p), __mmask16((1u << (k)) - 1u), (v))
// GCC 12 reports the intentionally undefined pass-through operand of the unmasked AVX-512
// intrinsics (_mm512_max_ps's _mm512_undefined_ps) as maybe-uninitialized once they are
// inlined into loops (softmax_row's running maximum, the conversions below); every lane is
// written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace kiln::cpu {
namespace {
// Truncating conversions whose "integer indefinite" result for NaN and out-of-range values
// (the sign bit alone) is the type's minimum, decision 0005's rule; masked tails.
void v_to_i64(const float* in, int64_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm512_storeu_si512(out + i, _mm512_cvttps_epi64(_mm256_loadu_ps(in + i)));
  if (i < n) {
    const __mmask8 m = __mmask8((1u << (n - i)) - 1);
    _mm512_mask_storeu_epi64(out + i, m, _mm512_cvttps_epi64(_mm256_maskz_loadu_ps(m, in + i)));
  }
}
void v_to_i32(const float* in, int32_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_si512(out + i, _mm512_cvttps_epi32(_mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_epi32(out + i, m, _mm512_cvttps_epi32(_mm512_maskz_loadu_ps(m, in + i)));
  }
}
}  // namespace
}  // namespace kiln::cpu
#define VEC_MATH_TO_INT

#include "vec_math_body.inc"
#define SOFTMAX_GRAD_ROWS_NAME softmax_grad_rows_avx512
#include "softmax_grad_rows_body.inc"
#define NORM_GRAD_ROWS_NAME norm_grad_rows_avx512
#include "norm_grad_rows_body.inc"
#define ACTIVATION_GRADS_NAME activation_grads_avx512
#include "activation_grads_body.inc"
#pragma GCC diagnostic pop
