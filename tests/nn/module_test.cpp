// nn::Module: registration and naming, traversal, train/eval, to(), zero_grad, state_dict
// round trips and load_state_dict errors.
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

// A module with its own parameter and buffer, a direct submodule and a Sequential.
class Net : public Module {
 public:
  // Reference members bound to the registered slots see to() conversions.
  Net()
      : Module("Net"),
        scale(register_parameter("scale", ones({3}))),
        steps(register_buffer("steps", zeros({}, DType::I64))) {
    fc1 = register_module("fc1", std::make_shared<Linear>(2, 3));
    body = register_module("body", std::make_shared<Sequential>(
                                       std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(),
                                       std::make_shared<Linear>(4, 2)));
  }
  Tensor forward(const Tensor& x) { return body->forward(fc1->forward(x) * scale); }
  Tensor& scale;
  Tensor& steps;
  std::shared_ptr<Linear> fc1;
  std::shared_ptr<Sequential> body;
};

TEST(Module, NamedParametersAreDottedAndOrdered) {
  Net net;
  std::vector<std::string> want = {"scale",         "fc1.weight",  "fc1.bias",
                                   "body.0.weight", "body.0.bias", "body.2.weight",
                                   "body.2.bias"};
  EXPECT_EQ(net.named_parameters().keys(), want);
  EXPECT_EQ(net.parameters().size(), 7u);
  EXPECT_EQ(net.named_parameters(false).keys(), std::vector<std::string>{"scale"});
  EXPECT_EQ(net.named_buffers().keys(), std::vector<std::string>{"steps"});
  EXPECT_EQ(net.named_children().keys(), (std::vector<std::string>{"fc1", "body"}));
  EXPECT_EQ(net.children().size(), 2u);
  for (const auto& [name, p] : net.named_parameters()) {
    EXPECT_TRUE(autograd::requires_grad(p)) << name;
    EXPECT_TRUE(autograd::is_leaf(p)) << name;
  }
  EXPECT_EQ(net.fc1->weight.shape(), (Shape{3, 2}));
  EXPECT_TRUE(net.named_parameters()["fc1.weight"].is_same(net.fc1->weight));
  auto mods = net.named_modules();
  EXPECT_EQ(mods.keys(), (std::vector<std::string>{"fc1", "body", "body.0", "body.1", "body.2"}));
}

TEST(Module, NamedModulesIncludesSelfWhenSharedOwned) {
  auto net = std::make_shared<Net>();
  auto mods = net->named_modules();
  ASSERT_TRUE(mods.contains(""));
  EXPECT_EQ(mods[""].get(), net.get());
  EXPECT_EQ(mods.size(), 6u);
}

TEST(Module, SharedSubmoduleIsVisitedOnce) {
  auto shared = std::make_shared<Linear>(2, 2);
  Module m("M");
  m.register_module("a", shared);
  m.register_module("b", shared);
  EXPECT_EQ(m.named_modules().keys(), std::vector<std::string>{"a"});
  EXPECT_EQ(m.named_parameters().keys(), (std::vector<std::string>{"a.weight", "a.bias"}));
  EXPECT_EQ(m.state_dict().keys(),
            (std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"}));
}

TEST(Module, RegistrationErrors) {
  Module m("M");
  m.register_parameter("w", zeros({2}));
  EXPECT_THROW(m.register_parameter("w", zeros({2})), ValueError);
  EXPECT_THROW(m.register_buffer("w", zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("a.b", zeros({2})), ValueError);
  EXPECT_THROW(m.register_parameter("", zeros({2})), ValueError);
  EXPECT_THROW(m.register_module("w", std::make_shared<ReLU>()), ValueError);
  EXPECT_THROW(m.register_module<Module>("x", nullptr), ValueError);
  EXPECT_THROW(m.parameter("nope"), ValueError);
  EXPECT_THROW(m.child("nope"), ValueError);
  try {
    m.parameter("nope");
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("\"w\""), std::string::npos) << e.what();
  }
}

TEST(Module, ParameterRegistrationMakesALeafAndSharesParameters) {
  Module m("M");
  Tensor data = ones({2});
  Tensor& p = m.register_parameter("p", data);
  EXPECT_TRUE(autograd::requires_grad(p));
  EXPECT_FALSE(autograd::requires_grad(data));  // the caller's tensor is not changed
  EXPECT_TRUE(p.shares_storage_with(data));
  Tensor& frozen = m.register_parameter("frozen", ones({2}), false);
  EXPECT_FALSE(autograd::requires_grad(frozen));
  Tensor& none = m.register_parameter("none", Tensor());
  EXPECT_FALSE(none.defined());
  EXPECT_EQ(m.named_parameters().keys(), (std::vector<std::string>{"p", "frozen"}));
  // Tying: registering an existing parameter keeps its identity.
  auto a = std::make_shared<Linear>(2, 2), b = std::make_shared<Linear>(2, 2);
  Module tied("Tied");
  tied.register_module("a", a);
  tied.register_module("b", b);
  b->weight = a->weight;
  EXPECT_EQ(tied.parameters().size(), 3u);  // a.weight once, a.bias, b.bias
  EXPECT_EQ(tied.state_dict().size(), 4u);  // state_dict keeps both names
}

TEST(Module, TrainEvalIsRecursive) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.body->operator[](1)->is_training());
  net.train();
  EXPECT_TRUE(net.fc1->is_training());
}

