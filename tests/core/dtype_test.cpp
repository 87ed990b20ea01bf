// DType names, sizes and PyTorch's type promotion (checked against torch.promote_types /
// torch.result_type tables written out by hand).
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace kiln {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(element_size(DType::Bool), 1u);
  EXPECT_EQ(element_size(DType::BF16), 2u);
  EXPECT_EQ(element_size(DType::F64), 8u);
  EXPECT_EQ(dtype_name(DType::BF16), "bfloat16");
  EXPECT_EQ(dtype_from_name("half"), DType::F16);
  EXPECT_EQ(dtype_from_name("long"), DType::I64);
  EXPECT_THROW(dtype_from_name("float128"), TypeError);
  try {
    dtype_from_name("complex64");
  } catch (const TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("complex64"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos);
  }
}

TEST(DType, PromoteTypesMatchesTorchTable) {
  using D = DType;
  struct Case {
    D a, b, want;
  } cases[] = {
      {D::U8, D::I8, D::I16},    {D::U8, D::I16, D::I16}, {D::U8, D::Bool, D::U8},
      {D::I8, D::I32, D::I32},   {D::I32, D::I64, D::I64}, {D::Bool, D::I8, D::I8},
      {D::F16, D::BF16, D::F32}, {D::F16, D::F32, D::F32}, {D::BF16, D::F64, D::F64},
      {D::I64, D::F16, D::F16},  {D::U8, D::BF16, D::BF16}, {D::Bool, D::F32, D::F32},
      {D::I16, D::U8, D::I16},   {D::F32, D::F64, D::F64},
  };
  for (auto c : cases) {
    EXPECT_EQ(promote_types(c.a, c.b), c.want) << c.a << " " << c.b;
    EXPECT_EQ(promote_types(c.b, c.a), c.want) << c.b << " " << c.a;
  }
}

TEST(DType, ScalarsDoNotPromoteTensorsOfTheSameCategory) {
  Tensor i32 = zeros({3}, DType::I32);
  Tensor u8 = zeros({3}, DType::U8);
  Tensor f16 = zeros({3}, DType::F16);
  Tensor b = zeros({3}, DType::Bool);
  EXPECT_EQ(result_type(i32, Scalar(1000)), DType::I32);
  EXPECT_EQ(result_type(u8, Scalar(1000)), DType::U8);
  EXPECT_EQ(result_type(u8, Scalar(1.5)), DType::F32);
  EXPECT_EQ(result_type(f16, Scalar(1e10)), DType::F16);
  EXPECT_EQ(result_type(b, Scalar(2)), DType::I64);
  EXPECT_EQ(result_type(b, Scalar(true)), DType::Bool);
  EXPECT_EQ(result_type(i32, Scalar(true)), DType::I32);
}

TEST(DType, ZeroDimTensorsPromoteOnlyAcrossCategories) {
  Tensor f16 = zeros({3}, DType::F16);
  Tensor i32 = zeros({3}, DType::I32);
  Tensor f64_0d = zeros({}, DType::F64);
  Tensor i64_0d = zeros({}, DType::I64);
  EXPECT_EQ(result_type(f16, f64_0d), DType::F16);
  EXPECT_EQ(result_type(i32, i64_0d), DType::I32);
  EXPECT_EQ(result_type(i32, f64_0d), DType::F64);
  // Two 0-d tensors: ordinary promotion.
  EXPECT_EQ(result_type(zeros({}, DType::F32), f64_0d), DType::F64);
  // Results of real ops follow the same rules.
  EXPECT_EQ(add(i32, f64_0d).dtype(), DType::F64);
  EXPECT_EQ(mul(f16, 3.0).dtype(), DType::F16);
  EXPECT_EQ(add(i32, 2).dtype(), DType::I32);
  EXPECT_EQ(div(i32, 2).dtype(), DType::F32);
}

TEST(DType, DefaultFloatDtypeIsSettable) {
  EXPECT_EQ(default_float_dtype(), DType::F32);
  set_default_float_dtype(DType::F64);
  EXPECT_EQ(result_type(zeros({2}, DType::I32), Scalar(0.5)), DType::F64);
  EXPECT_EQ(zeros({2}).dtype(), DType::F64);
  set_default_float_dtype(DType::F32);
  EXPECT_THROW(set_default_float_dtype(DType::I32), TypeError);
}

TEST(Shape, BroadcastAndWrapDim) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 7}), (Shape{0, 7}));
  try {
    broadcast_shapes({2, 3}, {4});
    FAIL();
  } catch (const ShapeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[2, 3]"), std::string::npos);
    EXPECT_NE(m.find("[4]"), std::string::npos);
  }
  EXPECT_EQ(wrap_dim(-1, 3), 2);
  EXPECT_EQ(wrap_dim(0, 0), 0);
  EXPECT_EQ(wrap_dim(-1, 0), 0);
  EXPECT_THROW(wrap_dim(3, 3), IndexError);
  EXPECT_THROW(wrap_dim(-4, 3), IndexError);
  EXPECT_THROW(numel_of({-1, 2}), Error);
  EXPECT_THROW(numel_of({int64_t(1) << 40, int64_t(1) << 40}), Error);
}

}  // namespace
}  // namespace kiln
