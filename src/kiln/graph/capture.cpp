// The tracer interceptor and Capture (include/kiln/graph/capture.h). The interceptor is
// installed only while some thread captures, so the dispatcher's fast path (no interceptor)
// is untouched otherwise.
#include "kiln/graph/capture.h"

#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/tensor/creation_observer.h"
#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln::graph {

struct Capture::State {
  Graph graph;
  std::unordered_map<const TensorImpl*, ValueId> ids;
  std::vector<Tensor> keep_alive;  // no recorded tensor is freed, so no address is reused
  int depth = 0;                   // > 0 while a recorded op runs
  bool data_dependent = false;
  // Per node, the tensors it wrote into (outs); and the tensors that turned out to be wrapped
  // numbers: the fill that made each one (outside the dispatcher's allocation) is dropped at
  // finish, since every use of a literal reads it as a constant.
  std::vector<std::vector<const TensorImpl*>> node_outs;
  std::unordered_map<const TensorImpl*, bool> literal_tensors;
  // Tensors the function allocated on this thread outside recorded ops since the capture
  // began (creation_observer.h), and the storage of each input or node result with its value
  // and storage offset: an unknown tensor is then a fresh one, a view of a graph value made
  // without the dispatcher, or a constant. The fresh tensors are held, as recorded ones are:
  // once freed, a later tensor could take the address — a detached alias of a buffer (batch
  // norm's running statistics) then read as fresh, and its update went to a snapshot.
  std::unordered_set<const TensorImpl*> fresh;
  std::vector<Tensor> fresh_alive;
  std::unordered_map<const StorageImpl*, std::pair<ValueId, int64_t>> storage_owner;

  ValueId new_value(const Tensor& t, bool literal = false) {
    if (!t.defined()) return kNoValue;
    const ValueId id = graph.num_values++;
    graph.info.push_back({t.shape(), t.dtype(), t.device(), literal,
                          t.is_contiguous() || t.is_channels_last()});
    if (!literal) ids[t.impl()] = id;
    keep_alive.push_back(t);
    return id;
  }
  // An input's or node result's value: views of its storage made later resolve to it.
  ValueId new_graph_value(const Tensor& t) {
    const ValueId id = new_value(t);
    if (id != kNoValue) storage_owner[t.impl()->storage().get()] = {id, t.storage_offset()};
    return id;
  }
  // The value a tensor met as an input stands for; unknown tensors become constants. Wrapped
  // numbers are literals of their own (the full() that made them is then dead code).
  ValueId value_of(const Tensor& t) {
    if (!t.defined()) return kNoValue;
    if (t.impl()->is_wrapped_number) {
      literal_tensors[t.impl()] = true;
      const ValueId id = new_value(t, /*literal=*/true);
      graph.constants.emplace_back(id, t);
      return id;
    }
    auto it = ids.find(t.impl());
    if (it != ids.end()) return it->second;
    if (fresh.count(t.impl())) {
      Node n;
      n.kind = NodeKind::Fresh;
      ++depth;  // the copy's ops are not the function's
      n.snapshot = autograd::detach(t).clone();
      --depth;
      const ValueId id = new_value(t);
      n.results = {id};
      graph.nodes.push_back(std::move(n));
      node_outs.emplace_back();
      return id;
    }
    auto owner = storage_owner.find(t.impl()->storage().get());
    if (owner != storage_owner.end()) {
      Node n;
      n.kind = NodeKind::Alias;
      n.inputs = {owner->second.first};
      n.shape = t.shape();
      n.strides = t.strides();
      n.relative_offset = t.storage_offset() - owner->second.second;
      const ValueId id = new_value(t);
      n.results = {id};
      graph.nodes.push_back(std::move(n));
      node_outs.emplace_back();
      return id;
    }
    const ValueId id = new_value(t);
    graph.constants.emplace_back(id, t);
    return id;
  }
};

