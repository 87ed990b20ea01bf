// The packed-weight cache of kiln's oneDNN paths (see onednn_packed_weights.h).
#include "onednn_packed_weights.h"

#ifdef KILN_HAVE_DNNL
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "kiln/backends/cpu/host_memory.h"
#include "kiln/tensor/tensor_impl.h"
#include "onednn_plan_cache.h"
#include "onednn_runtime.h"
#include "weight_identity.h"

namespace kiln::cpu {

namespace {

struct PackedWeight {
  WeightIdentity identity;
  dnnl::memory::desc layout;
  dnnl::memory packed;
  std::shared_ptr<void> buffer;  // the packed copy's memory (host_memory.h: huge pages)
};

std::mutex g_mutex;
std::unordered_map<std::string, PackedWeight> g_weights;
constexpr size_t kMaxCached = 512;  // entries kept before the cache is reset

// Reorders `from` into `to`. oneDNN's reorder into the Winograd weight format takes only the
// plain (dense, row-major) layout, so a weight stored otherwise (channels-last) goes through
// a plain copy first.
void pack(dnnl::memory& from, dnnl::memory& to, dnnl::stream& stream) {
  dnnl::reorder::primitive_desc direct;
  try {
    direct = dnnl::reorder::primitive_desc(from, to);
  } catch (const dnnl::error&) {
    const dnnl::memory::desc& user = from.get_desc();
    const dnnl::memory::dims dims = user.dims();
    dnnl::memory::dims strides(dims.size(), 1);
    for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
    dnnl::memory plain(dnnl::memory::desc(dims, user.data_type(), strides), onednn_engine());
    dnnl::reorder(from, plain).execute(stream, from, plain);
    dnnl::reorder(plain, to).execute(stream, plain, to);
    stream.wait();  // `plain` is freed on return
    return;
  }
  dnnl::reorder(direct).execute(stream, from, to);
}

}  // namespace

PackedWeightMemory onednn_packed_weight(const Tensor& weight, const std::string& layout_key,
                                        const dnnl::memory::desc& user,
                                        const dnnl::memory::desc& packed,
                                        dnnl::stream& stream) {
  if (packed == user)
    return {dnnl::memory(user, onednn_engine(), const_cast<void*>(weight.raw_data())), nullptr};
  const std::string key = weight_memory_key(weight, layout_key);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_weights.find(key);
    if (it != g_weights.end() && it->second.identity.describes(weight) &&
        it->second.layout == packed)
      return {it->second.packed, it->second.buffer};
  }
  dnnl::memory user_mem(user, onednn_engine(), const_cast<void*>(weight.raw_data()));
  // The packed copy in kiln's host memory, not oneDNN's own allocation: large weights get
  // huge pages there, which Linear layers streaming their weight every call read faster
  // (decision 0046).
  std::shared_ptr<void> buffer(host_allocate(packed.get_size()), host_free);
  if (!buffer) throw std::bad_alloc();
  dnnl::memory packed_mem(packed, onednn_engine(), buffer.get());
  pack(user_mem, packed_mem, stream);
  stream.wait();
  if (!WeightIdentity::trackable(weight)) return {packed_mem, buffer};  // foreign: per call
  std::lock_guard<std::mutex> lock(g_mutex);
  // Drop the packed copies of weights that no longer exist, so they do not hold memory.
  for (auto it = g_weights.begin(); it != g_weights.end();)
    it = it->second.identity.storage.expired() ? g_weights.erase(it) : std::next(it);
  if (g_weights.size() >= kMaxCached) g_weights.clear();
  g_weights[key] = PackedWeight{WeightIdentity::of(weight), packed, packed_mem, buffer};
  return {packed_mem, buffer};
}

void onednn_clear_packed_weights() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_weights.clear();
}

size_t onednn_packed_weight_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_weights.size();
}

size_t onednn_plans_made() { return g_onednn_plans_made.load(std::memory_order_relaxed); }

}  // namespace kiln::cpu
#else  // without oneDNN nothing is ever packed

namespace kiln::cpu {
void onednn_clear_packed_weights() {}
size_t onednn_packed_weight_count() { return 0; }
size_t onednn_plans_made() { return 0; }
}  // namespace kiln::cpu

#endif  // KILN_HAVE_DNNL
