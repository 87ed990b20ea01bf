// fuse_pointwise (include/kiln/graph/passes.h): groups of float32 elementwise nodes over one
// root tensor become one pointwise_program node (decision 0056's one-pass interpreter, whose
// steps round as the ops do, so results stay bit for bit the eager ones).
//
// A group grows in program order: a node joins when its operands are the group's root, values
// the group computed, or literal 0-d scalars, and its result has the root's shape. A group is
// replaced when it has two or more nodes and only its last value is read outside it.
#include <cmath>
#include <map>
#include <set>

#include "kiln/graph/passes.h"
#include "kiln/ops/pointwise_program.h"

namespace kiln::graph {

namespace {

struct Step {
  PointwiseOp op;
  bool binary;
};

// The program step an op stands for, if it has one.
std::optional<Step> step_of(const Node& n) {
  static const std::map<std::string, Step> steps = {
      {"add", {PointwiseOp::Add, true}},     {"sub", {PointwiseOp::Sub, true}},
      {"mul", {PointwiseOp::Mul, true}},     {"div", {PointwiseOp::Div, true}},
      {"maximum", {PointwiseOp::Max, true}}, {"minimum", {PointwiseOp::Min, true}},
      {"relu", {PointwiseOp::Relu, false}},  {"neg", {PointwiseOp::Neg, false}},
      {"abs", {PointwiseOp::Abs, false}},    {"clamp", {PointwiseOp::Clamp, false}},
      {"erf", {PointwiseOp::Erf, false}},    {"sqrt", {PointwiseOp::Sqrt, false}},
  };
  if (n.kind != NodeKind::Op) return std::nullopt;
  auto it = steps.find(n.op->name);
  if (it == steps.end() || !n.outs.empty() || n.results.size() != 1) return std::nullopt;
  const Step s = it->second;
  if (int64_t(n.inputs.size()) != (s.binary ? 2 : 1)) return std::nullopt;
  // add / sub with an alpha other than 1, div with a rounding mode: not program steps.
  if ((n.op->name == "add" || n.op->name == "sub") && n.attrs.size() > 0 &&
      std::holds_alternative<Scalar>(n.attrs[0]) &&
      std::get<Scalar>(n.attrs[0]).to_double() != 1.0)
    return std::nullopt;
  if (n.op->name == "div" && n.attrs.size() > 0 &&
      !std::holds_alternative<std::monostate>(n.attrs[0]) &&
      !(std::holds_alternative<std::string>(n.attrs[0]) &&
        std::get<std::string>(n.attrs[0]).empty()))
    return std::nullopt;
  if (n.op->name == "clamp")
    for (const AttrValue& a : n.attrs)
      if (!std::holds_alternative<std::monostate>(a) && !std::holds_alternative<Scalar>(a))
        return std::nullopt;
  return s;
}

struct Group {
  ValueId root = kNoValue;
  std::vector<size_t> nodes;          // indices into the graph's nodes
  std::map<ValueId, int64_t> regs;    // value -> register (the root is register 0)
  PointwiseProgram program;
};

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g) {
    for (const auto& [id, t] : g.constants)
      if (g.info[size_t(id)].literal && t.dim() == 0) literal_[id] = t.item<float>();
  }

