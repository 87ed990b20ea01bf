// Pointwise fusion at load time (decision 0056). Exported vision networks spell their
// activations as chains of small nodes: PaddleOCR's LCNet has, after every convolution, a
// learnable scale and shift (Mul, Add by scalars), a hard swish as Add 3, Clip 0..6, Mul,
// Div 6, and another scale and shift; mobile classifiers keep BatchNormalization nodes.
// Each node was a pass over memory, an allocation and a dispatch. Here the main graph's
// connected groups of such nodes that read one tensor (the root) and hand one value on are
// compiled into a PointwiseProgram, run as one op at the last node's place; the other nodes
// are skipped. The program's steps are the ops the nodes run, in order, so the values are
// the same bit for bit.
#include <algorithm>
#include <numeric>
#include <set>

#include "kiln/onnx/model_state.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

constexpr int64_t kMaxRegisters = 8;  // the CPU kernel's registers: 8 x 2 KiB

// One step with symbolic operands: values are numbered (0: the root), constants inline.
struct SymStep {
  PointwiseOp op;
  int64_t out = -1, a = -1;
  PointwiseOperand kind = PointwiseOperand::Scalar;
  int64_t b_value = -1;        // Register operand
  float scalar = 0, hi = 0;    // Scalar operand; Clamp: scalar is lo
  std::vector<float> channel;  // Channel operand
  bool reversed = false;
};

// What a node contributes, before values are numbered: steps whose operands are value names.
struct NodeSteps {
  struct Step {
    PointwiseOp op;
    std::string out, a, b;  // b: a value name for Register operands ("" otherwise)
    PointwiseOperand kind = PointwiseOperand::Scalar;
    float scalar = 0, hi = 0;
    std::vector<float> channel;
    bool reversed = false;
  };
  std::vector<Step> steps;
  std::vector<std::string> reads;  // the non-constant values the node reads
  int64_t scalar_rank = 0;         // the highest rank of its constants
  int vector_dim = 0;              // its vector constants run along dim 1 (1), the last (-1)
};

class Fuser {
 public:
  Fuser(Model::State& state) : state_(state), g_(state.proto->graph()), plan_(state.main) {}

  void run() {
    collect_constants();
    collect_external_reads();
    std::map<int, NodeSteps> steps;
    for (int index : plan_.order) {
      if (plan_.folded.count(index)) continue;
      NodeSteps s;
      if (describe(g_.node(index), s)) steps.emplace(index, std::move(s));
    }
    // Group: a node joins the group of the node producing a value it reads when every
    // reader of that value is a candidate and the value leaves no other way.
    std::map<std::string, int> producer;
    for (const auto& [index, s] : steps)
      for (const auto& o : g_.node(index).output()) producer[o] = index;
    std::map<std::string, std::vector<int>> readers;
    for (int index : plan_.order)
      for (const auto& in : g_.node(index).input()) readers[in].push_back(index);
    auto internal = [&](const std::string& v) {
      if (!producer.count(v) || plan_.outputs.count(v) || external_reads_.count(v)) return false;
      for (int r : readers[v])
        if (!steps.count(r)) return false;
      return !readers[v].empty();
    };
    std::map<int, int> parent;
    for (const auto& [index, s] : steps) parent[index] = index;
    auto find = [&](int i) {
      while (parent[i] != i) i = parent[i] = parent[parent[i]];
      return i;
    };
    for (const auto& [index, s] : steps)
      for (const auto& v : s.reads)
        if (internal(v)) parent[find(index)] = find(producer[v]);
    std::map<int, std::vector<int>> groups;
    for (const auto& [index, s] : steps) groups[find(index)].push_back(index);
    std::map<int, size_t> position;
    for (size_t p = 0; p < plan_.order.size(); ++p) position[plan_.order[p]] = p;
    for (auto& [root, nodes] : groups) {
      // A lone node gains only when it stands for several ops (a batch norm's five on its
      // statistics and two passes, a hard swish's four passes).
      if (nodes.size() < 2 && steps.at(nodes[0]).steps.size() < 2) continue;
      std::sort(nodes.begin(), nodes.end(),
                [&](int x, int y) { return position[x] < position[y]; });
      if (compile(nodes, steps, position) || nodes.size() < 2) continue;
      // A group that reads two tensors (a squeeze-and-excitation gate x * hard_sigmoid(s))
      // still runs its multi-step nodes each as one program.
      for (int i : nodes)
        if (steps.at(i).steps.size() >= 2) compile({i}, steps, position);
    }
  }

