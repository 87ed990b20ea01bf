// Loading and running hand-built models: values against hand-computed references, dynamic
// dims, Constant nodes, node order, opset-dependent operator forms, devices, weight export.
#include "onnx_test_util.h"

namespace kiln::test {
namespace {

TEST(OnnxLoader, RunsASmallMlpWithADynamicBatch) {
  onnx::Model model = load_model(small_mlp());
  EXPECT_EQ(model.opset_version(), 13);
  EXPECT_EQ(model.num_nodes(), 3u);
  ASSERT_EQ(model.inputs().size(), 1u);
  EXPECT_EQ(model.inputs()[0].name, "x");
  ASSERT_TRUE(model.inputs()[0].shape.has_value());
  EXPECT_FALSE((*model.inputs()[0].shape)[0].value.has_value());
  EXPECT_EQ((*model.inputs()[0].shape)[0].param, "N");
  EXPECT_EQ(model.op_types(), (std::vector<std::string>{"Add", "MatMul", "Relu"}));
  for (int64_t batch : {1, 4}) {
    std::vector<float> xs;
    for (int64_t i = 0; i < batch * 2; ++i) xs.push_back(float(i));
    auto out = model.run({{"x", tensor_from(xs, Shape{batch, 2})}});
    ASSERT_EQ(out.count("y"), 1u);
    Tensor y = out["y"];
    ASSERT_EQ(y.shape(), (Shape{batch, 3}));
    auto v = y.to_vector<float>();
    for (int64_t r = 0; r < batch; ++r) {
      const float a = xs[size_t(r * 2)], b = xs[size_t(r * 2 + 1)];
      EXPECT_FLOAT_EQ(v[size_t(r * 3 + 0)], std::max(0.f, a * 1 + b * 4 + 0.5f));
      EXPECT_FLOAT_EQ(v[size_t(r * 3 + 1)], std::max(0.f, a * 2 + b * 5 - 100));
      EXPECT_FLOAT_EQ(v[size_t(r * 3 + 2)], std::max(0.f, a * 3 + b * 6));
    }
  }
}

TEST(OnnxLoader, ConstantNodesAndAxesAsInputFromOpset13) {
  for (int64_t opset : {11, 13}) {
    auto m = make_model(opset);
    add_input(m, "x", {2, 3});
    add_output(m, "y", {2, 1});
    auto* c = add_node(m, "Constant", {}, {"axes"}, "axes_const");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(::onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_int64_data(1);
    ::onnx::NodeProto* r;
    if (opset >= 13) {
      r = add_node(m, "ReduceSum", {"x", "axes"}, {"y"}, "sum");
    } else {
      r = add_node(m, "ReduceSum", {"x"}, {"y"}, "sum");
      set_ints(r, "axes", {1});
      add_node(m, "Identity", {"axes"}, {"unused"}, "keep_constant");
    }
    onnx::Model model = load_model(m);
    Tensor y = model.run({{"x", tensor_from(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3})}})["y"];
    EXPECT_EQ(y.shape(), (Shape{2, 1})) << "opset " << opset;
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6, 15})) << "opset " << opset;
  }
}

