// The packed-weight cache of kiln's own GEMM kernels (see own_packed_weights.h).
#include "own_packed_weights.h"

#include <iterator>
#include <mutex>
#include <unordered_map>

#include "weight_identity.h"

namespace kiln::cpu {

namespace {

// Values derived from weights (packed copies, roundings), keyed by the weight's memory and the
// caller's layout key, each served only while it still describes the weight's contents;
// entries of freed weights are dropped at the next insertion, all of them beyond kMaxCached.
template <typename T>
class DerivedCache {
 public:
  bool find(const std::string& key, const Tensor& weight, T* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.identity.describes(weight)) return false;
    *out = it->second.value;
    return true;
  }
  void insert(const std::string& key, const Tensor& weight, const T& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();)
      it = it->second.identity.storage.expired() ? entries_.erase(it) : std::next(it);
    if (entries_.size() >= kMaxCached) entries_.clear();
    entries_[key] = Entry{WeightIdentity::of(weight), value};
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  static constexpr size_t kMaxCached = 512;
  struct Entry {
    WeightIdentity identity;
    T value;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

DerivedCache<std::shared_ptr<const GemmPackedB>> g_packed;
DerivedCache<Tensor> g_rounded;  // own_rounded_weight's

// Whether `t` was seen before under `key` with the same contents; records this sighting. Up
// to `capacity` sightings (weak references), forgotten all at once when full.
class Sightings {
 public:
  explicit Sightings(size_t capacity) : capacity_(capacity) {}
  bool seen_before(const std::string& key, const Tensor& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = seen_.find(key);
    if (it != seen_.end() && it->second.describes(t)) return true;
    if (seen_.size() >= capacity_) seen_.clear();
    seen_[key] = WeightIdentity::of(t);
    return false;
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::unordered_map<std::string, WeightIdentity> seen_;
};

}  // namespace

std::shared_ptr<const GemmPackedB> own_packed_weight(const Tensor& weight,
                                                     const std::string& layout_key,
                                                     const std::function<GemmPackedB()>& pack) {
  const std::string key = weight_memory_key(weight, layout_key);
  std::shared_ptr<const GemmPackedB> packed;
  if (g_packed.find(key, weight, &packed)) return packed;
  // Packed outside the lock (it runs threads of its own and may take milliseconds); two
  // threads packing the same weight at once both pack, and the later copy stays.
  packed = std::make_shared<const GemmPackedB>(pack());
  if (WeightIdentity::trackable(weight)) g_packed.insert(key, weight, packed);  // else per call
  return packed;
}

bool operand_seen_unchanged(const Tensor& operand, const std::string& layout_key) {
  static Sightings sightings(256);
  if (!WeightIdentity::trackable(operand)) return false;  // foreign memory: never "unchanged"
  return sightings.seen_before(weight_memory_key(operand, layout_key), operand);
}

Tensor own_rounded_weight(const Tensor& weight, DType dtype) {
  const std::string key =
      weight_memory_key(weight, "rounded|" + std::string(dtype_name(dtype)) + "|" +
                                    std::to_string(weight.size(0)) + "x" +
                                    std::to_string(weight.size(1)) + "|" +
                                    std::to_string(weight.stride(0)));
  Tensor rounded;
  if (g_rounded.find(key, weight, &rounded)) return rounded;
  rounded = weight.to(dtype).contiguous();
  if (WeightIdentity::trackable(weight)) g_rounded.insert(key, weight, rounded);
  return rounded;
}

bool linear_weight_reused(const Tensor& weight) {
  static Sightings sightings(4096);
  if (!WeightIdentity::trackable(weight)) return false;
  return sightings.seen_before(weight_memory_key(weight, "linear"), weight);
}

size_t own_packed_weight_count() { return g_packed.size(); }

void own_clear_packed_weights() {
  g_packed.clear();
  g_rounded.clear();
}

}  // namespace kiln::cpu
