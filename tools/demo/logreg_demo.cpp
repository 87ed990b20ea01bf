// `kiln demo`: until the training demo lands (autograd issue), a small end-to-end job on the
// ops: logistic regression on a synthetic two-class problem, trained by gradient descent
// with hand-derived gradients, on any device (`--device testing:0` runs it on the
// asynchronous fake device). Prints loss, accuracy and the weights found vs the true ones.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "kiln/kiln.h"
#include "tools/commands.h"

namespace kiln::tools {

namespace {
struct DemoOptions {
  int steps = 300;
  uint64_t seed = 0;
  std::string device = "cpu";
  int samples = 4096;
  int features = 16;
};

DemoOptions parse(int argc, char** argv) {
  DemoOptions o;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      KILN_CHECK(i + 1 < argc, ValueError, "option ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--steps") o.steps = std::stoi(value());
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--device") o.device = value();
    else if (a == "--samples") o.samples = std::stoi(value());
    else if (a == "--features") o.features = std::stoi(value());
    else KILN_THROW(ValueError, "unknown demo option '", a,
                    "'; expected --steps N, --seed N, --device D, --samples N, --features N");
  }
  KILN_CHECK(o.steps > 0 && o.samples > 0 && o.features > 0, ValueError,
             "steps, samples and features must be positive");
  return o;
}
}  // namespace

int run_logreg_demo(int argc, char** argv) {
  DemoOptions o = parse(argc, argv);
  Device dev = Device::parse(o.device);
  manual_seed(o.seed);
  auto t0 = std::chrono::steady_clock::now();

  // Data: labels from a hidden linear rule plus noise.
  Tensor x = randn({o.samples, o.features}, TensorOptions(DType::F32, dev));
  Tensor w_true = randn({o.features, 1}, TensorOptions(DType::F32, dev));
  Tensor noise = randn({o.samples, 1}, TensorOptions(DType::F32, dev)) * 0.5;
  Tensor y = gt(matmul(x, w_true) + noise, 0.0).to(DType::F32);
  int n_train = o.samples * 3 / 4;
  Tensor x_train = x.narrow(0, 0, n_train), y_train = y.narrow(0, 0, n_train);
  Tensor x_test = x.narrow(0, n_train, o.samples - n_train);
  Tensor y_test = y.narrow(0, n_train, o.samples - n_train);

  Tensor w = zeros({o.features, 1}, TensorOptions(DType::F32, dev));
  Tensor b = zeros({1}, TensorOptions(DType::F32, dev));
  const double lr = 0.5;
  std::printf("logistic regression: %d train / %d test samples, %d features, device %s\n",
              n_train, o.samples - n_train, o.features, dev.str().c_str());
  for (int step = 1; step <= o.steps; ++step) {
    Tensor p = sigmoid(addmm(b, x_train, w));
    Tensor err = p - y_train;                                  // d loss / d logits
    Tensor grad_w = matmul(x_train.t(), err) / double(n_train);
    Tensor grad_b = err.mean({0});
    w.sub_(grad_w, lr);
    b.sub_(grad_b, lr);
    if (step == 1 || step % (o.steps / 10 > 0 ? o.steps / 10 : 1) == 0 || step == o.steps) {
      Tensor pc = clamp(p, 1e-7, 1 - 1e-7);
      double loss = -(y_train * log(pc) + (1 - y_train) * log(1 - pc)).mean().item<double>();
      std::printf("  step %4d  train loss %.4f\n", step, loss);
    }
  }
  Tensor pred = gt(addmm(b, x_test, w), 0.0).to(DType::F32);
  double acc = eq(pred, y_test).to(DType::F32).mean().item<double>();
  // The direction of w should match the hidden rule (cosine similarity).
  double cos = (sum(w * w_true) / (norm(w) * norm(w_true))).item<double>();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("test accuracy %.1f%%  cosine(w, w_true) %.3f  (%.2f s)\n", 100 * acc, cos, secs);
  std::cout << "first learned weights: " << w.view({-1}).narrow(0, 0, std::min(4, o.features)).cpu()
            << "\n";
  return acc > 0.8 ? 0 : 1;
}

}  // namespace kiln::tools
