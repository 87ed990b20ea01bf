#include "kiln/backends/cpu/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

namespace kiln::cpu {

bool host_huge_pages_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("KILN_HUGE_PAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

void* host_allocate(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  const bool huge = nbytes >= kHugePageBytes && host_huge_pages_enabled();
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePageBytes : 64, nbytes) != 0) return nullptr;
  // Advice only: where the kernel has THP off (or madvise fails) the block keeps 4 KiB pages.
  if (huge) madvise(p, nbytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  return p;
}

void host_free(void* p) { std::free(p); }

std::string host_memory_summary() {
  // The kernel's mode is the bracketed word: "always [madvise] never".
  std::string line, mode = "unknown";
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  if (std::getline(f, line)) {
    const size_t a = line.find('['), b = line.find(']');
    if (a != std::string::npos && b != std::string::npos && b > a)
      mode = line.substr(a + 1, b - a - 1);
  }
  if (!host_huge_pages_enabled())
    return "blocks in 4 KiB pages (KILN_HUGE_PAGES=0; kernel THP mode " + mode + ")";
  return "blocks of 2 MiB and more advised as transparent huge pages (kernel THP mode " + mode +
         (mode == "never" ? ": not granted" : "") + "; KILN_HUGE_PAGES=0 switches it off)";
}

}  // namespace kiln::cpu
