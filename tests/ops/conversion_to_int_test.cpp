// float32 / bfloat16 / float16 -> int64 / int32 conversions of dense tensors (contiguous and
// channels-last), which take the AVX-512 / AVX2 truncating conversions (decisions 0038, 0041),
// against decision 0005's rule written out here independently: truncation toward zero, and the
// type's minimum for NaN and values outside its range. Vector tails, threaded sizes and the
// strided (element loop) path are compared too.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

template <typename I>
I expected(double x) {
  const double lo = double(std::numeric_limits<I>::min());
  const double hi = -lo;  // 2^31 or 2^63: the first value out of range above
  if (!(x >= lo && x < hi)) return std::numeric_limits<I>::min();
  return I(std::trunc(x));
}

std::vector<float> values(int64_t count) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 0.5f, -0.5f, 0.99999994f, -1.5f, 2.7f, -2.7f, NAN, -NAN,
                          inf, -inf, 2147483520.0f, 2147483648.0f, -2147483648.0f,
                          -2147483904.0f, 9.2233715e18f, 9.223372e18f, -9.223372e18f,
                          -9.2233731e18f, 1e-40f, 3e38f, -3e38f, 16777217.0f};
  for (int64_t i = 0; int64_t(v.size()) < count; ++i)
    v.push_back(std::sin(float(i) * 0.61f) * std::ldexp(1.0f, int(i % 70)));
  v.resize(size_t(count));
  return v;
}

template <typename I>
void expect_converted(const Tensor& x, DType to, const std::string& what) {
  const std::vector<double> xs = x.to(DType::F64).contiguous().to_vector<double>();
  const Tensor y = x.to(to);
  ASSERT_EQ(y.dtype(), to);
  const Tensor yc = y.contiguous();
  const I* got = static_cast<const I*>(yc.raw_data());
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(got[i], expected<I>(xs[i])) << what << ": x = " << xs[i] << " at " << i;
}

TEST(ConversionToInt, DenseFloat32AndBfloat16) {
  for (DType from : {DType::F32, DType::BF16, DType::F16}) {
    // 24 specials first: a 5 and a 23 are vector tails of them alone
    for (int64_t n : {int64_t(5), int64_t(23), int64_t(1013), int64_t(300007)}) {
      const std::vector<float> v = values(n);
      const Tensor x = tensor_from(v, {n}).to(from);
      const std::string what = std::string(dtype_name(from)) + " n=" + std::to_string(n);
      expect_converted<int64_t>(x, DType::I64, what + " to int64");
      expect_converted<int32_t>(x, DType::I32, what + " to int32");
    }
  }
}

TEST(ConversionToInt, ChannelsLastAndStrided) {
  const std::vector<float> v = values(2 * 6 * 7 * 9);
  for (DType from : {DType::F32, DType::BF16, DType::F16}) {
    const Tensor img = tensor_from(v, {2, 6, 7, 9}).to(from);
    const Tensor cl = img.contiguous(MemoryFormat::ChannelsLast);
    const Tensor y = cl.to(DType::I64);
    EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast));  // layout kept
    expect_converted<int64_t>(cl, DType::I64, "channels-last");
    expect_converted<int32_t>(cl, DType::I32, "channels-last");
    expect_converted<int64_t>(img.transpose(1, 3), DType::I64, "transposed");
    expect_converted<int32_t>(img.transpose(1, 3), DType::I32, "transposed");
  }
}

}  // namespace
}  // namespace kiln::test
