// The packed-weight cache of kiln's own GEMM kernels (see own_packed_weights.h).
#include "own_packed_weights.h"

#include <iterator>
#include <mutex>
#include <unordered_map>

#include "weight_identity.h"

namespace kiln::cpu {

namespace {

struct Entry {
  WeightIdentity identity;
  std::shared_ptr<const GemmPackedB> packed;
};

std::mutex g_mutex;
std::unordered_map<std::string, Entry> g_entries;
constexpr size_t kMaxCached = 512;

struct Rounded {  // own_rounded_weight's entries
  WeightIdentity identity;
  Tensor tensor;
};
std::mutex g_rounded_mutex;
std::unordered_map<std::string, Rounded> g_rounded;

}  // namespace

std::shared_ptr<const GemmPackedB> own_packed_weight(const Tensor& weight,
                                                     const std::string& layout_key,
                                                     const std::function<GemmPackedB()>& pack) {
  const std::string key = weight_memory_key(weight, layout_key);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_entries.find(key);
    if (it != g_entries.end() && it->second.identity.describes(weight)) return it->second.packed;
  }
  // Packed outside the lock (it runs threads of its own and may take milliseconds); two
  // threads packing the same weight at once both pack, and the later copy stays.
  auto packed = std::make_shared<const GemmPackedB>(pack());
  if (!WeightIdentity::trackable(weight)) return packed;  // foreign memory: packed per call
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto it = g_entries.begin(); it != g_entries.end();)
    it = it->second.identity.storage.expired() ? g_entries.erase(it) : std::next(it);
  if (g_entries.size() >= kMaxCached) g_entries.clear();
  g_entries[key] = Entry{WeightIdentity::of(weight), packed};
  return packed;
}

bool operand_seen_unchanged(const Tensor& operand, const std::string& layout_key) {
  static std::mutex mutex;
  static std::unordered_map<std::string, WeightIdentity> seen;
  constexpr size_t kMaxSightings = 256;
  if (!WeightIdentity::trackable(operand)) return false;  // foreign memory: never "unchanged"
  const std::string key = weight_memory_key(operand, layout_key);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = seen.find(key);
  if (it != seen.end() && it->second.describes(operand)) return true;
  if (seen.size() >= kMaxSightings) seen.clear();
  seen[key] = WeightIdentity::of(operand);
  return false;
}

Tensor own_rounded_weight(const Tensor& weight, DType dtype) {
  std::mutex& mutex = g_rounded_mutex;
  auto& cache = g_rounded;
  const std::string key =
      weight_memory_key(weight, "rounded|" + std::string(dtype_name(dtype)) + "|" +
                                    std::to_string(weight.size(0)) + "x" +
                                    std::to_string(weight.size(1)) + "|" +
                                    std::to_string(weight.stride(0)));
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end() && it->second.identity.describes(weight)) return it->second.tensor;
  }
  Tensor rounded = weight.to(dtype).contiguous();
  if (!WeightIdentity::trackable(weight)) return rounded;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = cache.begin(); it != cache.end();)
    it = it->second.identity.storage.expired() ? cache.erase(it) : std::next(it);
  if (cache.size() >= kMaxCached) cache.clear();
  cache[key] = Rounded{WeightIdentity::of(weight), rounded};
  return rounded;
}

bool linear_weight_reused(const Tensor& weight) {
  static std::mutex mutex;
  static std::unordered_map<std::string, WeightIdentity> seen;
  constexpr size_t kMaxSightings = 4096;
  if (!WeightIdentity::trackable(weight)) return false;
  const std::string key = weight_memory_key(weight, "linear");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = seen.find(key);
  if (it != seen.end() && it->second.describes(weight)) return true;
  if (seen.size() >= kMaxSightings) seen.clear();
  seen[key] = WeightIdentity::of(weight);
  return false;
}

size_t own_packed_weight_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_entries.size();
}

void own_clear_packed_weights() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_entries.clear();
  }
  std::lock_guard<std::mutex> lock(g_rounded_mutex);
  g_rounded.clear();
}

}  // namespace kiln::cpu
