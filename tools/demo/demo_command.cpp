// `kiln demo [fashion|logreg] [options]`.
#include <cstring>

#include "tools/commands.h"
#include "tools/demo/lm_options.h"

namespace kiln::tools {

int run_logreg_demo(int argc, char** argv);
}  // namespace kiln::tools

namespace kiln::demo {
int run_fashion_demo(int argc, char** argv);  // fashion_demo.cpp
}  // namespace kiln::demo

namespace kiln::tools {

int run_demo(int argc, char** argv) {
  if (argc > 0 && std::strcmp(argv[0], "logreg") == 0) return run_logreg_demo(argc - 1, argv + 1);
  if (argc > 0 && std::strcmp(argv[0], "fashion") == 0)
    return demo::run_fashion_demo(argc - 1, argv + 1);
  return demo::run_lm_demo(demo::parse_lm_options(argc, argv));
}

}  // namespace kiln::tools
