#pragma once
// Batched bfloat16 products too small to share among threads (attention's per-head products:
// 12 heads of [128, 64] @ [64, 128]): each thread runs whole batches through kiln's blocked
// kernel, single-threaded, instead of one oneDNN batched call (see batched_small_gemm.cpp).
#include <cstdint>

namespace kiln::cpu {

// C[b] = alpha * A[b] @ B[b] for b < batches, bfloat16 operands at element offsets b * x_bs
// with the given row / column strides, C with unit column stride, rounded once from float32
// sums. False, having done nothing, when the shape is not one this path takes (small
// many-row products, batches filling the threads evenly).
bool batches_on_threads_bf16(int64_t batches, int64_t M, int64_t N, int64_t K,
                             const uint16_t* A, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                             const uint16_t* B, int64_t b_bs, int64_t b_rs, int64_t b_cs,
                             uint16_t* C, int64_t c_bs, int64_t c_rs, float alpha);

}  // namespace kiln::cpu
