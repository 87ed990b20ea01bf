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
