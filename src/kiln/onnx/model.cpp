// Loading: parse, check the opset and the graph, convert the initializers.
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "kiln/io/serialize.h"
#include "kiln/onnx/model_state.h"
#include "kiln/onnx/tensor_convert.h"
#include "kiln/onnx/tensor_proto.h"
#include "kiln/ops/copy.h"

namespace kiln::onnx {

namespace {

void collect_op_types(const pb::GraphProto& g, std::set<std::string>& out) {
  for (const auto& node : g.node()) {
    out.insert(node.domain().empty() || node.domain() == "ai.onnx"
                   ? node.op_type()
                   : node.domain() + ":" + node.op_type());
    for (const auto& a : node.attribute()) {
      if (a.has_g()) collect_op_types(a.g(), out);
      for (const auto& sub : a.graphs()) collect_op_types(sub, out);
    }
  }
}

}  // namespace

ValueInfo value_info_from_proto(const pb::ValueInfoProto& v) {
  ValueInfo info;
  info.name = v.name();
  if (!v.has_type()) {
    info.kind = "unknown";
    return info;
  }
  const pb::TypeProto& t = v.type();
  switch (t.value_case()) {
    case pb::TypeProto::kTensorType: break;
    case pb::TypeProto::kSequenceType: info.kind = "sequence"; return info;
    case pb::TypeProto::kMapType: info.kind = "map"; return info;
    case pb::TypeProto::kOptionalType: info.kind = "optional"; return info;
    default: info.kind = "unknown"; return info;
  }
  info.onnx_elem_type = t.tensor_type().elem_type();
  info.dtype = dtype_from_onnx(info.onnx_elem_type);
  if (t.tensor_type().has_shape()) {
    std::vector<Dim> dims;
    for (const auto& d : t.tensor_type().shape().dim()) {
      Dim dim;
      if (d.has_dim_value() && d.dim_value() >= 0) dim.value = d.dim_value();
      else if (d.has_dim_param()) dim.param = d.dim_param();
      dims.push_back(dim);
    }
    info.shape = std::move(dims);
  }
  return info;
}

Model load_from_bytes(const void* data, size_t size, const std::string& base_dir,
                      const std::string& name) {
  KILN_CHECK(size <= size_t(std::numeric_limits<int>::max()), ValueError, "ONNX model ", quoted(name),
             " is ", size, " bytes; protobuf messages are limited to 2 GiB (store large weights as external data)");
  auto proto = std::make_shared<pb::ModelProto>();
  KILN_CHECK(proto->ParseFromArray(data, int(size)), ValueError, "ONNX model ", quoted(name),
             " is not a valid serialized ModelProto (protobuf parsing failed)");
  KILN_CHECK(proto->has_graph(), ValueError, "ONNX model ", quoted(name), " has no graph");
  auto state = std::make_shared<Model::State>();
  state->name = name;

  // Opsets: the default domain must be one kiln runs; other domains matter only if a node
  // uses them (then the node is an unsupported operator).
  bool have_default = false;
  for (const auto& op : proto->opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      have_default = true;
      state->opset = op.version();
    }
  }
  // A model that imports no default-domain opset may only use other domains' operators.
  if (!have_default) {
    for (const auto& node : proto->graph().node()) {
      KILN_CHECK(!(node.domain().empty() || node.domain() == "ai.onnx"), ValueError, "ONNX model ",
                 quoted(name), " uses the default-domain operator ", quoted(node.op_type()),
                 " but imports no opset of the default domain (ai.onnx)");
    }
  } else {
    KILN_CHECK(state->opset >= kMinOpset && state->opset <= kMaxOpset, NotImplementedError,
               "ONNX model ", quoted(name), " uses opset ", state->opset, "; kiln supports opsets ",
               kMinOpset, " to ", kMaxOpset);
  }

