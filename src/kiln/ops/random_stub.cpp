// Placeholder until the random op family lands; replaced by src/kiln/ops/random*.cpp.
namespace kiln::ops {
void register_random_ops() {}
}
namespace kiln::cpu {
void register_random_kernels() {}
}
#include "kiln/ops/random.h"
namespace kiln {
Tensor rand(const Shape&, TensorOptions, Generator*) { KILN_THROW(NotImplementedError, "rand: pending"); }
Tensor randn(const Shape&, TensorOptions, Generator*) { KILN_THROW(NotImplementedError, "randn: pending"); }
Tensor randint(int64_t, int64_t, const Shape&, TensorOptions, Generator*) { KILN_THROW(NotImplementedError, "randint: pending"); }
}
