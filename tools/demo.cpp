// `kiln demo`: placeholder until the ops needed for a real demo land.
#include <iostream>

#include "kiln/kiln.h"
#include "tools/commands.h"

namespace kiln::tools {
int run_demo(int, char**) {
  Tensor a = arange(6, DType::F32).view({2, 3});
  std::cout << a << "\n" << (a * 2 + 1) << "\n";
  return 0;
}
}  // namespace kiln::tools
