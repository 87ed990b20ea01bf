#include "kiln/onnx/op_context.h"

#include "kiln/onnx/tensor_convert.h"
#include "kiln/ops/copy.h"

namespace kiln::onnx {

namespace {

const char* attr_type_name(int t) {
  switch (t) {
    case pb::AttributeProto::FLOAT: return "FLOAT";
    case pb::AttributeProto::INT: return "INT";
    case pb::AttributeProto::STRING: return "STRING";
    case pb::AttributeProto::TENSOR: return "TENSOR";
    case pb::AttributeProto::GRAPH: return "GRAPH";
    case pb::AttributeProto::FLOATS: return "FLOATS";
    case pb::AttributeProto::INTS: return "INTS";
    case pb::AttributeProto::STRINGS: return "STRINGS";
    case pb::AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case pb::AttributeProto::TYPE_PROTO: return "TYPE_PROTO";
    default: return "UNDEFINED";
  }
}

}  // namespace

int64_t normalize_axis(int64_t axis, int64_t ndim, const char* what) {
  const int64_t n = ndim == 0 ? 1 : ndim;
  KILN_CHECK(axis >= -n && axis < n, IndexError, what, " ", axis, " is out of range for a tensor of rank ",
             ndim, " (expected ", -n, "..", n - 1, ")");
  return axis < 0 ? axis + n : axis;
}

OpContext::OpContext(const pb::NodeProto& node, int64_t opset, std::vector<Value> inputs, Device device,
                     const GraphRunner* runner)
    : node_(node), opset_(opset), values_(std::move(inputs)), device_(device), runner_(runner) {
  inputs_.reserve(values_.size());
  for (const Value& v : values_) {
    inputs_.push_back(v.tensor);
    any_sequence_ = any_sequence_ || v.is_sequence();
  }
}

const Tensor& OpContext::input(size_t i) const {
  KILN_CHECK(has_input(i), ValueError, "input ", i, " is required but was not given");
  KILN_CHECK(!values_[i].is_sequence(), TypeError, "input ", i, " is a sequence; a tensor is expected");
  KILN_CHECK(!values_[i].none, ValueError, "input ", i, " is an empty optional; a tensor is expected");
  return inputs_[i];
}

const std::vector<Tensor>& OpContext::inputs() const {
  for (size_t i = 0; any_sequence_ && i < values_.size(); ++i) {
    KILN_CHECK(!values_[i].is_sequence(), TypeError, "input ", i, " is a sequence; a tensor is expected");
  }
  return inputs_;
}

const Value& OpContext::value_input(size_t i) const {
  KILN_CHECK(has_input(i), ValueError, "input ", i, " is required but was not given");
  return values_[i];
}

const std::vector<Tensor>& OpContext::sequence_input(size_t i) const {
  const Value& v = value_input(i);
  KILN_CHECK(v.is_sequence(), TypeError, "input ", i, " is ", v.none ? "an empty optional" : "a tensor",
             "; a sequence is expected");
  return *v.sequence;
}

const pb::GraphProto& OpContext::attr_graph(const std::string& name) const {
  return required_attr(name, pb::AttributeProto::GRAPH).g();
}

std::vector<Value> OpContext::run_graph(const pb::GraphProto& graph, std::vector<Value> inputs) const {
  KILN_CHECK(runner_ != nullptr, ValueError, "this context cannot run subgraphs");
  return runner_->run(graph, std::move(inputs));
}

std::vector<int64_t> OpContext::input_ints(size_t i) const {
  const Tensor& t = input(i);
  KILN_CHECK(is_integral(t.dtype()), TypeError, "input ", i, " must be an integer tensor, got ", t.dtype());
  KILN_CHECK(t.dim() <= 1, ShapeError, "input ", i, " must be 1-d, got shape ", shape_str(t.shape()));
  return t.to_vector<int64_t>();
}

double OpContext::input_scalar(size_t i) const {
  const Tensor& t = input(i);
  KILN_CHECK(t.numel() == 1, ShapeError, "input ", i, " must hold one value, got shape ",
             shape_str(t.shape()));
  return t.to_vector<double>()[0];
}

const pb::AttributeProto* OpContext::find_attr(const std::string& name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

const pb::AttributeProto& OpContext::required_attr(const std::string& name, int type) const {
  const pb::AttributeProto* a = find_attr(name);
  KILN_CHECK(a != nullptr, ValueError, "attribute '", name, "' is required");
  // Old exporters leave the type unset; accept that when the expected field is filled.
  KILN_CHECK(a->type() == type || a->type() == pb::AttributeProto::UNDEFINED, ValueError,
             "attribute '", name, "' must be ", attr_type_name(type), ", got ", attr_type_name(a->type()));
  return *a;
}

int64_t OpContext::attr_int(const std::string& name, std::optional<int64_t> dflt) const {
  if (dflt && !find_attr(name)) return *dflt;
  return required_attr(name, pb::AttributeProto::INT).i();
}

float OpContext::attr_float(const std::string& name, std::optional<float> dflt) const {
  if (dflt && !find_attr(name)) return *dflt;
  return required_attr(name, pb::AttributeProto::FLOAT).f();
}

std::string OpContext::attr_string(const std::string& name, std::optional<std::string> dflt) const {
  if (dflt && !find_attr(name)) return *dflt;
  return required_attr(name, pb::AttributeProto::STRING).s();
}

std::vector<int64_t> OpContext::attr_ints(const std::string& name,
                                          std::optional<std::vector<int64_t>> dflt) const {
  if (dflt && !find_attr(name)) return *dflt;
  const auto& a = required_attr(name, pb::AttributeProto::INTS);
  return {a.ints().begin(), a.ints().end()};
}

std::vector<float> OpContext::attr_floats(const std::string& name,
                                          std::optional<std::vector<float>> dflt) const {
  if (dflt && !find_attr(name)) return *dflt;
  const auto& a = required_attr(name, pb::AttributeProto::FLOATS);
  return {a.floats().begin(), a.floats().end()};
}

Tensor OpContext::attr_tensor(const std::string& name) const {
  const auto& a = required_attr(name, pb::AttributeProto::TENSOR);
  return on_device(tensor_from_proto(a.t(), "", "attribute '" + name + "'"));
}

Tensor OpContext::on_device(const Tensor& t) const {
  return t.device() == device_ ? t : to_device(t, device_);
}

}  // namespace kiln::onnx
