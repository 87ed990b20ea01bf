#pragma once
// What the CPU can run: features from CPUID checked against what the OS enables (XGETBV),
// and the ISA level kiln's kernels use, capped by KILN_CPU_ISA.
#include <string>
#include <vector>

namespace kiln::cpu {

enum class IsaLevel : int { Baseline = 0, Avx2 = 1, Avx512 = 2, Avx512Vnni = 3, Amx = 4 };

struct CpuFeatures {
  std::string vendor, model_name;
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  std::vector<std::string> names() const;  // the features present, by name
};

const CpuFeatures& cpu_features();  // detected once; never throws
IsaLevel detected_isa_level();      // the best level the CPU and OS support
IsaLevel isa_level();               // detected level capped by KILN_CPU_ISA
std::string isa_level_name(IsaLevel level);  // "baseline", "avx2", "avx512", "avx512_vnni", "amx"
// Parses a KILN_CPU_ISA value; throws ValueError listing the accepted names.
IsaLevel parse_isa_level(const std::string& name);
// kiln's own matrix-product kernels chosen for the current level, one line per dtype (for
// `kiln info`; products that oneDNN takes are not counted here).
std::string gemm_kernel_summary();

}  // namespace kiln::cpu
