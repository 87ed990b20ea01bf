// SmallVec against std::vector: the same contents through growth past the inline capacity,
// copies, resize and assign.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "kiln/core/small_vec.h"

namespace {

using kiln::SmallVec;

template <typename T, size_t N>
std::vector<T> as_vector(const SmallVec<T, N>& v) {
  return std::vector<T>(v.begin(), v.end());
}

TEST(SmallVec, MatchesStdVectorThroughGrowthAndCopies) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    SmallVec<int64_t, 4> v;
    std::vector<int64_t> ref;
    const int ops = int(rng() % 40);
    for (int i = 0; i < ops; ++i) {
      switch (rng() % 5) {
        case 0:
        case 1: {
          int64_t x = int64_t(rng() % 1000);
          v.push_back(x);
          ref.push_back(x);
          break;
        }
        case 2: {
          size_t n = rng() % 12;
          v.resize(n, -1);
          ref.resize(n, -1);
          break;
        }
        case 3:
          if (!ref.empty()) {  // an element of the vector itself, at the growth boundary too
            v.push_back(v[0]);
            ref.push_back(ref[0]);
          }
          break;
        default: {
          SmallVec<int64_t, 4> copy = v;
          EXPECT_EQ(as_vector(copy), ref);
          v = copy;
        }
      }
      ASSERT_EQ(v.size(), ref.size());
      ASSERT_EQ(v.empty(), ref.empty());
      ASSERT_EQ(as_vector(v), ref);
      if (!ref.empty()) ASSERT_EQ(v.back(), ref.back());
    }
  }
}

TEST(SmallVec, ConstructorsAndAssign) {
  SmallVec<int, 2> a{1, 2, 3, 4, 5};
  EXPECT_EQ(as_vector(a), (std::vector<int>{1, 2, 3, 4, 5}));
  SmallVec<int, 2> b(3, 9);
  EXPECT_EQ(as_vector(b), (std::vector<int>{9, 9, 9}));
  std::vector<int> src{4, 5};
  SmallVec<int, 2> c(src.begin(), src.end());
  EXPECT_EQ(as_vector(c), src);
  c.assign(a.begin(), a.end());
  EXPECT_EQ(as_vector(c), as_vector(a));
  c.clear();
  EXPECT_TRUE(c.empty());
  SmallVec<std::array<int64_t, 3>, 2> arrays{{1, 2, 3}};
  arrays = {arrays[0]};  // assigning from an element of itself
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0][2], 3);
}

}  // namespace
