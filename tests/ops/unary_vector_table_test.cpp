// The unary ops that float32 and bfloat16 take through the vector table from the AVX2 level
// up (CTest reruns "*Unary*" at every level; the baseline level runs the scalar kernels):
// abs / neg (sign bits), sqrt / rsqrt / reciprocal, floor / ceil / trunc / round / sign (all
// bit-identical to the scalar formulas), SLEEF's transcendentals (within 2 ulps of float64),
// leaky_relu / softplus, and bfloat16 blocks through the float32 functors. Special values,
// vector tails and lengths split over the threads throughout.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "kiln/nn/functional.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

TEST(UnarySignBits, AbsAndNegAreExactWithSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0, -0.0, inf, -inf, 1e-40, -1e-40, 3.5, -2.25, 1e30, -1e30};
  for (int i = 0; i < 1000; ++i) v.push_back(std::sin(i * 0.7) * 100.0);
  v.push_back(NAN);
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t n : {int64_t(v.size()), int64_t(17), int64_t(5)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      std::vector<double> part(v.end() - n, v.end());
      if (n == int64_t(v.size())) part = v;
      Tensor x = tensor_from(part, {n}).to(dt);
      const std::vector<double> xv = x.to_vector<double>();
      const std::vector<double> a = abs(x).to_vector<double>(), m = neg(x).to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(xv[size_t(i)])) {
          EXPECT_TRUE(std::isnan(a[size_t(i)]) && std::isnan(m[size_t(i)]));
          continue;
        }
        EXPECT_EQ(a[size_t(i)], std::fabs(xv[size_t(i)])) << xv[size_t(i)];
        EXPECT_FALSE(std::signbit(a[size_t(i)])) << xv[size_t(i)];
        EXPECT_EQ(m[size_t(i)], -xv[size_t(i)]) << xv[size_t(i)];
        EXPECT_NE(std::signbit(m[size_t(i)]), std::signbit(xv[size_t(i)])) << xv[size_t(i)];
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// bfloat16 unary ops without a vector function run their float32 functor over blocks widened
// with the vector converters: bit for bit the float32 op on the widened input, rounded once,
// in contiguous and strided layouts (the baseline level takes the element loop).
// 16-bit floats take a bit operation on the sign over the flat array: every bit pattern of
// bfloat16 and float16 (65536 elements: split over the threads), out of place and in place,
// must come back with only bit 15 cleared (abs) or flipped (neg), NaN payloads included; a
// strided view takes the element loop and must agree on everything but NaN payloads.
TEST(UnarySignBits, EveryHalfFloatBitPatternOnlyChangesTheSign) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(i);
  auto bits_of = [](const Tensor& t) {
    std::vector<uint16_t> b(size_t(t.numel()));
    std::memcpy(b.data(), t.contiguous().raw_data(), b.size() * 2);
    return b;
  };
  const Device cpu(DeviceType::CPU, 0);
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = from_blob_copy(bits.data(), {65536}, dt, cpu);
    for (bool is_abs : {true, false}) {
      std::vector<uint16_t> want(bits.size());
      for (size_t i = 0; i < bits.size(); ++i)
        want[i] = is_abs ? uint16_t(bits[i] & 0x7fff) : uint16_t(bits[i] ^ 0x8000);
      EXPECT_EQ(bits_of(is_abs ? abs(x) : neg(x)), want) << (is_abs ? "abs" : "neg");
      Tensor y = x.clone();
      if (is_abs) abs_(y);
      else neg_(y);
      EXPECT_EQ(bits_of(y), want) << (is_abs ? "abs_" : "neg_");
      const Tensor strided = x.reshape({32768, 2}).select(1, 1);  // odd patterns, stride 2
      const std::vector<double> got =
          (is_abs ? abs(strided) : neg(strided)).to(DType::F64).to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i) {
        const uint16_t w = want[2 * i + 1];
        const double wv = from_blob_copy(&w, {}, dt, cpu).to(DType::F64).item<double>();
        if (std::isnan(wv)) {
          ASSERT_TRUE(std::isnan(got[i])) << i;
          continue;
        }
        ASSERT_EQ(got[i], wv) << i;
        ASSERT_EQ(std::signbit(got[i]), std::signbit(wv)) << i;
      }
    }
  }
}

