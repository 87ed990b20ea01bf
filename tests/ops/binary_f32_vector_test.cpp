// float32 add / sub / mul / div / maximum / minimum through the ISA's vector loops
// (vec_math.h add_f32 and friends): array op array, array op one value and one value op
// array, at lengths around the vector width (the aligning head, whole vectors and the tail),
// misaligned views, rows broadcast across runs (flat over whole periods for rows of at most
// 64), in place, a strided operand (the generic loop) and an output large enough for
// streaming stores. +, -, * and / of two floats computed in float64 and rounded to float32
// are the correctly rounded float32 results (maximum / minimum are exact selects), so every
// element must match exactly, special values (infinities, NaN, signed zeros, subnormals)
// included. CTest reruns
// this file at every ISA level (the Binary filter in tests/CMakeLists.txt).
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/tensor/streaming_store.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

struct Op {
  const char* name;
  Tensor (*tensor_op)(const Tensor&, const Tensor&);
  double (*ref)(double, double);
};

Tensor add2(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub2(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor mul2(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor div2(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor max2(const Tensor& a, const Tensor& b) { return maximum(a, b); }
Tensor min2(const Tensor& a, const Tensor& b) { return minimum(a, b); }

// PyTorch's maximum / minimum: NaN if either is NaN (the first one's if both), else the
// larger (smaller) value, the second one on ties (so max(+0, -0) is -0, as the scalar kernel).
double max_ref(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : a > b ? a : b; }
double min_ref(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : a < b ? a : b; }

const Op kOps[] = {
    {"add", add2, [](double a, double b) { return a + b; }},
    {"sub", sub2, [](double a, double b) { return a - b; }},
    {"mul", mul2, [](double a, double b) { return a * b; }},
    {"div", div2, [](double a, double b) { return a / b; }},
    {"maximum", max2, max_ref},
    {"minimum", min2, min_ref},
};

// Random floats with special values sprinkled in.
std::vector<double> float_values(size_t n, uint32_t seed) {
  std::vector<double> v = random_values(n, -4, 4, seed);
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             double(std::numeric_limits<float>::denorm_min()) * 3,
                             double(std::numeric_limits<float>::max()),
                             1e-30};
  for (size_t i = seed % 5; i < n; i += 13) v[i] = specials[(i / 13 + seed) % 8];
  for (double& x : v) x = double(float(x));
  return v;
}

// The float32 result of a op b, correctly rounded.
float expected(const Op& op, double a, double b) { return float(op.ref(a, b)); }

void expect_bits(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::F32) << what;
  const std::vector<float> g = got.to_vector<float>();
  ASSERT_EQ(g.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < g.size() && reported < 5; ++i) {
    const bool same = (std::isnan(g[i]) && std::isnan(want[i])) ||
                      std::memcmp(&g[i], &want[i], sizeof(float)) == 0;
    if (!same) {
      ADD_FAILURE() << what << " at " << i << ": got " << g[i] << ", expected " << want[i];
      ++reported;
    }
  }
}

const int64_t kLengths[] = {1, 7, 15, 16, 17, 31, 33, 64, 257, 70001};

TEST(BinaryF32Vector, ArraysAndOneValueAtEveryLength) {
  for (int64_t n : kLengths) {
    const std::vector<double> av = float_values(size_t(n), 1), bv = float_values(size_t(n), 2);
    const Tensor a = make(av, {n}, DType::F32, kCpu), b = make(bv, {n}, DType::F32, kCpu);
    const double s = -1.75;
    const Tensor one = make({s}, {}, DType::F32, kCpu);
    for (const Op& op : kOps) {
      const size_t count = static_cast<size_t>(n);
      std::vector<float> both(count), right(count), left(count);
      for (size_t i = 0; i < size_t(n); ++i) {
        both[i] = expected(op, av[i], bv[i]);
        right[i] = expected(op, av[i], s);
        left[i] = expected(op, s, bv[i]);
      }
      const std::string what = std::string(op.name) + " n=" + std::to_string(n);
      expect_bits(op.tensor_op(a, b), both, what + " array op array");
      expect_bits(op.tensor_op(a, one), right, what + " array op value");
      expect_bits(op.tensor_op(one, b), left, what + " value op array");
    }
  }
}

TEST(BinaryF32Vector, MisalignedViewsAndRowsBroadcastAcrossRuns) {
  const int64_t rows = 37, cols = 45;  // odd sizes: no run starts on a vector boundary
  const std::vector<double> av = float_values(size_t(rows * cols + 3), 3);
  const std::vector<double> rv = float_values(size_t(cols + 1), 4);
  const Tensor big = make(av, {rows * cols + 3}, DType::F32, kCpu);
  // Starts one and two floats into the storage: unaligned inputs.
  const Tensor a = big.narrow(0, 1, rows * cols).view({rows, cols});
  const Tensor row = make(rv, {cols + 1}, DType::F32, kCpu).narrow(0, 1, cols);
  for (const Op& op : kOps) {
    const size_t count = static_cast<size_t>(rows * cols);
    std::vector<float> want(count), want_t(count);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        want[size_t(i * cols + j)] = expected(op, av[size_t(1 + i * cols + j)], rv[size_t(1 + j)]);
        want_t[size_t(i * cols + j)] =
            expected(op, rv[size_t(1 + j)], av[size_t(1 + i * cols + j)]);
      }
    expect_bits(op.tensor_op(a, row), want, std::string(op.name) + " view op row");
    expect_bits(op.tensor_op(row, a), want_t, std::string(op.name) + " row op view");
    // An unaligned output: written through a view of a larger buffer.
    Tensor out_big = zeros({rows * cols + 2}, TensorOptions(DType::F32, kCpu));
    Tensor out = out_big.narrow(0, 2, rows * cols).view({rows, cols});
    if (std::string(op.name) == "add") {
      add_out(a, row, out);
      expect_bits(out, want, "add_out into an unaligned view");
      EXPECT_EQ(out_big.to_vector<float>()[0], 0.0f);
    }
  }
}

TEST(BinaryF32Vector, InPlaceAndStridedOperands) {
  const int64_t n = 70001;
  const std::vector<double> av = float_values(size_t(n), 5), bv = float_values(size_t(2 * n), 6);
  const Tensor b_wide = make(bv, {n, 2}, DType::F32, kCpu);
  const Tensor b_strided = b_wide.select(1, 1);  // stride 2: the generic loop
  for (const Op& op : kOps) {
    std::vector<float> want(static_cast<size_t>(n));
    for (size_t i = 0; i < size_t(n); ++i) want[i] = expected(op, av[i], bv[2 * i + 1]);
    expect_bits(op.tensor_op(make(av, {n}, DType::F32, kCpu), b_strided), want,
                std::string(op.name) + " array op strided");
  }
  // In place: the output is the first input.
  Tensor a = make(av, {n}, DType::F32, kCpu);
  const Tensor b = b_strided.contiguous();
  add_(a, b);
  std::vector<float> want(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i) want[i] = float(av[i] + bv[2 * i + 1]);
  expect_bits(a, want, "add_");
  mul_(a, 0.5);
  for (float& w : want) w = float(double(w) * 0.5);
  expect_bits(a, want, "mul_ by a value");
  // x - alpha * y with alpha != 1 keeps the generic loop: still exact for alpha 2 (a power
  // of two scales exactly).
  Tensor c = make(av, {n}, DType::F32, kCpu);
  std::vector<float> want_alpha(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i)
    want_alpha[i] = float(av[i] - 2.0 * double(float(bv[2 * i + 1])));
  expect_bits(sub(c, b, 2), want_alpha, "sub alpha 2");
}

TEST(BinaryF32Vector, OutputLargeEnoughForStreamingStores) {
  const int64_t n = detail::kStreamingStoreBytes / int64_t(sizeof(float)) + 37;
  const std::vector<double> av = random_values(size_t(n), -8, 8, 7);
  const std::vector<double> bv = random_values(size_t(n), 0.5, 3, 8);
  const Tensor a = make(av, {n}, DType::F32, kCpu), b = make(bv, {n}, DType::F32, kCpu);
  for (const Op& op : kOps) {
    std::vector<float> want(static_cast<size_t>(n));
    for (size_t i = 0; i < size_t(n); ++i)
      want[i] = expected(op, double(float(av[i])), double(float(bv[i])));
    expect_bits(op.tensor_op(a, b), want, std::string(op.name) + " streamed");
  }
}

// addcmul(shift, x, scale) with value 1 through muladd_f32 (eval batch norm): per-channel
// shift and scale one value per run (planar), repeated rows (channels-last: the periodic
// path), either factor order, in place into a dense shift, and a strided x (generic runs):
// shift + x * scale with the product rounded first, bit for bit, specials included.
TEST(BinaryF32Vector, AddcmulPerChannelRunsAndPeriods) {
  const int64_t n = 3, c = 24, h = 7, w = 5;
  const Shape shape{n, c, h, w};
  const size_t count = size_t(n * c * h * w);
  const std::vector<double> xv = float_values(count, 11);
  const std::vector<double> sv = float_values(size_t(c), 12), mv = float_values(size_t(c), 13);
  const Tensor x = make(xv, shape, DType::F32, kCpu);
  const Tensor shift = make(sv, {c, 1, 1}, DType::F32, kCpu);
  const Tensor scale = make(mv, {c, 1, 1}, DType::F32, kCpu);
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t ch = (i / size_t(h * w)) % size_t(c);
    const float prod = float(xv[i]) * float(mv[ch]);  // rounded before the sum
    want[i] = float(sv[ch]) + prod;
  }
  expect_bits(addcmul(shift, x, scale), want, "planar");
  expect_bits(addcmul(shift, scale, x), want, "planar, scale first");
  const Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor ycl = addcmul(shift, xcl, scale);
  EXPECT_TRUE(ycl.is_contiguous(MemoryFormat::ChannelsLast));
  expect_bits(ycl.contiguous(), want, "channels-last");
  expect_bits(addcmul(shift, scale, xcl).contiguous(), want, "channels-last, scale first");
  // In place into a dense shift (the shift steps with the output).
  Tensor dense_shift = shift.expand(shape).contiguous();
  addcmul_(dense_shift, x, scale);
  expect_bits(dense_shift, want, "in place");
  // x read with a stride (every other element of a wider tensor): generic runs.
  std::vector<double> wide(count * 2, 0.0);
  for (size_t i = 0; i < count; ++i) wide[2 * i] = xv[i];
  const Tensor xs = make(wide, {n, c, h, w * 2}, DType::F32, kCpu).slice(3, 0, w * 2, 2);
  expect_bits(addcmul(shift, xs, scale), want, "strided x");
}

