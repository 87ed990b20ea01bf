#pragma once
// The vectorised, threaded path of sum / mean / amax / amin / var / std for float32 and
// bfloat16 inputs whose reduced elements form contiguous runs (reducing the innermost dims)
// or whose kept innermost dim is contiguous (reducing outer dims, e.g. dim 0 of [R, C]).
// Every other case (other dtypes, a reduced dim in the middle with a strided inner run,
// empty reductions) returns false and the generic strided kernel runs.
#include "kiln/dispatch/op_call.h"

namespace kiln::cpu {

// Norm2: the 2-norm sqrt(sum x^2) (the runs layout only, like Var and Std).
enum class FastReduceKind { Sum, Mean, Max, Min, Var, Std, Norm2 };

// Runs the reduction of call (attrs: dims, keepdim[, correction]) and returns true when
// the fast path covers it.
bool fast_reduce(OpCall& call, FastReduceKind kind);

}  // namespace kiln::cpu
