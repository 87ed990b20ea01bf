// Vectorised reductions, avx512 variant (compiler flags set in CMakeLists.txt).
#include "reduce_vec.h"

#define REDUCE_VEC_NAME reduce_vec_avx512
#include "reduce_vec_body.inc"
