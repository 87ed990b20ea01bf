#include "few_rows_product.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "isa/gemm_bf16.h"
#include "isa/vec_math.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

// pass_max: the most rows one pass takes (kDotTileRows, or 6 where 7-8 rows in one pass ran
// slower: the widening bfloat16 tiles).
template <typename E, typename Tile>
bool run(Tile tile, int64_t max_rows, int pass_max, int64_t M, int64_t N, int64_t K,
         const E* A, int64_t a_rs, const E* W, int64_t w_rs, float* out, int64_t out_rs) {
  if (!tile || M < 2 || M >= max_rows || N < 1 || K < 1) return false;
  // Up to pass_max rows in one pass; more in passes of 6, the first reading the weight rows
  // from memory, the others from the cache.
  const int pass_rows = M <= pass_max ? int(M) : 6;
  const int group_cols = dot_tile_cols(pass_rows);
  const int64_t groups = (N + group_cols - 1) / group_cols;
  parallel_region(N * K >= (int64_t(1) << 16), [&] {
#pragma omp for schedule(static)
    for (int64_t q = 0; q < groups; ++q) {
      const int64_t j0 = q * group_cols;
      const int cols = int(std::min<int64_t>(group_cols, N - j0));
      for (int64_t i0 = 0; i0 < M; i0 += pass_rows)
        tile(A + i0 * a_rs, a_rs, int(std::min<int64_t>(pass_rows, M - i0)), W + j0 * w_rs,
             w_rs, cols, K, out + i0 * out_rs + j0, out_rs);
    }
  });
  return true;
}

}  // namespace

bool few_rows_times_weight_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs,
                               const float* W, int64_t w_rs, float* out, int64_t out_rs) {
  return run(vec_math_f32().dot_tile, kFewRowsMax, kDotTileRows, M, N, K, A, a_rs, W, w_rs,
             out, out_rs);
}

bool few_rows_times_weight_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                int64_t a_rs, const uint16_t* W, int64_t w_rs, float* out,
                                int64_t out_rs) {
  // The widening tiles (AVX2, AVX-512 without BF16) keep passes of 6 rows: 7 or 8 rows at
  // once, a column per pass at AVX2, ran [8, 4096] x [4096, 4096]^T 5-8% slower there.
  const DotTileBf16Fn tile = dot_tile_bf16_kernel();
  return run(tile, few_rows_max_bf16(),
             tile == &dot_tile_bf16_avx512bf16 ? kDotTileRows : 6, M, N, K, A, a_rs, W, w_rs,
             out, out_rs);
}

// Weight rows shorter than this (in values) are read one at a time: four interleaved rows of
// 1.5 KiB (GPT-2's K = 768) streamed slower than the contiguous run of rows (bfloat16
// [1, 768] x [2304, 768]^T from memory: 144-148 us one row at a time, 187-189 us four).
constexpr int64_t kFourRowsMinDepth = 2048;

bool one_row_times_weight_bf16(int64_t N, int64_t K, const uint16_t* a, const uint16_t* W,
                               int64_t w_rs, float* out) {
  if (N < 1 || K < 1) return false;
  const bool parallel = N * K >= (int64_t(1) << 16);
  if (const DotRowsBf16Fn rows = dot_rows_bf16_kernel()) {
    // AVX-512 BF16: each thread streams its run of weight rows, one ahead of use.
    parallel_region(parallel, [&] {
      const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
      const int64_t j0 = N * t / threads, j1 = N * (t + 1) / threads;
      rows(a, W + j0 * w_rs, w_rs, j1 - j0, K, out + j0);
    });
    return true;
  }
  const Dot4F32Bf16Fn dot4 = dot4_f32_bf16_kernel();
  const DotF32Bf16Fn dot = dot_f32_bf16_kernel();
  if (!dot4 || !dot) return false;
  thread_local std::vector<float> row;
  row.resize(size_t(K));
  vec_math_f32().widen_bf16(a, row.data(), K);
  const float* aw = row.data();
  if (K < kFourRowsMinDepth) {
    parallel_region(parallel, [&] {
#pragma omp for schedule(static)
      for (int64_t j = 0; j < N; ++j) out[j] = dot(aw, W + j * w_rs, K);
    });
    return true;
  }
  const int64_t groups = N / 4;
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t q = 0; q < groups; ++q) dot4(aw, W + 4 * q * w_rs, w_rs, K, out + 4 * q);
  });
  for (int64_t j = 4 * groups; j < N; ++j) out[j] = dot(aw, W + j * w_rs, K);
  return true;
}

int64_t few_rows_max_bf16() {
  static const int64_t rows = dot_tile_bf16_kernel() == vec_math_f32().dot_tile_bf16
                                  ? kFewRowsMaxWidening
                                  : kFewRowsMax;
  return rows;
}

}  // namespace kiln::cpu