TEST(Module, StateDictRoundTrip) {
  manual_seed(1);
  Net a;
  manual_seed(2);
  Net b;
  Tensor x = randn({5, 2});
  auto sd = a.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"scale", "steps", "fc1.weight", "fc1.bias",
                                                 "body.0.weight", "body.0.bias", "body.2.weight",
                                                 "body.2.bias"}));
  for (const auto& [k, v] : sd) EXPECT_FALSE(autograd::requires_grad(v)) << k;
  EXPECT_TRUE(sd["fc1.weight"].shares_storage_with(a.fc1->weight));
  EXPECT_GT(kiln::abs(a.forward(x) - b.forward(x)).sum().item<double>(), 1e-3);
  auto r = b.load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_EQ(a.forward(x).to_vector<float>(), b.forward(x).to_vector<float>());
  // The load copied: b's tensors are still its own (and still parameters).
  EXPECT_FALSE(b.fc1->weight.shares_storage_with(a.fc1->weight));
  EXPECT_TRUE(autograd::requires_grad(b.fc1->weight));
}

TEST(Module, StrictLoadListsMissingUnexpectedAndMismatchedKeys) {
  Net net;
  auto sd = net.state_dict();
  StateDict bad;
  for (const auto& [k, v] : sd)
    if (k != "fc1.bias" && k != "body.2.bias") bad.insert(k, v.clone());
  bad.insert("body.5.weight", zeros({1}));
  bad.insert_or_assign("body.0.weight", zeros({3, 4}));  // should be [4, 3]
  std::vector<float> before = net.fc1->weight.to_vector<float>();
  try {
    net.load_state_dict(bad);
    FAIL() << "expected StateDictError";
  } catch (const StateDictError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Error(s) in loading state_dict for Net"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Missing key(s) in state_dict: \"fc1.bias\", \"body.2.bias\"."),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("Unexpected key(s) in state_dict: \"body.5.weight\"."), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("size mismatch for body.0.weight: copying a param with shape [3, 4] from "
                       "checkpoint, the shape in current model is [4, 3]."),
              std::string::npos) << msg;
    EXPECT_EQ(e.missing_keys(), (std::vector<std::string>{"fc1.bias", "body.2.bias"}));
    EXPECT_EQ(e.unexpected_keys(), std::vector<std::string>{"body.5.weight"});
    EXPECT_EQ(e.shape_mismatches().size(), 1u);
  }
  // Nothing was loaded.
  EXPECT_EQ(net.fc1->weight.to_vector<float>(), before);
}

TEST(Module, NonStrictLoadReturnsKeysButShapeMismatchStillFails) {
  Net net;
  StateDict partial;
  partial.insert("fc1.weight", full({3, 2}, 0.5));
  partial.insert("extra", zeros({1}));
  auto r = net.load_state_dict(partial, false);
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"extra"});
  EXPECT_EQ(r.missing_keys.size(), 7u);
  EXPECT_EQ(net.fc1->weight.to_vector<float>(), std::vector<float>(6, 0.5f));
  StateDict wrong;
  wrong.insert("fc1.weight", zeros({2, 3}));
  EXPECT_THROW(net.load_state_dict(wrong, false), StateDictError);
}

TEST(Module, LoadConvertsDtype) {
  Linear lin(2, 1);
  StateDict sd;
  sd.insert("weight", f64({1.5, -2.0}, {1, 2}));
  sd.insert("bias", f64({0.25}, {1}));
  lin.load_state_dict(sd);
  EXPECT_EQ(lin.weight.dtype(), DType::F32);
  EXPECT_EQ(lin.weight.to_vector<double>(), (std::vector<double>{1.5, -2.0}));
}

