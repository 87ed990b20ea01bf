// Subgraphs (values of the enclosing graph seen from If and Loop bodies, values kept alive
// until the owning node ran, errors for undefined names) and recurrent-operator invariants
// that the backend suite does not cover (bidirectional = forward + reverse, layout 1).
#include "kiln/ops/views.h"
#include "onnx_test_util.h"

namespace kiln::test {
namespace {

::onnx::GraphProto* graph_attr(::onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

void set_int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_string(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

void graph_value(google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* list, const std::string& name,
                 int elem_type = ::onnx::TensorProto::FLOAT) {
  auto* v = list->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

::onnx::NodeProto* graph_node(::onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                              const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
}

TEST(OnnxControlFlow, IfBranchesReadOuterValuesComputedLater) {
  auto m = make_model(13);
  add_input(m, "x", {3});
  add_input(m, "c", {}, ::onnx::TensorProto::BOOL);
  add_output(m, "y", {3});
  // The If node comes first in the file; its branches read "twice", produced after it.
  auto* iff = add_node(m, "If", {"c"}, {"y"}, "branch");
  auto* then_g = graph_attr(iff, "then_branch");
  graph_node(then_g, "Add", {"twice", "x"}, {"t_out"});
  graph_value(then_g->mutable_output(), "t_out");
  auto* else_g = graph_attr(iff, "else_branch");
  graph_node(else_g, "Neg", {"twice"}, {"e_out"});
  graph_value(else_g->mutable_output(), "e_out");
  add_node(m, "Add", {"x", "x"}, {"twice"}, "double");
  onnx::Model model = load_model(m);
  Tensor x = tensor_from<float>({1, 2, 3}, Shape{3});
  EXPECT_EQ(model.run({{"x", x}, {"c", scalar_tensor(true, DType::Bool)}}).at("y").to_vector<float>(),
            (std::vector<float>{3, 6, 9}));
  EXPECT_EQ(model.run({{"x", x}, {"c", scalar_tensor(false, DType::Bool)}}).at("y").to_vector<float>(),
            (std::vector<float>{-2, -4, -6}));
}

TEST(OnnxControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  auto m = make_model(13);
  add_input(m, "n", {}, ::onnx::TensorProto::INT64);
  add_input(m, "step", {2});
  add_input(m, "init", {2});
  add_output(m, "final", {2});
  add_output(m, "history", {-1, 2});
  auto* loop = add_node(m, "Loop", {"n", "", "init"}, {"final", "history"}, "accumulate");
  auto* body = graph_attr(loop, "body");
  graph_value(body->mutable_input(), "i", ::onnx::TensorProto::INT64);
  graph_value(body->mutable_input(), "cond_in", ::onnx::TensorProto::BOOL);
  graph_value(body->mutable_input(), "acc");
  graph_node(body, "Add", {"acc", "step"}, {"acc_next"});  // "step" is an outer value
  graph_node(body, "Identity", {"cond_in"}, {"cond_out"});
  graph_node(body, "Identity", {"acc_next"}, {"scan"});
  graph_value(body->mutable_output(), "cond_out", ::onnx::TensorProto::BOOL);
  graph_value(body->mutable_output(), "acc_next");
  graph_value(body->mutable_output(), "scan");
  onnx::Model model = load_model(m);
  auto out = model.run({{"n", scalar_tensor(int64_t(3), DType::I64)},
                        {"step", tensor_from<float>({1, 10}, Shape{2})},
                        {"init", tensor_from<float>({0, 0}, Shape{2})}});
  EXPECT_EQ(out.at("final").to_vector<float>(), (std::vector<float>{3, 30}));
  EXPECT_EQ(out.at("history").shape(), (Shape{3, 2}));
  EXPECT_EQ(out.at("history").to_vector<float>(), (std::vector<float>{1, 10, 2, 20, 3, 30}));
}

TEST(OnnxControlFlow, UndefinedNameInASubgraphNamesTheNode) {
  auto m = make_model(13);
  add_input(m, "c", {}, ::onnx::TensorProto::BOOL);
  add_output(m, "y", {1});
  auto* iff = add_node(m, "If", {"c"}, {"y"}, "branch");
  auto* then_g = graph_attr(iff, "then_branch");
  graph_node(then_g, "Neg", {"nowhere"}, {"t"});
  graph_value(then_g->mutable_output(), "t");
  auto* else_g = graph_attr(iff, "else_branch");
  graph_node(else_g, "Neg", {"nowhere"}, {"e"});
  graph_value(else_g->mutable_output(), "e");
  EXPECT_KILN_ERROR(load_model(m), ValueError, "node 'branch' (If)", "then_branch", "'nowhere'");
}

// An LSTM/GRU model over X [seq, batch, input] with random weights for `dirs` directions.
onnx::Model recurrent_model(const std::string& op, const std::string& direction, int64_t layout,
                            const std::vector<float>& w, const std::vector<float>& r, int64_t dirs,
                            int64_t gates, int64_t hidden, int64_t input) {
  auto m = make_model(14);
  add_input(m, "x", {-1, -1, input});
  add_input(m, "lens", {-1}, ::onnx::TensorProto::INT32);
  add_output(m, "y", {});
  add_output(m, "yh", {});
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  m.mutable_graph()->mutable_output(1)->mutable_type()->mutable_tensor_type()->clear_shape();
  *m.mutable_graph()->add_initializer() = float_tensor("w", {dirs, gates * hidden, input}, w);
  *m.mutable_graph()->add_initializer() = float_tensor("r", {dirs, gates * hidden, hidden}, r);
  auto* n = add_node(m, op, {"x", "w", "r", "", "lens"}, {"y", "yh"}, "rnn");
  set_string(n, "direction", direction);
  set_int(n, "hidden_size", hidden);
  set_int(n, "layout", layout);
  return load_model(m);
}

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

void expect_close(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  auto x = contiguous(a).to_vector<float>(), y = contiguous(b).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5) << "element " << i;
}

TEST(OnnxRecurrent, BidirectionalIsForwardAndReverseWithSequenceLengthsAndLayout) {
  const int64_t seq = 4, batch = 3, input = 2, hidden = 3;
  for (const auto& [op, gates] : std::vector<std::pair<std::string, int64_t>>{{"LSTM", 4}, {"GRU", 3}, {"RNN", 1}}) {
    SCOPED_TRACE(op);
    const auto wf = random_values(size_t(gates * hidden * input), 1), wr = random_values(size_t(gates * hidden * input), 2);
    const auto rf = random_values(size_t(gates * hidden * hidden), 3), rr = random_values(size_t(gates * hidden * hidden), 4);
    auto cat_v = [](std::vector<float> a, const std::vector<float>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    onnx::Model bi = recurrent_model(op, "bidirectional", 0, cat_v(wf, wr), cat_v(rf, rr), 2, gates, hidden, input);
    onnx::Model fw = recurrent_model(op, "forward", 0, wf, rf, 1, gates, hidden, input);
    onnx::Model rv = recurrent_model(op, "reverse", 0, wr, rr, 1, gates, hidden, input);
    onnx::Model bi1 = recurrent_model(op, "bidirectional", 1, cat_v(wf, wr), cat_v(rf, rr), 2, gates, hidden, input);
    Tensor x = tensor_from<float>(random_values(size_t(seq * batch * input), 5), Shape{seq, batch, input});
    Tensor lens = tensor_from<int32_t>({4, 2, 1}, Shape{3});
    auto b = bi.run({{"x", x}, {"lens", lens}});
    auto f = fw.run({{"x", x}, {"lens", lens}});
    auto r = rv.run({{"x", x}, {"lens", lens}});
    expect_close(select(b.at("y"), 1, 0), select(f.at("y"), 1, 0));
    expect_close(select(b.at("y"), 1, 1), select(r.at("y"), 1, 0));
    expect_close(select(b.at("yh"), 0, 0), select(f.at("yh"), 0, 0));
    expect_close(select(b.at("yh"), 0, 1), select(r.at("yh"), 0, 0));
    // Past a sequence's end the outputs are zero; its final state is the one at its end.
    EXPECT_EQ(select(select(f.at("y"), 0, 3), 1, 2).to_vector<float>(), std::vector<float>(size_t(hidden), 0.f));
    expect_close(select(f.at("yh"), 1, 2), select(select(f.at("y"), 0, 0), 1, 2));
    // Batch-first layout: the same numbers, transposed.
    auto b1 = bi1.run({{"x", contiguous(transpose(x, 0, 1))}, {"lens", lens}});
    expect_close(b1.at("y"), permute(b.at("y"), {2, 0, 1, 3}));
    expect_close(b1.at("yh"), transpose(b.at("yh"), 0, 1));
  }
}

}  // namespace
}  // namespace kiln::test
