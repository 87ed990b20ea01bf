// Malformed and hostile ONNX files: every one is a kiln::Error naming the problem, never a
// crash (these run under ASan/UBSan in CI).
#include "onnx_test_util.h"

namespace kiln::test {
namespace {

TEST(OnnxHostile, TruncatedModelsFailCleanly) {
  const std::string bytes = serialize(small_mlp());
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      onnx::Model m = onnx::load_from_bytes(bytes.data(), n);
      // A prefix can be a valid smaller model; running it must still not crash.
      try {
        m.run({{"x", ones(Shape{1, 2})}});
      } catch (const Error&) {
      }
    } catch (const Error&) {
    }
  }
}

TEST(OnnxHostile, GarbageBytesFailCleanly) {
  std::mt19937 rng(1234);
  std::string valid = serialize(small_mlp());
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = valid;
    // Flip a few bytes of a valid model, or use pure noise.
    if (trial % 3 == 0) {
      for (auto& c : bytes) c = char(rng());
    } else {
      for (int k = 0; k < 1 + trial % 8; ++k) bytes[rng() % bytes.size()] = char(rng());
    }
    try {
      onnx::Model m = onnx::load_from_bytes(bytes.data(), bytes.size());
      try {
        m.run({{"x", ones(Shape{1, 2})}});
      } catch (const Error&) {
      }
    } catch (const Error&) {
    }
  }
  EXPECT_KILN_ERROR(onnx::load_from_bytes("\xff\xff\xff", 3), ValueError, "not a valid serialized ModelProto");
}

TEST(OnnxHostile, MissingFileAndMissingGraph) {
  EXPECT_KILN_ERROR(onnx::load("/nonexistent/model.onnx"), ValueError, "does not exist");
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  EXPECT_KILN_ERROR(load_model(m), ValueError, "has no graph");
}

TEST(OnnxHostile, HugeDimsAndWrongDataSizes) {
  auto huge = small_mlp();
  auto* w = huge.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  w->add_dims(int64_t(1) << 40);
  w->add_dims(int64_t(1) << 40);
  EXPECT_KILN_ERROR(load_model(huge), ValueError, "initializer 'w'");
  w->clear_dims();
  w->add_dims(int64_t(1) << 62);
  w->add_dims(8);
  EXPECT_KILN_ERROR(load_model(huge), ValueError, "initializer 'w'", "overflow");
  w->clear_dims();
  w->add_dims(-3);
  EXPECT_KILN_ERROR(load_model(huge), ValueError, "negative dimension");
  auto raw = small_mlp();
  auto* b = raw.mutable_graph()->mutable_initializer(1);
  b->clear_float_data();
  b->set_raw_data("abc");
  EXPECT_KILN_ERROR(load_model(raw), ValueError, "initializer 'b'", "raw_data holds 3 bytes", "needs 12");
  auto bad_type = small_mlp();
  bad_type.mutable_graph()->mutable_initializer(1)->set_data_type(::onnx::TensorProto::STRING);
  EXPECT_KILN_ERROR(load_model(bad_type), NotImplementedError, "initializer 'b'", "STRING");
  bad_type.mutable_graph()->mutable_initializer(1)->set_data_type(999);
  EXPECT_KILN_ERROR(load_model(bad_type), ValueError, "invalid data type 999");
}

TEST(OnnxHostile, GraphStructureErrors) {
  auto missing = small_mlp();
  missing.mutable_graph()->mutable_initializer()->RemoveLast();  // drop b
  EXPECT_KILN_ERROR(load_model(missing), ValueError, "node 'bias' (Add)", "input 'b' is not produced");

  auto cycle = make_model();
  add_input(cycle, "x", {1});
  add_output(cycle, "z", {1});
  add_node(cycle, "Add", {"x", "z"}, {"y"}, "first");
  add_node(cycle, "Relu", {"y"}, {"z"}, "second");
  EXPECT_KILN_ERROR(load_model(cycle), ValueError, "cycle");

  auto twice = make_model();
  add_input(twice, "x", {1});
  add_output(twice, "y", {1});
  add_node(twice, "Relu", {"x"}, {"y"}, "a");
  add_node(twice, "Neg", {"x"}, {"y"}, "b");
  EXPECT_KILN_ERROR(load_model(twice), ValueError, "'y' is also produced");

  auto no_output = small_mlp();
  add_output(no_output, "ghost", {1});
  EXPECT_KILN_ERROR(load_model(no_output), ValueError, "graph output 'ghost'");
}

