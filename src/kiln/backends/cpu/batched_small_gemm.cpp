// Whole batches per thread for small bfloat16 batched products (batched_small_gemm.h). A
// oneDNN batched matmul of attention's shape shares each product between the threads; inside
// BERT-base (bfloat16, batch 1, 128 tokens), where the operands arrive from the L3 rather than
// the L1, its attention products (12 x [128, 64] @ [64, 128] and back) averaged 136-146 us per
// call, against 102-115 us with whole heads per thread here (decision 0040). Each thread runs
// its batches through kiln's blocked kernel alone (the kernel's own parallel region is
// nested, so it runs on the calling thread), packing each batch's B once. float32 stays with
// oneDNN: the same change measured 170-200 -> 200 us per call in BERT-base float32.
#include "batched_small_gemm.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "isa/gemm_bf16.h"
#include "isa/gemm_f32.h"
#include "isa/vec_math.h"

namespace kiln::cpu {

namespace {

// Batches of at most this many multiply-adds (2^21: [128, 128] @ [128, 128]) are small
// enough that sharing one among threads costs more than it gains.
constexpr int64_t kMaxBatchMacs = int64_t(1) << 21;

// Whether the shape takes this path: many-row products (fewer rows stream through the
// matrix-vector kernels), each small, and batches that fill the threads evenly (a multiple
// of the thread count, or at least four per thread).
bool takes(int64_t batches, int64_t M, int64_t N, int64_t K, int threads) {
  if (threads < 2 || M < kGemmBlockedMinRows || N < 1 || K < 1) return false;
  if (M * N * K > kMaxBatchMacs) return false;
  return batches % threads == 0 || batches >= 4 * int64_t(threads);
}

}  // namespace

bool batches_on_threads_bf16(int64_t batches, int64_t M, int64_t N, int64_t K,
                             const uint16_t* A, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                             const uint16_t* B, int64_t b_bs, int64_t b_rs, int64_t b_cs,
                             uint16_t* C, int64_t c_bs, int64_t c_rs, float alpha) {
  const int threads = omp_get_max_threads();
  const VecMathF32& vm = vec_math_f32();
  if (!vm.narrow_bf16 || !takes(batches, M, N, K, threads) || omp_in_parallel()) return false;
  const GemmBf16Fn kernel = gemm_bf16_kernel();
#pragma omp parallel
  {
    std::vector<float> sums(size_t(M * N));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < batches; ++b) {
      kernel(M, N, K, A + b * a_bs, a_rs, a_cs, B + b * b_bs, b_rs, b_cs, sums.data(), N);
      for (int64_t i = 0; i < M; ++i) {
        float* row = sums.data() + i * N;
        if (alpha != 1.0f)
          for (int64_t j = 0; j < N; ++j) row[j] *= alpha;
        vm.narrow_bf16(row, C + b * c_bs + i * c_rs, N);
      }
    }
  }
  return true;
}

}  // namespace kiln::cpu
