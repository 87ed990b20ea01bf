// The bit loops (bit_loops.h), avx2 unit (compiler flags set in CMakeLists.txt).
#include "bit_loops.h"

#define BIT_LOOPS_NAME bit_loops_avx2
#include "bit_loops_body.inc"