 private:
  void collect_constants() {
    std::set<std::string> fed;
    for (const auto& in : g_.input()) fed.insert(in.name());
    for (const auto& [name, t] : state_.initializers)
      if (!fed.count(name)) constants_[name] = t;
    for (const auto& [index, values] : plan_.folded) {
      const pb::NodeProto& node = g_.node(index);
      for (int i = 0; i < node.output_size() && size_t(i) < values.size(); ++i)
        if (values[size_t(i)].tensor.defined())
          constants_[node.output(i)] = values[size_t(i)].tensor;
    }
  }

  // Names read inside subgraphs (they may come from the main graph): never fused away.
  void collect_external_reads() {
    std::vector<const pb::GraphProto*> todo;
    auto subgraphs_of = [&](const pb::GraphProto& g) {
      for (const auto& node : g.node())
        for_each_subgraph(node, [&](const pb::GraphProto& sub) { todo.push_back(&sub); });
    };
    subgraphs_of(g_);
    while (!todo.empty()) {
      const pb::GraphProto* g = todo.back();
      todo.pop_back();
      for (const auto& node : g->node())
        for (const auto& in : node.input()) external_reads_.insert(in);
      subgraphs_of(*g);
    }
  }

  // A float32 constant of one element (its rank noted), or nullopt.
  std::optional<float> scalar_constant(const std::string& name, int64_t& rank) const {
    auto it = constants_.find(name);
    if (it == constants_.end()) return std::nullopt;
    const Tensor& t = it->second;
    if (t.dtype() != DType::F32 || t.numel() != 1) return std::nullopt;
    rank = std::max(rank, t.dim());
    return float(t.to(Device(DeviceType::CPU, 0)).item().to_double());
  }

  static std::vector<float> floats(const Tensor& t) {
    const Tensor v = t.to(Device(DeviceType::CPU, 0)).contiguous();
    const float* d = static_cast<const float*>(v.raw_data());
    return std::vector<float>(d, d + v.numel());
  }

