// The xpu backend in C++ against float64 references computed by kiln's CPU kernels (whose own
// suites check them against closed forms and PyTorch). Runs on any OpenCL device: the GPU
// where there is one, PoCL's CPU driver elsewhere (KILN_XPU_DEVICE_TYPES=all below). The
// Python suite (tests/python/test_xpu_backend.py) covers the ops against PyTorch in depth;
// this one is what runs on a machine with a GPU but without kiln's Python module.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kiln/kiln.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/pointwise_program.h"
#include "kiln/ops/pooling.h"
#include "kiln/nn/functional_conv.h"
#include "kiln/runtime/backend.h"

namespace kiln {
namespace {

const int kAllTypes = setenv("KILN_XPU_DEVICE_TYPES", "all", /*overwrite=*/0);

Device xpu() { return Device(DeviceType::XPU, 0); }

// |got - want| <= atol + rtol * |want| everywhere (NaNs must match).
void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  ASSERT_EQ(got.device().type, DeviceType::XPU);
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "at " << i;
      continue;
    }
    ASSERT_LE(std::abs(g[i] - w[i]), atol + rtol * std::abs(w[i])) << "at " << i << ": " << g[i] << " vs " << w[i];
  }
}

// The same values (bit patterns aside from NaN payloads) and shape.
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  return true;
}

TEST(XpuRuntime, HasADeviceAndMovesEveryDtypeExactly) {
  (void)kAllTypes;
  ASSERT_TRUE(is_available(DeviceType::XPU)) << "no OpenCL device: install pocl-opencl-icd";
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I64, DType::I32, DType::I16,
                  DType::I8, DType::U8, DType::Bool}) {
    Tensor x = (randn({33, 7}) * 50).to(t);
    Tensor back = x.to(xpu()).to(Device(DeviceType::CPU));
    EXPECT_TRUE(same_values(back, x)) << dtype_name(t);
    EXPECT_TRUE(same_values(x.t().to(xpu()).contiguous().to(Device(DeviceType::CPU)), x.t().contiguous()))
        << dtype_name(t);
  }
}

TEST(XpuRuntime, EventsOrderStreams) {
  Stream s = new_stream(xpu());
  Tensor x = ones({512, 256}).to(xpu());
  Event done(DeviceType::XPU, true), start(DeviceType::XPU, true);
  start.record();
  Tensor y = sum(mul(x, 2.0));
  done.record();
  done.wait(s);
  Tensor z;
  {
    StreamGuard g(s);
    z = add(y, 1.0);
  }
  s.synchronize();
  EXPECT_EQ(z.item().to_double(), 262145.0);
  EXPECT_GE(start.elapsed_time(done), 0.0);
}

TEST(XpuOps, ElementwiseBroadcastAndStrided) {
  Tensor a = randn({5, 1, 37}, DType::F64), b = randn({6, 37}, DType::F64);
  for (DType t : {DType::F32, DType::BF16, DType::F64}) {
    const double tol = t == DType::BF16 ? 2e-2 : t == DType::F32 ? 1e-5 : 1e-12;
    Tensor ka = a.to(t).to(xpu()), kb = b.to(t).to(xpu());
    Tensor ra = a.to(t).to(DType::F64), rb = b.to(t).to(DType::F64);
    expect_close(add(ka, kb, 0.5), add(ra, rb, 0.5), tol, tol);
    expect_close(mul(ka, kb.t().contiguous().t()), mul(ra, rb), tol, tol);
    expect_close(exp(ka), exp(ra), tol, tol);
    expect_close(gelu(kb), gelu(rb), tol, tol);
    expect_close(gt(ka, kb).to(DType::F64), gt(ra, rb).to(DType::F64), 0, 0);
  }
}

