// `kiln demo [logreg] [options]`.
#include <cstring>

#include "tools/commands.h"
#include "tools/demo/lm_options.h"

namespace kiln::tools {

int run_logreg_demo(int argc, char** argv);

int run_demo(int argc, char** argv) {
  if (argc > 0 && std::strcmp(argv[0], "logreg") == 0) return run_logreg_demo(argc - 1, argv + 1);
  return demo::run_lm_demo(demo::parse_lm_options(argc, argv));
}

}  // namespace kiln::tools
