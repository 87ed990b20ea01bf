// pointwise_program (one pass over a chain of float32 steps) against the same steps run as
// ordinary ops (run_pointwise_steps): bit for bit, for random programs over every step kind,
// operand kind and register reuse, on inputs holding NaN, infinities, signed zeros and
// subnormals, at sizes around the kernel's block lengths, with and without per-channel
// constants, contiguous and channels-last, on one and two threads; off the CPU (the testing
// device) the op-by-op path gives the same values. Malformed programs are refused with
// ValueError.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/ops/pointwise_program.h"
#include "kiln/runtime/threads.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

std::vector<float> special_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::nanf(""), inf, -inf, 0.0f, -0.0f, 1e-40f, -1e-40f, 3.0f, -3.0f,
                            6.0f};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 13 == 5 ? specials[(i / 13) % 10] : u(gen);
  return v;
}

Tensor float_tensor(const std::vector<float>& v, const Shape& shape) {
  return tensor_from(v, shape, TensorOptions(DType::F32, kCpu));
}

// Bit patterns equal, NaN matching any NaN.
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.cpu().to_vector<float>(), w = want.cpu().to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    uint32_t gb, wb;
    std::memcpy(&gb, &g[i], 4);
    std::memcpy(&wb, &w[i], 4);
    ASSERT_EQ(gb, wb) << what << " at " << i << ": " << g[i] << " vs " << w[i];
  }
}

// A random program of `steps` steps over up to `registers` registers; channel operands of
// length `channels` when channels > 0.
PointwiseProgram random_program(std::mt19937& gen, int steps, int64_t registers,
                                int64_t channels, bool last_dim = false) {
  PointwiseProgram p;
  p.registers = registers;
  p.last_dim = last_dim;
  std::uniform_real_distribution<float> c(-4.0f, 4.0f);
  std::vector<int64_t> written{0};
  for (int i = 0; i < steps; ++i) {
    PointwiseStep s;
    s.op = PointwiseOp(int64_t(gen() % 12));  // every operation, Add to Sqrt
    s.a = written[gen() % written.size()];
    s.dst = int64_t(gen() % uint32_t(registers));
    s.reversed = gen() % 2 == 0;
    const uint32_t kind = gen() % 3;
    if (s.op == PointwiseOp::Clamp) {
      s.b = int64_t(p.scalars.size());
      const float lo = c(gen);
      p.scalars.push_back(lo);
      p.scalars.push_back(lo + std::fabs(c(gen)));
    } else if (kind == 0) {
      s.kind = PointwiseOperand::Register;
      s.b = written[gen() % written.size()];
    } else if (kind == 1 || channels == 0) {
      s.kind = PointwiseOperand::Scalar;
      s.b = int64_t(p.scalars.size());
      p.scalars.push_back(gen() % 7 == 0 ? 0.0f : c(gen));
    } else {
      s.kind = PointwiseOperand::Channel;
      s.b = int64_t(p.channels.size());
      std::vector<float> v(static_cast<size_t>(channels));
      for (float& x : v) x = gen() % 9 == 0 ? -0.0f : c(gen);
      p.channels.push_back(v);
    }
    p.steps.push_back(s);
    if (std::find(written.begin(), written.end(), s.dst) == written.end()) written.push_back(s.dst);
  }
  return p;
}