  const Tensor* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : &it->second;
  }

  static bool default_domain(const pb::NodeProto& n) {
    return n.domain().empty() || n.domain() == "ai.onnx";
  }

  static const pb::AttributeProto* attr(const pb::NodeProto& n, const char* name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }

  bool describe(const pb::NodeProto& n, NodeSteps& s) const {
    if (!default_domain(n) || n.output_size() < 1 || n.output(0).empty()) return false;
    for (int i = 1; i < n.output_size(); ++i)
      if (!n.output(i).empty()) return false;
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0) return false;
    const std::string& type = n.op_type();
    const std::string& y = n.output(0);
    using Step = NodeSteps::Step;
    auto unary = [&](PointwiseOp op, const std::string& a, const std::string& out) {
      Step st;
      st.op = op;
      st.a = a;
      st.out = out;
      return st;
    };
    auto with_scalar = [&](PointwiseOp op, const std::string& a, float c, const std::string& out,
                           bool reversed = false) {
      Step st = unary(op, a, out);
      st.scalar = c;
      st.reversed = reversed;
      return st;
    };
    auto clamp = [&](const std::string& a, float lo, float hi, const std::string& out) {
      Step st = unary(PointwiseOp::Clamp, a, out);
      st.scalar = lo;
      st.hi = hi;
      return st;
    };
    if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div") {
      if (n.input_size() != 2) return false;
      const PointwiseOp op = type == "Add" ? PointwiseOp::Add : type == "Sub" ? PointwiseOp::Sub
                             : type == "Mul" ? PointwiseOp::Mul : PointwiseOp::Div;
      const std::string &a = n.input(0), &b = n.input(1);
      const bool ca = constants_.count(a) > 0, cb = constants_.count(b) > 0;
      if (ca && cb) return false;
      if (!ca && !cb) {
        Step st = unary(op, a, y);
        st.kind = PointwiseOperand::Register;
        st.b = b;
        s.steps.push_back(st);
        s.reads = {a, b};
        return true;
      }
      const std::string& c_name = ca ? a : b;
      s.reads = {ca ? b : a};
      if (const auto c = scalar_constant(c_name, s.scalar_rank)) {
        s.steps.push_back(with_scalar(op, ca ? b : a, *c, y, ca));
        return true;
      }
      // A bias row: [K] or [1, ..., 1, K], along the input's last dim.
      const Tensor* t = constant(c_name);
      if (!t || t->dtype() != DType::F32 || t->dim() < 1 || t->numel() != t->size(-1))
        return false;
      Step st = unary(op, ca ? b : a, y);
      st.kind = PointwiseOperand::Channel;
      st.channel = floats(*t);
      st.reversed = ca;
      s.steps.push_back(st);
      s.scalar_rank = t->dim();
      s.vector_dim = -1;
      return true;
    }
    if (n.input_size() < 1 || n.input(0).empty() || constants_.count(n.input(0))) return false;
    const std::string& x = n.input(0);
    s.reads = {x};
    static const std::map<std::string, PointwiseOp> kUnary{
        {"Relu", PointwiseOp::Relu}, {"Erf", PointwiseOp::Erf}, {"Sqrt", PointwiseOp::Sqrt},
        {"Neg", PointwiseOp::Neg},   {"Abs", PointwiseOp::Abs}};
    if (auto u = kUnary.find(type); u != kUnary.end()) {
      s.steps.push_back(unary(u->second, x, y));
      return true;
    }
    if (type == "Clip") {
      constexpr float kInf = std::numeric_limits<float>::infinity();
      float lo = -kInf, hi = kInf;
      if (state_.opset < 11) {
        if (const auto* a = attr(n, "min")) lo = a->f();
        if (const auto* a = attr(n, "max")) hi = a->f();
      } else {
        for (int i = 1; i < std::min(3, n.input_size()); ++i) {
          if (n.input(i).empty()) continue;
          const Tensor* t = constant(n.input(i));
          if (!t || t->dtype() != DType::F32 || t->numel() != 1) return false;
          (i == 1 ? lo : hi) = float(t->to(Device(DeviceType::CPU, 0)).item().to_double());
        }
      }
      if (!(lo <= hi)) return false;  // ONNX fills with max then (and NaN bounds: leave alone)
      s.steps.push_back(clamp(x, lo, hi, y));
      return true;
    }
    if (type == "HardSigmoid" || type == "HardSwish") {
      const bool swish = type == "HardSwish";
      const float alpha = swish ? float(1.0 / 6) : attr(n, "alpha") ? attr(n, "alpha")->f() : 0.2f;
      const float beta = swish ? 0.5f : attr(n, "beta") ? attr(n, "beta")->f() : 0.5f;
      const std::string t = y + "\x01hard", u = y + "\x01shift", v = swish ? y + "\x01gate" : y;
      s.steps.push_back(with_scalar(PointwiseOp::Mul, x, alpha, t));
      s.steps.push_back(with_scalar(PointwiseOp::Add, t, beta, u));
      s.steps.push_back(clamp(u, 0.0f, 1.0f, v));
      if (swish) {
        Step st = unary(PointwiseOp::Mul, x, y);
        st.kind = PointwiseOperand::Register;
        st.b = v;
        s.steps.push_back(st);
      }
      return true;
    }
    if (type == "BatchNormalization") return describe_batch_norm(n, x, y, s);
    return false;
  }

  // Inference batch norm as op_batch_norm computes it: x * a + b per channel, with
  // a = scale / sqrt(var + eps) and b = bias - mean * a made here by the same ops.
  bool describe_batch_norm(const pb::NodeProto& n, const std::string& x, const std::string& y,
                           NodeSteps& s) const {
    const int64_t opset = state_.opset;
    if (opset < 9) return false;  // is_test / spatial attributes: leave to the op
    if (opset >= 14) {
      const auto* t = attr(n, "training_mode");
      if (t && t->i() != 0) return false;
    }
    if (n.input_size() != 5) return false;
    std::vector<Tensor> p;
    for (int i = 1; i < 5; ++i) {
      const Tensor* t = constant(n.input(i));
      if (!t || t->dtype() != DType::F32 || t->dim() != 1) return false;
      p.push_back(t->to(Device(DeviceType::CPU, 0)));
    }
    const int64_t c = p[0].numel();
    for (const Tensor& t : p)
      if (t.numel() != c || c == 0) return false;
    const auto* e = attr(n, "epsilon");
    const double eps = e ? e->f() : 1e-5f;
    Tensor a = div(p[0], sqrt(add(p[3], scalar_like(p[3], eps))));
    Tensor b = sub(p[1], mul(p[2], a));
    NodeSteps::Step scale, shift;
    scale.op = PointwiseOp::Mul;
    scale.a = x;
    scale.out = y + "\x01scaled";
    scale.kind = PointwiseOperand::Channel;
    scale.channel = floats(a);
    shift.op = PointwiseOp::Add;
    shift.a = scale.out;
    shift.out = y;
    shift.kind = PointwiseOperand::Channel;
    shift.channel = floats(b);
    s.steps = {scale, shift};
    s.vector_dim = 1;
    return true;
  }

  // Whether the group became a chain (false: left to run node by node).
  bool compile(const std::vector<int>& nodes, const std::map<int, NodeSteps>& steps,
               const std::map<int, size_t>& position) {
    // The group's outside inputs must be one value (the root), its output one value.
    std::set<std::string> produced;
    for (int i : nodes)
      for (const auto& st : steps.at(i).steps) produced.insert(st.out);
    std::set<std::string> roots;
    for (int i : nodes)
      for (const auto& v : steps.at(i).reads)
        if (!produced.count(v)) roots.insert(v);
    const int tail = nodes.back();
    const std::string& output = g_.node(tail).output(0);
    if (roots.size() != 1) return false;
    for (int i : nodes)
      if (i != tail && !internal_only(g_.node(i).output(0), nodes)) return false;
    // Number the values, then give each a register from its step to its last use.
    std::map<std::string, int64_t> id{{*roots.begin(), 0}};
    std::vector<SymStep> sym;
    int64_t scalar_rank = 0;
    int vector_dim = 0;
    for (int i : nodes) {
      const NodeSteps& ns = steps.at(i);
      scalar_rank = std::max(scalar_rank, ns.scalar_rank);
      if (ns.vector_dim != 0 && vector_dim != 0 && ns.vector_dim != vector_dim) return false;
      if (ns.vector_dim != 0) vector_dim = ns.vector_dim;
      for (const auto& st : ns.steps) {
        SymStep s;
        s.op = st.op;
        s.a = id.at(st.a);
        s.kind = st.kind;
        if (st.kind == PointwiseOperand::Register) s.b_value = id.at(st.b);
        s.scalar = st.scalar;
        s.hi = st.hi;
        s.channel = st.channel;
        s.reversed = st.reversed;
        s.out = int64_t(id.size());
        id[st.out] = s.out;
        sym.push_back(std::move(s));
      }
    }
    std::vector<size_t> last_use(id.size(), 0);
    for (size_t k = 0; k < sym.size(); ++k) {
      last_use[size_t(sym[k].a)] = k;
      if (sym[k].b_value >= 0) last_use[size_t(sym[k].b_value)] = k;
    }
    PointwiseProgram prog;
    std::vector<int64_t> reg(id.size(), -1);
    reg[0] = 0;
    std::vector<bool> busy(kMaxRegisters, false);
    busy[0] = true;
    for (size_t k = 0; k < sym.size(); ++k) {
      const SymStep& s = sym[k];
      PointwiseStep p;
      p.op = s.op;
      p.a = reg[size_t(s.a)];
      p.kind = s.kind;
      p.reversed = s.reversed;
      if (s.op == PointwiseOp::Clamp) {
        p.b = int64_t(prog.scalars.size());
        prog.scalars.push_back(s.scalar);
        prog.scalars.push_back(s.hi);
      } else if (s.kind == PointwiseOperand::Register) {
        p.b = reg[size_t(s.b_value)];
      } else if (s.kind == PointwiseOperand::Scalar) {
        p.b = int64_t(prog.scalars.size());
        prog.scalars.push_back(s.scalar);
      } else {
        if (!prog.channels.empty() && prog.channels[0].size() != s.channel.size()) return false;
        p.b = int64_t(prog.channels.size());
        prog.channels.push_back(s.channel);
      }
      // Operands whose last use is this step free their registers for its result.
      for (int64_t v : {s.a, s.b_value})
        if (v >= 0 && last_use[size_t(v)] == k) busy[size_t(reg[size_t(v)])] = false;
      auto free = std::find(busy.begin(), busy.end(), false);
      if (free == busy.end()) return false;  // more live values than registers
      *free = true;
      p.dst = reg[size_t(s.out)] = int64_t(free - busy.begin());
      prog.registers = std::max(prog.registers, p.dst + 1);
      prog.steps.push_back(p);
    }
    prog.last_dim = vector_dim == -1;
    check_pointwise_program(prog);
    FusedChain chain;
    chain.root = *roots.begin();
    chain.output = output;
    chain.program = std::move(prog);
    chain.scalar_rank = scalar_rank;
    chain.nodes = nodes;
    // Values last read by the skipped nodes are dropped after the chain has run.
    const size_t at = position.at(tail);
    for (int i : nodes) {
      if (i == tail) continue;
      const size_t p = position.at(i);
      auto& from = plan_.drops[p];
      plan_.drops[at].insert(plan_.drops[at].end(), from.begin(), from.end());
      from.clear();
      plan_.absorbed.insert(i);
    }
    plan_.fused.emplace(tail, std::move(chain));
    return true;
  }

  // Whether every reader of v is one of nodes.
  bool internal_only(const std::string& v, const std::vector<int>& nodes) const {
    if (plan_.outputs.count(v) || external_reads_.count(v)) return false;
    for (int index : plan_.order)
      for (const auto& in : g_.node(index).input())
        if (in == v && std::find(nodes.begin(), nodes.end(), index) == nodes.end()) return false;
    return true;
  }

  Model::State& state_;
  const pb::GraphProto& g_;
  GraphPlan& plan_;
  std::map<std::string, Tensor> constants_;
  std::set<std::string> external_reads_;
};

}  // namespace