TEST(XpuOps, ReductionsSoftmaxNorms) {
  Tensor x = randn({6, 9, 300}, DType::F64);
  Tensor kx = x.to(DType::F32).to(xpu());
  Tensor rx = x.to(DType::F32).to(DType::F64);
  expect_close(sum(kx, {2}), sum(rx, {2}), 1e-5, 1e-4);
  expect_close(sum(kx), sum(rx), 1e-5, 1e-3);
  expect_close(mean(kx, {0, 2}, true), mean(rx, {0, 2}, true), 1e-5, 1e-5);
  expect_close(amax(kx, {1}), amax(rx, {1}), 0, 0);
  expect_close(argmax(kx, 2), argmax(rx, 2), 0, 0);
  Tensor long_rows = randn({2, 300000});
  expect_close(sum(long_rows.to(xpu()), {1}), sum(long_rows.to(DType::F64), {1}), 1e-5, 1e-2);
  expect_close(softmax(kx, -1), softmax(rx, -1), 1e-5, 1e-7);
  expect_close(softmax(kx, 1), softmax(rx, 1), 1e-5, 1e-7);
  Tensor w = randn({300}, DType::F64), b = randn({300}, DType::F64);
  expect_close(nn::functional::layer_norm(kx, {300}, w.to(DType::F32).to(xpu()), b.to(DType::F32).to(xpu())),
               nn::functional::layer_norm(rx, {300}, w.to(DType::F32).to(DType::F64), b.to(DType::F32).to(DType::F64)),
               1e-4, 1e-4);
}

TEST(XpuOps, MatmulOddSizesTransposedBatched) {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 17, 31}, {65, 130, 67}, {1, 257, 129}, {3, 300, 70}, {8, 129, 9},
                                                            {200, 96, 300}}) {
    Tensor a = randn({m, k}, DType::F64), b = randn({k, n}, DType::F64);
    Tensor want = matmul(a.to(DType::F32).to(DType::F64), b.to(DType::F32).to(DType::F64));
    Tensor ka = a.to(DType::F32).to(xpu()), kb = b.to(DType::F32).to(xpu());
    expect_close(matmul(ka, kb), want, 1e-4, 1e-4);
    expect_close(matmul(ka.t().contiguous().t(), kb.t().contiguous().t()), want, 1e-4, 1e-4);
    expect_close(matmul(a.to(xpu()), b.to(xpu())), matmul(a, b), 1e-12, 1e-12);
    Tensor wb = matmul(a.to(DType::BF16).to(DType::F64), b.to(DType::BF16).to(DType::F64));
    expect_close(matmul(a.to(DType::BF16).to(xpu()), b.to(DType::BF16).to(xpu())), wb, 2e-2, 2e-2);
  }
  // bfloat16 products in every operand layout, batched (on NVIDIA GPUs the tensor-core kernel).
  {
    Tensor a = randn({2, 150, 72}).to(DType::BF16), b = randn({72, 264}).to(DType::BF16);
    Tensor want = matmul(a.to(DType::F64), b.to(DType::F64));
    Tensor xa = a.to(xpu()), xb = b.to(xpu());
    expect_close(matmul(xa, xb), want, 2e-2, 2e-2);
    expect_close(matmul(xa.transpose(1, 2).contiguous().transpose(1, 2), xb.t().contiguous().t()), want, 2e-2, 2e-2);
    // A Linear's layout: x [150, 72] times W.t() for W [264, 72] (k contiguous in both).
    Tensor w = b.t().contiguous();
    expect_close(matmul(xa[1], w.to(xpu()).t()), matmul(a[1].to(DType::F64), b.to(DType::F64)), 2e-2, 2e-2);
    Tensor self = randn({264}).to(DType::BF16);
    expect_close(addmm(self.to(xpu()), xa[0], xb, 0.5, 2.0),
                 addmm(self.to(DType::F64), a[0].to(DType::F64), b.to(DType::F64), 0.5, 2.0), 2e-2, 5e-2);
  }
  // Rows, K and starts that are multiples of 8 (on NVIDIA GPUs the pipelined tensor-core
  // kernel): blocks of 64 rows (M <= 64) and of 128, K not a multiple of the 32-wide step,
  // B n-contiguous (N a multiple of 8) and k-contiguous (any N), a broadcast batch.
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{40, 200, 136}, {64, 32, 8}, {129, 264, 264}, {9, 8, 16}}) {
    Tensor a = randn({3, m, k}).to(DType::BF16), b = randn({k, n}).to(DType::BF16);
    Tensor want = matmul(a.to(DType::F64), b.to(DType::F64));
    const double atol = 2e-2 * std::sqrt(double(k) / 64.0);
    expect_close(matmul(a.to(xpu()), b.to(xpu())), want, 2e-2, atol);
    Tensor w = randn({n + 3, k}).to(DType::BF16);  // a Linear's weight, N not a multiple of 8
    expect_close(matmul(a.to(xpu()), w.to(xpu()).t()), matmul(a.to(DType::F64), w.to(DType::F64).t()), 2e-2, atol);
  }
  // Few rows times a transposed bfloat16 weight (the pairs path for even K).
  for (int64_t k : {300, 257}) {
    Tensor x = randn({2, k}).to(DType::BF16), w = randn({70, k}).to(DType::BF16);
    Tensor want = matmul(x.to(DType::F64), w.to(DType::F64).t());
    expect_close(matmul(x.to(xpu()), w.to(xpu()).t()), want, 2e-2, 2e-2);
  }
  Tensor a = randn({3, 1, 9, 20}, DType::F64), b = randn({4, 20, 11}, DType::F64);
  expect_close(matmul(a.to(xpu()), b.to(xpu())), matmul(a, b), 1e-12, 1e-12);
  Tensor c = randn({5, 7}, DType::F64), p = randn({5, 3}, DType::F64), q = randn({3, 7}, DType::F64);
  expect_close(addmm(c.to(xpu()), p.to(xpu()), q.to(xpu()), 0.5, 2.0), addmm(c, p, q, 0.5, 2.0), 1e-12, 1e-12);
}

