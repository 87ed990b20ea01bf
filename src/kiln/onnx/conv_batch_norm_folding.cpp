// Folds an inference BatchNormalization into the Conv before it (decision 0060), as ONNX
// Runtime does at load: y = (conv(x, W) + B - mean) * a + bias with a = scale / sqrt(var +
// eps) is conv(x, W * a) + (B - mean) * a + bias, per output channel. Mobile networks (the
// PaddleOCR classifier: 35 of its 53 convolutions) follow every Conv by one; folded, the batch
// norm's pass over the activations is gone, and a following activation fuses alone.
//
// The main graph's ModelProto is rewritten before planning (the Conv reads new initializers
// and writes the batch norm's output; the batch norm node is removed), so every later pass
// sees an ordinary graph. Only constant parameters fold (initializers that are not also graph
// inputs, which a caller may feed, or Constant nodes' tensors: Paddle's exporter writes
// every weight as a Constant node), float32, with the Conv's output read by nothing but the
// batch norm (not a graph output, not read inside a subgraph). Parameters nothing reads
// any more are dropped (the initializer, or its Constant node).
#include <map>
#include <set>
#include <string>

#include "kiln/onnx/model_state.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/onnx/tensor_convert.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

const pb::AttributeProto* find_attribute(const pb::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool default_domain(const pb::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx";
}

// How many times each name is read as a node input, in the graph and every subgraph.
void count_reads(const pb::GraphProto& g, std::map<std::string, int>& reads) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) ++reads[in];
    for_each_subgraph(n, [&](const pb::GraphProto& sub) { count_reads(sub, reads); });
  }
}

class Folder {
 public:
  Folder(pb::GraphProto& graph, std::map<std::string, Tensor>& initializers, int64_t opset)
      : g_(graph), inits_(initializers), opset_(opset) {
    for (const auto& in : g_.input()) feedable_.insert(in.name());
    for (const auto& out : g_.output()) outputs_.insert(out.name());
    count_reads(g_, reads_);
    for (int i = 0; i < g_.node_size(); ++i)
      for (const auto& out : g_.node(i).output())
        if (!out.empty() && !producer_.emplace(out, i).second) well_formed_ = false;
    for (const auto& [name, t] : inits_)
      if (producer_.count(name)) well_formed_ = false;
  }

  void run() {
    if (!well_formed_) return;  // a value defined twice: left for planning to report
    for (int i = 0; i < g_.node_size(); ++i)
      if (fold(i)) removed_.insert(i);
    for (auto it = removed_.rbegin(); it != removed_.rend(); ++it)
      g_.mutable_node()->DeleteSubrange(*it, 1);
  }

 private:
  // A float32 initializer the caller cannot replace, or a Constant node's float32 tensor;
  // null otherwise.
  const Tensor* constant(const std::string& name) {
    if (name.empty() || feedable_.count(name)) return nullptr;
    const Tensor* t = nullptr;
    if (auto it = inits_.find(name); it != inits_.end()) {
      t = &it->second;
    } else if (auto c = constant_nodes_.find(name); c != constant_nodes_.end()) {
      t = &c->second;
    } else if (auto p = producer_.find(name); p != producer_.end()) {
      const pb::NodeProto& n = g_.node(p->second);
      const auto* v = find_attribute(n, "value");
      if (n.op_type() != "Constant" || !default_domain(n) || n.attribute_size() != 1 || !v ||
          !v->has_t() || n.output_size() != 1)
        return nullptr;
      try {
        t = &constant_nodes_.emplace(name, tensor_from_proto(v->t(), "", "Constant " + name))
                 .first->second;
      } catch (const Error&) {  // malformed: the Constant op reports it when it runs
        return nullptr;
      }
    }
    return t && t->dtype() == DType::F32 ? t : nullptr;
  }