TEST(Module, ToDtypeReplacesParametersInPlace) {
  Net net;
  Tensor x = randn({4, 2});
  backward(net.forward(x).sum());
  net.to(DType::F64);
  for (const auto& [name, p] : net.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::F64) << name;
    EXPECT_TRUE(autograd::requires_grad(p)) << name;
    EXPECT_TRUE(autograd::is_leaf(p)) << name;
    ASSERT_TRUE(autograd::grad(p).defined()) << name;
    EXPECT_EQ(autograd::grad(p).dtype(), DType::F64) << name;
  }
  EXPECT_EQ(net.fc1->weight.dtype(), DType::F64);  // the layer's member sees the new tensor
  EXPECT_EQ(net.steps.dtype(), DType::I64);         // integer buffers keep their dtype
  EXPECT_EQ(net.buffer("steps").dtype(), DType::I64);
  Tensor y = net.forward(x.to(DType::F64));
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_THROW(net.to(DType::I32), TypeError);
}

TEST(Module, ToKeepsTiedParametersTied) {
  auto a = std::make_shared<Linear>(2, 2), b = std::make_shared<Linear>(2, 2);
  Module m("M");
  m.register_module("a", a);
  m.register_module("b", b);
  b->weight = a->weight;
  m.to(DType::F64);
  EXPECT_TRUE(a->weight.is_same(b->weight));
}

TEST(Module, ToDeviceRoundTrip) {
  std::vector<DeviceType> types = registered_device_types();
  bool has_testing = false;
  for (DeviceType t : types) has_testing = has_testing || (t == DeviceType::Testing && is_available(t));
  if (!has_testing) return;  // only CPU: nothing to move to
  Linear lin(3, 2);
  std::vector<float> w = lin.weight.to_vector<float>();
  lin.to(Device(DeviceType::Testing, 0));
  EXPECT_EQ(lin.weight.device(), Device(DeviceType::Testing, 0));
  EXPECT_TRUE(autograd::requires_grad(lin.weight));
  Tensor y = lin.forward(ones({1, 3}, Device(DeviceType::Testing, 0)));
  EXPECT_EQ(y.device(), Device(DeviceType::Testing, 0));
  lin.to(Device(DeviceType::CPU, 0));
  EXPECT_EQ(lin.weight.to_vector<float>(), w);
}

TEST(Module, ZeroGrad) {
  Net net;
  backward(net.forward(randn({3, 2})).sum());
  for (const auto& p : net.parameters()) EXPECT_TRUE(autograd::grad(p).defined());
  net.zero_grad(false);
  for (const auto& p : net.parameters()) {
    ASSERT_TRUE(autograd::grad(p).defined());
    for (double v : autograd::grad(p).to_vector<double>()) EXPECT_EQ(v, 0.0);
  }
  net.zero_grad();
  for (const auto& p : net.parameters()) EXPECT_FALSE(autograd::grad(p).defined());
}

TEST(Module, Str) {
  Sequential seq{std::make_shared<Linear>(2, 3), std::make_shared<ReLU>(),
                 std::make_shared<Linear>(3, 1, false)};
  EXPECT_EQ(seq.str(),
            "Sequential(\n"
            "  (0): Linear(in_features=2, out_features=3, bias=true)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=3, out_features=1, bias=false)\n"
            ")");
}

TEST(Containers, SequentialModuleListModuleDict) {
  auto l1 = std::make_shared<Linear>(2, 3);
  auto act = std::make_shared<Tanh>();
  Sequential seq;
  seq.push_back(l1);
  seq.push_back(act);
  Tensor x = randn({4, 2});
  EXPECT_EQ(seq.forward(x).to_vector<float>(), act->forward(l1->forward(x)).to_vector<float>());
  EXPECT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq.get<Linear>(0), l1);
  EXPECT_EQ(seq.get<Linear>(1), nullptr);
  EXPECT_THROW(seq[2], IndexError);

  ModuleList list{std::make_shared<Linear>(1, 1), std::make_shared<Linear>(1, 2)};
  list.push_back(std::make_shared<GELU>());
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(list.named_parameters().keys(),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  int n = 0;
  for (const auto& m : list) n += m != nullptr;
  EXPECT_EQ(n, 3);
  EXPECT_EQ(list.get<Linear>(1)->out_features, 2);

  ModuleDict dict;
  dict.insert("enc", std::make_shared<Linear>(2, 2));
  dict.insert("norm", std::make_shared<LayerNorm>(Shape{2}));
  EXPECT_TRUE(dict.contains("enc"));
  EXPECT_FALSE(dict.contains("dec"));
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"enc", "norm"}));
  EXPECT_EQ(dict.get<LayerNorm>("norm")->normalized_shape, Shape{2});
  EXPECT_EQ(dict.state_dict().keys(),
            (std::vector<std::string>{"enc.weight", "enc.bias", "norm.weight", "norm.bias"}));
  EXPECT_THROW(dict.insert("enc", std::make_shared<ReLU>()), ValueError);
  EXPECT_THROW(dict["dec"], ValueError);
}

}  // namespace
}  // namespace kiln::nn
