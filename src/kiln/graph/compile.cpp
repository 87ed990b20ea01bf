// kiln::compile (include/kiln/graph/compile.h): guards, the graph cache and replay.
#include "kiln/graph/compile.h"

#include <map>
#include <mutex>
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/graph/capture.h"
#include "kiln/graph/passes.h"

namespace kiln::graph {

namespace {

// The guard of one call: what a capture's ops and attributes may have depended on.
std::string guard_key(const std::vector<Tensor>& inputs) {
  std::ostringstream os;
  os << (autograd::is_grad_enabled() ? 'G' : 'n');
  for (const Tensor& t : inputs) {
    os << '|' << dtype_name(t.dtype()) << shape_str(t.shape()) << '@' << t.device().str()
       << (autograd::requires_grad(t) ? 'r' : '-') << (t.is_contiguous() ? 'c' : '-')
       << (t.is_channels_last() ? 'l' : '-');
    if (!t.is_contiguous()) os << shape_str(t.strides());
  }
  return os.str();
}

bool any_requires_grad(const Graph& g, const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (autograd::requires_grad(t)) return true;
  for (const auto& c : g.constants)
    if (autograd::requires_grad(c.second)) return true;
  return false;
}

struct Entry {
  bool eager = false;  // data-dependent: run the function
  Graph plain;         // passes without fusion (used while gradients are recorded)
  Graph fused;
};

}  // namespace

struct CompiledFunction::Impl {
  TensorFunction fn;
  CompileOptions options;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Entry>> cache;
  int64_t captures = 0, replays = 0;
  std::string last;
};

CompiledFunction::CompiledFunction(TensorFunction fn, CompileOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->fn = std::move(fn);
  impl_->options = options;
}
CompiledFunction::~CompiledFunction() = default;
CompiledFunction::CompiledFunction(CompiledFunction&&) noexcept = default;

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& inputs) {
  const std::string key = guard_key(inputs);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->cache.find(key);
    if (it != impl_->cache.end()) entry = it->second;
    if (!entry && impl_->cache.size() >= impl_->options.max_graphs) return impl_->fn(inputs);
  }
  if (entry) {
    if (entry->eager) return impl_->fn(inputs);
    const bool grad = autograd::is_grad_enabled() && any_requires_grad(entry->plain, inputs);
    std::vector<Tensor> out = run(grad ? entry->plain : entry->fused, inputs);
    std::lock_guard lock(impl_->mutex);
    ++impl_->replays;
    return out;
  }
  auto fresh = std::make_shared<Entry>();
  std::vector<Tensor> outputs;
  {
    Capture capture;
    for (const Tensor& t : inputs) capture.add_input(t);
    outputs = impl_->fn(inputs);
    fresh->plain = capture.finish(outputs);
    fresh->eager = capture.data_dependent();
  }
  if (!fresh->eager) {
    fresh->fused = fresh->plain;
    optimize(fresh->plain, false);
    optimize(fresh->fused, impl_->options.fuse);
  }
  std::lock_guard lock(impl_->mutex);
  impl_->cache.emplace(key, fresh);
  ++impl_->captures;
  impl_->last = fresh->eager ? "(data-dependent: runs eagerly)" : fresh->fused.to_string();
  return outputs;
}

int64_t CompiledFunction::captures() const { return impl_->captures; }
int64_t CompiledFunction::replays() const { return impl_->replays; }
std::string CompiledFunction::last_graph() const { return impl_->last; }

CompiledFunction compile(TensorFunction fn, CompileOptions options) {
  return CompiledFunction(std::move(fn), options);
}

}  // namespace kiln::graph
