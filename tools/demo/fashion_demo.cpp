// `kiln demo fashion`: a small CNN learns Fashion-MNIST (the Debian package
// dataset-fashion-mnist) and reports test accuracy. Conv(1->16, 3x3) ReLU MaxPool,
// Conv(16->32, 3x3) ReLU MaxPool, Linear(1568->128) ReLU, Linear(128->10); Adam with a
// cosine-decayed learning rate, shuffled mini-batches from a prefetching DataLoader.
#include <chrono>
#include <cstdio>
#include <string>

#include "kiln/data/data.h"
#include "kiln/io/serialize.h"
#include "kiln/kiln.h"
#include "kiln/nn/nn.h"
#include "kiln/optim/optim.h"
#include "tools/demo/progress.h"

namespace kiln::demo {

namespace {

struct FashionOptions {
  int64_t epochs = 2;
  int64_t batch_size = 64;
  double lr = 2e-3;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string data_dir = data::MnistDataset::kFashionMnistDir;
  std::string out = "kiln_fashion_cnn.safetensors";
  int64_t limit = 0;  // train on the first N images only (0: all); for quick runs
};

FashionOptions parse(int argc, char** argv) {
  FashionOptions o;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      KILN_CHECK(i + 1 < argc, ValueError, "option ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::stoll(value());
    else if (a == "--batch") o.batch_size = std::stoll(value());
    else if (a == "--lr") o.lr = std::stod(value());
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--device") o.device = value();
    else if (a == "--data") o.data_dir = value();
    else if (a == "--out") o.out = value();
    else if (a == "--limit") o.limit = std::stoll(value());
    else KILN_THROW(ValueError, "unknown option '", a, "' for `kiln demo fashion`; expected "
                    "--epochs N, --batch N, --lr X, --seed N, --device D, --data DIR, "
                    "--out FILE, --limit N");
  }
  KILN_CHECK(o.epochs > 0 && o.batch_size > 0 && o.lr > 0 && o.limit >= 0, ValueError,
             "epochs, batch and lr must be positive and limit non-negative");
  return o;
}

std::shared_ptr<nn::Sequential> make_cnn(TensorOptions to) {
  using nn::ConvOptionsNd;
  std::vector<int64_t> k3{3}, k2{2};
  return std::make_shared<nn::Sequential>(std::initializer_list<nn::AnyModule>{
      std::make_shared<nn::Conv2d>(1, 16, k3, ConvOptionsNd{.padding = {1}, .tensor = to}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(k2),
      std::make_shared<nn::Conv2d>(16, 32, k3, ConvOptionsNd{.padding = {1}, .tensor = to}),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(k2),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(32 * 7 * 7, 128, true, to),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 10, true, to)});
}

// Accuracy over the whole test set, in batches of 1000.
double test_accuracy(nn::Sequential& model, const data::MnistDataset& test, Device d) {
  autograd::NoGradGuard ng;
  model.eval();
  int64_t correct = 0;
  data::DataLoader loader(std::shared_ptr<const data::Dataset>(&test, [](const data::Dataset*) {}),
                          {.batch_size = 1000});
  for (const data::Batch& b : loader) {
    Tensor pred = argmax(model.forward(b[0].to(d)), 1).to(Device(DeviceType::CPU, 0));
    correct += sum(eq(pred, b[1])).item<int64_t>();
  }
  model.train();
  return double(correct) / double(test.size());
}

}  // namespace

int run_fashion_demo(int argc, char** argv) {
  FashionOptions o = parse(argc, argv);
  Device d = Device::parse(o.device);
  manual_seed(o.seed);
  const std::string dir = o.data_dir + "/";
  auto train = std::make_shared<data::MnistDataset>(dir + "train-images-idx3-ubyte.gz",
                                                    dir + "train-labels-idx1-ubyte.gz");
  auto test = std::make_shared<data::MnistDataset>(dir + "t10k-images-idx3-ubyte.gz",
                                                   dir + "t10k-labels-idx1-ubyte.gz");
  std::shared_ptr<const data::Dataset> train_set = train;
  if (o.limit > 0 && o.limit < train->size())
    train_set = std::make_shared<data::TensorDataset>(std::vector<Tensor>{
        (train->images().slice(0, 0, o.limit).to(DType::F32) / 255.0).unsqueeze(1),
        train->labels().slice(0, 0, o.limit)});

  auto model = make_cnn(TensorOptions(DType::F32, d));
  int64_t n_params = 0;
  for (const Tensor& p : model->parameters()) n_params += p.numel();
  data::DataLoader loader(train_set, {.batch_size = o.batch_size, .shuffle = true,
                                      .drop_last = true, .seed = o.seed});
  const int64_t steps_per_epoch = loader.size(), steps = steps_per_epoch * o.epochs;
  optim::Adam opt(model->parameters(), {.lr = o.lr});
  optim::CosineAnnealingLR schedule(opt, steps);

  std::printf("kiln demo fashion: CNN on Fashion-MNIST (%s)\n", o.data_dir.c_str());
  std::printf("  data: %lld training images, %lld test images, 28x28, 10 classes\n",
              (long long)train_set->size(), (long long)test->size());
  std::printf("  model: conv16-pool-conv32-pool-fc128-fc10, %lld parameters, device %s\n",
              (long long)n_params, d.str().c_str());
  std::printf("  training: %lld epochs x %lld steps of %lld images, Adam lr %g, cosine schedule\n",
              (long long)o.epochs, (long long)steps_per_epoch, (long long)o.batch_size, o.lr);

  const auto t0 = std::chrono::steady_clock::now();
  int64_t step = 0;
  double smoothed = 0, acc = 0;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    for (const data::Batch& b : loader) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy(model->forward(b[0].to(d)), b[1].to(d));
      backward(loss);
      opt.step();
      schedule.step();
      ++step;
      const double l = loss.item<double>();
      smoothed = step == 1 ? l : 0.98 * smoothed + 0.02 * l;
      if (step % 10 == 0 || step == steps) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("\repoch %lld step %5lld/%lld %s loss %.3f | %5.0f img/s | ETA %s   ",
                    (long long)epoch + 1, (long long)step, (long long)steps,
                    progress_bar(step, steps).c_str(), smoothed,
                    double(step * o.batch_size) / elapsed,
                    format_duration(elapsed / double(step) * double(steps - step)).c_str());
        std::fflush(stdout);
      }
    }
    acc = test_accuracy(*model, *test, d);
    std::printf("\n  epoch %lld: test accuracy %.2f%%\n", (long long)epoch + 1, 100.0 * acc);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("test accuracy %.2f%% (%lld images); training and evaluation took %s "
              "(%.0f training images/s)\n",
              100.0 * acc, (long long)test->size(), format_duration(seconds).c_str(),
              double(steps * o.batch_size) / seconds);
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : model->state_dict()) state[name] = t;
  save(state, o.out);
  std::printf("checkpoint: %s\n", o.out.c_str());
  return 0;
}

}  // namespace kiln::demo