TEST(OnnxLoader, InitializerElementTypesAndFields) {
  auto m = make_model();
  add_output(m, "i8", {3}, ::onnx::TensorProto::INT8);
  add_output(m, "h", {2}, ::onnx::TensorProto::FLOAT16);
  add_output(m, "raw", {2}, ::onnx::TensorProto::INT32);
  add_output(m, "flag", {2}, ::onnx::TensorProto::BOOL);
  add_output(m, "d", {1}, ::onnx::TensorProto::DOUBLE);
  auto* g = m.mutable_graph();
  auto* t = g->add_initializer();
  t->set_name("i8");
  t->set_data_type(::onnx::TensorProto::INT8);
  t->add_dims(3);
  for (int v : {-128, 0, 127}) t->add_int32_data(v);
  t = g->add_initializer();
  t->set_name("h");
  t->set_data_type(::onnx::TensorProto::FLOAT16);
  t->add_dims(2);
  t->add_int32_data(0x3C00);  // 1.0
  t->add_int32_data(0xC000);  // -2.0
  t = g->add_initializer();
  t->set_name("raw");
  t->set_data_type(::onnx::TensorProto::INT32);
  t->add_dims(2);
  const int32_t raw[2] = {7, -9};
  t->set_raw_data(std::string(reinterpret_cast<const char*>(raw), sizeof raw));
  t = g->add_initializer();
  t->set_name("flag");
  t->set_data_type(::onnx::TensorProto::BOOL);
  t->add_dims(2);
  t->add_int32_data(0);
  t->add_int32_data(5);
  t = g->add_initializer();
  t->set_name("d");
  t->set_data_type(::onnx::TensorProto::DOUBLE);
  t->add_dims(1);
  t->add_double_data(0.125);
  onnx::Model model = load_model(m);
  EXPECT_TRUE(model.inputs().empty());
  auto out = model.run({});
  EXPECT_EQ(out["i8"].dtype(), DType::I8);
  EXPECT_EQ(out["i8"].to_vector<int64_t>(), (std::vector<int64_t>{-128, 0, 127}));
  EXPECT_EQ(out["h"].dtype(), DType::F16);
  EXPECT_EQ(out["h"].to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_EQ(out["raw"].to_vector<int32_t>(), (std::vector<int32_t>{7, -9}));
  EXPECT_EQ(out["flag"].to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ(out["d"].to_vector<double>(), (std::vector<double>{0.125}));
}

TEST(OnnxLoader, ExternalDataNextToTheModel) {
  TempDir dir;
  const float w[4] = {1, 2, 3, 4};
  write_file(dir.file("weights.bin"), std::string("PAD!") + std::string(reinterpret_cast<const char*>(w), sizeof w));
  auto m = make_model();
  add_output(m, "w", {2, 2});
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(::onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->add_dims(2);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", "weights.bin"}, {"offset", "4"}, {"length", "16"}}) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  write_file(dir.file("model.onnx"), serialize(m));
  onnx::Model model = onnx::load(dir.file("model.onnx"));
  EXPECT_EQ(model.run({})["w"].to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(OnnxLoader, RunsOnTheTestingDevice) {
  onnx::Model model = load_model(small_mlp()).to(Device(DeviceType::Testing, 0));
  EXPECT_EQ(model.device(), Device(DeviceType::Testing, 0));
  Tensor x = tensor_from(std::vector<float>{1, 1}, Shape{1, 2});
  EXPECT_KILN_ERROR(model.run({{"x", x}}), DeviceError, "model input 'x'", "testing");
  Tensor y = model.run({{"x", x.to(Device(DeviceType::Testing, 0))}})["y"];
  EXPECT_EQ(y.device(), Device(DeviceType::Testing, 0));
  EXPECT_EQ(y.cpu().to_vector<float>(), (std::vector<float>{5.5f, 0, 9}));
}

TEST(OnnxLoader, WeightsExportToSafetensors) {
  TempDir dir;
  onnx::Model model = load_model(small_mlp());
  model.save_weights(dir.file("w.safetensors"));
  auto back = kiln::load(dir.file("w.safetensors"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back["w"].shape(), (Shape{2, 3}));
  EXPECT_EQ(back["b"].to_vector<float>(), (std::vector<float>{0.5f, -100, 0}));
}

TEST(OnnxLoader, ParsesSerializedTensors) {
  auto t = float_tensor("t", {2}, {1.5f, -2});
  std::string bytes;
  ASSERT_TRUE(t.SerializeToString(&bytes));
  Tensor x = onnx::parse_tensor(bytes.data(), bytes.size());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(onnx::onnx_type_name(onnx::onnx_type_from_dtype(DType::BF16)), "BFLOAT16");
  EXPECT_FALSE(onnx::dtype_from_onnx(::onnx::TensorProto::UINT32).has_value());
  EXPECT_TRUE(onnx::is_supported_operator("Conv"));
  EXPECT_FALSE(onnx::is_supported_operator("NoSuchOp"));
}

}  // namespace
}  // namespace kiln::test
