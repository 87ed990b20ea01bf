// Printing matches PyTorch's repr for the same values (strings taken from torch 2.x).
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace kiln {
namespace {

TEST(Print, MatchesPyTorchStyle) {
  EXPECT_EQ(arange(6, DType::F32).view({2, 3}).str(),
            "tensor([[0., 1., 2.],\n        [3., 4., 5.]])");
  EXPECT_EQ(arange(3).str(), "tensor([0, 1, 2])");
  EXPECT_EQ(full({}, 3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(tensor_from(std::vector<float>{1.5f, -2.25f}).str(), "tensor([ 1.5000, -2.2500])");
  EXPECT_EQ(tensor_from(std::vector<bool>{true, false}).str(), "tensor([ True, False])");
  EXPECT_EQ(zeros({0, 3}).str(), "tensor([], size=(0, 3))");
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  EXPECT_EQ(ones({2}, DType::F64).str(), "tensor([1., 1.], dtype=kiln.float64)");
  EXPECT_EQ(arange(2, DType::I32).str(), "tensor([0, 1], dtype=kiln.int32)");
  EXPECT_EQ(arange(8, DType::F32).view({2, 2, 2}).str(),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  EXPECT_EQ(tensor_from(std::vector<float>{1e-5f, 1.0f}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(arange(2000, DType::F32).str(),
            "tensor([   0.,    1.,    2.,  ..., 1997., 1998., 1999.])");
}

TEST(Print, ShowsDevice) {
  ASSERT_TRUE(is_available(DeviceType::Testing)) << "no testing backend (the testing backend is part of every build)";
  EXPECT_EQ(ones({1}, TensorOptions(Device(DeviceType::Testing, 0))).str(),
            "tensor([1.], device='testing:0')");
}

}  // namespace
}  // namespace kiln