TEST(OnnxHostile, UnsupportedOpsetsAndOperators) {
  for (int64_t opset : {0, 18}) {
    auto m = small_mlp();
    m.mutable_opset_import(0)->set_version(opset);
    EXPECT_KILN_ERROR(load_model(m), NotImplementedError, "opset " + std::to_string(opset), "1 to 17");
  }
  auto m = small_mlp();
  m.mutable_graph()->mutable_node(0)->set_op_type("FancyRelu");
  onnx::Model model = load_model(m);
  EXPECT_KILN_ERROR(model.run({{"x", ones(Shape{1, 2})}}), NotImplementedError, "node 'act' (FancyRelu)",
                    "not supported");
  auto custom = small_mlp();
  custom.mutable_graph()->mutable_node(0)->set_domain("com.example");
  EXPECT_KILN_ERROR(load_model(custom).run({{"x", ones(Shape{1, 2})}}), NotImplementedError,
                    "com.example:Relu");
}

TEST(OnnxHostile, WrongInputsAndAttributes) {
  onnx::Model model = load_model(small_mlp());
  EXPECT_KILN_ERROR(model.run({}), ValueError, "model input 'x' was not given");
  EXPECT_KILN_ERROR(model.run({{"x", ones(Shape{1, 2}, DType::F64)}}), TypeError, "'x'", "float32", "float64");
  EXPECT_KILN_ERROR(model.run({{"x", ones(Shape{1, 3})}}), ShapeError, "'x'", "size 2 in dim 1");
  EXPECT_KILN_ERROR(model.run({{"x", ones(Shape{2})}}), ShapeError, "'x'", "rank 2");
  EXPECT_KILN_ERROR(model.run({{"x", ones(Shape{1, 2})}, {"q", ones(Shape{1})}}), ValueError, "no input 'q'");

  auto m = make_model();
  add_input(m, "x", {2, 3});
  add_output(m, "y", {3, 2});
  auto* t = add_node(m, "Transpose", {"x"}, {"y"}, "flip");
  set_ints(t, "perm", {0, 5});
  EXPECT_KILN_ERROR(load_model(m).run({{"x", ones(Shape{2, 3})}}), Error, "node 'flip' (Transpose)");
  auto typed = make_model();
  add_input(typed, "x", {2});
  add_output(typed, "y", {2});
  auto* lr = add_node(typed, "LeakyRelu", {"x"}, {"y"}, "leaky");
  auto* a = lr->add_attribute();
  a->set_name("alpha");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("big");
  EXPECT_KILN_ERROR(load_model(typed).run({{"x", ones(Shape{2})}}), ValueError, "node 'leaky' (LeakyRelu)",
                    "attribute 'alpha' must be FLOAT, got STRING");
}

// A model whose initializer "w" lives in an external file described by entries.
::onnx::ModelProto external_model(const std::vector<std::pair<std::string, std::string>>& entries) {
  auto m = make_model();
  add_output(m, "w", {2});
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(::onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : entries) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  return m;
}

TEST(OnnxHostile, ExternalDataMustStayInsideTheModelFolder) {
  TempDir outer;
  fs::create_directories(outer.path() / "model");
  const std::string eight(8, '\0');
  write_file(outer.file("secret.bin"), eight);
  write_file(outer.file("model/w.bin"), eight);
  fs::create_symlink(outer.path() / "secret.bin", outer.path() / "model" / "link.bin");
  const std::string dir = outer.file("model");
  auto load_with = [&](std::vector<std::pair<std::string, std::string>> entries) {
    write_file(outer.file("model/model.onnx"), serialize(external_model(entries)));
    return onnx::load(outer.file("model/model.onnx"));
  };
  EXPECT_NO_THROW(load_with({{"location", "w.bin"}}));
  EXPECT_KILN_ERROR(load_with({{"location", "../secret.bin"}}), ValueError, "leaves the model's folder");
  EXPECT_KILN_ERROR(load_with({{"location", outer.file("secret.bin")}}), ValueError, "relative");
  EXPECT_KILN_ERROR(load_with({{"location", "link.bin"}}), ValueError, "resolves outside");
  EXPECT_KILN_ERROR(load_with({{"location", "nothere.bin"}}), ValueError, "not found");
  EXPECT_KILN_ERROR(load_with({{"location", ""}}), ValueError, "without a location");
  EXPECT_KILN_ERROR(load_with({{"location", "w.bin"}, {"offset", "9"}}), ValueError, "past the end");
  EXPECT_KILN_ERROR(load_with({{"location", "w.bin"}, {"offset", "4"}, {"length", "8"}}), ValueError,
                    "does not fit");
  EXPECT_KILN_ERROR(load_with({{"location", "w.bin"}, {"length", "4"}}), ValueError, "holds 4 bytes");
  EXPECT_KILN_ERROR(load_with({{"location", "w.bin"}, {"offset", "-1"}}), ValueError, "non-negative integer");
  EXPECT_KILN_ERROR(load_with({{"location", "w.bin"}, {"offset", "18446744073709551615"}}), ValueError,
                    "past the end");
  // From bytes there is no folder to read from.
  std::string bytes = serialize(external_model({{"location", "w.bin"}}));
  EXPECT_KILN_ERROR(onnx::load_from_bytes(bytes.data(), bytes.size()), ValueError, "not loaded from a file");
}

}  // namespace
}  // namespace kiln::test
