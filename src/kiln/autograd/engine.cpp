// The backward engine: counts dependencies from the roots, then runs nodes in an order where
// every node runs after all nodes that feed gradients into it (a ready queue ordered by
// creation sequence, latest first), summing gradients that reach the same node input.
#include <atomic>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

#include "kiln/autograd/node.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/reduction.h"

namespace kiln::autograd {

namespace {

// Anomaly mode: torch's message for a node whose gradient output holds NaN.
void check_no_nan(const Node& n, const std::vector<Tensor>& out) {
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].defined() && (is_floating(out[i].dtype()) || is_complex(out[i].dtype())) && any(isnan(out[i])).item<bool>())
      KILN_THROW(Error, "Function '", n.name(), "' returned nan values in its ", i, "th output.");
}


struct NodeCompare {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Whether a gradient can take another one added in place: nothing but the engine's buffer
// can see it (torch's InputBuffer rule): held only there, not a view and its storage not
// shared, contiguous, of b's shape, dtype and device, and neither part of a graph
// (create_graph).
bool can_accumulate_in_place(const Tensor& a, const Tensor& b) {
  return a.impl_ptr().use_count() == 1 && a.impl()->storage().use_count() == 1 &&
         !a.impl()->view_base && a.is_contiguous() && a.shape() == b.shape() &&
         a.dtype() == b.dtype() && a.device() == b.device() && !requires_grad(a) &&
         !requires_grad(b);
}

// The sum of two gradients reaching the same input, in place into a where no one else sees
// it: a new sum for GPT-2-small's tied [50257, 768] embedding cost 45 ms of its training step
// (a fresh 154 MB block, page faults and all; decision 0118).
Tensor accumulate(Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  if (can_accumulate_in_place(a, b)) {
    add_(a, b);
    return a;
  }
  return a + b;
}

struct Capture {
  Node* node;
  uint32_t input_nr;
};

// The final callbacks of the backward pass running on this thread (queue_backward_callback);
// null outside backward. A nested backward (a hook calling autograd::grad) has its own.
thread_local std::vector<std::function<void()>>* t_final_callbacks = nullptr;
// Which backward pass runs on this thread (current_backward_pass_id); 0 outside backward.
thread_local uint64_t t_pass_id = 0;
std::atomic<uint64_t> g_next_pass_id{1};

// Runs backward from (roots, root_grads). When captures is non-null (autograd::grad), the
// gradients arriving at the captured edges are returned instead of accumulated into leaves.
// With accumulate_captured_leaves (backward(inputs=)), captured AccumulateGrad nodes run:
// the leaves' hooks and accumulation happen as in a full backward.
std::vector<Tensor> run_backward(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                                 bool keep_graph, bool create_graph,
                                 const std::vector<Edge>* captures,
                                 bool accumulate_captured_leaves = false) {

  bool prev = is_grad_enabled();
  set_grad_enabled(create_graph);
  struct Restore {
    bool p;
    ~Restore() { set_grad_enabled(p); }
  } restore{prev};
  std::vector<std::function<void()>> final_callbacks;
  struct RestoreCallbacks {
    std::vector<std::function<void()>>* p;
    ~RestoreCallbacks() { t_final_callbacks = p; }
  } restore_callbacks{t_final_callbacks};
  t_final_callbacks = &final_callbacks;
  struct RestorePass {
    uint64_t p;
    ~RestorePass() { t_pass_id = p; }
  } restore_pass{t_pass_id};
  t_pass_id = g_next_pass_id.fetch_add(1);

  // Dependencies: how many edges point at each node.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  std::vector<Node*> stack;
  std::set<Node*> seen;
  for (const auto& e : roots)
    if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& e : n->next_edges) {
      if (!e.valid()) continue;
      deps[e.node.get()]++;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  // autograd::grad: only nodes whose gradients can reach a captured edge run (as torch's
  // engine): others would compute unused gradients and may need derivatives that do not
  // exist (the second derivative of a branch that only leads elsewhere).
  std::unordered_map<Node*, bool> feeds_capture;  // some next edge leads to a captured node
  std::set<Node*> capture_nodes;
  if (captures) {
    for (const auto& e : *captures)
      if (e.valid()) capture_nodes.insert(e.node.get());
    std::unordered_map<Node*, bool> needed;  // captured or feeds one
    std::set<Node*> visited;
    std::vector<std::pair<Node*, size_t>> dfs;  // iterative post-order over the DAG
    for (const auto& e : roots)
      if (e.valid() && visited.insert(e.node.get()).second) dfs.push_back({e.node.get(), 0});
    while (!dfs.empty()) {
      Node* n = dfs.back().first;
      size_t& next = dfs.back().second;
      if (next < n->next_edges.size()) {
        const Edge& e = n->next_edges[next++];
        if (e.valid() && visited.insert(e.node.get()).second) dfs.push_back({e.node.get(), 0});
        continue;
      }
      bool below = false;
      for (const auto& e : n->next_edges) below = below || (e.valid() && needed[e.node.get()]);
      feeds_capture[n] = below;
      needed[n] = below || capture_nodes.count(n) != 0;
      dfs.pop_back();
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_grad = [&](const Edge& e, const Tensor& g) {
    auto& buf = buffers[e.node.get()];
    if (buf.size() <= e.input_nr) buf.resize(e.input_nr + 1);
    buf[e.input_nr] = accumulate(buf[e.input_nr], g);
    keep_alive[e.node.get()] = e.node;
  };
  for (size_t i = 0; i < roots.size(); ++i)
    if (roots[i].valid()) add_grad(roots[i], root_grads[i]);

  std::vector<Tensor> captured;
  std::map<std::pair<Node*, uint32_t>, size_t> capture_index;
  if (captures) {
    captured.resize(captures->size());
    for (size_t i = 0; i < captures->size(); ++i)
      if ((*captures)[i].valid())
        capture_index[{(*captures)[i].node.get(), (*captures)[i].input_nr}] = i;
  }

  std::priority_queue<Node*, std::vector<Node*>, NodeCompare> ready;
  for (const auto& e : roots)
    if (e.valid() && deps[e.node.get()] == 0) ready.push(e.node.get());
  std::set<Node*> queued;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    if (!queued.insert(n).second) continue;
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(std::max<size_t>(grads.size(), n->num_outputs()));
    // Tensor hooks on this node's outputs.
    for (size_t i = 0; i < n->pre_hooks.size() && i < grads.size(); ++i)
      for (auto& hook : n->pre_hooks[i])
        if (grads[i].defined()) {
          Tensor r = hook(grads[i]);
          if (r.defined()) grads[i] = r;
        }
    if (captures) {
      for (size_t i = 0; i < grads.size(); ++i) {
        auto it = capture_index.find({n, uint32_t(i)});
        if (it != capture_index.end()) captured[it->second] = accumulate(captured[it->second], grads[i]);
      }
    }
    bool is_leaf_node = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    std::vector<Tensor> out;
    bool runs = !captures || (is_leaf_node ? accumulate_captured_leaves && capture_nodes.count(n)
                                           : feeds_capture[n]);
    if (runs) {
      bool any = false;
      for (auto& g : grads) any = any || g.defined();
      if (any) {
        // Copies: a hook may register another hook on this node.
        auto pre_hooks = n->node_pre_hooks;
        for (auto& hook : pre_hooks) hook(grads);
        if (n->node_post_hooks.empty()) {
          out = n->apply(std::move(grads));
        } else {
          std::vector<Tensor> grad_outputs = grads;
          out = n->apply(std::move(grads));
          out.resize(n->next_edges.size());
          auto post_hooks = n->node_post_hooks;
          for (auto& hook : post_hooks) hook(out, grad_outputs);
        }
      }
      if (!keep_graph) n->release_saved();
      if (is_anomaly_enabled() && is_anomaly_check_nan_enabled()) check_no_nan(*n, out);
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      if (i < out.size() && out[i].defined()) add_grad(e, out[i]);
      if (--deps[e.node.get()] == 0) {
        keep_alive[e.node.get()] = e.node;
        ready.push(e.node.get());
      }
    }
  }
  // By index: a callback may queue another, which runs in this pass too.
  for (size_t i = 0; i < final_callbacks.size(); ++i) final_callbacks[i]();
  return captured;
}

Tensor default_root_grad(const Tensor& t, const char* what) {
  KILN_CHECK(t.numel() == 1, Error, "grad can be implicitly created only for scalar outputs (",
             what, " got a tensor of shape ", shape_str(t.shape()), ")");
  return ones_like(t);
}

}  // namespace

namespace {
// The roots of backward(tensors, grad_tensors): each tensor's gradient edge and its seed
// gradient (ones for a scalar without one).
void backward_roots(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
                    std::vector<Edge>& roots, std::vector<Tensor>& grads) {
  KILN_CHECK(grad_tensors.empty() || grad_tensors.size() == tensors.size(), ValueError,
             "backward: got ", tensors.size(), " tensors but ", grad_tensors.size(),
             " gradients");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(requires_grad(t), Error,
               "element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_tensors.empty() || !grad_tensors[i].defined()
                   ? default_root_grad(t, "backward")
                   : grad_tensors[i];
    KILN_CHECK(g.shape() == t.shape(), ShapeError, "backward: gradient has shape ",
               shape_str(g.shape()), " but the tensor has shape ", shape_str(t.shape()));
    roots.push_back(gradient_edge(t));
    grads.push_back(g);
  }
}
}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              bool retain_graph, bool create_graph) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  backward_roots(tensors, grad_tensors, roots, grads);
  run_backward(roots, std::move(grads), retain_graph || create_graph, create_graph, nullptr);
}

