// End to end: a small CNN (Conv2d, ReLU, MaxPool2d, Conv2d, AdaptiveAvgPool2d, Linear) learns
// to tell the orientation of a noisy line in a 12x12 image (horizontal, vertical, diagonal,
// anti-diagonal, at random positions) to a stated held-out accuracy with a fixed seed.
#include "kiln/optim/optim.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/pooling.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

struct Images {
  Tensor x, y;  // x [N, 1, 12, 12] float32; y [N] int64
};

Images line_images(int n, uint32_t seed) {
  constexpr int S = 12;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pos(2, S - 3), len(4, 7);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::vector<float> xs(static_cast<size_t>(n * S * S));
  std::vector<int64_t> ys(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    float* img = xs.data() + size_t(i) * S * S;
    for (int p = 0; p < S * S; ++p) img[p] = noise(rng);
    const int label = i % 4, r = pos(rng), c = pos(rng), l = len(rng);
    for (int t = -l / 2; t <= l / 2; ++t) {
      int rr = r, cc = c;
      if (label == 0) cc += t;
      if (label == 1) rr += t;
      if (label == 2) rr += t, cc += t;
      if (label == 3) rr += t, cc -= t;
      if (rr >= 0 && rr < S && cc >= 0 && cc < S) img[rr * S + cc] += 1.5f;
    }
    ys[size_t(i)] = label;
  }
  return {tensor_from(xs, {n, 1, S, S}), tensor_from(ys, {n})};
}

TEST(CNNTraining, LineOrientationReaches95Percent) {
  manual_seed(0);
  Images train = line_images(512, 1), test = line_images(512, 2);
  Sequential cnn{std::make_shared<Conv2d>(1, 8, std::vector<int64_t>{3},
                                          ConvOptionsNd{.padding = {1}}),
                 std::make_shared<ReLU>(),
                 std::make_shared<MaxPool2d>(std::vector<int64_t>{2}),
                 std::make_shared<Conv2d>(8, 16, std::vector<int64_t>{3},
                                          ConvOptionsNd{.padding = {1}}),
                 std::make_shared<ReLU>(),
                 std::make_shared<AdaptiveAvgPool2d>(std::vector<int64_t>{1, 1}),
                 std::make_shared<Flatten>(),
                 std::make_shared<Linear>(16, 4)};
  optim::Adam opt(cnn.parameters(), {.lr = 0.01});
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 120; ++step) {
    const int64_t start = (step % 8) * 64;
    Tensor xb = train.x.slice(0, start, start + 64), yb = train.y.slice(0, start, start + 64);
    opt.zero_grad();
    Tensor loss = F::cross_entropy(cnn.forward(xb), yb);
    backward(loss);
    opt.step();
    last_loss = loss.item<double>();
    if (step == 0) first_loss = last_loss;
  }
  autograd::NoGradGuard ng;
  Tensor predicted = argmax(cnn.forward(test.x), 1);
  double acc = eq(predicted, test.y).to(DType::F64).mean().item<double>();
  EXPECT_GE(acc, 0.95) << "held-out accuracy";
  EXPECT_LT(last_loss, 0.3 * first_loss);
  std::printf("line orientation CNN: held-out accuracy %.3f, loss %.4f -> %.4f\n", acc,
              first_loss, last_loss);
}

}  // namespace
}  // namespace kiln::nn
