#pragma once
// acc += the 16 int32 sums of four u8 x s8 products each (vpdpbusd), accumulating in place.
// GCC 12 lowers _mm512_dpbusd_epi32 with copies of the accumulators: the 8 x 32 tile of
// gemm_s8_avx512vnni.cpp ran 16-32 zmm register moves (and stores of some accumulators to
// the stack) per 16 products, and a standalone tile loop on data in L1 reached 310-672 GOP/s
// of one core's 984. Written as inline asm with the accumulator as an in/out operand, the
// same loops ran 920-945 GOP/s at every tile shape tried (8 x 32 to 14 x 32, 6 x 64).
// Only for translation units compiled with AVX-512 VNNI.
#include <immintrin.h>

namespace kiln::cpu {

// u8: the unsigned bytes (A), s8: the signed bytes (B); s8 may come from memory.
inline __m512i dpbusd_accumulate(__m512i acc, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "vm"(s8));
  return acc;
}

}  // namespace kiln::cpu
