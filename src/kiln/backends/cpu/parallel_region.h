#pragma once
// An OpenMP parallel region only where it pays. `#pragma omp parallel if (false)` still builds
// a team of one in libgomp and ends it through its barrier, which wakes a futex: 320-410 ns per
// call on Zen 4 (a standalone loop, one and two threads), against 8-10 ns for the same body
// called directly, and most of the time of a small op (sum(0) of [64, 64] float32 took 2.6 us,
// PyTorch 2.1).
#include <omp.h>

namespace kiln::cpu {

// Runs body() in a parallel region when `parallel`, else on the calling thread alone. The body
// may hold worksharing constructs (`#pragma omp for`, `single`, `barrier`): called directly,
// outside any active region, they bind to a team of the calling thread only and it runs every
// iteration. Inside an active region (a kernel called from another kernel's threads) they would
// bind to that outer team instead, so there the serialised region is kept.
template <typename F>
inline void parallel_region(bool parallel, F&& body) {
  if (!parallel && !omp_in_parallel()) {
    body();
    return;
  }
#pragma omp parallel if (parallel)
  body();
}

}  // namespace kiln::cpu
