// Sorting networks for short lines of 64-bit integers (decision 0153): a fixed sequence of
// compare-exchanges, each a min and a max the compiler turns into conditional moves, so the
// cost does not depend on the data and no branch mispredicts. std::sort's insertion sort on
// random lines of 8 mispredicts about once per element.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// The largest line sort_short_line takes.
constexpr int64_t kSortNetworkMaxLine = 64;

// Sorts a[0, n) ascending for 1 <= n <= kSortNetworkMaxLine. a must hold the next power of
// two (at least 2) of entries: those past n are overwritten with UINT64_MAX, which sorts after
// every key the callers make (their low 32 bits hold an index below n).
void sort_short_line(uint64_t* a, int64_t n);

}  // namespace kiln::cpu
