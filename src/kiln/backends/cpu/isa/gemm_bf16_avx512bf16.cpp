// bfloat16 GEMM with AVX-512 BF16 (compiler flags set in CMakeLists.txt). The blocked design
// of gemm_f32_blocked.inc, with K taken two at a time: B is packed per KC x NC block into
// panels of 32 columns holding (k, k+1) pairs side by side, A into panels of 6 rows of pairs,
// and vdpbf16ps adds a[k] * b[k] + a[k+1] * b[k+1] into 16 float32 lanes per instruction.
// An odd K is padded with a zero pair member.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm_bf16.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kMR = 6, kNR = 32;
constexpr int64_t kKC = 512;  // k values per block (256 pairs)
constexpr int64_t kMC = 96, kNC = 512;

inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// C[0:mr, 0:nr] (=|+=) (A panel)(B panel) over kp pairs.
inline void microkernel(int64_t kp, const uint32_t* __restrict a, const uint32_t* __restrict b,
                        float* c, int64_t c_rs, int64_t mr, int64_t nr, bool accumulate) {
  __m512 acc[kMR][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kp; ++k) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(int(a[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
    a += kMR;
    b += kNR;
  }
  if (mr == kMR && nr == kNR) {
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      float* row = c + r * c_rs;
      if (accumulate) {
        _mm512_storeu_ps(row, _mm512_add_ps(acc[r][0], _mm512_loadu_ps(row)));
        _mm512_storeu_ps(row + 16, _mm512_add_ps(acc[r][1], _mm512_loadu_ps(row + 16)));
      } else {
        _mm512_storeu_ps(row, acc[r][0]);
        _mm512_storeu_ps(row + 16, acc[r][1]);
      }
    }
    return;
  }
  alignas(64) float tile[kMR * kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(tile + r * kNR, acc[r][0]);
    _mm512_storeu_ps(tile + r * kNR + 16, acc[r][1]);
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j)
      c[r * c_rs + j] = accumulate ? c[r * c_rs + j] + tile[r * kNR + j] : tile[r * kNR + j];
}

// B[k0:k0+kc, j0:j0+nc] -> panels of kNR columns of (k, k+1) pairs, zero-padded.
void pack_b(const uint16_t* B, int64_t b_rs, int64_t b_cs, int64_t K, int64_t k0, int64_t kc,
            int64_t j0, int64_t nc, uint32_t* out) {
  const int64_t panels = (nc + kNR - 1) / kNR, kp = (kc + 1) / 2;
#pragma omp for schedule(static)
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j = j0 + p * kNR, w = std::min(kNR, j0 + nc - j);
    uint32_t* dst = out + p * kp * kNR;
    for (int64_t q = 0; q < kp; ++q) {
      const int64_t k = k0 + 2 * q;
      const uint16_t* r0 = B + k * b_rs + j * b_cs;
      const uint16_t* r1 = k + 1 < K ? r0 + b_rs : nullptr;
      for (int64_t jj = 0; jj < w; ++jj)
        dst[q * kNR + jj] = pair(r0[jj * b_cs], r1 ? r1[jj * b_cs] : uint16_t(0));
      for (int64_t jj = w; jj < kNR; ++jj) dst[q * kNR + jj] = 0;
    }
  }
}

// A[i0:i0+mc, k0:k0+kc] -> panels of kMR rows of (k, k+1) pairs, zero-padded.
void pack_a(const uint16_t* A, int64_t a_rs, int64_t a_cs, int64_t K, int64_t i0, int64_t mc,
            int64_t k0, int64_t kc, uint32_t* out) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t p = 0; p * kMR < mc; ++p) {
    const int64_t i = i0 + p * kMR, h = std::min(kMR, i0 + mc - i);
    uint32_t* dst = out + p * kp * kMR;
    for (int64_t q = 0; q < kp; ++q) {
      const int64_t k = k0 + 2 * q;
      for (int64_t r = 0; r < h; ++r) {
        const uint16_t* row = A + (i + r) * a_rs;
        dst[q * kMR + r] = pair(row[k * a_cs], k + 1 < K ? row[(k + 1) * a_cs] : uint16_t(0));
      }
      for (int64_t r = h; r < kMR; ++r) dst[q * kMR + r] = 0;
    }
  }
}

}  // namespace

