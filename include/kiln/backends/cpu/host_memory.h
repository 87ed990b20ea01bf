#pragma once
// Host memory for CPU tensors (the CPU backend's raw_allocate / raw_free, and oneDNN's packed
// weights; decision 0046). Blocks from kHugePageBytes up start on a 2 MiB boundary and are
// advised to the kernel as transparent huge pages (madvise MADV_HUGEPAGE over their whole
// 2 MiB pages), so that streaming a large tensor or weight walks one page table entry per
// 2 MiB instead of per 4 KiB; smaller blocks are aligned to a cache line. KILN_HUGE_PAGES=0
// at start keeps every block in 4 KiB pages.
#include <cstddef>
#include <string>

namespace kiln::cpu {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;
void* host_allocate(size_t nbytes);  // null when out of memory
void host_free(void* p);
// Whether large blocks are advised as huge pages (KILN_HUGE_PAGES, read once).
bool host_huge_pages_enabled();
// One line for `kiln info`: the setting and the kernel's THP mode
// (/sys/kernel/mm/transparent_hugepage/enabled).
std::string host_memory_summary();

}  // namespace kiln::cpu