TEST(XpuOps, IndexSelectCatAndErrors) {
  Tensor w = randn({50, 16});
  Tensor idx = tensor_from<int64_t>({3, 0, 49, 3}, DType::I64);
  expect_close(index_select(w.to(xpu()), 0, idx.to(xpu())), index_select(w, 0, idx), 0, 0);
  for (int64_t bad : {int64_t(50), int64_t(-1)})
    EXPECT_THROW(index_select(w.to(xpu()), 0, tensor_from<int64_t>({bad}, DType::I64).to(xpu())), IndexError);
  Tensor p = randn({2, 3}), q = randn({2, 5});
  expect_close(cat({p.to(xpu()), q.to(xpu())}, 1), cat({p, q}, 1), 0, 0);
  EXPECT_THROW(add(ones({3}).to(xpu()), ones({3})), Error);
}

TEST(XpuOps, ConvolutionWithEveryActivation) {
  Tensor x = randn({2, 6, 9, 8}, DType::F64), w = randn({4, 3, 3, 3}, DType::F64), b = randn({4}, DType::F64);
  ConvOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  o.groups = 2;
  expect_close(convolution(x.to(xpu()), w.to(xpu()), b.to(xpu()), o), convolution(x, w, b, o), 1e-12, 1e-12);
  for (auto act : {ConvActivation::Relu, ConvActivation::Clip, ConvActivation::HardSigmoid,
                   ConvActivation::HardSwish}) {
    ConvEpilogue e{act, act == ConvActivation::HardSigmoid ? 0.2 : -0.5, act == ConvActivation::HardSigmoid ? 0.5 : 0.7};
    expect_close(convolution_activation(x.to(xpu()), w.to(xpu()), b.to(xpu()), o, e),
                 convolution_activation(x, w, b, o, e), 1e-12, 1e-12);
  }
}