void gemm_bf16_avx512bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                          int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                          int64_t c_rs) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * c_rs, C + i * c_rs + N, 0.0f);
    return;
  }
  const int64_t nc_max = std::min(kNC, ((N + kNR - 1) / kNR) * kNR);
  std::vector<uint32_t> packed_b(size_t(kKC / 2 * nc_max));
  const bool parallel = M * N * K >= (int64_t(1) << 18) && omp_get_max_threads() > 1;
  for (int64_t j0 = 0; j0 < N; j0 += kNC) {
    const int64_t nc = std::min(kNC, N - j0), jr_panels = (nc + kNR - 1) / kNR;
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0), kp = (kc + 1) / 2;
      const bool accumulate = k0 > 0;
      const int64_t ic_blocks = (M + kMC - 1) / kMC;
#pragma omp parallel if (parallel)
      {
        pack_b(B, b_rs, b_cs, K, k0, kc, j0, nc, packed_b.data());
        const int64_t threads = omp_get_num_threads();
        const int64_t groups = std::min<int64_t>(
            jr_panels, std::max<int64_t>(1, (4 * threads + ic_blocks - 1) / ic_blocks));
        thread_local std::vector<uint32_t> packed_a;
        packed_a.resize(size_t(kMC * kKC / 2));
#pragma omp for schedule(dynamic)
        for (int64_t t = 0; t < ic_blocks * groups; ++t) {
          const int64_t ib = t / groups, g = t % groups;
          const int64_t i0 = ib * kMC, mc = std::min(kMC, M - i0);
          pack_a(A, a_rs, a_cs, K, i0, mc, k0, kc, packed_a.data());
          const int64_t p_begin = jr_panels * g / groups, p_end = jr_panels * (g + 1) / groups;
          for (int64_t p = p_begin; p < p_end; ++p) {
            const int64_t j = p * kNR, nr = std::min(kNR, nc - j);
            for (int64_t ir = 0; ir < mc; ir += kMR)
              microkernel(kp, packed_a.data() + (ir / kMR) * kp * kMR,
                          packed_b.data() + p * kp * kNR, C + (i0 + ir) * c_rs + j0 + j, c_rs,
                          std::min(kMR, mc - ir), nr, accumulate);
          }
        }
      }
    }
  }
}

float dot_bf16_avx512bf16(const uint16_t* a, const uint16_t* b, int64_t n) {
  // Four accumulators hide vdpbf16ps's latency; the tail is a masked load (zeros add 0).
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
         acc3 = _mm512_setzero_ps();
  auto pairs = [](const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); };
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    acc0 = _mm512_dpbf16_ps(acc0, pairs(a + i), pairs(b + i));
    acc1 = _mm512_dpbf16_ps(acc1, pairs(a + i + 32), pairs(b + i + 32));
    acc2 = _mm512_dpbf16_ps(acc2, pairs(a + i + 64), pairs(b + i + 64));
    acc3 = _mm512_dpbf16_ps(acc3, pairs(a + i + 96), pairs(b + i + 96));
  }
  for (; i + 32 <= n; i += 32) acc0 = _mm512_dpbf16_ps(acc0, pairs(a + i), pairs(b + i));
  if (i < n) {
    const __mmask32 m = __mmask32((uint64_t(1) << (n - i)) - 1);
    acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_maskz_loadu_epi16(m, a + i),
                            (__m512bh)_mm512_maskz_loadu_epi16(m, b + i));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace kiln::cpu