  int64_t run() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) consider(i);
    return replace_groups();
  }

 private:
  // The devices with a pointwise_program kernel: the CPU's interpreter and the xpu backend's
  // generated kernels.
  bool f32_dense_fusable(ValueId id) const {
    const ValueInfo& v = g_.info[size_t(id)];
    return v.dtype == DType::F32 && v.dense &&
           (v.device.type == DeviceType::CPU || v.device.type == DeviceType::XPU);
  }

  void consider(size_t i) {
    const Node& n = g_.nodes[i];
    const std::optional<Step> step = step_of(n);
    if (!step || !f32_dense_fusable(n.results[0])) return;
    // The tensor operands: each must be in one group (or be its root), or be a literal.
    int64_t group = -1;
    ValueId fresh_root = kNoValue;
    for (ValueId id : n.inputs) {
      if (literal_.count(id)) continue;
      auto owner = owner_.find(id);
      const int64_t gi = owner != owner_.end() ? owner->second : -1;
      if (gi >= 0) {
        if (group >= 0 && group != gi) return;
        group = gi;
      } else {
        if (fresh_root != kNoValue && fresh_root != id) return;
        fresh_root = id;
      }
    }
    if (group >= 0 && fresh_root != kNoValue && groups_[size_t(group)].root != fresh_root)
      return;
    if (group < 0 && fresh_root == kNoValue) return;  // literals only: constant folding's job
    if (group < 0) {
      if (!f32_dense_fusable(fresh_root)) return;
      groups_.push_back({});
      group = int64_t(groups_.size() - 1);
      groups_.back().root = fresh_root;
      groups_.back().regs[fresh_root] = 0;
    }
    Group& gr = groups_[size_t(group)];
    if (g_.info[size_t(n.results[0])].shape != g_.info[size_t(gr.root)].shape) return;
    add_step(gr, n, *step);
    gr.nodes.push_back(i);
    owner_[n.results[0]] = group;
  }

  // A literal operand's index in the program's scalars.
  int64_t scalar(Group& gr, float v) {
    gr.program.scalars.push_back(v);
    return int64_t(gr.program.scalars.size() - 1);
  }

  void add_step(Group& gr, const Node& n, const Step& step) {
    PointwiseStep s;
    s.op = step.op;
    s.dst = gr.program.registers++;
    ValueId a = n.inputs[0];
    if (step.binary) {
      ValueId b = n.inputs[1];
      if (literal_.count(a) && !literal_.count(b)) {  // literal op value: reversed
        std::swap(a, b);
        s.reversed = true;
      }
      s.a = gr.regs.at(a);
      if (literal_.count(b)) {
        s.kind = PointwiseOperand::Scalar;
        s.b = scalar(gr, literal_.at(b));
      } else {
        s.kind = PointwiseOperand::Register;
        s.b = gr.regs.at(b);
      }
    } else {
      s.a = gr.regs.at(a);
      if (step.op == PointwiseOp::Clamp) {
        auto bound = [&](size_t k, float none) {
          return k < n.attrs.size() && std::holds_alternative<Scalar>(n.attrs[k])
                     ? float(std::get<Scalar>(n.attrs[k]).to_double())
                     : none;
        };
        s.b = scalar(gr, bound(0, -INFINITY));
        scalar(gr, bound(1, INFINITY));
      }
    }
    gr.regs[n.results[0]] = s.dst;
    gr.program.steps.push_back(s);
  }

  int64_t replace_groups() {
    // Reads of each value outside its group (graph outputs count as reads).
    std::map<ValueId, int64_t> outside_reads;
    for (ValueId id : g_.outputs) ++outside_reads[id];
    std::vector<int64_t> group_of_node(g_.nodes.size(), -1);
    for (size_t gi = 0; gi < groups_.size(); ++gi)
      for (size_t i : groups_[gi].nodes) group_of_node[i] = int64_t(gi);
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (ValueId id : g_.nodes[i].inputs) {
        auto owner = owner_.find(id);
        if (owner == owner_.end() || owner->second != group_of_node[i]) ++outside_reads[id];
      }
    std::set<size_t> removed;
    std::map<size_t, Node> replacement;  // at the group's last node
    int64_t fused = 0;
    for (Group& gr : groups_) {
      if (gr.nodes.size() < 2) continue;
      const ValueId last = g_.nodes[gr.nodes.back()].results[0];
      bool inner_escapes = false;
      for (size_t k = 0; k + 1 < gr.nodes.size(); ++k)
        inner_escapes = inner_escapes || outside_reads[g_.nodes[gr.nodes[k]].results[0]] > 0;
      if (inner_escapes) continue;
      Node n;
      n.op = &get_op("pointwise_program");
      n.inputs = {gr.root};
      n.attrs = {encode_pointwise_program(gr.program)};
      n.results = {last};
      for (size_t i : gr.nodes) removed.insert(i);
      replacement[gr.nodes.back()] = std::move(n);
      fused += int64_t(gr.nodes.size());
    }
    std::vector<Node> out;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      auto r = replacement.find(i);
      if (r != replacement.end())
        out.push_back(std::move(r->second));
      else if (!removed.count(i))
        out.push_back(std::move(g_.nodes[i]));
    }
    g_.nodes = std::move(out);
    return fused;
  }

  Graph& g_;
  std::map<ValueId, float> literal_;
  std::map<ValueId, int64_t> owner_;  // value -> group that computes it
  std::vector<Group> groups_;
};

}  // namespace

int64_t fuse_pointwise(Graph& graph) {
  // An in-place write between a group's steps would be read by the fused pass at the group's
  // end instead of where the step was: graphs that mutate are left as they are.
  if (graph.mutates()) return 0;
  return Fuser(graph).run();
}

}  // namespace kiln::graph
