// Vectorised reductions, avx512 variant (compiler flags set in CMakeLists.txt).
#include <immintrin.h>

#include "reduce_vec.h"
#include "transpose_f32_avx512.h"  // transpose16x16

namespace kiln::cpu {
namespace {

inline __m512 load_vector(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_vector(const uint16_t* p) {  // bfloat16: its bits are the float's upper half
  const __m512i w =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// Sixteen float32 or bfloat16 runs of n = 16, 32 or 48 values (row stride `stride`) summed as
// sum_four_short_runs sums them, in 16-wide registers: each row's float lanes (0 + v0) + v1
// (+ v2) for two or three vectors, its values themselves for one; transposed, so that lane r
// of vector l holds row r's lane l; then lane after lane added in double from +0.0, which is
// the single-run order (lanes in order, no tail) bit for bit. The four-row form did this in
// 4-wide registers: sum(1) over the 32 channels of a channels-last [8, 32, 28, 28] float32
// took 35 us on two threads (PyTorch 24), bfloat16 24 us (29).
template <typename In>
void sum_sixteen_short_runs(const In* x, int64_t stride, int64_t n, double* out) {
  __m512 f[16];
  for (int r = 0; r < 16; ++r) {
    const In* row = x + r * stride;
    if (n == 16) {
      f[r] = load_vector(row);
      continue;
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_setzero_ps(), load_vector(row)),
                             load_vector(row + 16));
    if (n == 48) s = _mm512_add_ps(s, load_vector(row + 32));
    f[r] = s;
  }
  transpose16x16(f);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int l = 0; l < 16; ++l) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(f[l])));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(
                               _mm512_extractf64x4_pd(_mm512_castps_pd(f[l]), 1))));
  }
  _mm512_storeu_pd(out, lo);
  _mm512_storeu_pd(out + 8, hi);
}

}  // namespace
}  // namespace kiln::cpu

#define REDUCE_SIXTEEN_SHORT_RUNS sum_sixteen_short_runs
#define REDUCE_VEC_NAME reduce_vec_avx512
#include "reduce_vec_body.inc"
