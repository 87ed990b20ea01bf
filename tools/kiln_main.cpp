// The kiln command-line program: `kiln info`, `kiln info --ops`, `kiln demo`, `kiln bench`.
#include <cstring>
#include <iostream>
#include <string>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/kiln.h"
#include "tools/commands.h"

namespace {

int usage() {
  std::cerr << "usage: kiln <command>\n"
               "  info          version, build, CPU features, backends and devices\n"
               "  info --ops    every op with its schema and kernel coverage per device\n"
               "  demo          a small end-to-end example on the ops\n"
               "  bench         kernel benchmarks vs oneDNN and the machine's peaks (--quick, --help)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string cmd = argv[1];
  try {
    if (cmd == "info") {
      bool ops = argc > 2 && std::strcmp(argv[2], "--ops") == 0;
      return ops ? kiln::tools::print_op_coverage() : kiln::tools::print_info();
    }
    if (cmd == "demo") return kiln::tools::run_demo(argc - 2, argv + 2);
    if (cmd == "bench") return kiln::tools::run_bench(argc - 2, argv + 2);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      usage();
      return 0;
    }
    std::cerr << "kiln: unknown command '" << cmd << "'\n";
    return usage();
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
}