TEST(UnaryBfloat16Blocks, EqualTheFloat32OpRoundedOnce) {
  std::vector<double> v;
  for (int i = 0; i < 3000; ++i) v.push_back(std::sin(i * 0.37) * 40.0 + (i % 7 == 0 ? 0.5 : 0));
  Tensor x = tensor_from(v, {60, 50}).to(DType::BF16);
  using Op = Tensor (*)(const Tensor&);
  const std::pair<const char*, Op> ops[] = {
      {"sqrt", [](const Tensor& t) { return sqrt(abs(t)); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(abs(t)); }},
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"floor", [](const Tensor& t) { return floor(t); }},
      {"round", [](const Tensor& t) { return round(t); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }},
      {"clamp", [](const Tensor& t) { return clamp(t, Scalar(-3.5), Scalar(7.25)); }}};
  for (const Tensor& in : {x, x.t()}) {
    for (const auto& [name, op] : ops) {
      SCOPED_TRACE(std::string(name) + (in.is_contiguous() ? " contiguous" : " transposed"));
      std::vector<double> got = op(in).to_vector<double>();
      std::vector<double> want = op(in.to(DType::F32)).to(DType::BF16).to_vector<double>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
    }
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// bfloat16 nearest-even rounding of a float, NaN kept NaN (independent of kiln's converters).
float round_to_bf16(float f) {
  if (std::isnan(f)) return f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

bool same_bits_or_both_nan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0;
}

// An op and the scalar float formula it must equal bit for bit.
struct ScalarFormula {
  const char* name;
  Tensor (*op)(const Tensor&);
  float (*ref)(float);
};

// Each op on prefixes of `base` (all of it, 1011, `short_n` and 5 elements: threaded lengths,
// vector tails), in float32 and in bfloat16 (inputs and the formula's result rounded to
// bfloat16), against the formula.
void expect_scalar_formulas(const std::vector<ScalarFormula>& cases,
                            const std::vector<float>& base, int64_t short_n) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t n : {int64_t(base.size()), int64_t(1011), short_n, int64_t(5)}) {
      std::vector<float> v(base.begin(), base.begin() + n);
      if (dt == DType::BF16)
        for (float& f : v) f = round_to_bf16(f);
      Tensor x = tensor_from(v, {n}).to(dt);
      for (const ScalarFormula& c : cases) {
        SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)) + " n=" +
                     std::to_string(n));
        const std::vector<float> got = c.op(x).to(DType::F32).to_vector<float>();
        ASSERT_EQ(got.size(), v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          float want = c.ref(v[i]);
          if (dt == DType::BF16) want = round_to_bf16(want);
          ASSERT_TRUE(same_bits_or_both_nan(got[i], want))
              << "x = " << v[i] << ": got " << got[i] << ", want " << want;
        }
      }
    }
  }
}

// sqrt, rsqrt and reciprocal of float32 and bfloat16 take the vector table from the AVX2
// level up: bit for bit the scalar float formulas (IEEE square root and division round
// correctly), with special values, denormals, negatives, vector tails and arrays long enough
// to be split over the threads.
TEST(UnaryRoots, SqrtRsqrtReciprocalEqualTheScalarFormulas) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> base = {0.0f, -0.0f, inf, -inf, 1e-40f, -1e-40f, 3.5f, -2.25f, 1e30f,
                             1e-30f, 2.0f, 0.25f, NAN};
  for (int i = 0; i < 70000; ++i) base.push_back(std::ldexp(1.0f + std::sin(i * 0.7f), i % 41 - 20));
  const std::vector<ScalarFormula> cases = {
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, [](float x) { return std::sqrt(x); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); },
       [](float x) { return 1.0f / std::sqrt(x); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, [](float x) { return 1.0f / x; }}};
  expect_scalar_formulas(cases, base, 17);
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