namespace {

thread_local Capture::State* t_capture = nullptr;

// Tensors made inside a recorded op are its results (recorded as node values) or its scratch
// (never seen by the function), so only those made at depth 0 count as fresh.
void note_creation(const Tensor& created) {
  Capture::State* s = t_capture;
  if (s == nullptr || s->depth > 0) return;
  if (s->fresh.insert(created.impl()).second) s->fresh_alive.push_back(created);
}

// How many Philox blocks the wrapper of a random op reserved: the default generator of the
// op's device now stands at its attrs' offset plus that many. A draw from another generator
// (an explicit kiln.Generator) cannot be re-reserved on replay: the capture then counts as
// not replayable (as a host read does).
void note_generator(Capture::State& s, Node& node, const OpCall& call) {
  Device device = call.device.value_or(Device(DeviceType::CPU, 0));
  for (const Tensor& t : call.inputs)
    if (t.defined()) {
      device = t.device();
      break;
    }
  const size_t n = node.attrs.size();
  const Generator& g = default_generator(device);
  if (n >= 2 && std::holds_alternative<int64_t>(node.attrs[n - 2]) &&
      std::holds_alternative<int64_t>(node.attrs[n - 1])) {
    const uint64_t seed = uint64_t(std::get<int64_t>(node.attrs[n - 2]));
    const uint64_t offset = uint64_t(std::get<int64_t>(node.attrs[n - 1]));
    if (seed == g.seed() && g.offset() >= offset) {
      node.random_blocks = int64_t(g.offset() - offset);
      node.generator_device = device;
      return;
    }
  }
  s.data_dependent = true;
}

class TracerInterceptor : public Interceptor {
 public:
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    Capture::State* s = t_capture;
    if (s == nullptr || s->depth > 0) return next(call);
    Node node;
    node.op = call.op;
    node.attrs = call.attrs;
    node.device = call.device;
    for (const Tensor& t : call.inputs) node.inputs.push_back(s->value_of(t));
    std::vector<const TensorImpl*> written;  // read now: dispatch moves call.outs away
    for (const Tensor& t : call.outs) {
      node.outs.push_back(s->value_of(t));
      if (t.defined()) written.push_back(t.impl());
    }
    std::vector<Tensor> results;
    ++s->depth;
    try {
      results = next(call);
    } catch (...) {
      --s->depth;
      throw;
    }
    --s->depth;
    if (node.op->random) note_generator(*s, node, call);
    for (const Tensor& r : results) node.results.push_back(s->new_graph_value(r));
    s->node_outs.push_back(std::move(written));
    s->graph.nodes.push_back(std::move(node));
    return results;
  }
};

TracerInterceptor g_tracer;
std::mutex g_install_mutex;
int g_active_captures = 0;

}  // namespace

Capture::Capture() : state_(std::make_unique<State>()) {
  KILN_CHECK(t_capture == nullptr, Error,
             "graph capture: this thread is already capturing (kiln.compile calls do not nest "
             "while the outer one captures)");
  std::lock_guard lock(g_install_mutex);
  if (g_active_captures++ == 0) set_interceptor(InterceptorSlot::Tracer, &g_tracer);
  t_capture = state_.get();
  set_tensor_creation_observer(note_creation);
}

Capture::~Capture() { close(); }

void Capture::close() {
  if (closed_) return;
  closed_ = true;
  if (t_capture == state_.get()) {
    t_capture = nullptr;
    set_tensor_creation_observer(nullptr);
  }
  std::lock_guard lock(g_install_mutex);
  if (--g_active_captures == 0) set_interceptor(InterceptorSlot::Tracer, nullptr);
}

void Capture::add_input(const Tensor& t) {
  KILN_CHECK(t.defined(), ValueError, "graph capture: an input tensor is undefined");
  state_->graph.inputs.push_back(state_->new_graph_value(t));
}

Graph Capture::finish(const std::vector<Tensor>& outputs) {
  KILN_CHECK(!closed_ && t_capture == state_.get(), Error,
             "graph capture: finish() after the capture ended");
  for (const Tensor& t : outputs) state_->graph.outputs.push_back(state_->value_of(t));
  close();
  State& s = *state_;
  std::vector<Node> kept;
  for (size_t i = 0; i < s.graph.nodes.size(); ++i) {
    const auto& written = s.node_outs[i];
    bool fills_literal = !written.empty();
    for (const TensorImpl* impl : written) fills_literal = fills_literal && s.literal_tensors.count(impl);
    if (!fills_literal) kept.push_back(std::move(s.graph.nodes[i]));
  }
  s.graph.nodes = std::move(kept);
  return std::move(s.graph);
}

bool is_capturing() { return t_capture != nullptr; }

void note_host_read(const Tensor& t) {
  Capture::State* s = t_capture;
  if (s == nullptr || !t.defined()) return;
  auto it = s->ids.find(t.impl());
  if (it == s->ids.end()) {
    // An alias made without the dispatcher (x.detach(), .data) reads a graph value's memory:
    // its values depend on the inputs as much as the value's own. Otherwise a captured
    // constant or a tensor the graph never saw.
    if (s->storage_owner.count(t.impl()->storage().get())) s->data_dependent = true;
    return;
  }
  for (const auto& [id, constant] : s->graph.constants)
    if (id == it->second) return;
  s->data_dependent = true;
}

bool Capture::data_dependent() const { return state_->data_dependent; }

}  // namespace kiln::graph
