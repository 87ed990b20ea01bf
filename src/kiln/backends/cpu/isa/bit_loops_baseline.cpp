// The bit loops (bit_loops.h), baseline unit (compiler flags set in CMakeLists.txt).
#include "bit_loops.h"

#define BIT_LOOPS_NAME bit_loops_baseline
#include "bit_loops_body.inc"
