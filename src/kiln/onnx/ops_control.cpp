// Control flow: If, Loop and Scan run their subgraphs through OpContext::run_graph, which
// lets a body read the enclosing graphs' values. Loop-carried values may be tensors or
// sequences; per-iteration (scan) outputs are stacked on a new leading axis.
#include <optional>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/onnx/tensor_convert.h"
#include "kiln/onnx/tensor_proto.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

bool truthy(const Tensor& t, const char* what) {
  KILN_CHECK(t.defined() && t.numel() == 1, ShapeError, what, " must hold one value, got ",
             t.defined() ? shape_str(t.shape()) : std::string("nothing"));
  return t.to_vector<double>()[0] != 0;
}

const Tensor& tensor_of(const Value& v, const std::string& what) {
  KILN_CHECK(v.defined() && !v.is_sequence(), TypeError, what, " must be a tensor");
  return v.tensor;
}

// Stacks per-iteration outputs; with no iterations, an empty tensor of the declared type.
Tensor stack_or_empty(const std::vector<Tensor>& items, const pb::ValueInfoProto& declared, Device device) {
  if (!items.empty()) return stack(items, 0);
  DType dtype = DType::F32;
  Shape shape{0};
  if (declared.has_type() && declared.type().has_tensor_type()) {
    const auto& tt = declared.type().tensor_type();
    if (auto d = dtype_from_onnx(tt.elem_type())) dtype = *d;
    for (const auto& dim : tt.shape().dim()) shape.push_back(dim.has_dim_value() ? dim.dim_value() : 0);
  }
  return empty(shape, TensorOptions(dtype, device));
}

std::vector<Tensor> op_if(OpContext& ctx) {
  const bool cond = truthy(ctx.input(0), "the condition");
  const char* branch = cond ? "then_branch" : "else_branch";
  std::vector<Value> outs = ctx.run_graph(ctx.attr_graph(branch), {});
  KILN_CHECK(outs.size() == ctx.num_outputs(), ValueError, branch, " has ", outs.size(),
             " outputs but the node has ", ctx.num_outputs());
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_value_output(i, std::move(outs[i]));
  return {};
}

// Inputs (M, cond, v...); body (iteration, cond, v...) -> (cond, v..., scan outputs...).
std::vector<Tensor> op_loop(OpContext& ctx) {
  const pb::GraphProto& body = ctx.attr_graph("body");
  KILN_CHECK(ctx.num_inputs() >= 2, ValueError, "Loop needs the inputs M and cond (either may be empty)");
  const size_t carried = ctx.num_inputs() - 2;
  KILN_CHECK(size_t(body.input_size()) == carried + 2, ValueError, "the body declares ", body.input_size(),
             " inputs; expected 2 + ", carried, " loop-carried values");
  KILN_CHECK(size_t(body.output_size()) >= carried + 1, ValueError, "the body declares ", body.output_size(),
             " outputs; expected at least 1 + ", carried);
  const size_t scans = size_t(body.output_size()) - 1 - carried;
  KILN_CHECK(ctx.num_outputs() <= carried + scans, ValueError, "the node has ", ctx.num_outputs(),
             " outputs but the body gives ", carried, " loop-carried values and ", scans, " scan outputs");
  std::optional<int64_t> trips;
  if (ctx.has_input(0)) trips = int64_t(ctx.input_scalar(0));
  const bool has_cond = ctx.has_input(1);
  bool cond = has_cond ? truthy(ctx.input(1), "cond") : true;
  std::vector<Value> state;
  for (size_t i = 0; i < carried; ++i) state.push_back(ctx.value_input(2 + i));
  std::vector<std::vector<Tensor>> scanned(scans);
  for (int64_t it = 0; (!trips || it < *trips) && cond; ++it) {
    std::vector<Value> in;
    in.emplace_back(ctx.on_device(scalar_tensor(it, TensorOptions(DType::I64))));
    in.emplace_back(ctx.on_device(scalar_tensor(cond, TensorOptions(DType::Bool))));
    for (auto& v : state) in.push_back(std::move(v));
    std::vector<Value> out = ctx.run_graph(body, std::move(in));
    // Without a cond input the body's condition is ignored (a for loop), unless there is no
    // trip count either: then it is the only way out.
    if (has_cond || !trips) cond = truthy(tensor_of(out[0], "the body's condition"), "the body's condition");
    for (size_t i = 0; i < carried; ++i) state[i] = std::move(out[1 + i]);
    for (size_t k = 0; k < scans; ++k) {
      scanned[k].push_back(tensor_of(out[1 + carried + k], "scan output " + std::to_string(k)));
    }
  }
  for (size_t i = 0; i < carried; ++i) ctx.set_value_output(i, std::move(state[i]));
  for (size_t k = 0; k < scans && carried + k < ctx.num_outputs(); ++k) {
    ctx.set_value_output(carried + k,
                         stack_or_empty(scanned[k], body.output(int(1 + carried + k)), ctx.device()));
  }
  return {};
}

struct ScanResult {
  std::vector<Value> states;
  std::vector<Tensor> outputs;
};

