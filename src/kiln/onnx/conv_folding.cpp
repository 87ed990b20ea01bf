// Folds an inference BatchNormalization, or an Add of a per-channel constant (a bias), into
// the Conv before it (decision 0060), as ONNX Runtime does at load: y = (conv(x, W) + B - mean) * a + bias with a = scale / sqrt(var +
// eps) is conv(x, W * a) + (B - mean) * a + bias, per output channel. Mobile networks (the
// PaddleOCR classifier: 35 of its 53 convolutions) follow every Conv by one; folded, the batch
// norm's pass over the activations is gone, and a following activation fuses alone.
//
// The ModelProto is rewritten before planning (the Conv reads new initializers and writes the
// batch norm's output; the batch norm node is removed), so every later pass sees an ordinary
// graph; subgraphs (If branches, Loop / Scan bodies) are folded the same way. Only constant parameters fold (initializers that are not also graph
// inputs, which a caller may feed, or Constant nodes' tensors: Paddle's exporter writes
// every weight as a Constant node), float32, with the Conv's output read by nothing but the
// batch norm (not a graph output, not read inside a subgraph). Parameters nothing reads
// any more are dropped (the initializer, or its Constant node).
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/onnx/model_state.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/onnx/tensor_convert.h"
#include "kiln/ops/conv.h"
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

