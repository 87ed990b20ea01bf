// Placeholder until the reduction op family lands; replaced by src/kiln/ops/reduction*.cpp.
namespace kiln::ops {
void register_reduction_ops() {}
}
namespace kiln::cpu {
void register_reduction_kernels() {}
}
#include "kiln/ops/reduction.h"
#include "kiln/core/error.h"
namespace kiln {
Tensor sum(const Tensor&, std::optional<DType>) { KILN_THROW(NotImplementedError, "sum: pending"); }
Tensor sum(const Tensor&, const Dims&, bool, std::optional<DType>) { KILN_THROW(NotImplementedError, "sum: pending"); }
Tensor mean(const Tensor&) { KILN_THROW(NotImplementedError, "mean: pending"); }
Tensor mean(const Tensor&, const Dims&, bool) { KILN_THROW(NotImplementedError, "mean: pending"); }
}
