// gemm_kernel_summary (cpu_info.h): which of kiln's own GEMM kernels the level selected, read
// off the selected function pointers, so it cannot disagree with the selection itself.
#include <string>

#include "gemm_bf16.h"
#include "gemm_f32.h"
#include "gemm_packed_b.h"
#include "gemm_s8.h"
#include "vec_math.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

std::string gemm_kernel_summary() {
  const GemmF32Fn f32 = gemm_f32_kernel();
  const GemmBf16Fn bf16 = gemm_bf16_kernel();
  const GemmS8Fn s8 = gemm_s8_kernel();
  auto kept = [](bool packed) { return packed ? ", Linear weights packed once" : ""; };
  std::string s = "  float32: ";
  s += f32 == &gemm_f32_avx512 ? "AVX-512 FMA, 8 x 32 register tiles"
       : f32 == &gemm_f32_avx2 ? "AVX2 FMA, 6 x 16 register tiles"
                               : "plain loops";
  s += kept(bool(gemm_f32_packed_kernel()));
  s += "\n  bfloat16: ";
  s += bf16 == &gemm_bf16_amx          ? "AMX tiles (tdpbf16ps), 32 x 32 blocks"
       : bf16 == &gemm_bf16_avx512bf16 ? "AVX-512 BF16 (vdpbf16ps), 8 x 32 register tiles"
       : bf16 == &gemm_bf16_avx512     ? "AVX-512 FMA on operands widened while packing"
       : bf16 == &gemm_bf16_avx2       ? "AVX2 FMA on operands widened while packing"
                                       : "operands widened to float32, plain loops";
  s += kept(bool(gemm_bf16_packed_kernel()));
  s += "\n  int8: ";
  s += s8 == &gemm_s8_amx          ? "AMX tiles (tdpbssd / tdpbusd), 32 x 32 blocks"
       : s8 == &gemm_s8_avx512vnni ? "AVX-512 VNNI (vpdpbusd), 8 x 32 register tiles"
       : s8 == &gemm_s8_avx2       ? "int16 pairs (vpmaddwd), 6 x 16 register tiles"
                                   : "plain loops";
  s += kept(bool(gemm_s8_packed_kernel()));
  // Products of 2 to 15 rows with a row-major weight (few_rows_product.h; bfloat16 up to 32
  // rows where its tile widens).
  const DotTileBf16Fn tile_bf16 = dot_tile_bf16_kernel();
  s += "\n  2-15 rows x weight: ";
  s += !vec_math_f32().dot_tile ? "the kernels above"
       : tile_bf16 == &dot_tile_bf16_avx512bf16
           ? "dot tiles of 6 x 4 rows (bfloat16 with vdpbf16ps)"
           : "dot tiles of 6 x 4 rows (bfloat16 widened in registers, up to 32 rows)";
  return s;
}

}  // namespace kiln::cpu