uint64_t current_backward_pass_id() { return t_pass_id; }

std::vector<Tensor> backward_to(const std::vector<Tensor>& tensors,
                                const std::vector<Tensor>& grad_tensors,
                                const std::vector<Tensor>& inputs, bool retain_graph,
                                bool create_graph) {
  KILN_CHECK(!inputs.empty(), Error, "'inputs' argument to backward() cannot be empty.");
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  backward_roots(tensors, grad_tensors, roots, grads);
  std::vector<Edge> captures;
  for (const auto& in : inputs) {
    KILN_CHECK(requires_grad(in), Error, "One of the differentiated Tensors does not require grad");
    captures.push_back(gradient_edge(in));
  }
  return run_backward(roots, std::move(grads), retain_graph || create_graph, create_graph,
                      &captures, /*accumulate_captured_leaves=*/true);
}

void queue_backward_callback(std::function<void()> callback) {
  KILN_CHECK(t_final_callbacks != nullptr, Error,
             "Final callbacks can only be installed during backward pass.");
  t_final_callbacks->push_back(std::move(callback));
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Edge> captures;
  for (const auto& in : inputs) {
    KILN_CHECK(requires_grad(in), Error, "One of the differentiated Tensors does not require grad");
    captures.push_back(gradient_edge(in));
  }
  return grad_at_edges(outputs, captures, grad_outputs, retain_graph, create_graph, allow_unused);
}

std::vector<Tensor> grad_at_edges(const std::vector<Tensor>& outputs,
                                  const std::vector<Edge>& captures,
                                  const std::vector<Tensor>& grad_outputs,
                                  std::optional<bool> retain_graph, bool create_graph,
                                  bool allow_unused) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), ValueError,
             "grad: got ", outputs.size(), " outputs but ", grad_outputs.size(),
             " grad_outputs");
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK(requires_grad(outputs[i]), Error, "element ", i,
               " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(gradient_edge(outputs[i]));
    grads.push_back(grad_outputs.empty() || !grad_outputs[i].defined()
                        ? default_root_grad(outputs[i], "grad")
                        : grad_outputs[i]);
  }
  for (const auto& e : captures)
    KILN_CHECK(e.valid(), Error, "grad: a gradient edge to differentiate at has no node");
  auto result = run_backward(roots, std::move(grads), retain_graph.value_or(create_graph),
                             create_graph, &captures);
  for (size_t i = 0; i < result.size(); ++i)
    KILN_CHECK(result[i].defined() || allow_unused, Error,
               "One of the differentiated Tensors appears to not have been used in the graph. "
               "Set allow_unused=True if this is the desired behavior (input ", i, ")");
  return result;
}

}  // namespace kiln::autograd
