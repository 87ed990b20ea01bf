// Vectorised reductions, avx2 variant (compiler flags set in CMakeLists.txt).
#include "reduce_vec.h"

#define REDUCE_VEC_NAME reduce_vec_avx2
#include "reduce_vec_body.inc"
