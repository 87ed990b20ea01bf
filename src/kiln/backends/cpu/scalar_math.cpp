#include "scalar_math.h"

namespace kiln::cpu {
void throw_zero_division() { KILN_THROW(Error, "ZeroDivisionError: integer division by zero"); }
}  // namespace kiln::cpu
