// kiln::set_num_threads / get_num_threads, and that results do not depend on the count.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace kiln {
namespace {

TEST(Threads, SetAndGetAndResultsIndependentOfCount) {
  const int before = get_num_threads();
  ASSERT_GE(before, 1);
  Tensor a = randn({400, 200}), b = randn({200, 500});  // 80000 elements: parallel loops
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  std::vector<float> one = matmul(a, b).to_vector<float>();
  std::vector<float> sum_one = (exp(a) + 1.0).to_vector<float>();
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  EXPECT_EQ(matmul(a, b).to_vector<float>(), one);  // same blocking: bit-identical
  EXPECT_EQ((exp(a) + 1.0).to_vector<float>(), sum_one);
  EXPECT_THROW(set_num_threads(0), ValueError);
  set_num_threads(before);
  EXPECT_EQ(get_num_threads(), before);
}

}  // namespace
}  // namespace kiln