// One scan over inputs xs (their scan axes and directions given) with states carried through
// the body; per-iteration outputs stacked at their output axes (reversed for direction 1).
ScanResult scan_once(OpContext& ctx, const pb::GraphProto& body, std::vector<Value> states,
                     const std::vector<Tensor>& xs, const std::vector<int64_t>& in_axes,
                     const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                     const std::vector<int64_t>& out_dirs, size_t num_outputs) {
  int64_t steps = -1;
  std::vector<int64_t> axes(xs.size());
  for (size_t j = 0; j < xs.size(); ++j) {
    axes[j] = normalize_axis(in_axes[j], xs[j].dim(), "scan_input_axes entry");
    const int64_t n = xs[j].size(axes[j]);
    KILN_CHECK(steps < 0 || n == steps, ShapeError, "scan input ", j, " has ", n, " steps along axis ", axes[j],
               " but scan input 0 has ", steps);
    steps = n;
  }
  std::vector<std::vector<Tensor>> collected(num_outputs);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Value> in = states;
    for (size_t j = 0; j < xs.size(); ++j) in.emplace_back(select(xs[j], axes[j], in_dirs[j] ? steps - 1 - t : t));
    std::vector<Value> out = ctx.run_graph(body, std::move(in));
    for (size_t i = 0; i < states.size(); ++i) states[i] = std::move(out[i]);
    for (size_t k = 0; k < num_outputs; ++k) {
      collected[k].push_back(tensor_of(out[states.size() + k], "scan output " + std::to_string(k)));
    }
  }
  ScanResult r{std::move(states), {}};
  for (size_t k = 0; k < num_outputs; ++k) {
    auto& items = collected[k];
    if (out_dirs[k]) std::reverse(items.begin(), items.end());
    if (items.empty()) {
      r.outputs.push_back(stack_or_empty(items, body.output(int(r.states.size() + k)), ctx.device()));
      continue;
    }
    const int64_t axis = normalize_axis(out_axes[k], items[0].dim() + 1, "scan_output_axes entry");
    r.outputs.push_back(stack(items, axis));
  }
  return r;
}

std::vector<int64_t> per_input(const OpContext& ctx, const char* name, size_t n) {
  std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(n, 0));
  KILN_CHECK(v.size() == n, ValueError, "attribute '", name, "' has ", v.size(), " entries; expected ", n);
  return v;
}

// Opset 9+: inputs (states..., scan inputs...). Opset 8: (sequence_lens, states...,
// scan inputs...) with a leading batch axis everywhere, scanned along axis 1.
std::vector<Tensor> op_scan(OpContext& ctx) {
  const pb::GraphProto& body = ctx.attr_graph("body");
  const size_t m = size_t(ctx.attr_int("num_scan_inputs"));
  const bool batched = ctx.opset() < 9;
  const size_t first = batched ? 1 : 0;
  KILN_CHECK(ctx.num_inputs() >= first + m, ValueError, "num_scan_inputs is ", m, " but the node has ",
             ctx.num_inputs(), " inputs");
  const size_t n = ctx.num_inputs() - first - m;
  KILN_CHECK(size_t(body.input_size()) == n + m, ValueError, "the body declares ", body.input_size(),
             " inputs; expected ", n, " states + ", m, " scan inputs");
  KILN_CHECK(size_t(body.output_size()) >= n, ValueError, "the body has fewer outputs than states");
  const size_t k = size_t(body.output_size()) - n;
  std::vector<Value> states;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < n; ++i) states.push_back(ctx.value_input(first + i));
  for (size_t j = 0; j < m; ++j) xs.push_back(ctx.input(first + n + j));

  if (!batched) {
    ScanResult r = scan_once(ctx, body, states, xs, per_input(ctx, "scan_input_axes", m),
                             per_input(ctx, "scan_input_directions", m), per_input(ctx, "scan_output_axes", k),
                             per_input(ctx, "scan_output_directions", k), k);
    for (size_t i = 0; i < n; ++i) ctx.set_value_output(i, std::move(r.states[i]));
    for (size_t j = 0; j < k; ++j) ctx.set_value_output(n + j, std::move(r.outputs[j]));
    return {};
  }
  const std::vector<int64_t> dirs = per_input(ctx, "directions", m);
  KILN_CHECK(!xs.empty(), ValueError, "Scan needs at least one scan input");
  const int64_t batch = xs[0].size(0);
  if (ctx.has_input(0)) {
    const int64_t full = xs[0].dim() > 1 ? xs[0].size(1) : 0;
    for (int64_t len : ctx.input_ints(0)) {
      KILN_CHECK(len == full, NotImplementedError, "sequence_lens shorter than the scan axis (", len,
                 " of ", full, ") are not supported");
    }
  }
  std::vector<std::vector<Tensor>> final_states(n), outputs(k);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> sb;
    for (const auto& s : states) sb.emplace_back(select(tensor_of(s, "a Scan state"), 0, b));
    std::vector<Tensor> xb;
    for (const auto& x : xs) xb.push_back(select(x, 0, b));
    ScanResult r = scan_once(ctx, body, sb, xb, std::vector<int64_t>(m, 0), dirs, std::vector<int64_t>(k, 0),
                             std::vector<int64_t>(k, 0), k);
    for (size_t i = 0; i < n; ++i) final_states[i].push_back(tensor_of(r.states[i], "a Scan state"));
    for (size_t j = 0; j < k; ++j) outputs[j].push_back(r.outputs[j]);
  }
  std::vector<Tensor> result;
  for (auto& v : final_states) result.push_back(stack(v, 0));
  for (auto& v : outputs) result.push_back(stack(v, 0));
  return result;
}

}  // namespace

void register_control_ops(OpTable& t) {
  t.add("If", op_if);
  t.add("Loop", op_loop);
  t.add("Scan", op_scan);
}

}  // namespace kiln::onnx
