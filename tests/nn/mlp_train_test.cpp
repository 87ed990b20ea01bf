// End to end: an MLP learns synthetic tasks with a fixed seed to a stated accuracy on held-out
// data, quickly: two moons with cross_entropy + Adam, XOR blobs with BCE-with-logits + SGD.
#include <chrono>

#include "kiln/optim/optim.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

struct Data {
  Tensor x, y;  // x [N, 2] float32; y [N] int64 labels
};

// Two interleaved half circles with Gaussian noise, as sklearn's make_moons.
Data two_moons(int n, double noise, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, M_PI);
  std::normal_distribution<double> g(0, noise);
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int i = 0; i < n; ++i) {
    int label = i % 2;
    double t = u(rng);
    double px = label == 0 ? std::cos(t) : 1 - std::cos(t);
    double py = label == 0 ? std::sin(t) : 0.5 - std::sin(t);
    xs.push_back(float(px + g(rng)));
    xs.push_back(float(py + g(rng)));
    ys.push_back(label);
  }
  return {tensor_from(xs, {n, 2}), tensor_from(ys, {n})};
}

// Four Gaussian blobs at the corners of a square; the label is the XOR of the quadrant signs.
Data xor_blobs(int n, double spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0, spread);
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int i = 0; i < n; ++i) {
    int sx = i % 2, sy = (i / 2) % 2;
    xs.push_back(float((sx ? 1.0 : -1.0) + g(rng)));
    xs.push_back(float((sy ? 1.0 : -1.0) + g(rng)));
    ys.push_back(sx ^ sy);
  }
  return {tensor_from(xs, {n, 2}), tensor_from(ys, {n})};
}

double accuracy(const Tensor& predicted, const Tensor& labels) {
  return eq(predicted, labels).to(DType::F64).mean().item<double>();
}

TEST(MLPTraining, TwoMoonsWithAdamReaches97Percent) {
  auto start = std::chrono::steady_clock::now();
  manual_seed(0);
  Data train = two_moons(512, 0.1, 1), test = two_moons(512, 0.1, 2);
  Sequential mlp{std::make_shared<Linear>(2, 32), std::make_shared<Tanh>(),
                 std::make_shared<Linear>(32, 32), std::make_shared<Tanh>(),
                 std::make_shared<Linear>(32, 2)};
  optim::Adam opt(mlp.parameters(), {.lr = 0.01});
  double first_loss = 0, loss_value = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    Tensor loss = F::cross_entropy(mlp.forward(train.x), train.y);
    backward(loss);
    opt.step();
    loss_value = loss.item<double>();
    if (step == 0) first_loss = loss_value;
  }
  autograd::NoGradGuard ng;
  double acc = accuracy(argmax(mlp.forward(test.x), 1), test.y);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(acc, 0.97) << "held-out accuracy";
  EXPECT_LT(loss_value, 0.1 * first_loss);
  std::printf("two moons: held-out accuracy %.3f, loss %.4f -> %.4f, %.2f s\n", acc, first_loss,
              loss_value, seconds);
}

TEST(MLPTraining, XorBlobsWithSgdMomentumReaches95Percent) {
  auto start = std::chrono::steady_clock::now();
  manual_seed(1);
  Data train = xor_blobs(400, 0.35, 3), test = xor_blobs(400, 0.35, 4);
  Sequential mlp{std::make_shared<Linear>(2, 16), std::make_shared<ReLU>(),
                 std::make_shared<Linear>(16, 1), std::make_shared<Flatten>(0)};
  optim::SGD opt(mlp.parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor target = train.y.to(DType::F32);
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    Tensor loss = F::binary_cross_entropy_with_logits(mlp.forward(train.x), target);
    backward(loss);
    opt.step();
  }
  autograd::NoGradGuard ng;
  Tensor predicted = gt(mlp.forward(test.x), Scalar(0.0)).to(DType::I64);
  double acc = accuracy(predicted, test.y);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(acc, 0.95) << "held-out accuracy";
  std::printf("xor blobs: held-out accuracy %.3f, %.2f s\n", acc, seconds);
}

}  // namespace
}  // namespace kiln::nn
