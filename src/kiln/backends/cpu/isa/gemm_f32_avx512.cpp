// float32 GEMM microkernel, avx512 variant (compiler flags set in CMakeLists.txt).
#include "gemm_f32.h"
#define KILN_GEMM_F32_NAME gemm_f32_avx512
#include "gemm_f32_body.inc"
