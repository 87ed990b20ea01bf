#pragma once
// The float32 matrix-product microkernel, compiled once per ISA level (each variant in its
// own translation unit with that level's compiler flags) and chosen once at start from the
// detected CPU, capped by KILN_CPU_ISA.
//
// C[i, j] = alpha * sum_k A[i, k] * B[k, j] for i < M, j < N, where A and B have element
// strides (a_rs, a_cs) and (b_rs, b_cs) (a transposed weight needs no copy: the blocked kernel
// packs from any layout), C has row stride c_rs (unit column stride). Accumulates in float32,
// as BLAS does.
#include <cstdint>

namespace kiln::cpu {

using GemmF32Fn = void (*)(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs,
                           int64_t a_cs, const float* B, int64_t b_rs, int64_t b_cs, float* C,
                           int64_t c_rs, float alpha);

void gemm_f32_baseline(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                       int64_t, int64_t, float*, int64_t, float);
void gemm_f32_avx2(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                   int64_t, int64_t, float*, int64_t, float);
void gemm_f32_avx512(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                     int64_t, int64_t, float*, int64_t, float);

// Products with fewer rows than this stream B row by row (matrix-vector and LLM decoding
// shapes); the others use the packed, register-blocked kernel.
inline constexpr int64_t kGemmBlockedMinRows = 8;

// The variant for the current ISA level (cpu::isa_level()).
GemmF32Fn gemm_f32_kernel();

// How the blocked kernels (float32, bfloat16, int8) split C between `threads` threads: a grid
// of {row runs, panel runs} over row_tiles tiles of mr rows and `panels` column panels, B
// (b_bytes in all) packed per thread in blocks of block_panels panels, or (b_bytes 0) packed
// beforehand, prepacked_bytes of it, which each thread reads for its panels. Defined in
// gemm_f32_select.cpp (plain code, compiled once, shared by every ISA variant).
struct GemmGrid {
  int64_t row_runs, panel_runs;
};
GemmGrid gemm_thread_grid(int64_t row_tiles, int64_t panels, int64_t threads, int64_t mr,
                          int64_t block_panels, int64_t b_bytes, int64_t prepacked_bytes = 0);

}  // namespace kiln::cpu
