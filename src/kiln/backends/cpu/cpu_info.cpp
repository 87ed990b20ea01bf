#include "kiln/backends/cpu/cpu_info.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "kiln/core/error.h"

namespace kiln::cpu {

namespace {

uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// Linux hands a process the AMX tile state only after it asks for it (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; the permission is process-wide): without it the
// first tile instruction raises SIGILL (../shared/HARDWARE.md). False when refused.
bool request_amx_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.vendor = vendor;
  __get_cpuid(1, &a, &b, &c, &d);
  f.sse42 = c & bit_SSE4_2;
  bool osxsave = c & bit_OSXSAVE;
  bool avx_hw = c & bit_AVX;
  f.fma = c & bit_FMA;
  f.f16c = c & bit_F16C;
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  bool os_avx512 = (xcr0 & 0xe6) == 0xe6;        // + opmask, ZMM_Hi256, Hi16_ZMM
  bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG and XTILEDATA
  f.avx = avx_hw && os_avx;
  f.fma = f.fma && os_avx;
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = (b & bit_AVX2) && os_avx;
    f.avx512f = (b & bit_AVX512F) && os_avx512;
    f.avx512dq = (b & bit_AVX512DQ) && os_avx512;
    f.avx512bw = (b & bit_AVX512BW) && os_avx512;
    f.avx512vl = (b & bit_AVX512VL) && os_avx512;
    f.avx512_vnni = (c & (1u << 11)) && os_avx512;
    f.avx512_fp16 = (d & (1u << 23)) && os_avx512;
    f.amx_bf16 = (d & (1u << 22)) && os_amx;
    f.amx_tile = (d & (1u << 24)) && os_amx;
    f.amx_int8 = (d & (1u << 25)) && os_amx;
    if (f.amx_tile && !request_amx_permission()) f.amx_tile = f.amx_bf16 = f.amx_int8 = false;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = (a1 & (1u << 5)) && os_avx512;
  }
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) f.model_name = line.substr(pos + 2);
      break;
    }
  }
  return f;
}

}  // namespace

std::vector<std::string> CpuFeatures::names() const {
  std::vector<std::string> n;
  auto add = [&](bool on, const char* name) {
    if (on) n.push_back(name);
  };
  add(sse42, "sse4.2");
  add(avx, "avx");
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512dq, "avx512dq");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(amx_tile, "amx_tile");
  add(amx_bf16, "amx_bf16");
  add(amx_int8, "amx_int8");
  return n;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

IsaLevel detected_isa_level() {
  const auto& f = cpu_features();
  if (f.amx_tile && f.amx_bf16 && f.amx_int8 && f.avx512_bf16 && f.avx512_vnni)
    return IsaLevel::Amx;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni && f.avx512_bf16)
    return IsaLevel::Avx512Vnni;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return IsaLevel::Avx512;
  if (f.avx2 && f.fma) return IsaLevel::Avx2;
  return IsaLevel::Baseline;
}

std::string isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::Baseline: return "baseline";
    case IsaLevel::Avx2: return "avx2";
    case IsaLevel::Avx512: return "avx512";
    case IsaLevel::Avx512Vnni: return "avx512_vnni";
    case IsaLevel::Amx: return "amx";
  }
  return "?";
}

IsaLevel parse_isa_level(const std::string& name) {
  for (int i = 0; i <= int(IsaLevel::Amx); ++i)
    if (isa_level_name(IsaLevel(i)) == name) return IsaLevel(i);
  KILN_THROW(ValueError, "KILN_CPU_ISA='", name,
             "' is not an ISA level; expected one of baseline, avx2, avx512, avx512_vnni, amx");
}

IsaLevel isa_level() {
  static const IsaLevel level = [] {
    IsaLevel best = detected_isa_level();
    const char* env = std::getenv("KILN_CPU_ISA");
    if (!env || !*env) return best;
    IsaLevel cap = parse_isa_level(env);
    return cap < best ? cap : best;
  }();
  return level;
}

}  // namespace kiln::cpu
