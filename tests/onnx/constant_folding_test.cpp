// Constant folding at load time: work on weights alone runs once, gives the same result as
// running it, follows the model to another device, and never folds what a caller can change
// (an initializer that is also a graph input may be fed to override it).
#include "onnx_test_util.h"

namespace kiln::test {
namespace {

::onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::INT64);
  t.add_dims(int64_t(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

// y = x + concat(w[2:4], w[0:2]) with w an initializer (optionally also a graph input).
::onnx::ModelProto reordered_weights(bool w_is_input) {
  auto m = make_model(13);
  add_input(m, "x", {4});
  if (w_is_input) add_input(m, "w", {4});
  add_output(m, "y", {4});
  *m.mutable_graph()->add_initializer() = float_tensor("w", {4}, {1, 2, 3, 4});
  *m.mutable_graph()->add_initializer() = int64_tensor("s0", {0});
  *m.mutable_graph()->add_initializer() = int64_tensor("s2", {2});
  *m.mutable_graph()->add_initializer() = int64_tensor("s4", {4});
  add_node(m, "Slice", {"w", "s2", "s4"}, {"hi"}, "hi");
  add_node(m, "Slice", {"w", "s0", "s2"}, {"lo"}, "lo");
  auto* cat = add_node(m, "Concat", {"hi", "lo"}, {"w2"}, "cat");
  auto* a = cat->add_attribute();
  a->set_name("axis");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(0);
  add_node(m, "Add", {"x", "w2"}, {"y"}, "add");
  return m;
}

TEST(OnnxConstantFolding, FoldedWeightsGiveTheRunResultOnEveryDevice) {
  onnx::Model model = load_model(reordered_weights(false));
  Tensor x = tensor_from<float>({10, 20, 30, 40}, Shape{4});
  EXPECT_EQ(model.run({{"x", x}}).at("y").to_vector<float>(), (std::vector<float>{13, 24, 31, 42}));
  onnx::Model moved = model.to(Device(DeviceType::Testing, 0));
  Tensor y = moved.run({{"x", x.to(Device(DeviceType::Testing, 0))}}).at("y");
  EXPECT_EQ(y.device(), Device(DeviceType::Testing, 0));
  EXPECT_EQ(y.cpu().to_vector<float>(), (std::vector<float>{13, 24, 31, 42}));
}

TEST(OnnxConstantFolding, InitializersThatCanBeFedAreNotFolded) {
  onnx::Model model = load_model(reordered_weights(true));
  Tensor x = tensor_from<float>({0, 0, 0, 0}, Shape{4});
  EXPECT_EQ(model.run({{"x", x}}).at("y").to_vector<float>(), (std::vector<float>{3, 4, 1, 2}));
  Tensor w = tensor_from<float>({5, 6, 7, 8}, Shape{4});
  EXPECT_EQ(model.run({{"x", x}, {"w", w}}).at("y").to_vector<float>(), (std::vector<float>{7, 8, 5, 6}));
}

}  // namespace
}  // namespace kiln::test
