// Eager execution: nodes run in the checked order, each through its op-table entry; values
// are dropped after their last use.
#include <set>

#include "kiln/onnx/model_state.h"
#include "kiln/onnx/op_table.h"

namespace kiln::onnx {

namespace {

// Rethrows the current exception with the node named in front, keeping its class (the
// Python bindings map classes to exception types).
[[noreturn]] void rethrow_for_node(const std::string& where) {
  try {
    throw;
  } catch (const ValueError& e) {
    throw ValueError(where + ": " + e.what());
  } catch (const TypeError& e) {
    throw TypeError(where + ": " + e.what());
  } catch (const IndexError& e) {
    throw IndexError(where + ": " + e.what());
  } catch (const ShapeError& e) {
    throw ShapeError(where + ": " + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(where + ": " + e.what());
  } catch (const NotImplementedError& e) {
    throw NotImplementedError(where + ": " + e.what());
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(where + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(where + ": out of host memory");
  } catch (const std::exception& e) {
    throw Error(where + ": " + e.what());
  }
}

void check_input(const ValueInfo& info, const Tensor& t, Device device) {
  const std::string who = "model input " + quoted(info.name);
  KILN_CHECK(t.defined(), ValueError, who, " is an undefined tensor");
  KILN_CHECK(info.kind == "tensor", NotImplementedError, who, " is a ", info.kind,
             "; kiln feeds tensors only");
  KILN_CHECK(t.device() == device, DeviceError, who, " is on ", t.device(), " but the model is on ",
             device, " (move the model with Model::to or the input with Tensor::to)");
  if (info.onnx_elem_type != 0) {
    KILN_CHECK(info.dtype.has_value(), NotImplementedError, who, " has element type ",
               info.onnx_elem_type, " which kiln lacks");
    KILN_CHECK(t.dtype() == *info.dtype, TypeError, who, " must be ", *info.dtype, ", got ", t.dtype());
  }
  if (info.shape) {
    const auto& dims = *info.shape;
    KILN_CHECK(int64_t(dims.size()) == t.dim(), ShapeError, who, " must have rank ", dims.size(),
               ", got shape ", shape_str(t.shape()));
    for (size_t d = 0; d < dims.size(); ++d) {
      KILN_CHECK(!dims[d].value || *dims[d].value == t.size(int64_t(d)), ShapeError, who,
                 " must have size ", dims[d].value.value_or(0), " in dim ", d, ", got shape ",
                 shape_str(t.shape()));
    }
  }
}

}  // namespace

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& feeds) const {
  const State& s = state();
  const pb::GraphProto& g = s.proto->graph();
  std::map<std::string, Tensor> env(s.initializers);
  std::set<std::string> declared;
  for (const auto& in : g.input()) declared.insert(in.name());
  for (const auto& [name, t] : feeds) {
    KILN_CHECK(declared.count(name), ValueError, "the model has no input ", quoted(name));
    env[name] = t;
  }
  for (const ValueInfo& in : s.inputs) {
    auto it = feeds.find(in.name);
    KILN_CHECK(it != feeds.end(), ValueError, "model input ", quoted(in.name), " was not given");
    check_input(in, it->second, s.device);
  }

  std::set<std::string> graph_outputs;
  for (const auto& out : g.output()) graph_outputs.insert(out.name());
  std::map<std::string, size_t> last_use;
  for (size_t pos = 0; pos < s.order.size(); ++pos) {
    for (const auto& in : g.node(s.order[pos]).input()) last_use[in] = pos;
  }

  const OpTable& table = op_table();
  for (size_t pos = 0; pos < s.order.size(); ++pos) {
    const int index = s.order[pos];
    const pb::NodeProto& node = g.node(index);
    const std::string where = describe_node(node, index);
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    OpFunction fn = default_domain ? table.find(node.op_type()) : nullptr;
    KILN_CHECK(fn != nullptr, NotImplementedError, where, ": operator not supported by kiln");
    std::vector<Tensor> inputs;
    inputs.reserve(size_t(node.input_size()));
    for (const auto& name : node.input()) {
      if (name.empty()) {
        inputs.emplace_back();
        continue;
      }
      auto it = env.find(name);
      KILN_CHECK(it != env.end(), ValueError, where, ": input ", quoted(name),
                 " has no value (an optional output that was not produced)");
      inputs.push_back(it->second);
    }
    std::vector<Tensor> outs;
    try {
      OpContext ctx(node, s.opset, std::move(inputs), s.device);
      outs = fn(ctx);
    } catch (...) {
      rethrow_for_node(where);
    }
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& name = node.output(i);
      if (name.empty()) continue;
      if (size_t(i) < outs.size() && outs[size_t(i)].defined()) {
        env[name] = std::move(outs[size_t(i)]);
      } else {
        KILN_CHECK(!graph_outputs.count(name) && !last_use.count(name), NotImplementedError, where,
                   ": output ", i, " (", quoted(name), ") is not produced by kiln's implementation");
      }
    }
    for (const auto& name : node.input()) {
      auto lu = last_use.find(name);
      if (lu != last_use.end() && lu->second == pos && !graph_outputs.count(name)) env.erase(name);
    }
  }
  std::map<std::string, Tensor> result;
  for (const auto& out : g.output()) {
    auto it = env.find(out.name());
    KILN_CHECK(it != env.end(), ValueError, "graph output ", quoted(out.name()), " was not produced");
    result[out.name()] = it->second;
  }
  return result;
}

}  // namespace kiln::onnx