TEST(XpuOps, ConvolutionGradientsAndTransposed) {
  Tensor x = randn({2, 4, 9, 8}, DType::F64), gy = randn({2, 6, 5, 8}, DType::F64);
  ConvOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  o.groups = 2;
  // The weight gradient of a [6, 2, 3, 3] kernel, and the input gradient (a transposed
  // convolution with the same weight).
  expect_close(convolution_weight_grad(x.to(xpu()), gy.to(xpu()), {6, 2, 3, 3}, o),
               convolution_weight_grad(x, gy, {6, 2, 3, 3}, o), 1e-12, 1e-12);
  Tensor w = randn({6, 2, 3, 3}, DType::F64);
  ConvOptions t = o;
  t.transposed = true;
  t.output_padding = {0, 0};
  expect_close(convolution(gy.to(xpu()), w.to(xpu()), Tensor(), t), convolution(gy, w, Tensor(), t), 1e-12, 1e-12);
  Tensor xf = randn({2, 64, 14, 14}), wf = randn({64, 64, 3, 3}), gf = randn({2, 64, 14, 14});
  ConvOptions p;
  p.padding = {1, 1};
  expect_close(convolution_weight_grad(xf.to(xpu()), gf.to(xpu()), {64, 64, 3, 3}, p),
               convolution_weight_grad(xf.to(DType::F64), gf.to(DType::F64), {64, 64, 3, 3}, p), 1e-4, 1e-3);
}

// A fused pointwise program (graph mode's fuse_pointwise, hardswish) as one generated kernel:
// every step kind, registers, scalars, channel vectors along dim 1 and along the last dim,
// reversed operands; bit for bit the same steps run as separate xpu ops.
TEST(XpuOps, PointwiseProgramEqualsItsSteps) {
  using Op = PointwiseOp;
  using Kind = PointwiseOperand;
  for (bool last_dim : {false, true}) {
    PointwiseProgram p;
    p.registers = 4;
    p.scalars = {0.5f, -1.0f, 2.0f, 3.0f};
    p.last_dim = last_dim;
    const int64_t C = last_dim ? 7 : 6;
    p.channels = {std::vector<float>(size_t(C)), std::vector<float>(size_t(C))};
    for (int64_t c = 0; c < C; ++c) {
      p.channels[0][size_t(c)] = 0.25f * float(c) - 0.6f;
      p.channels[1][size_t(c)] = 1.0f + 0.125f * float(c);
    }
    p.steps = {{Op::Mul, 1, 0, Kind::Channel, 1, false},  {Op::Add, 1, 1, Kind::Channel, 0, false},
               {Op::Sub, 2, 1, Kind::Scalar, 3, true},    {Op::Div, 2, 2, Kind::Register, 0, false},
               {Op::Max, 3, 2, Kind::Register, 1, false}, {Op::Min, 3, 3, Kind::Scalar, 2, false},
               {Op::Clamp, 2, 1, Kind::Scalar, 0, false}, {Op::Relu, 1, 0, Kind::Scalar, 0, false},
               {Op::Neg, 1, 1, Kind::Scalar, 0, false},   {Op::Abs, 1, 1, Kind::Scalar, 0, false},
               {Op::Sqrt, 1, 1, Kind::Scalar, 0, false},  {Op::Erf, 2, 2, Kind::Scalar, 0, false},
               {Op::Mul, 1, 1, Kind::Register, 2, false}, {Op::Add, 1, 1, Kind::Register, 3, false}};
    std::vector<float> values = (randn({3, 6, 5, 7}) * 2.0).to_vector<float>();
    values[3] = std::nanf("");
    values[50] = -0.0f;
    Tensor x = tensor_from(values, Shape{3, 6, 5, 7}, TensorOptions(DType::F32));
    Tensor xx = x.to(xpu());
    ASSERT_TRUE(pointwise_program_supported(xx, p));
    Tensor fused = pointwise_program(xx, p), steps = run_pointwise_steps(xx, p);
    EXPECT_TRUE(same_values(fused, steps));
    expect_close(fused, run_pointwise_steps(x.to(DType::F64), p), 1e-5, 1e-6);
    if (!last_dim) {  // a channels-last input gives the same values
      Tensor cl = pointwise_program(xx.contiguous(MemoryFormat::ChannelsLast), p);
      EXPECT_TRUE(same_values(cl, steps));
    }
  }
}

