#include "kiln/runtime/threads.h"

#include <omp.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <atomic>

#include "kiln/core/error.h"

namespace kiln {

void set_num_threads(int threads) {
  KILN_CHECK(threads > 0, ValueError, "set_num_threads: expected a positive number of threads, "
             "got ", threads);
  omp_set_num_threads(threads);
}

int get_num_threads() { return omp_get_max_threads(); }

namespace {
constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;  // MXCSR bits 15 and 6
std::atomic<int> g_interop_threads{1};

#if defined(__x86_64__)
bool cpu_has_daz() {
  unsigned eax, ebx, ecx, edx;
  __asm__("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(1), "c"(0));
  return (ecx & 1u) != 0;  // SSE3, which every CPU with DAZ has
}

void set_mxcsr_flush(bool on) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? csr | kFlushToZero | kDenormalsAreZero : csr & ~(kFlushToZero | kDenormalsAreZero));
}
#else
bool cpu_has_daz() { return false; }
void set_mxcsr_flush(bool) {}
#endif
}  // namespace

bool set_flush_denormal(bool on) {
  if (!cpu_has_daz()) return false;
  set_mxcsr_flush(on);
  // The team's threads keep their own MXCSR: set it in each (a parallel region of the team
  // the calling thread's ops use).
#pragma omp parallel
  set_mxcsr_flush(on);
  return true;
}

void set_num_interop_threads(int threads) {
  KILN_CHECK(threads > 0, ValueError, "set_num_interop_threads: expected a positive number of "
             "threads, got ", threads);
  g_interop_threads.store(threads);
}
int get_num_interop_threads() { return g_interop_threads.load(); }

}  // namespace kiln

namespace kiln::detail {
// Declared in kiln/tensor/strided_loop.h (the elementwise iterator), kept out of that header
// so it does not pull in omp.h.
int elementwise_threads() { return omp_get_max_threads(); }
}  // namespace kiln::detail