// Folds within one graph (the main graph or a subgraph). reads: every name's reads over the
// whole model (a subgraph may read the main graph's initializers, which other graphs read
// too), shared by the graphs' folders so that a parameter is dropped only when no graph
// reads it any more. outer_feedable: the main graph's inputs (a caller may feed those).
class Folder {
 public:
  Folder(pb::GraphProto& graph, std::map<std::string, Tensor>& initializers, int64_t opset,
         std::map<std::string, int>& reads, const std::set<std::string>& outer_feedable)
      : g_(graph), inits_(initializers), opset_(opset), feedable_(outer_feedable), reads_(reads) {
    for (const auto& in : g_.input()) feedable_.insert(in.name());
    for (const auto& out : g_.output()) outputs_.insert(out.name());
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
    } else if (auto p = producer_.find(name); p != producer_.end() &&
                                               g_.node(p->second).op_type() == "Reshape") {
      t = reshaped_constant(name, g_.node(p->second));
    } else if (p != producer_.end()) {
      t = constant_node_value(name, g_.node(p->second));
    }
    return t && t->dtype() == DType::F32 ? t : nullptr;
  }

  // The tensor of Constant node n (which writes name), read once and kept; null when n is
  // not a plain Constant or its tensor is malformed (the Constant op reports that when it runs).
  const Tensor* constant_node_value(const std::string& name, const pb::NodeProto& n) {
    const auto* v = find_attribute(n, "value");
    if (n.op_type() != "Constant" || !default_domain(n) || n.attribute_size() != 1 || !v ||
        !v->has_t() || n.output_size() != 1)
      return nullptr;
    try {
      return &constant_nodes_.emplace(name, tensor_from_proto(v->t(), "", "Constant " + name))
                  .first->second;
    } catch (const Error&) {
      return nullptr;
    }
  }

  // The Conv producing x, when x is read only once and the Conv's weights (and bias) are
  // constant float32: the node and its parameters; conv null otherwise.
  struct FoldableConv {
    pb::NodeProto* conv = nullptr;
    int index = -1;
    const Tensor* w = nullptr;
    const Tensor* bias = nullptr;  // null when the Conv has none
  };
  FoldableConv conv_producing(const std::string& x, int reads = 1) {
    FoldableConv f;
    if (reads_[x] != reads || outputs_.count(x) || feedable_.count(x)) return f;
    auto p = producer_.find(x);
    if (p == producer_.end()) return f;
    pb::NodeProto& conv = *g_.mutable_node(p->second);
    if (conv.op_type() != "Conv" || !default_domain(conv) || conv.output_size() != 1 ||
        conv.input_size() < 2)
      return f;
    const Tensor* w = constant(conv.input(1));
    if (!w || w->dim() < 3) return f;
    if (conv.input_size() >= 3 && !conv.input(2).empty()) {
      f.bias = constant(conv.input(2));
      if (!f.bias || f.bias->dim() != 1 || f.bias->numel() != w->size(0)) return f;
    }
    f.conv = &conv;
    f.index = p->second;
    f.w = w;
    return f;
  }

  // Points f's Conv at new parameters (new_w undefined: the weights stay) and makes it write
  // `output` (the folded node's output).
  void rewrite_conv(const FoldableConv& f, const Tensor& new_w, const Tensor& new_b,
                    const std::string& output) {
    pb::NodeProto& conv = *f.conv;
    const std::string prefix = "kiln/folded/" + output + "/";
    if (new_w.defined()) {
      const std::string w_name = unused_name(prefix + "weight");
      inits_.emplace(w_name, new_w);
      release(conv.input(1));
      conv.set_input(1, w_name);
    }
    const std::string b_name = unused_name(prefix + "bias");
    inits_.emplace(b_name, new_b);
    if (f.bias) release(conv.input(2));
    if (conv.input_size() >= 3)
      conv.set_input(2, b_name);
    else
      conv.add_input(b_name);
    conv.set_output(0, output);
    producer_[output] = f.index;
  }

  bool fold(int index) {
    return fold_batch_norm(index) || fold_bias_add(index) || fold_activation(index);
  }

  // The value of a one-element float32 constant, or nullopt.
  std::optional<double> constant_scalar(const std::string& name) {
    const Tensor* t = constant(name);
    if (!t || t->numel() != 1) return std::nullopt;
    return t->to(Device(DeviceType::CPU, 0)).item<double>();
  }

  // The node producing x when it is read `reads` times (not a graph output) and is op `type`
  // of the default domain with one output; null otherwise.
  const pb::NodeProto* single_use_producer(const std::string& x, const char* type, int* index) {
    if (reads_[x] != 1 || outputs_.count(x) || feedable_.count(x)) return nullptr;
    auto p = producer_.find(x);
    if (p == producer_.end()) return nullptr;
    const pb::NodeProto& n = g_.node(p->second);
    if (n.op_type() != type || !default_domain(n) || n.output_size() != 1) return nullptr;
    *index = p->second;
    return &n;
  }

  // A Clip's bounds when constant (attributes before opset 11, inputs from 11; an omitted
  // bound is unbounded); nullopt otherwise.
  std::optional<std::pair<double, double>> clip_bounds(const pb::NodeProto& clip) {
    double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
    if (opset_ < 11) {
      if (const auto* a = find_attribute(clip, "min")) lo = a->f();
      if (const auto* a = find_attribute(clip, "max")) hi = a->f();
      return std::make_pair(lo, hi);
    }
    for (int i = 1; i < clip.input_size() && i < 3; ++i) {
      if (clip.input(i).empty()) continue;
      const std::optional<double> v = constant_scalar(clip.input(i));
      if (!v) return std::nullopt;
      (i == 1 ? lo : hi) = *v;
    }
    return std::make_pair(lo, hi);
  }

  // An activation after a Conv into the Conv (attributes kiln_activation / kiln_alpha /
  // kiln_beta, read by op_conv, kiln/ops/conv.h's convolution_activation), as ONNX Runtime
  // fuses them: Relu, HardSigmoid, HardSwish, Clip with constant bounds, and the exporters'
  // hard swish x * (clip(x + 3, 0, 6) / 6) (Add, Clip, Div, Mul: the PaddleOCR classifier's
  // 18 of them ran as separate pointwise programs).
  bool fold_activation(int index) {
    const pb::NodeProto& n = g_.node(index);
    if (!default_domain(n) || n.output_size() != 1 || n.output(0).empty() || n.input_size() < 1)
      return false;
    const std::string& type = n.op_type();
    const std::string& out = n.output(0);
    if (type == "Relu" && n.input_size() == 1)
      return fuse_activation(n.input(0), 1, ConvActivation::Relu, 0, 0, out, {});
    if (type == "HardSwish" && n.input_size() == 1)
      return fuse_activation(n.input(0), 1, ConvActivation::HardSwish, 0, 0, out, {});
    if (type == "HardSigmoid" && n.input_size() == 1) {
      const auto* a = find_attribute(n, "alpha");
      const auto* b = find_attribute(n, "beta");
      return fuse_activation(n.input(0), 1, ConvActivation::HardSigmoid, a ? a->f() : 0.2f,
                             b ? b->f() : 0.5f, out, {});
    }
    if (type == "Clip") {
      const auto bounds = clip_bounds(n);
      if (!bounds || !(bounds->first <= bounds->second)) return false;
      if (!fuse_activation(n.input(0), 1, ConvActivation::Clip, bounds->first, bounds->second,
                           out, {}))
        return false;
      for (int i = 1; i < n.input_size(); ++i)
        if (!n.input(i).empty()) release(n.input(i));
      return true;
    }
    if ((type == "Mul" || type == "Div") && n.input_size() == 2) return fold_hard_swish(n);
    return false;
  }

  // Whether c is Clip(Add(x, 3), 0, 6) (either Add operand order), each step read once: the
  // Clip and Add nodes go to `nodes`, their constants to `consts`.
  bool relu6_of_x_plus_3(const std::string& c, const std::string& x, std::vector<int>& nodes,
                         std::vector<std::string>& consts) {
    int clip_i = -1, add_i = -1;
    const pb::NodeProto* clip = single_use_producer(c, "Clip", &clip_i);
    if (!clip) return false;
    const auto bounds = clip_bounds(*clip);
    if (!bounds || bounds->first != 0.0 || bounds->second != 6.0) return false;
    const pb::NodeProto* add = single_use_producer(clip->input(0), "Add", &add_i);
    if (!add || add->input_size() != 2) return false;
    const int x_side = add->input(0) == x ? 0 : add->input(1) == x ? 1 : -1;
    if (x_side < 0 || constant_scalar(add->input(1 - x_side)) != 3.0) return false;
    nodes.insert(nodes.end(), {clip_i, add_i});
    consts.push_back(add->input(1 - x_side));
    for (int i = 1; i < clip->input_size(); ++i)
      if (!clip->input(i).empty()) consts.push_back(clip->input(i));
    return true;
  }

  // Hard swish as exporters write it, x read by the Add and the Mul only, each step read once:
  // Mul(x, Div(Clip(Add(x, 3), 0, 6), 6)) (anchored at the Mul) or Div(Mul(x, Clip(Add(x, 3),
  // 0, 6)), 6) (PaddlePaddle's, anchored at the Div); either operand order.
  bool fold_hard_swish(const pb::NodeProto& n) {
    const bool at_div = n.op_type() == "Div";
    const pb::NodeProto* mul = &n;
    std::vector<int> nodes;
    std::vector<std::string> consts;
    if (at_div) {
      int mul_i = -1;
      if (constant_scalar(n.input(1)) != 6.0) return false;
      mul = single_use_producer(n.input(0), "Mul", &mul_i);
      if (!mul || mul->input_size() != 2) return false;
      nodes.push_back(mul_i);
      consts.push_back(n.input(1));
    }
    for (int side = 0; side < 2; ++side) {
      const std::string& x = mul->input(side);
      std::vector<int> more = nodes;
      std::vector<std::string> more_consts = consts;
      std::string clipped = mul->input(1 - side);
      if (!at_div) {
        int div_i = -1;
        const pb::NodeProto* div = single_use_producer(clipped, "Div", &div_i);
        if (!div || div->input_size() != 2 || constant_scalar(div->input(1)) != 6.0) continue;
        more.push_back(div_i);
        more_consts.push_back(div->input(1));
        clipped = div->input(0);
      }
      if (!relu6_of_x_plus_3(clipped, x, more, more_consts)) continue;
      if (!fuse_activation(x, 2, ConvActivation::HardSwish, 0, 0, n.output(0), more)) continue;
      for (const auto& c : more_consts) release(c);
      return true;
    }
    return false;
  }

  // Makes the Conv producing x (read `reads` times, by the activation's nodes) apply the
  // activation and write `output`; the activation's other nodes are removed.
  bool fuse_activation(const std::string& x, int reads, ConvActivation act, double alpha,
                       double beta, const std::string& output, const std::vector<int>& nodes) {
    const FoldableConv f = conv_producing(x, reads);
    if (!f.conv || find_attribute(*f.conv, "kiln_activation")) return false;
    pb::NodeProto& conv = *f.conv;
    auto* a = conv.add_attribute();
    a->set_name("kiln_activation");
    a->set_type(pb::AttributeProto::INT);
    a->set_i(int64_t(act));
    for (const auto& [name, v] : {std::pair<const char*, double>{"kiln_alpha", alpha},
                                  std::pair<const char*, double>{"kiln_beta", beta}}) {
      auto* p = conv.add_attribute();
      p->set_name(name);
      p->set_type(pb::AttributeProto::FLOAT);
      p->set_f(float(v));
    }
    conv.set_output(0, output);
    producer_[output] = f.index;
    for (int i : nodes) removed_.insert(i);
    return true;
  }

  // A batch norm node into the Conv that produces its input.
  bool fold_batch_norm(int bn_index) {
    const pb::NodeProto& bn = g_.node(bn_index);
    if (bn.op_type() != "BatchNormalization" || !default_domain(bn) || opset_ < 9) return false;
    if (bn.input_size() != 5 || bn.output_size() < 1 || bn.output(0).empty()) return false;
    for (int o = 1; o < bn.output_size(); ++o)
      if (!bn.output(o).empty()) return false;  // running statistics asked for: training
    if (opset_ >= 14) {
      const auto* t = find_attribute(bn, "training_mode");
      if (t && t->i() != 0) return false;
    }
    const FoldableConv f = conv_producing(bn.input(0));
    if (!f.conv) return false;
    const int64_t c = f.w->size(0);
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
    Shape per_out(size_t(f.w->dim()), 1);
    per_out[0] = c;
    Tensor new_w = contiguous(mul(*f.w, reshape(a, per_out)));
    Tensor new_b = f.bias ? add(mul(*f.bias, a), b) : contiguous(b);
    for (int i = 1; i < 5; ++i) release(bn.input(i));
    rewrite_conv(f, new_w, new_b, bn.output(0));
    return true;
  }

  // An Add of a Conv's output and a per-channel (or one-element) constant into the Conv's
  // bias (the squeeze-and-excitation blocks of mobile networks: Conv, then Add of the bias
  // reshaped to [1, C, 1, 1]).
  bool fold_bias_add(int add_index) {
    const pb::NodeProto& n = g_.node(add_index);
    if (n.op_type() != "Add" || !default_domain(n) || n.input_size() != 2 ||
        n.output_size() != 1 || n.output(0).empty())
      return false;
    for (int side = 0; side < 2; ++side) {
      const FoldableConv f = conv_producing(n.input(side));
      if (!f.conv) continue;
      const Tensor* t = constant(n.input(1 - side));
      const int64_t c = f.w->size(0), rank = f.w->dim();
      if (!t || t->dim() > rank || (t->numel() != c && t->numel() != 1)) continue;
      // Per channel: every dim 1 except, in the output's dim 1, C (or all 1).
      bool per_channel = true;
      for (int64_t d = 0; d < t->dim(); ++d) {
        const int64_t out_dim = rank - t->dim() + d;
        per_channel = per_channel && (t->size(d) == 1 || (out_dim == 1 && t->size(d) == c));
      }
      if (!per_channel) continue;
      Tensor shift = reshape(*t, Shape{t->numel()});
      if (t->numel() != c) shift = expand(shift, Shape{c});
      Tensor new_b = contiguous(f.bias ? add(*f.bias, shift) : shift);
      release(n.input(1 - side));
      rewrite_conv(f, Tensor(), new_b, n.output(0));
      return true;
    }
    return false;
  }

  // A Reshape of a float32 constant by a constant shape of positive sizes (and at most one
  // -1), or null.
  const Tensor* reshaped_constant(const std::string& name, const pb::NodeProto& n) {
    if (!default_domain(n) || n.input_size() != 2 || n.attribute_size() != 0) return nullptr;
    const std::string& shape_name = n.input(1);
    if (shape_name.empty() || feedable_.count(shape_name)) return nullptr;
    const Tensor* data = constant(n.input(0));
    const Tensor* shape = nullptr;
    if (auto it = inits_.find(shape_name); it != inits_.end()) {
      shape = &it->second;
    } else if (auto c = constant_nodes_.find(shape_name); c != constant_nodes_.end()) {
      shape = &c->second;
    } else if (auto p = producer_.find(shape_name); p != producer_.end()) {
      shape = constant_node_value(shape_name, g_.node(p->second));
    }
    if (!data || !shape || shape->dtype() != DType::I64 || shape->dim() != 1) return nullptr;
    const Tensor host = shape->to(Device(DeviceType::CPU, 0));
    const int64_t* dims = host.data_ptr<int64_t>();
    Shape target;
    int64_t known = 1, inferred = -1;
    for (int64_t i = 0; i < host.numel(); ++i) {
      if (dims[i] == -1 && inferred < 0) {
        inferred = i;
      } else if (dims[i] > 0) {
        known *= dims[i];
      } else {
        return nullptr;
      }
      target.push_back(dims[i]);
    }
    if (inferred >= 0) {
      if (data->numel() % known != 0) return nullptr;
      target[size_t(inferred)] = data->numel() / known;
    } else if (known != data->numel()) {
      return nullptr;
    }
    return &constant_nodes_.emplace(name, reshape(*data, target)).first->second;
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
    if (inits_.erase(name) != 0) return;
    const int node = producer_.at(name);  // its Constant node, or a Reshape of constants
    removed_.insert(node);
    constant_nodes_.erase(name);
    const pb::NodeProto& n = g_.node(node);
    if (n.op_type() == "Reshape")
      for (const auto& in : n.input()) release(in);
  }

  pb::GraphProto& g_;
  std::map<std::string, Tensor>& inits_;
  int64_t opset_;
  std::set<std::string> feedable_, outputs_;
  std::map<std::string, int>& reads_;
  std::map<std::string, int> producer_;
  std::map<std::string, Tensor> constant_nodes_;  // Constant nodes' tensors, as read
  std::set<int> removed_;                          // nodes to delete
  bool well_formed_ = true;
};

}  // namespace