// max pooling's backward gathers per input element on the device; with overlapping windows
// (one element the maximum of several) its sums run in the CPU's order: the same bits.
TEST(XpuOps, MaxPoolBackwardEqualsTheCpu) {
  struct Case {
    Shape in;
    PoolOptions o;
  };
  std::vector<Case> cases(3);
  cases[0].in = {2, 3, 9, 11};
  cases[0].o.kernel_size = {3, 3};
  cases[0].o.stride = {1, 2};
  cases[0].o.padding = {1, 1};
  cases[0].o.dilation = {1, 2};
  cases[1].in = {3, 17};
  cases[1].o.kernel_size = {4};
  cases[1].o.stride = {1};
  cases[1].o.padding = {2};
  cases[1].o.dilation = {1};
  cases[1].o.ceil_mode = true;
  cases[2].in = {1, 2, 5, 6, 7};
  cases[2].o.kernel_size = {2, 3, 3};
  cases[2].o.stride = {1, 1, 2};
  cases[2].o.padding = {0, 1, 1};
  cases[2].o.dilation = {1, 1, 1};
  for (const Case& c : cases) {
    const int64_t nd = int64_t(c.o.kernel_size.size());
    // Few distinct values: ties and repeated maxima.
    Tensor x = kiln::round(randn(c.in) * 2.0);
    auto [v, idx] = max_pool_with_indices(x, nd, c.o);
    Tensor gy = randn(v.shape());
    Tensor want = max_pool_backward(gy, idx, c.in, c.o);
    Tensor got = max_pool_backward(gy.to(xpu()), idx.to(xpu()), c.in, c.o);
    ASSERT_EQ(got.device().type, DeviceType::XPU);
    EXPECT_TRUE(same_values(got, want));
    // float64 and bfloat16 gradients.
    expect_close(max_pool_backward(gy.to(DType::F64).to(xpu()), idx.to(xpu()), c.in, c.o),
                 max_pool_backward(gy.to(DType::F64), idx, c.in, c.o), 0, 0);
    expect_close(max_pool_backward(gy.to(DType::BF16).to(xpu()), idx.to(xpu()), c.in, c.o),
                 max_pool_backward(gy.to(DType::BF16), idx, c.in, c.o), 0, 0);
  }
}

// gelu's backward as one kernel, both forms, every float dtype, against the CPU kernel (whose
// own tests check it against PyTorch): float64 to rounding, the 16-bit types to one ulp.
TEST(XpuOps, GeluBackwardMatchesTheCpu) {
  for (const char* form : {"none", "tanh"}) {
    Tensor x = randn({5, 67}, DType::F64) * 3.0, g = randn({5, 67}, DType::F64);
    expect_close(gelu_backward(g.to(xpu()), x.to(xpu()), form), gelu_backward(g, x, form), 1e-12, 1e-12);
    expect_close(gelu_backward(g.to(DType::F32).to(xpu()), x.to(DType::F32).to(xpu()), form),
                 gelu_backward(g, x, form), 1e-5, 1e-6);
    for (DType t : {DType::BF16, DType::F16}) {
      const double tol = t == DType::BF16 ? 1e-2 : 2e-3;
      expect_close(gelu_backward(g.to(t).to(xpu()), x.to(t).to(xpu()), form),
                   gelu_backward(g.to(t), x.to(t), form).to(DType::F64), tol, tol);
    }
  }
}

TEST(XpuOps, PoolingForward) {
  Tensor x = randn({2, 3, 9, 11}, DType::F64);
  auto [v, i] = nn::functional::max_pool2d_with_indices(x.to(xpu()), {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  auto [rv, ri] = nn::functional::max_pool2d_with_indices(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  expect_close(v, rv, 0, 0);
  expect_close(i, ri, 0, 0);
  expect_close(nn::functional::avg_pool2d(x.to(xpu()), {3, 3}, {2, 2}, {1, 1}, false, false),
               nn::functional::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, false), 1e-12, 1e-12);
  expect_close(nn::functional::adaptive_avg_pool2d(x.to(xpu()), {4, 3}),
               nn::functional::adaptive_avg_pool2d(x, {4, 3}), 1e-12, 1e-12);
}

}  // namespace
}  // namespace kiln
