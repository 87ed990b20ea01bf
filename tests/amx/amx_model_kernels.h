#pragma once
// Entry points of the AMX kernels run on the tile model (amx_model_kernels.cpp). Each returns
// the number of tile products it executed (summed over the OpenMP threads).
#include <cstdint>

namespace kiln::cpu::test {

int64_t model_gemm_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                        int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                        int64_t c_rs);
int64_t model_gemm_s8(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                      const int8_t* B, bool b_transposed, int32_t* C);
// The same with B packed whole first (amx_pack_whole; the int8 B given as W [N, K]).
int64_t model_gemm_bf16_prepacked(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                  int64_t a_rs, int64_t a_cs, const uint16_t* B, int64_t b_rs,
                                  int64_t b_cs, float* C, int64_t c_rs);
int64_t model_gemm_s8_prepacked(int64_t M, int64_t N, int64_t K, const uint8_t* A,
                                bool a_signed, const int8_t* W, int32_t* C);
// The bfloat16 product rounded inside the kernel (AmxBf16Out, decision 0119): C bfloat16 with
// row stride c_rs, bias [N] float32 or null added before the rounding.
int64_t model_gemm_bf16_rounded(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                int64_t a_rs, int64_t a_cs, const uint16_t* B, int64_t b_rs,
                                int64_t b_cs, uint16_t* C, int64_t c_rs, const float* bias,
                                bool prepacked);
int64_t model_products();  // all threads' tile products so far

}  // namespace kiln::cpu::test
