#pragma once
// The 8-bit integer matrix product with int32 results: C[M, N] = A[M, K] @ B[K, N], A uint8 or
// int8 (a_signed) row-major (lda = K), B int8 either row-major [K, N] or, with b_transposed,
// stored as its transpose [N, K] row-major (a Linear weight: x @ W.T), C row-major int32
// (overwritten).
// With AVX-512 VNNI (ISA level avx512_vnni and up) a packed, register-blocked kernel adds four
// u8 x s8 products per int32 lane with vpdpbusd; signed A is shifted to unsigned by +128 and
// the shift's contribution, 128 * (column sums of B), subtracted. At the AVX2 and AVX-512
// levels both operands are widened to int16 and multiplied in exact pairs with vpmaddwd
// (gemm_s8_avx2.cpp); at the baseline level, plain int32 loops. Sums wrap in int32 (exactly
// like the hardware instructions for these ranges).
#include <cstdint>

namespace kiln::cpu {

using GemmS8Fn = void (*)(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                          const int8_t* B, bool b_transposed, int32_t* C);

void gemm_s8_reference(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                       const int8_t* B, bool b_transposed, int32_t* C);
void gemm_s8_avx2(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                  const int8_t* B, bool b_transposed, int32_t* C);
void gemm_s8_avx512vnni(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                        const int8_t* B, bool b_transposed, int32_t* C);
// AMX tiles (tdpbssd for a signed A, tdpbusd for an unsigned one: no shift needed;
// gemm_amx.cpp) from kAmxMinRows rows (gemm_bf16.h); fewer rows: gemm_s8_avx512vnni.
void gemm_s8_amx(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                 const int8_t* B, bool b_transposed, int32_t* C);

GemmS8Fn gemm_s8_kernel();

}  // namespace kiln::cpu