void fuse_pointwise_chains(Model::State& state) { Fuser(state).run(); }

bool fused_chain_applies(const FusedChain& chain, const Value& root) {
  if (root.is_sequence() || !root.tensor.defined() || root.tensor.dtype() != DType::F32)
    return false;
  const Tensor& x = root.tensor;
  const auto& channels = chain.program.channels;
  if (channels.empty()) return true;
  const int64_t c = int64_t(channels[0].size());
  return chain.program.last_dim ? x.dim() >= 1 && x.size(-1) == c
                                : x.dim() >= 2 && x.size(1) == c;
}

Tensor run_fused_chain(const FusedChain& chain, const Value& root) {
  const Tensor& x = root.tensor;
  // Off the CPU the same steps run as ordinary ops on the tensor's device.
  Tensor y = pointwise_program_supported(x, chain.program) ? pointwise_program(x, chain.program)
                                                           : run_pointwise_steps(x, chain.program);
  if (y.dim() < chain.scalar_rank) {  // a [1]-shaped constant broadcasts a 0-d input up
    Shape s(size_t(chain.scalar_rank - y.dim()), 1);
    s.insert(s.end(), y.shape().begin(), y.shape().end());
    y = reshape(y, s);
  }
  return y;
}

}  // namespace kiln::onnx
