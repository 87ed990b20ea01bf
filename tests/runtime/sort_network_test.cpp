// sort_short_line (src/kiln/backends/cpu/sort_network.h): every line length it takes, against
// std::sort on the same integers, with repeated keys and the extreme keys its callers make.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "sort_network.h"

namespace kiln::test {
namespace {

TEST(SortNetwork, EveryLengthMatchesStdSort) {
  std::mt19937_64 rng(7);
  for (int64_t n = 1; n <= cpu::kSortNetworkMaxLine; ++n) {
    for (int trial = 0; trial < 50; ++trial) {
      // (key << 32 | index) as the sort kernels build them; few distinct keys on odd trials
      // (ties, broken by the index), and the keys 0 and 0xFFFFFFFF (NaN's) among them.
      std::vector<uint64_t> line(64), expected(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        uint64_t key = trial % 2 ? rng() % 3 : rng() >> 32;
        if (j % 11 == 3) key = 0xFFFFFFFFu;
        if (j % 13 == 5) key = 0;
        line[size_t(j)] = expected[size_t(j)] = key << 32 | uint64_t(j);
      }
      std::sort(expected.begin(), expected.end());
      cpu::sort_short_line(line.data(), n);
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), line.begin()))
          << "n = " << n << ", trial " << trial;
    }
  }
}

}  // namespace
}  // namespace kiln::test