// maximum / minimum of every pair of special values (ties of signed zeros, NaN on either
// side, infinities), repeated past a vector length, in float32 and bfloat16 (max_bf16 /
// min_bf16 convert in registers), against the reference bit for bit.
TEST(BinaryF32Vector, MaximumMinimumOfEverySpecialPair) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const double specials[] = {0.0, -0.0, inf, -inf, nan, 1.5, -2.5, 1e-30};
  std::vector<double> av, bv;
  for (int rep = 0; rep < 5; ++rep)
    for (double a : specials)
      for (double b : specials) av.push_back(a), bv.push_back(b);
  const int64_t n = int64_t(av.size());
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor a = make(av, {n}, dt, kCpu), b = make(bv, {n}, dt, kCpu);
    // The values as stored (1e-30 rounds in bfloat16; the rest are exact).
    const std::vector<double> as = a.to_vector<double>(), bs = b.to_vector<double>();
    for (const Op& op : {kOps[4], kOps[5]}) {
      const std::vector<float> got = op.tensor_op(a, b).to(DType::F32).to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i) {
        const float want = float(op.ref(as[i], bs[i]));
        const bool same = (std::isnan(got[i]) && std::isnan(want)) ||
                          std::memcmp(&got[i], &want, sizeof(float)) == 0;
        ASSERT_TRUE(same) << op.name << " " << dtype_name(dt) << " (" << av[i] << ", " << bv[i]
                          << "): got " << got[i] << ", expected " << want;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
