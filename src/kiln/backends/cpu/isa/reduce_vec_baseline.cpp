// Vectorised reductions, baseline variant (compiler flags set in CMakeLists.txt).
#include "reduce_vec.h"

#define REDUCE_VEC_NAME reduce_vec_baseline
#include "reduce_vec_body.inc"
