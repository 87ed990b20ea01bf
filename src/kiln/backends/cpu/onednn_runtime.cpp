#include "onednn_runtime.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

#ifndef KILN_HAVE_DNNL

void onednn_apply_isa_cap() {}

#else

namespace {
dnnl::cpu_isa isa_for(IsaLevel level) {
  switch (level) {
    case IsaLevel::Baseline: return dnnl::cpu_isa::sse41;
    case IsaLevel::Avx2: return dnnl::cpu_isa::avx2;
    case IsaLevel::Avx512: return dnnl::cpu_isa::avx512_core;
    case IsaLevel::Avx512Vnni: return dnnl::cpu_isa::avx512_core_bf16;
    default: return dnnl::cpu_isa::all;
  }
}
}  // namespace

void onednn_apply_isa_cap() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Fails (harmlessly) if oneDNN already dispatched; the cap then stays oneDNN's own.
    try {
      dnnl::set_max_cpu_isa(isa_for(isa_level()));
    } catch (const dnnl::error&) {
    }
  });
}

dnnl::engine& onednn_engine() {
  static dnnl::engine e = [] {
    onednn_apply_isa_cap();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

bool onednn_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_ONEDNN");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
