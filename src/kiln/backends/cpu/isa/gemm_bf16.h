#pragma once
// The bfloat16 matrix product with float32 results: C[M, N] = A[M, K] @ B[K, N], where A and
// B are bfloat16 bit patterns with any element strides and C is row-major float32 (row
// stride c_rs, overwritten). With AMX (ISA level amx) tile products of 32 x 32 blocks
// (gemm_amx_body.inc); with AVX-512 BF16 (ISA level avx512_vnni and up) a packed,
// register-blocked kernel multiplies pairs of bfloat16 with vdpbf16ps; at the AVX2 and AVX-512
// levels the float32 blocked kernel of that level widens the operands while it packs them
// (gemm_f32_blocked.inc); at the baseline level both operands are widened whole and the plain
// float32 kernel runs. Products accumulate in float32 either way, as PyTorch's bfloat16 matmul
// does.
#include <cstdint>

namespace kiln::cpu {

using GemmBf16Fn = void (*)(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                            int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs,
                            float* C, int64_t c_rs);

void gemm_bf16_widening(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                        const uint16_t*, int64_t, int64_t, float*, int64_t);
void gemm_bf16_avx2(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                    const uint16_t*, int64_t, int64_t, float*, int64_t);
void gemm_bf16_avx512(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                      const uint16_t*, int64_t, int64_t, float*, int64_t);
void gemm_bf16_avx512bf16(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                          const uint16_t*, int64_t, int64_t, float*, int64_t);
// AMX tiles (tdpbf16ps, gemm_amx.cpp) from kAmxMinRows rows; fewer rows: gemm_bf16_avx512bf16.
void gemm_bf16_amx(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*,
                   int64_t, int64_t, float*, int64_t);
inline constexpr int64_t kAmxMinRows = 16;
// The same product rounded to bfloat16 C (row stride c_rs) inside the tile kernel, the float32
// sums never stored (decision 0119); the rounding is vec_math's narrow_bf16's. False, having
// written nothing, below kAmxMinRows rows.
using GemmBf16ToBf16Fn = bool (*)(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                  int64_t a_rs, int64_t a_cs, const uint16_t* B, int64_t b_rs,
                                  int64_t b_cs, uint16_t* C, int64_t c_rs);
bool gemm_bf16_amx_to_bf16(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                           const uint16_t*, int64_t, int64_t, uint16_t*, int64_t);
// gemm_bf16_amx_to_bf16 at ISA level amx, else null.
GemmBf16ToBf16Fn gemm_bf16_to_bf16_kernel();
// A Linear weight packed once for the tiles (bfloat16 linear, int8 int_mm with W.t()) takes
// products from this many rows: below it the vector dot tiles stream the weight at close to
// the read bandwidth, above it they turn compute-bound (vdpbf16ps at half the float32 FMA
// rate) or take their rows in two passes. bfloat16 from 7 rows (decision 0142; 5 before, from
// decision 0116): [M, 4096] x [4096, 4096]^T with the weights rotated through 640 MB (past the
// 480 MB L3), two threads, AMX Xeon: the tiles streamed 26-30 GB/s at M = 5 and 26 at M = 6
// where the AMX kernel streamed 19-20 at every M from 5 to 15; at M = 7 21-22 against 19, at 8
// 20 against 19-20, at 10 17 against 19-20. int8 from 2 rows: the VNNI rows kernel streamed
// 16 GB/s at M = 2 and 3 and 13.5-14 at M = 4, the tiles 19-20 (M = 1 keeps its own kernel).
inline constexpr int64_t kAmxFewRowsMin = 7;
inline constexpr int64_t kAmxFewRowsMinS8 = 2;

// The variant for the current ISA level (cpu::isa_level()).
GemmBf16Fn gemm_bf16_kernel();

// C[M, N] (float32, row stride c_rs) = A[M, K] @ B[K, N] for a few rows (M < 4: a vector times
// a matrix, attention weights times V in a decode step) whose B rows are contiguous (column
// stride 1): each B row is widened and added into 64-column register blocks, no packing (the
// blocked kernels packed B for one row: [1, 140] x [140, 64] took 3 us per head).
using GemmBf16RowsFn = void (*)(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                int64_t a_rs, int64_t a_cs, const uint16_t* B, int64_t b_rs,
                                float* C, int64_t c_rs);
void gemm_bf16_rows_avx2(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                         const uint16_t*, int64_t, float*, int64_t);
void gemm_bf16_rows_avx512(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                           const uint16_t*, int64_t, float*, int64_t);
// The AVX2 / AVX-512 form for the level, null at the baseline level.
GemmBf16RowsFn gemm_bf16_rows_kernel();

// sum_k a[k] * b[k] of two contiguous bfloat16 vectors in float32 (bfloat16 products are exact
// in float32). With AVX-512 BF16: vdpbf16ps, 32 pairs per instruction, reading the bfloat16
// data directly (LLM decoding streams weights through this); at the AVX2 and AVX-512 levels
// the values are widened in registers (dot_bf16_widening.inc). Null at the baseline level.
using DotBf16Fn = float (*)(const uint16_t* a, const uint16_t* b, int64_t n);
float dot_bf16_avx2(const uint16_t* a, const uint16_t* b, int64_t n);
float dot_bf16_avx512(const uint16_t* a, const uint16_t* b, int64_t n);
float dot_bf16_avx512bf16(const uint16_t* a, const uint16_t* b, int64_t n);
DotBf16Fn dot_bf16_kernel();
// out[j] = that sum of a with the weight rows w + j * w_rs for j < rows, each row's loads
// prefetching the next row: one stream at a time, kept ahead of its use. AVX-512 BF16 only
// (the widening levels stream four rows at once, Dot4F32Bf16Fn); null elsewhere. Bit for bit
// dot_bf16_kernel()'s sums.
using DotRowsBf16Fn = void (*)(const uint16_t* a, const uint16_t* w, int64_t w_rs, int64_t rows,
                               int64_t n, float* out);
void dot_rows_bf16_avx512bf16(const uint16_t* a, const uint16_t* w, int64_t w_rs, int64_t rows,
                              int64_t n, float* out);
DotRowsBf16Fn dot_rows_bf16_kernel();
// The widening dot with a already float32 (dot_bf16_widening.inc): one widening per pair, bit
// for bit dot_bf16_kernel()'s result. Null where that kernel does not widen (AVX-512 BF16 reads
// bfloat16 pairs directly) and at the baseline level.
using DotF32Bf16Fn = float (*)(const float* a, const uint16_t* b, int64_t n);
float dot_f32_bf16_avx2(const float* a, const uint16_t* b, int64_t n);
float dot_f32_bf16_avx512(const float* a, const uint16_t* b, int64_t n);
DotF32Bf16Fn dot_f32_bf16_kernel();
// Four such sums against the rows b + j * ldb (j < 4) into out[j]: four weight streams at once.
using Dot4F32Bf16Fn = void (*)(const float* a, const uint16_t* b, int64_t ldb, int64_t n,
                               float* out);
void dot4_f32_bf16_avx2(const float* a, const uint16_t* b, int64_t ldb, int64_t n, float* out);
void dot4_f32_bf16_avx512(const float* a, const uint16_t* b, int64_t ldb, int64_t n, float* out);
Dot4F32Bf16Fn dot4_f32_bf16_kernel();  // null where dot_f32_bf16_kernel() is

// A tile of up to 6 activation rows x 4 weight rows (or 8 x 3) of bfloat16 dot products
// (VecDotTileBf16 in vec_math.h): vdpbf16ps with AVX-512 BF16, else vec_math's widening loop
// (AVX2, AVX-512); null at the baseline level.
void dot_tile_bf16_avx512bf16(const uint16_t* a, int64_t a_rs, int rows, const uint16_t* w,
                              int64_t w_rs, int cols, int64_t n, float* out, int64_t out_rs);
using DotTileBf16Fn = void (*)(const uint16_t* a, int64_t a_rs, int rows, const uint16_t* w,
                               int64_t w_rs, int cols, int64_t n, float* out, int64_t out_rs);
DotTileBf16Fn dot_tile_bf16_kernel();

}  // namespace kiln::cpu
