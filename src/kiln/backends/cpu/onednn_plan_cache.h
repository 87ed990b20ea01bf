#pragma once
// A bounded, thread-safe cache of oneDNN plans (primitive descriptor, primitive and the
// descriptors a call needs) keyed by a string that encodes everything the plan depends on;
// shared by the matmul, Linear, int8 and convolution paths. Making a plan runs oneDNN's JIT
// (tens of microseconds to milliseconds); finding one costs a hash. A full cache is cleared:
// plans are cheap to remake and a model uses a few dozen shapes.
//
// Plans are kept per thread count: oneDNN divides a primitive's work among the threads it
// sees when the primitive is made (omp_get_max_threads), so a plan made under
// set_num_threads(1) would run on one thread after set_num_threads(2) (a [128, 768] x
// [768, 768] Linear stayed at 116 / 230 GFLOP/s float32 / bfloat16 instead of 231 / 455).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kiln/runtime/threads.h"

namespace kiln::cpu {

// A cache key made of the values' raw bytes: one allocation and a copy, where a key spelt out
// with std::to_string ("1/1,256,256,...") cost about 0.36 us of every matmul call.
inline std::string onednn_key(std::initializer_list<int64_t> values) {
  std::string key(values.size() * sizeof(int64_t), '\0');
  std::memcpy(key.data(), values.begin(), key.size());
  return key;
}

// Plans made so far by every cache (onednn_plans_made() in kiln/backends/cpu/onednn.h).
inline std::atomic<size_t> g_onednn_plans_made{0};

template <typename Plan>
class OnednnPlanCache {
 public:
  // The plan for key at the calling thread's thread count, made by make() when absent
  // (outside the lock: making may throw dnnl::error, which reaches the caller and caches
  // nothing).
  template <typename Make>
  std::shared_ptr<Plan> get(const std::string& key, Make&& make) {
    const int threads = get_num_threads();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto per_count = plans_.find(threads);
      if (per_count != plans_.end()) {
        auto it = per_count->second.find(key);
        if (it != per_count->second.end()) return it->second;
      }
    }
    std::shared_ptr<Plan> plan = make();
    g_onednn_plans_made.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex_);
    if (size_ >= kMaxPlans) {
      plans_.clear();
      size_ = 0;
    }
    if (plans_[threads].insert_or_assign(key, plan).second) ++size_;
    return plan;
  }

 private:
  static constexpr size_t kMaxPlans = 512;
  std::mutex mutex_;
  size_t size_ = 0;  // plans in all the maps
  std::unordered_map<int, std::unordered_map<std::string, std::shared_ptr<Plan>>> plans_;
};

}  // namespace kiln::cpu
