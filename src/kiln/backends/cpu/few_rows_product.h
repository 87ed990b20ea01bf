#pragma once
// Products of a few rows with a row-major weight: out = A @ W.T with A [M, K] and W [N, K]
// both with contiguous rows, M from 2 to kFewRowsMax - 1 (several sequences decoded at once;
// bfloat16 below few_rows_max_bf16()).
// The weight is read from memory once: each pair of weight rows is dotted with every row of A
// while it is in the cache (vec_math.h's dot tiles), where looping over A's rows outside
// streamed the whole weight M times (M = 4 bfloat16 [4096, 4096]: 1.85 ms against 0.56 ms at
// M = 1). Pairs of weight rows are split over the threads.
#include <cstdint>

namespace kiln::cpu {

inline constexpr int64_t kFewRowsMax = 16;  // from here oneDNN or the blocked kernels
// bfloat16 where the dot tile widens the values in registers (the AVX2 and AVX-512 levels,
// no vdpbf16ps): the blocked kernel there widens B while packing it on every call, and the
// tiles stay faster up to 32 rows ([M, 4096] x [11008, 4096]^T, KILN_CPU_ISA=avx2: M = 16
// 13.8-14.3 against 19.5-19.6 ms, M = 32 25.7-27.7 against 28.2-29.6, M = 48 36.5-37.4
// against 33.5-34.0; avx512: M = 32 17.7-17.8 against 23.5-23.8). The exclusive bound on M.
inline constexpr int64_t kFewRowsMaxWidening = 33;
int64_t few_rows_max_bf16();

// out[i * out_rs + j] = sum_k A[i * a_rs + k] * W[j * w_rs + k] in float32 for i < M, j < N;
// false (nothing written) where the ISA level has no dot tile (baseline) or M is out of range
// (2 to kFewRowsMax - 1; bfloat16: to few_rows_max_bf16() - 1).
bool few_rows_times_weight_f32(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs,
                               const float* W, int64_t w_rs, float* out, int64_t out_rs);
bool few_rows_times_weight_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                int64_t a_rs, const uint16_t* W, int64_t w_rs, float* out,
                                int64_t out_rs);

// One bfloat16 row times the weight (LLM decoding): out[j] = sum_k a[k] * W[j * w_rs + k] for
// j < N. With AVX-512 BF16 each thread streams its run of weight rows with vdpbf16ps,
// prefetching one row ahead (dot_rows_bf16_kernel); where the ISA level widens bfloat16 in
// registers (AVX2, AVX-512 without BF16), a is widened to float32 once and four weight rows
// stream at a time (dot4_f32_bf16_kernel); false (nothing written) at the baseline level.
bool one_row_times_weight_bf16(int64_t N, int64_t K, const uint16_t* a, const uint16_t* W,
                               int64_t w_rs, float* out);

}  // namespace kiln::cpu