  const pb::GraphProto& g = proto->graph();
  for (const auto& init : g.initializer()) {
    const std::string what = "initializer " + quoted(init.name());
    KILN_CHECK(!init.name().empty(), ValueError, "ONNX model ", quoted(name), ": an initializer has no name");
    KILN_CHECK(!state->initializers.count(init.name()), ValueError, "ONNX model ", quoted(name),
               ": ", what, " is defined twice");
    state->initializers.emplace(init.name(), tensor_from_proto(init, base_dir, what));
  }
  KILN_CHECK(g.sparse_initializer_size() == 0, NotImplementedError, "ONNX model ", quoted(name),
             ": sparse initializers are not supported");
  if (have_default) fold_into_convs(*proto->mutable_graph(), state->initializers,
                                                state->opset);
  std::vector<std::string> available;
  std::set<std::string> input_names;
  for (const auto& in : g.input()) {
    KILN_CHECK(input_names.insert(in.name()).second, ValueError, "ONNX model ", quoted(name),
               ": graph input ", quoted(in.name()), " is declared twice");
    available.push_back(in.name());
    if (!state->initializers.count(in.name())) state->inputs.push_back(value_info_from_proto(in));
  }
  for (const auto& [n, t] : state->initializers) {
    if (!input_names.count(n)) available.push_back(n);
  }
  for (const auto& out : g.output()) state->outputs.push_back(value_info_from_proto(out));
  // Subgraph plans are keyed by their address inside the proto, so it moves in first.
  state->proto = std::move(proto);
  try {
    plan_graphs(*state, available, base_dir);
    fold_constants(*state);
    fuse_pointwise_chains(*state);
    plan_shape_caches(*state);
    assign_value_slots(*state);
    collect_held_storage(*state);
  } catch (const ValueError& e) {
    KILN_THROW(ValueError, "ONNX model ", quoted(name), ": ", e.what());
  } catch (const NotImplementedError& e) {
    KILN_THROW(NotImplementedError, "ONNX model ", quoted(name), ": ", e.what());
  }
  return Model(std::move(state));
}

Model load(const std::string& path) {
  std::error_code ec;
  KILN_CHECK(std::filesystem::is_regular_file(path, ec), ValueError, "ONNX model ", quoted(path, 1024),
             " does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), ValueError, "cannot open ONNX model ", quoted(path, 1024));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::string dir = std::filesystem::path(path).parent_path().string();
  return load_from_bytes(bytes.data(), bytes.size(), dir.empty() ? "." : dir, path);
}

const Model::State& Model::state() const {
  KILN_CHECK(state_ != nullptr, ValueError, "onnx::Model: no model loaded");
  return *state_;
}
const std::vector<ValueInfo>& Model::inputs() const { return state().inputs; }
const std::vector<ValueInfo>& Model::outputs() const { return state().outputs; }
const std::map<std::string, Tensor>& Model::initializers() const { return state().initializers; }
int64_t Model::opset_version() const { return state().opset; }
int64_t Model::ir_version() const { return state().proto->ir_version(); }
const std::string& Model::producer_name() const { return state().proto->producer_name(); }
const std::string& Model::graph_name() const { return state().proto->graph().name(); }
size_t Model::num_nodes() const { return size_t(state().proto->graph().node_size()); }
Device Model::device() const { return state().device; }

std::vector<std::string> Model::op_types() const {
  std::set<std::string> types;
  collect_op_types(state().proto->graph(), types);
  return {types.begin(), types.end()};
}

Model Model::to(Device device) const {
  auto s = std::make_shared<State>(state());
  s->device = device;
  for (auto& [n, t] : s->initializers) t = to_device(t, device);
  auto move = [&](GraphPlan& plan) {
    // Kept shape-derived values live on the old device: this copy starts its own.
    if (plan.shape_cache) plan.shape_cache = std::make_shared<ShapeCache>();
    for (auto& [n, t] : plan.initializers) t = to_device(t, device);
    for (auto& [i, values] : plan.folded) {
      for (Value& v : values) {
        if (v.tensor.defined()) v.tensor = to_device(v.tensor, device);
        if (v.sequence) {
          for (Tensor& t : *v.sequence) t = to_device(t, device);
        }
      }
    }
  };
  move(s->main);
  for (auto& [g, plan] : s->subgraphs) move(plan);
  collect_held_storage(*s);
  return Model(std::move(s));
}

void Model::save_weights(const std::string& path) const { kiln::save(state().initializers, path); }

}  // namespace kiln::onnx
