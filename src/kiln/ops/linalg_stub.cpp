// Placeholder until the linalg op family lands; replaced by src/kiln/ops/linalg*.cpp.
namespace kiln::ops {
void register_linalg_ops() {}
}
namespace kiln::cpu {
void register_linalg_kernels() {}
}
#include "kiln/ops/linalg.h"
#include "kiln/core/error.h"
namespace kiln {
Tensor matmul(const Tensor&, const Tensor&) { KILN_THROW(NotImplementedError, "matmul: pending"); }
}
