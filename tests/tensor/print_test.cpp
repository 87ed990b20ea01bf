// Printing matches PyTorch's repr for the same values (strings taken from torch 2.x).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/tensor/print_options.h"

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
  // The shown values' range (1 to 1999) is over 1000: scientific, wrapped at 80 columns.
  EXPECT_EQ(arange(2000, DType::F32).str(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(arange(30, DType::F32).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
}

TEST(Print, FollowsThePrintOptions) {
  const PrintOptions saved = print_options();
  PrintOptions o;
  o.precision = 2;
  o.threshold = 5;
  o.edgeitems = 1;
  set_print_options(o);
  EXPECT_EQ(arange(12).view({3, 4}).str(), "tensor([[ 0,  ...,  3],\n        ...,\n        [ 8,  ..., 11]])");
  EXPECT_EQ(tensor_from(std::vector<float>{1.23456f, 2.5f}).str(), "tensor([1.23, 2.50])");
  o.sci_mode = false;
  o.threshold = 1000;
  set_print_options(o);
  EXPECT_EQ(tensor_from(std::vector<float>{1e-5f, 1.0f}).str(), "tensor([0.00, 1.00])");
  // A suffix that would pass the line width goes on its own line (torch's _add_suffixes).
  o = PrintOptions{};
  set_print_options(o);
  EXPECT_EQ(tensor_from(std::vector<double>{-0.1117, -1.1456, 1.4103, 1.3654, 1.1206, -0.9622, -0.3391}).str(),
            "tensor([-0.1117, -1.1456,  1.4103,  1.3654,  1.1206, -0.9622, -0.3391],\n"
            "       dtype=kiln.float64)");
  EXPECT_EQ(zeros({0}, DType::I64).str(), "tensor([], dtype=kiln.int64)");
  o.linewidth = 30;
  set_print_options(o);
  EXPECT_EQ(arange(12, DType::F32).str(),
            "tensor([ 0.,  1.,  2.,  3.,\n         4.,  5.,  6.,  7.,\n         8.,  9., 10., 11.])");
  set_print_options(saved);
}

TEST(Print, ShowsDevice) {
  ASSERT_TRUE(is_available(DeviceType::Testing)) << "no testing backend (the testing backend is part of every build)";
  EXPECT_EQ(ones({1}, TensorOptions(Device(DeviceType::Testing, 0))).str(),
            "tensor([1.], device='testing:0')");
}

}  // namespace
}  // namespace kiln