std::vector<float> mixed_values(int64_t count) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, NAN, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 1e-40f,
                          -1e-40f, 8388607.5f, -8388609.0f, 1e30f, -1e30f};
  for (int64_t i = 0; int64_t(v.size()) < count; ++i)
    v.push_back(std::sin(float(i) * 0.37f) * std::ldexp(1.0f, int(i % 30) - 10));
  return v;
}

// floor, ceil, trunc, round (half to even) and sign of float32 / bfloat16 through the vector
// table: exact operations, so bit for bit the scalar functions (sign: +0 for zeros and NaN),
// over vector tails and threaded lengths.
TEST(UnaryRounding, FloorCeilTruncRoundSignEqualTheScalarFunctions) {
  const std::vector<ScalarFormula> cases = {
      {"floor", [](const Tensor& t) { return floor(t); }, [](float x) { return std::floor(x); }},
      {"ceil", [](const Tensor& t) { return ceil(t); }, [](float x) { return std::ceil(x); }},
      {"trunc", [](const Tensor& t) { return trunc(t); }, [](float x) { return std::trunc(x); }},
      {"round", [](const Tensor& t) { return round(t); },
       [](float x) { return std::nearbyint(x); }},
      {"sign", [](const Tensor& t) { return sign(t); },
       [](float x) { return std::isnan(x) ? 0.0f : float((0.0f < x) - (x < 0.0f)); }}};
  expect_scalar_formulas(cases, mixed_values(70000), 19);
}

