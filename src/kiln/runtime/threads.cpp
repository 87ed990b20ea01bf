#include "kiln/runtime/threads.h"

#include <omp.h>

#include "kiln/core/error.h"

namespace kiln {

void set_num_threads(int threads) {
  KILN_CHECK(threads > 0, ValueError, "set_num_threads: expected a positive number of threads, "
             "got ", threads);
  omp_set_num_threads(threads);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace kiln

namespace kiln::detail {
// Declared in kiln/tensor/strided_loop.h (the elementwise iterator), kept out of that header
// so it does not pull in omp.h.
int elementwise_threads() { return omp_get_max_threads(); }
}  // namespace kiln::detail
