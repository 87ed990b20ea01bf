// Optimizer state in safetensors files (save_optimizer_state / load_optimizer_state):
// training resumed from files (model weights via kiln::save, optimizer state via
// save_optimizer_state) continues bit for bit like an uninterrupted run; every double and
// step count round-trips exactly; hostile metadata is a ValueError naming the problem.
#include <cmath>
#include <cstring>
#include <limits>

#include "io/io_test_util.h"
#include "kiln/io/optimizer_state.h"
#include "kiln/nn/nn.h"
#include "kiln/optim/optim.h"

namespace kiln::test {
namespace {

using optim::OptimizerStateDict;

std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 8),
                                          std::make_shared<nn::Tanh>(),
                                          std::make_shared<nn::Linear>(8, 2));
}

void train_step(nn::Sequential& model, optim::Optimizer& opt, int step) {
  Generator g(500 + uint64_t(step));
  Tensor x = randn({16, 3}, DType::F32, &g);
  Tensor y = randint(0, 2, {16}, DType::I64, &g);
  opt.zero_grad();
  backward(nn::functional::cross_entropy(model.forward(x), y));
  opt.step();
}

std::vector<uint32_t> bits(const nn::Module& m) {
  std::vector<uint32_t> out;
  for (const auto& p : m.parameters())
    for (float v : p.to_vector<float>()) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      out.push_back(u);
    }
  return out;
}

// Two groups (weights and biases) with options whose decimal forms are not exact.
using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(nn::Sequential&)>;

std::vector<optim::ParamGroup> two_groups(nn::Sequential& m, double lr_bias) {
  std::vector<Tensor> weights, biases;
  for (const auto& [name, p] : m.named_parameters())
    (name.find("bias") != std::string::npos ? biases : weights).push_back(p);
  return {optim::ParamGroup{weights, {}}, optim::ParamGroup{biases, {{"lr", lr_bias}}}};
}

void expect_resume_from_files_is_bit_exact(const MakeOpt& make_opt, const std::string& what) {
  TempDir dir;
  const std::string model_path = dir.file("model.safetensors");
  const std::string opt_path = dir.file("optimizer.safetensors");
  auto model = make_model(7);
  auto opt = make_opt(*model);
  for (int s = 1; s <= 10; ++s) {
    train_step(*model, *opt, s);
    if (s == 5) {
      std::map<std::string, Tensor> weights;
      for (const auto& [k, v] : model->state_dict()) weights[k] = v;
      save(weights, model_path);
      save_optimizer_state(opt->state_dict(), opt_path);
    }
  }
  auto model2 = make_model(99);  // other initial weights and fresh optimizer state
  auto opt2 = make_opt(*model2);
  nn::StateDict loaded;
  for (const auto& [k, v] : load(model_path)) loaded.insert(k, v);
  model2->load_state_dict(loaded);
  opt2->load_state_dict(load_optimizer_state(opt_path));
  for (int s = 6; s <= 10; ++s) train_step(*model2, *opt2, s);
  EXPECT_EQ(bits(*model), bits(*model2)) << what;
  for (size_t g = 0; g < opt->param_groups().size(); ++g)
    EXPECT_EQ(opt->param_groups()[g].options, opt2->param_groups()[g].options) << what;
  EXPECT_NE(bits(*model), bits(*make_model(7))) << what << ": training changed nothing";
}

TEST(OptimizerStateFile, AdamResumesBitExactly) {
  expect_resume_from_files_is_bit_exact(
      [](nn::Sequential& m) {
        return std::make_unique<optim::Adam>(two_groups(m, 1.0 / 3.0),
                                             optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1,
                                                                .amsgrad = true});
      },
      "Adam (amsgrad, two groups)");
}

