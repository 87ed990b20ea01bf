// kiln info's list of kiln's own GEMM kernels names the variants the ISA level selects (the
// isa_* CTest reruns run this at every level; "amx" where the CPU has it).
#include <gtest/gtest.h>

#include <string>

#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::test {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(LinalgKernelSummary, NamesTheKernelsOfTheLevel) {
  using cpu::IsaLevel;
  const IsaLevel level = cpu::isa_level();
  const auto& f = cpu::cpu_features();
  const std::string s = cpu::gemm_kernel_summary();
  SCOPED_TRACE(s);
  EXPECT_TRUE(contains(s, level >= IsaLevel::Avx512 ? "float32: AVX-512 FMA"
                          : level >= IsaLevel::Avx2 ? "float32: AVX2 FMA"
                                                    : "float32: plain loops"));
  EXPECT_EQ(contains(s, "float32: plain loops, Linear weights packed once"), false);
  EXPECT_EQ(contains(s, "FMA, 8 x 32 register tiles, Linear weights packed once") ||
                contains(s, "FMA, 6 x 16 register tiles, Linear weights packed once"),
            level >= IsaLevel::Avx2);
  const char* bf16 = level >= IsaLevel::Amx                           ? "bfloat16: AMX tiles"
                     : level >= IsaLevel::Avx512Vnni && f.avx512_bf16 ? "bfloat16: AVX-512 BF16"
                     : level >= IsaLevel::Avx512                      ? "bfloat16: AVX-512 FMA"
                     : level >= IsaLevel::Avx2                        ? "bfloat16: AVX2 FMA"
                                                                      : "bfloat16: operands";
  EXPECT_TRUE(contains(s, bf16));
  const char* s8 = level >= IsaLevel::Amx                           ? "int8: AMX tiles"
                   : level >= IsaLevel::Avx512Vnni && f.avx512_vnni ? "int8: AVX-512 VNNI"
                   : level >= IsaLevel::Avx2                        ? "int8: int16 pairs"
                                                                    : "int8: plain loops";
  EXPECT_TRUE(contains(s, s8));
  const char* tiles = level >= IsaLevel::Avx512Vnni && f.avx512_bf16
                          ? "2-15 rows x weight: dot tiles of 6 x 4 rows (bfloat16 with vdpbf16ps)"
                      : level >= IsaLevel::Avx2
                          ? "2-15 rows x weight: dot tiles of 6 x 4 rows (bfloat16 widened in "
                            "registers, up to 32 rows)"
                          : "2-15 rows x weight: the kernels above";
  EXPECT_TRUE(contains(s, tiles));
}

}  // namespace
}  // namespace kiln::test
