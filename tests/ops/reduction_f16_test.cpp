// float16 reductions (decision 0067): the fast path reads float16 itself (F16C loads in the
// AVX2 / AVX-512 reduction units), elsewhere the dispatcher widens to float32 first. Either
// way a result is, by definition, the float32 reduction of the widened input rounded once, so
// every layout the fast path cuts differently (long runs split into chunks, runs read side by
// side, many short strided runs, rows of a kept inner dim, the periodic columns of a narrow
// matrix, var / std / norm's two passes) is compared bit for bit with that, and with a
// float64 reference within float16's rounding. CTest reruns it at every ISA level.
#include <cmath>
#include <string>

#include "kiln/ops/reduction.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// Same bits, every NaN counted as a NaN.
void expect_same_f16(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::F16) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.contiguous().to_vector<double>();
  const std::vector<double> w = want.contiguous().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
    } else {
      EXPECT_EQ(g[i], w[i]) << what << " at " << i;
    }
  }
}

// x is float16: each reduction of it against the float32 reduction of x widened, rounded.
void check_against_float32(const Tensor& x, const Dims& dims, const std::string& what,
                           bool stats = true) {
  const Tensor wide = x.to(DType::F32);
  auto narrow = [](const Tensor& t) { return t.to(DType::F16); };
  expect_same_f16(sum(x, dims), narrow(sum(wide, dims)), what + " sum");
  expect_same_f16(mean(x, dims, true), narrow(mean(wide, dims, true)), what + " mean");
  expect_same_f16(amax(x, dims), narrow(amax(wide, dims)), what + " amax");
  expect_same_f16(amin(x, dims), narrow(amin(wide, dims)), what + " amin");
  if (!stats) return;
  expect_same_f16(var(x, dims), narrow(var(wide, dims)), what + " var");
  expect_same_f16(kiln::std(x, dims, 0.0), narrow(kiln::std(wide, dims, 0.0)), what + " std");
  expect_same_f16(norm(x, 2, dims), narrow(norm(wide, 2, dims)), what + " norm");
}

Tensor f16_values(const Shape& shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::vector<double> v = random_values(size_t(numel_of(shape)), lo, hi, seed);
  return make(v, shape, DType::F16, kCpu);
}

TEST(ReductionFloat16, RunsOfEveryLengthAgainstFloat32) {
  const std::vector<Shape> shapes{{1, 1 << 19}, {1, 300007}, {5, 70001}, {6, 9001},
                                  {3000, 37},   {4096, 8},   {256, 784}, {3, 17},
                                  {2, 1}};
  for (const Shape& s : shapes) {
    const Tensor x = f16_values(s, uint32_t(s[1]));
    check_against_float32(x, {1}, shape_str(s));
    check_against_float32(x, {}, shape_str(s) + " all", /*stats=*/false);
  }
}

TEST(ReductionFloat16, RowsAndPeriodicColumnsAgainstFloat32) {
  // Reduced leading dims, the last one kept: rows accumulated by column blocks (with tails),
  // split into pieces (tall narrow matrices), or summed flat by columns (16 % C == 0).
  const std::vector<Shape> shapes{{2048, 520}, {8192, 64}, {4096, 8}, {4096, 16},
                                  {33, 1029},  {7, 3, 40}};
  for (const Shape& s : shapes) {
    const Tensor x = f16_values(s, uint32_t(s[0] + s.back()));
    check_against_float32(x, {0}, shape_str(s) + " dim 0", /*stats=*/false);
  }
  const Tensor img = f16_values({8, 32, 28, 28}, 5);
  check_against_float32(img, {0, 2}, "NCHW dims (0, 2)", /*stats=*/false);
  check_against_float32(img, {2, 3}, "NCHW dims (2, 3)");
  // channels-last: its channels are many short runs C apart (strided runs), or the kept dim
  const Tensor cl = img.contiguous(MemoryFormat::ChannelsLast);
  check_against_float32(cl, {1}, "channels-last dim 1", /*stats=*/false);
  check_against_float32(cl, {2, 3}, "channels-last dims (2, 3)", /*stats=*/false);
  // a transposed input (generic loop, or widened first)
  check_against_float32(f16_values({300, 200}, 6).t(), {1}, "transposed");
}

TEST(ReductionFloat16, AgainstFloat64AndSpecialValues) {
  std::vector<double> v = random_values(size_t(40 * 5000), -1.0, 1.0, 7);
  for (double& x : v) x = round_to(x, DType::F16);
  const Tensor x = make(v, {40, 5000}, DType::F16, kCpu);
  const std::vector<double> s = sum(x, {1}).to_vector<double>();
  const std::vector<double> m = amax(x, {1}).to_vector<double>();
  for (int64_t r = 0; r < 40; ++r) {
    double ref = 0, best = -INFINITY;
    for (int64_t k = 0; k < 5000; ++k) {
      ref += v[size_t(r * 5000 + k)];
      best = std::max(best, v[size_t(r * 5000 + k)]);
    }
    // float32 lanes carried in double, one rounding to float16 (2^-11 relative)
    EXPECT_NEAR(s[size_t(r)], ref, 1e-3 * std::fabs(ref) + 1e-2) << "row " << r;
    EXPECT_EQ(m[size_t(r)], best) << "row " << r;
  }
  // NaN at every position of a run of 70 propagates through max / min / sum; an infinity
  // wins max and makes the sum infinite; a sum past 65504 overflows to infinity.
  for (int64_t at = 0; at < 70; ++at) {
    std::vector<double> w = random_values(70, -1.0, 1.0, uint32_t(at));
    w[size_t(at)] = NAN;
    const Tensor t = make(w, {1, 70}, DType::F16, kCpu);
    EXPECT_TRUE(std::isnan(amax(t, {1}).to_vector<double>()[0])) << at;
    EXPECT_TRUE(std::isnan(amin(t, {1}).to_vector<double>()[0])) << at;
    EXPECT_TRUE(std::isnan(sum(t, {1}).to_vector<double>()[0])) << at;
    w[size_t(at)] = INFINITY;
    const Tensor u = make(w, {1, 70}, DType::F16, kCpu);
    EXPECT_EQ(amax(u, {1}).to_vector<double>()[0], INFINITY) << at;
    EXPECT_EQ(sum(u, {1}).to_vector<double>()[0], INFINITY) << at;
  }
  const Tensor big = make(std::vector<double>(100, 1000.0), {100}, DType::F16, kCpu);
  EXPECT_EQ(sum(big).to_vector<double>()[0], INFINITY);
  EXPECT_EQ(mean(big).to_vector<double>()[0], 1000.0);  // the sum is carried wider
}

}  // namespace
}  // namespace kiln::test