TEST(OptimizerStateFile, SgdMomentumResumesBitExactly) {
  expect_resume_from_files_is_bit_exact(
      [](nn::Sequential& m) {
        return std::make_unique<optim::SGD>(
            two_groups(m, 0.07),
            optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
      },
      "SGD (nesterov momentum, two groups)");
}

TEST(OptimizerStateFile, AdamWResumesBitExactly) {
  expect_resume_from_files_is_bit_exact(
      [](nn::Sequential& m) {
        return std::make_unique<optim::AdamW>(m.parameters(), optim::AdamWOptions{.lr = 3e-3});
      },
      "AdamW");
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(OptimizerStateFile, EveryDoubleAndStepRoundTripsExactly) {
  TempDir dir;
  const std::vector<double> values = {0.1,
                                      1.0 / 3.0,
                                      -0.0,
                                      5e-324,  // smallest denormal
                                      2.2250738585072014e-308,
                                      std::numeric_limits<double>::max(),
                                      -std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::infinity(),
                                      0.30000000000000004,
                                      123456789.123456789,
                                      1e22};
  OptimizerStateDict sd;
  OptimizerStateDict::Group g0, g1;
  for (size_t i = 0; i < values.size(); ++i) g0.options["opt" + std::to_string(i)] = values[i];
  g0.options["nan"] = std::numeric_limits<double>::quiet_NaN();
  g0.params = {3, 0};
  g1.params = {};  // an empty group
  OptimizerStateDict::Group g2{{{"lr", 0.5}}, {1, 2}};
  sd.param_groups = {g0, g1, g2};
  sd.state[0] = {int64_t(1) << 62, {{"exp_avg", randn({2, 3})}, {"max.sq", randn({2, 3}, DType::F64)}}};
  sd.state[2] = {7, {}};  // a step count without buffers
  sd.state[3] = {0, {{"momentum_buffer", randint(0, 9, {4}, DType::I32)}}};
  const std::string path = dir.file("state.safetensors");
  save_optimizer_state(sd, path);
  OptimizerStateDict r = load_optimizer_state(path);
  ASSERT_EQ(r.param_groups.size(), 3u);
  for (size_t g = 0; g < 3; ++g) {
    EXPECT_EQ(r.param_groups[g].params, sd.param_groups[g].params);
    ASSERT_EQ(r.param_groups[g].options.size(), sd.param_groups[g].options.size());
    for (const auto& [k, v] : sd.param_groups[g].options)
      EXPECT_TRUE(same_bits(r.param_groups[g].options.at(k), v) || (std::isnan(v) && std::isnan(r.param_groups[g].options.at(k))))
          << k << " = " << v;
  }
  ASSERT_EQ(r.state.size(), 3u);
  for (const auto& [p, st] : sd.state) {
    EXPECT_EQ(r.state.at(p).step, st.step);
    ASSERT_EQ(r.state.at(p).buffers.size(), st.buffers.size());
    for (const auto& [name, t] : st.buffers) {
      const Tensor& got = r.state.at(p).buffers.at(name);
      EXPECT_EQ(got.dtype(), t.dtype()) << name;
      EXPECT_EQ(raw_bytes(got), raw_bytes(t)) << name;
    }
  }
  // The file is a plain safetensors file that other readers can open.
  io::SafetensorsFile f = io::SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("format"), "kiln.optimizer_state");
  EXPECT_TRUE(f.contains("state.0.exp_avg"));
  EXPECT_EQ(f.metadata().at("param_groups.2.options.lr"), "0.5");
}

TEST(OptimizerStateFile, EmptyStateBeforeTheFirstStep) {
  TempDir dir;
  auto model = make_model(1);
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  save_optimizer_state(opt.state_dict(), dir.file("s"));
  OptimizerStateDict r = load_optimizer_state(dir.file("s"));
  EXPECT_TRUE(r.state.empty());
  EXPECT_EQ(r.param_groups[0].params.size(), 4u);
  optim::SGD opt2(model->parameters(), {.lr = 0.5});
  opt2.load_state_dict(r);
  EXPECT_EQ(opt2.param_groups()[0].lr(), 0.1);
}

struct HostileCase {
  std::string name;
  io::SafetensorsMetadata metadata;
  std::map<std::string, Tensor> tensors;
  std::string expected;
};

io::SafetensorsMetadata base_metadata() {
  return {{"format", "kiln.optimizer_state"},
          {"format_version", "1"},
          {"param_groups", "1"},
          {"param_groups.0.params", "0,1"},
          {"param_groups.0.options.lr", "0.1"},
          {"state.0.step", "3"}};
}

io::SafetensorsMetadata with(io::SafetensorsMetadata md, const std::string& k,
                             const std::string& v) {
  md[k] = v;
  return md;
}
io::SafetensorsMetadata without(io::SafetensorsMetadata md, const std::string& k) {
  md.erase(k);
  return md;
}

TEST(OptimizerStateFile, HostileMetadataIsAValueError) {
  TempDir dir;
  const std::map<std::string, Tensor> buf = {{"state.0.exp_avg", zeros({2})}};
  const auto md = base_metadata();
  std::vector<HostileCase> cases = {
      {"no metadata", {}, buf, "missing metadata entry \"format\""},
      {"not optimizer state", with(md, "format", "pt"), buf, "not an optimizer state file"},
      {"future version", with(md, "format_version", "2"), buf, "unsupported format_version \"2\""},
      {"no group count", without(md, "param_groups"), buf, "missing metadata entry \"param_groups\""},
      {"group count text", with(md, "param_groups", "one"), buf, "expected a non-negative integer"},
      {"group count negative", with(md, "param_groups", "-1"), buf, "non-negative integer"},
      {"group count leading zero", with(md, "param_groups", "01"), buf, "non-negative integer"},
      {"group count overflow", with(md, "param_groups", "99999999999999999999"), buf,
       "non-negative integer"},
      {"group count huge", with(md, "param_groups", "1000000000000"), buf,
       "says 1000000000000 groups but there are only"},
      {"group count too big", with(md, "param_groups", "2"), buf,
       "missing metadata entry \"param_groups.1.params\""},
      {"group params missing", without(md, "param_groups.0.params"), buf,
       "missing metadata entry \"param_groups.0.params\""},
      {"group index out of range", with(md, "param_groups.1.params", "2"), buf,
       "names group 1 but there are 1 groups"},
      {"group index text", with(md, "param_groups.x.params", "2"), buf, "non-negative integer"},
      {"params empty item", with(md, "param_groups.0.params", "0,,1"), buf, "non-negative integer"},
      {"params trailing comma", with(md, "param_groups.0.params", "0,1,"), buf,
       "non-negative integer"},
      {"params space", with(md, "param_groups.0.params", "0, 1"), buf, "non-negative integer"},
      {"params plus sign", with(md, "param_groups.0.params", "+0,1"), buf, "non-negative integer"},
      {"params duplicate", with(md, "param_groups.0.params", "0,0"), buf, "listed twice"},
      {"option not a number", with(md, "param_groups.0.options.lr", "0.1x"), buf,
       "metadata \"param_groups.0.options.lr\": expected a number, got \"0.1x\""},
      {"option empty", with(md, "param_groups.0.options.lr", ""), buf, "expected a number"},
      {"option hex prefix", with(md, "param_groups.0.options.lr", "0x1p-3"), buf,
       "expected a number"},
      {"option without name", with(md, "param_groups.0.options.", "1"), buf,
       "unknown metadata entry"},
      {"unknown group field", with(md, "param_groups.0.paramz", "1"), buf, "unknown metadata entry"},
      {"unknown entry", with(md, "comment", "hello"), buf, "unknown metadata entry \"comment\""},
      {"step negative", with(md, "state.0.step", "-3"), buf, "non-negative integer"},
      {"step fraction", with(md, "state.0.step", "1.5"), buf, "non-negative integer"},
      {"unknown state field", with(md, "state.0.lr", "1"), buf, "unknown metadata entry"},
      {"state of unlisted parameter", with(md, "state.5.step", "1"), buf,
       "state for parameter 5, which no group lists"},
      {"tensor without step", without(md, "state.0.step"), buf,
       "tensor \"state.0.exp_avg\" is state of parameter 0, which has no \"state.0.step\" entry"},
      {"foreign tensor", md, {{"weight", zeros({2})}}, "unexpected tensor \"weight\""},
      {"tensor without buffer name", md, {{"state.0.", zeros({2})}}, "unexpected tensor"},
      {"tensor with bad index", md, {{"state.a.exp_avg", zeros({2})}}, "non-negative integer"},
  };
  for (const HostileCase& c : cases) {
    const std::string path = dir.file("hostile.safetensors");
    io::save_safetensors(path, c.tensors, c.metadata);
    try {
      load_optimizer_state(path);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.expected), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.name << ": not a ValueError: " << e.what();
    }
  }
  // The base case itself is valid.
  io::save_safetensors(dir.file("ok"), buf, md);
  OptimizerStateDict ok = load_optimizer_state(dir.file("ok"));
  EXPECT_EQ(ok.state.at(0).step, 3);
  EXPECT_EQ(ok.param_groups[0].options.at("lr"), 0.1);
}

TEST(OptimizerStateFile, StateOfTheWrongShapeIsRejectedByTheOptimizer) {
  TempDir dir;
  auto model = make_model(3);
  optim::Adam opt(model->parameters(), {.lr = 0.01});
  train_step(*model, opt, 1);
  OptimizerStateDict sd = opt.state_dict();
  sd.state[0].buffers["exp_avg"] = zeros({5});
  save_optimizer_state(sd, dir.file("s"));
  EXPECT_THROW(opt.load_state_dict(load_optimizer_state(dir.file("s"))), ValueError);
}

}  // namespace
}  // namespace kiln::test