namespace {

// Folds in every subgraph of graph's nodes, depth first (If branches, Loop and Scan bodies:
// Silero VAD's convolutions sit in an If branch).
void fold_in_subgraphs(pb::GraphProto& graph, std::map<std::string, Tensor>& initializers,
                       int64_t opset, std::map<std::string, int>& reads,
                       const std::set<std::string>& main_inputs) {
  for (auto& node : *graph.mutable_node()) {
    for (auto& a : *node.mutable_attribute()) {
      std::vector<pb::GraphProto*> subs;
      if (a.has_g()) subs.push_back(a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) subs.push_back(&sub);
      for (pb::GraphProto* sub : subs) {
        Folder(*sub, initializers, opset, reads, main_inputs).run();
        fold_in_subgraphs(*sub, initializers, opset, reads, main_inputs);
      }
    }
  }
}

}  // namespace

void fold_into_convs(pb::GraphProto& graph, std::map<std::string, Tensor>& initializers,
                     int64_t opset) {
  std::map<std::string, int> reads;
  count_reads(graph, reads);
  std::set<std::string> main_inputs;
  for (const auto& in : graph.input()) main_inputs.insert(in.name());
  Folder(graph, initializers, opset, reads, {}).run();
  fold_in_subgraphs(graph, initializers, opset, reads, main_inputs);
}

}  // namespace kiln::onnx
