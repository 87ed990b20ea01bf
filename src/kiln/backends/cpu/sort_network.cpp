// Sorting networks for short lines of 64-bit integers (sort_network.h; decision 0153). Out of
// line: inlined into sort_slices, the unrolled networks slowed its radix path by 15%.
#include "sort_network.h"

namespace kiln::cpu {

namespace {

// Sorts a[0, N) ascending, N a power of two: bitonic merges with every comparator ascending
// (each merge's first step compares mirrored positions, so no half runs descending). Fully
// unrolled: N = 64 is 672 compare-exchanges, about 20 KiB of code.
template <int N>
void bitonic_sort_pow2(uint64_t* a) {
  const auto exchange = [a](int i, int l) {
    const uint64_t x = a[i], y = a[l];
    a[i] = x < y ? x : y;
    a[l] = x < y ? y : x;
  };
#pragma GCC unroll 8
  for (int k = 2; k <= N; k *= 2) {
#pragma GCC unroll 64
    for (int i = 0; i < N; ++i)
      if ((i & (k - 1)) < k / 2) exchange(i, (i & ~(k - 1)) + k - 1 - (i & (k - 1)));
#pragma GCC unroll 8
    for (int j = k / 4; j > 0; j /= 2)
#pragma GCC unroll 64
      for (int i = 0; i < N; ++i)
        if ((i & j) == 0) exchange(i, i + j);
  }
}

}  // namespace

void sort_short_line(uint64_t* a, int64_t n) {
  int64_t padded = 2;
  while (padded < n) padded *= 2;
  for (int64_t i = n; i < padded; ++i) a[i] = ~uint64_t(0);
  switch (padded) {
    case 2: bitonic_sort_pow2<2>(a); break;
    case 4: bitonic_sort_pow2<4>(a); break;
    case 8: bitonic_sort_pow2<8>(a); break;
    case 16: bitonic_sort_pow2<16>(a); break;
    case 32: bitonic_sort_pow2<32>(a); break;
    default: bitonic_sort_pow2<64>(a); break;
  }
}

}  // namespace kiln::cpu
