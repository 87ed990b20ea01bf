// `kiln info`: version, build type, CPU features and ISA level, oneDNN, backends and devices;
// `kiln info --ops`: the op registry as a coverage table.
#include <iomanip>
#include <iostream>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/host_memory.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/kiln.h"
#include "tools/commands.h"

namespace kiln::tools {

int print_info() {
  const auto& f = cpu::cpu_features();
  std::cout << "kiln " << version() << " (" << build_type() << " build)\n";
  std::cout << "cpu: " << (f.model_name.empty() ? f.vendor : f.model_name) << "\n";
  std::cout << "cpu features:";
  for (const auto& n : f.names()) std::cout << ' ' << n;
  std::cout << "\n";
  std::cout << "cpu isa level: " << cpu::isa_level_name(cpu::isa_level()) << " (detected "
            << cpu::isa_level_name(cpu::detected_isa_level()) << ", cap KILN_CPU_ISA)\n";
  std::cout << "gemm kernels (kiln's own):\n" << cpu::gemm_kernel_summary() << "\n";
  std::cout << "onednn: "
            << (!cpu::onednn_available() ? "not built in"
                : cpu::onednn_enabled()  ? "in use (KILN_ONEDNN=0 switches it off)"
                                         : "built in, switched off (KILN_ONEDNN=0)")
            << "\n";
  std::cout << "host memory: " << cpu::host_memory_summary() << "\n";
  std::cout << "backends:\n";
  for (DeviceType t : registered_device_types()) {
    Backend& b = get_backend(t);
    int n = b.device_count();
    std::cout << "  " << b.name() << ": " << n << " device" << (n == 1 ? "" : "s");
    if (t == DeviceType::XPU && n == 0)
      std::cout << " (OpenCL GPUs; KILN_XPU_DEVICE_TYPES=all also admits CPU drivers such as PoCL)";
    std::cout << "\n";
    for (int i = 0; i < n; ++i) {
      auto p = b.properties(i);
      std::cout << "    " << Device(t, i).str() << "  " << p.name;
      if (p.total_memory) std::cout << "  " << (p.total_memory >> 20) << " MiB";
      std::cout << "\n";
    }
  }
  std::cout << "ops registered: " << all_ops().size() << "\n";
  return 0;
}

int print_op_coverage() {
  auto types = registered_device_types();
  std::cout << std::left << std::setw(22) << "op";
  for (DeviceType t : types) std::cout << std::setw(12) << device_type_name(t);
  std::cout << "schema\n";
  for (const OpDef* op : all_ops()) {
    std::cout << std::setw(22) << op->name;
    for (DeviceType t : types) {
      std::string cell;
      if (op->view) cell = "view";
      else if (op->composite) cell = "composite";
      // meta runs every op's meta function instead of a kernel (decision 0104)
      else if (t == DeviceType::Meta) cell = op->dynamic_shape ? "-" : "meta fn";
      else if (op->kernels[size_t(t)].fn) cell = std::to_string(__builtin_popcount(op->kernels[size_t(t)].dtypes)) + " dtypes";
      else if (default_kernel(t) && op->kernels[0].fn) cell = "via cpu";
      else cell = "-";
      std::cout << std::setw(12) << cell;
    }
    std::cout << op->schema << "\n";
  }
  std::cout << "fallback calls so far: " << total_fallback_calls() << "\n";
  return 0;
}

}  // namespace kiln::tools
