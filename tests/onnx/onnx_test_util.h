#pragma once
// Helpers for the ONNX tests: ModelProto graphs built with the protobuf API, serialized and
// loaded through kiln::onnx::load_from_bytes (or written to a temporary folder).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kiln/io/serialize.h"
#include "kiln/kiln.h"
#include "kiln/onnx/onnx.h"

namespace kiln::test {

namespace fs = std::filesystem;

inline ::onnx::ModelProto make_model(int64_t opset = 13) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// dims: -1 is a dynamic dimension named "N".
inline void add_value(google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* list,
                      const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  auto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d < 0) dim->set_dim_param("N");
    else dim->set_dim_value(d);
  }
}
inline void add_input(::onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
                      int elem_type = ::onnx::TensorProto::FLOAT) {
  add_value(m.mutable_graph()->mutable_input(), name, elem_type, dims);
}
inline void add_output(::onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
                       int elem_type = ::onnx::TensorProto::FLOAT) {
  add_value(m.mutable_graph()->mutable_output(), name, elem_type, dims);
}

inline ::onnx::NodeProto* add_node(::onnx::ModelProto& m, const std::string& op,
                                   const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs, const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline void set_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline ::onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                        const std::vector<float>& values) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

inline std::string serialize(const ::onnx::ModelProto& m) {
  std::string s;
  EXPECT_TRUE(m.SerializeToString(&s));
  return s;
}

inline onnx::Model load_model(const ::onnx::ModelProto& m, const std::string& base_dir = "") {
  std::string bytes = serialize(m);
  return onnx::load_from_bytes(bytes.data(), bytes.size(), base_dir, "test-model");
}

// y = relu(x @ w + b) with x [N, 2] (dynamic batch), w [2, 3], b [3] as initializers.
inline ::onnx::ModelProto small_mlp() {
  auto m = make_model();
  add_input(m, "x", {-1, 2});
  add_output(m, "y", {-1, 3});
  *m.mutable_graph()->add_initializer() = float_tensor("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  *m.mutable_graph()->add_initializer() = float_tensor("b", {3}, {0.5f, -100, 0});
  // Listed out of order on purpose: the loader sorts them.
  add_node(m, "Relu", {"h"}, {"y"}, "act");
  add_node(m, "Add", {"xw", "b"}, {"h"}, "bias");
  add_node(m, "MatMul", {"x", "w"}, {"xw"}, "mm");
  return m;
}

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("kiln_onnx_test_" + std::to_string(rd()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Expects statement to throw ErrorClass whose message contains every part.
#define EXPECT_KILN_ERROR(statement, ErrorClass, ...)                                      \
  do {                                                                                     \
    try {                                                                                  \
      statement;                                                                           \
      ADD_FAILURE() << "expected " #ErrorClass " from " #statement;                        \
    } catch (const ErrorClass& e) {                                                        \
      for (const std::string& part : std::vector<std::string>{__VA_ARGS__})                                       \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)                     \
            << "message '" << e.what() << "' lacks '" << part << "'";                      \
    }                                                                                      \
  } while (0)

}  // namespace kiln::test