  // Folds batch norm node bn_index into the Conv that produces its input; false (nothing
  // changed) when any condition does not hold.
  bool fold(int bn_index) {
    const pb::NodeProto& bn = g_.node(bn_index);
    if (bn.op_type() != "BatchNormalization" || !default_domain(bn) || opset_ < 9) return false;
    if (bn.input_size() != 5 || bn.output_size() < 1 || bn.output(0).empty()) return false;
    for (int o = 1; o < bn.output_size(); ++o)
      if (!bn.output(o).empty()) return false;  // running statistics asked for: training
    if (opset_ >= 14) {
      const auto* t = find_attribute(bn, "training_mode");
      if (t && t->i() != 0) return false;
    }
    const std::string& x = bn.input(0);
    if (reads_[x] != 1 || outputs_.count(x) || feedable_.count(x)) return false;
    auto p = producer_.find(x);
    if (p == producer_.end()) return false;
    pb::NodeProto& conv = *g_.mutable_node(p->second);
    if (conv.op_type() != "Conv" || !default_domain(conv) || conv.output_size() != 1 ||
        conv.input_size() < 2)
      return false;
    const Tensor* w = constant(conv.input(1));
    if (!w || w->dim() < 3) return false;
    const int64_t c = w->size(0);
    const Tensor* conv_bias = nullptr;
    if (conv.input_size() >= 3 && !conv.input(2).empty()) {
      conv_bias = constant(conv.input(2));
      if (!conv_bias || conv_bias->dim() != 1 || conv_bias->numel() != c) return false;
    }
    std::vector<Tensor> p4;  // scale, bias, mean, var
    for (int i = 1; i < 5; ++i) {
      const Tensor* t = constant(bn.input(i));
      if (!t || t->dim() != 1 || t->numel() != c) return false;
      p4.push_back(*t);
    }
    const auto* e = find_attribute(bn, "epsilon");
    const double eps = e ? e->f() : 1e-5f;
    // a and b exactly as op_batch_norm makes them, then W * a and B * a + b.
    Tensor a = div(p4[0], sqrt(add(p4[3], scalar_like(p4[3], eps))));
    Tensor b = sub(p4[1], mul(p4[2], a));
    Shape per_out(size_t(w->dim()), 1);
    per_out[0] = c;
    Tensor new_w = contiguous(mul(*w, reshape(a, per_out)));
    Tensor new_b = conv_bias ? add(mul(*conv_bias, a), b) : contiguous(b);
    const std::string prefix = "kiln/folded_batch_norm/" + bn.output(0) + "/";
    const std::string w_name = unused_name(prefix + "weight");
    const std::string b_name = unused_name(prefix + "bias");
    inits_.emplace(w_name, new_w);
    inits_.emplace(b_name, new_b);
    release(conv.input(1));
    if (conv_bias) release(conv.input(2));
    for (int i = 1; i < 5; ++i) release(bn.input(i));
    conv.set_input(1, w_name);
    if (conv.input_size() >= 3)
      conv.set_input(2, b_name);
    else
      conv.add_input(b_name);
    conv.set_output(0, bn.output(0));
    producer_[bn.output(0)] = p->second;
    return true;
  }

  std::string unused_name(const std::string& base) const {
    std::string name = base;
    for (int k = 1; inits_.count(name) || producer_.count(name) || feedable_.count(name); ++k)
      name = base + "." + std::to_string(k);
    return name;
  }

  // One read of a parameter is gone; it is dropped when nothing else reads it.
  void release(const std::string& name) {
    if (--reads_[name] != 0 || outputs_.count(name)) return;
    if (inits_.erase(name) == 0) {
      removed_.insert(producer_.at(name));  // its Constant node
      constant_nodes_.erase(name);
    }
  }

  pb::GraphProto& g_;
  std::map<std::string, Tensor>& inits_;
  int64_t opset_;
  std::set<std::string> feedable_, outputs_;
  std::map<std::string, int> reads_;
  std::map<std::string, int> producer_;
  std::map<std::string, Tensor> constant_nodes_;  // Constant nodes' tensors, as read
  std::set<int> removed_;                          // nodes to delete
  bool well_formed_ = true;
};

}  // namespace

void fold_batch_norms_into_convs(pb::GraphProto& graph,
                                 std::map<std::string, Tensor>& initializers, int64_t opset) {
  Folder(graph, initializers, opset).run();
}

}  // namespace kiln::onnx