// sin, cos, tan, exp2, expm1, log2, log1p of float32 through SLEEF's 1-ULP vector functions:
// within 2 float32 ulps of the float64 value (one for SLEEF, one for the float64 result's own
// rounding), special values as the C library's, large arguments of sin / cos included.
TEST(UnarySleef, TranscendentalsWithinTwoUlps) {
  using Op = Tensor (*)(const Tensor&);
  struct Case {
    const char* name;
    Op op;
    double (*ref)(double);
    double lo, hi;
  };
  const Case cases[] = {
      {"sin", [](const Tensor& t) { return sin(t); }, [](double x) { return std::sin(x); }, -1e4, 1e4},
      {"cos", [](const Tensor& t) { return cos(t); }, [](double x) { return std::cos(x); }, -1e4, 1e4},
      {"tan", [](const Tensor& t) { return tan(t); }, [](double x) { return std::tan(x); }, -1.5, 1.5},
      {"exp2", [](const Tensor& t) { return exp2(t); }, [](double x) { return std::exp2(x); }, -130, 127},
      {"expm1", [](const Tensor& t) { return expm1(t); }, [](double x) { return std::expm1(x); }, -20, 80},
      {"log2", [](const Tensor& t) { return log2(t); }, [](double x) { return std::log2(x); }, 1e-30, 1e30},
      {"log1p", [](const Tensor& t) { return log1p(t); }, [](double x) { return std::log1p(x); }, -0.999, 1e6}};
  for (const Case& c : cases) {
    std::vector<float> v;
    for (int i = 0; i < 5000; ++i) {
      const double u = (i + 0.5) / 5000.0;
      // log-spaced where the range spans many orders of magnitude, linear otherwise
      const double x = c.lo > 0 ? c.lo * std::pow(c.hi / c.lo, u) : c.lo + (c.hi - c.lo) * u;
      v.push_back(float(x));
    }
    for (float s : {0.0f, -0.0f, 1e-20f, -1e-20f}) v.push_back(s);
    Tensor x = tensor_from(v, {int64_t(v.size())});
    const std::vector<float> got = c.op(x).to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      const double want = c.ref(double(v[i]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << c.name << "(" << v[i] << ")";
        continue;
      }
      if (!std::isfinite(want)) {
        EXPECT_EQ(double(got[i]), float(want)) << c.name << "(" << v[i] << ")";
        continue;
      }
      const float wf = float(want);
      const double ulp = std::max(double(std::nextafter(std::fabs(wf), INFINITY)) - std::fabs(wf),
                                  double(std::numeric_limits<float>::denorm_min()));
      ASSERT_LE(std::fabs(double(got[i]) - want), 2 * ulp) << c.name << "(" << v[i] << ")";
    }
  }
  // Special values: NaN propagates; the C library's limits.
  Tensor s = tensor_from(std::vector<float>{NAN, INFINITY, -INFINITY, -1.0f}, {4});
  EXPECT_TRUE(std::isnan(sin(s).to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(sin(s).to_vector<float>()[1]));
  EXPECT_EQ(exp2(s).to_vector<float>()[2], 0.0f);
  EXPECT_EQ(log1p(s).to_vector<float>()[3], -INFINITY);
  EXPECT_EQ(expm1(s).to_vector<float>()[2], -1.0f);
  EXPECT_EQ(log2(s).to_vector<float>()[1], INFINITY);
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// leaky_relu and softplus of float32 / bfloat16 through the vector table's parameterised
// functions, over threaded lengths and a channels-last layout: leaky_relu bit for bit
// x > 0 ? x : x * slope in float (NaN stays NaN, -0 stays -0), softplus within 2 float32 ulps
// of the float64 formula (relative 1e-6; bfloat16: one rounding of that).
TEST(UnaryParams, LeakyReluAndSoftplusOverVectorsAndTails) {
  std::vector<float> base = mixed_values(90000);
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t n : {int64_t(base.size()), int64_t(17), int64_t(3)}) {
      std::vector<float> v(base.begin(), base.begin() + n);
      if (dt == DType::BF16)
        for (float& f : v) f = round_to_bf16(f);
      Tensor x = tensor_from(v, {n}).to(dt);
      for (float slope : {0.01f, 0.2f}) {
        const std::vector<float> got =
            nn::functional::leaky_relu(x, slope).to(DType::F32).to_vector<float>();
        for (size_t i = 0; i < v.size(); ++i) {
          float want = v[i] > 0 ? v[i] : v[i] * slope;
          if (dt == DType::BF16) want = round_to_bf16(want);
          ASSERT_TRUE(same_bits_or_both_nan(got[i], want))
              << dtype_name(dt) << " slope " << slope << " x = " << v[i] << ": got " << got[i];
        }
      }
      for (auto [beta, threshold] : {std::pair{1.0, 20.0}, std::pair{2.0, 5.0}}) {
        const std::vector<float> got = softplus(x, beta, threshold).to(DType::F32).to_vector<float>();
        for (size_t i = 0; i < v.size(); ++i) {
          const double xv = v[i];
          if (std::isnan(xv)) {
            ASSERT_TRUE(std::isnan(got[i]));
            continue;
          }
          const double want = xv * beta > threshold ? xv : std::log1p(std::exp(xv * beta)) / beta;
          if (std::isinf(want)) {
            ASSERT_EQ(double(got[i]), want) << dtype_name(dt) << " softplus(" << xv << ")";
            continue;
          }
          const double tol = (dt == DType::BF16 ? 8e-3 : 1e-6) * std::fabs(want) + 1e-38;
          ASSERT_NEAR(got[i], want, tol) << dtype_name(dt) << " softplus(" << xv << ")";
        }
      }
    }
  // A channels-last input keeps its layout, with the same values as the contiguous one.
  Tensor img = tensor_from(std::vector<float>(base.begin(), base.begin() + 2 * 16 * 5 * 7),
                           {2, 16, 5, 7});
  Tensor cl = img.contiguous(MemoryFormat::ChannelsLast);
  Tensor y = nn::functional::leaky_relu(cl, 0.1);
  EXPECT_TRUE(!y.is_contiguous() && y.is_contiguous(MemoryFormat::ChannelsLast));
  const std::vector<float> a = y.contiguous().to_vector<float>(),
                           b = nn::functional::leaky_relu(img, 0.1).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits_or_both_nan(a[i], b[i])) << i;
  // Integer inputs keep the composite (as before): the slope applies in the input's type
  // promotion.
  EXPECT_NO_THROW(nn::functional::leaky_relu(arange(5, TensorOptions(DType::I64)), 0.1));
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// clamp of float32 through the vector table (max then min, decision 0038): bit for bit the
// scalar kernel's two selects for every bound form: both, one absent, min > max (max wins),
// NaN bounds (ignored, as `x < NaN` is false) and a -0 / +0 pair.
TEST(UnaryClamp, EveryBoundFormEqualsTheScalarSelects) {
  const float inf = std::numeric_limits<float>::infinity();
  const float lo_hi[][2] = {{-3.5f, 7.25f}, {-inf, 2.0f}, {-1.0f, inf}, {4.0f, -4.0f},
                            {NAN, 1.0f},    {0.0f, NAN},  {0.0f, 0.0f}, {-0.0f, 0.0f}};
  std::vector<float> base = mixed_values(70000);
  for (const auto& b : lo_hi) {
    const float lo = b[0], hi = b[1];
    const std::optional<Scalar> slo = std::isinf(lo) ? std::nullopt : std::optional<Scalar>(lo);
    const std::optional<Scalar> shi = std::isinf(hi) ? std::nullopt : std::optional<Scalar>(hi);
    SCOPED_TRACE("clamp(" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    for (int64_t n : {int64_t(base.size()), int64_t(1011), int64_t(5)}) {
      std::vector<float> v(base.begin(), base.begin() + n);
      const std::vector<float> got = clamp(tensor_from(v, {n}), slo, shi).to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        float want = v[i] < lo ? lo : v[i];
        want = want > hi ? hi : want;
        ASSERT_TRUE(same_bits_or_both_nan(got[i], want))
            << "n=" << n << " x = " << v[i] << ": got " << got[i] << ", want " << want;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// x ** y for one exponent of a vector form (2, 3, 0.5, -1) runs the vector table on dense
// float32 tensors: bit for bit the scalar formulas (x * x, (x * x) * x, sqrt, 1 / x), special
// values included, at vector tails and threaded lengths; then in place and channels-last.
TEST(UnaryPowConstant, VectorExponentsEqualTheScalarFormulas) {
  const std::vector<ScalarFormula> cases = {
      {"pow 2", [](const Tensor& t) { return pow(t, Scalar(2)); }, [](float x) { return x * x; }},
      {"pow 3", [](const Tensor& t) { return pow(t, Scalar(3)); },
       [](float x) { return (x * x) * x; }},
      {"pow 0.5", [](const Tensor& t) { return pow(t, Scalar(0.5)); },
       [](float x) { return std::sqrt(x); }},
      {"pow -1", [](const Tensor& t) { return pow(t, Scalar(-1)); },
       [](float x) { return 1.0f / x; }}};
  expect_scalar_formulas(cases, mixed_values(70000), 21);
  const std::vector<float> v = mixed_values(2 * 20 * 9 * 11);
  Tensor cl = tensor_from(v, {2, 20, 9, 11}).contiguous(MemoryFormat::ChannelsLast);
  Tensor cubed = pow(cl, Scalar(3));
  EXPECT_TRUE(cubed.is_contiguous(MemoryFormat::ChannelsLast));
  pow_(cl, Scalar(3));  // in place
  for (const Tensor& t : {cubed, cl}) {
    const std::vector<float> got = t.contiguous().to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_TRUE(same_bits_or_both_nan(got[i], (v[i] * v[i]) * v[i])) << v[i];
  }
}

}  // namespace
}  // namespace kiln::test