TEST(PointwiseProgram, RandomProgramsEqualTheOpsBitForBit) {
  std::mt19937 gen(7);
  const std::vector<Shape> shapes{{1}, {7}, {511}, {512}, {2049}, {3, 5, 700}, {2, 3, 40, 41},
                                  {1, 16, 24, 96}, {4, 1, 3}, {70000}};
  int checked = 0;
  for (const Shape& shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const Tensor x = float_tensor(special_values(size_t(n), uint32_t(n)), shape);
    for (int trial = 0; trial < 12; ++trial) {
      // Vectors along dim 1 (odd trials), along the last dim (every fourth), or none.
      const bool last_dim = trial % 4 == 2;
      const int64_t channels = last_dim                                ? shape.back()
                               : shape.size() >= 2 && trial % 2 ? shape[1]
                                                                : 0;
      const PointwiseProgram p = random_program(gen, 1 + int(gen() % 9),
                                                1 + int64_t(gen() % 8), channels, last_dim);
      ASSERT_TRUE(pointwise_program_supported(x, p));
      const std::string what = shape_str(shape) + " trial " + std::to_string(trial);
      expect_same_bits(pointwise_program(x, p), run_pointwise_steps(x, p), what);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 120);
}

// The LCNet activation block as the ONNX fusion compiles it, on two threads and on one, on a
// strided (transposed) input, and against a float64 evaluation of the same roundings.
TEST(PointwiseProgram, HardSwishBlockOnThreadsAndStridedInput) {
  PointwiseProgram p;
  p.registers = 3;
  p.scalars = {0.9f, 0.5f, 3.0f, 0.0f, 6.0f, 6.0f};
  using O = PointwiseOp;
  auto step = [](O op, int64_t dst, int64_t a, PointwiseOperand k, int64_t b) {
    PointwiseStep s;
    s.op = op;
    s.dst = dst;
    s.a = a;
    s.kind = k;
    s.b = b;
    return s;
  };
  const auto S = PointwiseOperand::Scalar, R = PointwiseOperand::Register;
  p.steps = {step(O::Mul, 1, 0, S, 0), step(O::Add, 1, 1, S, 1), step(O::Add, 2, 1, S, 2),
             step(O::Clamp, 2, 2, S, 3), step(O::Mul, 2, 1, R, 2), step(O::Div, 0, 2, S, 5)};
  const std::vector<float> v = special_values(64 * 40 * 50, 3);
  const Tensor x = float_tensor(v, {64, 40, 50});
  std::vector<double> want(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float a = float(v[i] * 0.9f) + 0.5f;
    float c = a + 3.0f;
    c = c < 0.0f ? 0.0f : c;
    c = c > 6.0f ? 6.0f : c;
    want[i] = double(float(a * c) / 6.0f);
  }
  const int threads = get_num_threads();
  for (int t : {2, 1}) {
    set_num_threads(t);
    Tensor y = pointwise_program(x, p);
    expect_same_bits(y, float_tensor(std::vector<float>(want.begin(), want.end()), {64, 40, 50}),
                     std::to_string(t) + " threads");
  }
  set_num_threads(threads);
  const Tensor xt = x.transpose(0, 2);  // read through contiguous()
  expect_same_bits(pointwise_program(xt, p), run_pointwise_steps(xt, p), "transposed input");
}

// A channels-last input is read in place and gives a channels-last result, per-channel
// constants following the channels innermost: the same values as the op sequence (which
// keeps the layout too), channel counts below, at and above the block length.
TEST(PointwiseProgram, ChannelsLastKeepsItsLayout) {
  std::mt19937 gen(13);
  for (int64_t channels : {1, 3, 24, 700, 2500}) {
    const Shape shape{2, channels, 5, 7};
    const Tensor x =
        float_tensor(special_values(size_t(2 * channels * 35), uint32_t(channels)), shape)
            .contiguous(MemoryFormat::ChannelsLast);
    ASSERT_TRUE(channels == 1 || x.is_channels_last());
    for (int trial = 0; trial < 4; ++trial) {
      const PointwiseProgram p = random_program(gen, 5, 4, trial % 2 ? channels : 0);
      const Tensor y = pointwise_program(x, p);
      EXPECT_EQ(y.strides(), x.strides()) << channels << " channels";
      // Vectors along the last dim (7) read the input as contiguous rows instead.
      const PointwiseProgram rows = random_program(gen, 5, 4, 7, true);
      const Tensor yr = pointwise_program(x, rows);
      expect_same_bits(yr, run_pointwise_steps(x.contiguous(), rows),
                            std::to_string(channels) + " channels, rows, trial " +
                                std::to_string(trial));
      expect_same_bits(y, run_pointwise_steps(x.contiguous(), p),
                            std::to_string(channels) + " channels, trial " +
                                std::to_string(trial));
    }
  }
}

TEST(PointwiseProgram, TestingDeviceRunsTheSameSteps) {
  std::mt19937 gen(11);
  const Tensor x = float_tensor(special_values(2 * 3 * 50, 5), {2, 3, 50});
  const Tensor xd = x.to(Device(DeviceType::Testing, 0));
  for (int trial = 0; trial < 6; ++trial) {
    const PointwiseProgram p = random_program(gen, 6, 4, trial % 2 ? 3 : 0);
    EXPECT_FALSE(pointwise_program_supported(xd, p));
    Tensor y = run_pointwise_steps(xd, p);
    EXPECT_EQ(y.device(), Device(DeviceType::Testing, 0));
    expect_same_bits(y, pointwise_program(x, p), "trial " + std::to_string(trial));
  }
}

TEST(PointwiseProgram, MalformedProgramsAndInputsAreRefused) {
  const Tensor x = float_tensor({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  PointwiseProgram p;
  EXPECT_THROW(pointwise_program(x, p), ValueError);  // no step
  PointwiseStep s;
  s.op = PointwiseOp::Add;
  s.kind = PointwiseOperand::Scalar;
  s.b = 0;
  p.steps = {s};
  EXPECT_THROW(pointwise_program(x, p), ValueError);  // scalar 0 missing
  p.scalars = {1.0f};
  s.dst = 3;
  p.steps = {s};
  EXPECT_THROW(pointwise_program(x, p), ValueError);  // register 3 of 1
  s.dst = 0;
  s.a = 1;
  p.registers = 2;
  p.steps = {s};
  EXPECT_THROW(pointwise_program(x, p), ValueError);  // register 1 read before written
  s.a = 0;
  p.registers = 1;
  s.kind = PointwiseOperand::Channel;
  p.steps = {s};
  p.channels = {{1.0f, 2.0f, 3.0f}};  // 3 channels, x has 2 in dim 1
  EXPECT_FALSE(pointwise_program_supported(x, p));
  EXPECT_THROW(pointwise_program(x, p), ValueError);
  EXPECT_THROW(run_pointwise_steps(x, p), ShapeError);
  p.channels = {{1.0f, 2.0f}};
  EXPECT_EQ(pointwise_program(x, p).to_vector<float>(),
            (std::vector<float>{2, 3, 4, 6, 7, 8}));
  EXPECT_FALSE(pointwise_program_supported(x.to(DType::F64), p));
  EXPECT_THROW(pointwise_program(x.to(DType::F64), p), ValueError);
  std::vector<int64_t> code = encode_pointwise_program(p);
  EXPECT_EQ(encode_pointwise_program(decode_pointwise_program(code)), code);
  for (size_t cut = 0; cut < code.size(); ++cut) {
    std::vector<int64_t> shorter(code.begin(), code.begin() + int64_t(cut));
    EXPECT_THROW(decode_pointwise_program(shorter), ValueError) << "cut at " << cut;
  }
  code[2] = 99;  // an unknown operation
  EXPECT_THROW(decode_pointwise_program(code), ValueError);
}

}  // namespace
}  // namespace kiln::test
