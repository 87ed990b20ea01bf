#pragma once
// A bounded, thread-safe cache of oneDNN plans (primitive descriptor, primitive and the
// descriptors a call needs) keyed by a string that encodes everything the plan depends on;
// shared by the matmul, Linear, int8 and convolution paths. Making a plan runs oneDNN's JIT
// (tens of microseconds to milliseconds); finding one costs a hash. A full cache is cleared:
// plans are cheap to remake and a model uses a few dozen shapes.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::cpu {

// A cache key made of the values' raw bytes: one allocation and a copy, where a key spelt out
// with std::to_string ("1/1,256,256,...") cost about 0.36 us of every matmul call.
inline std::string onednn_key(std::initializer_list<int64_t> values) {
  std::string key(values.size() * sizeof(int64_t), '\0');
  std::memcpy(key.data(), values.begin(), key.size());
  return key;
}

template <typename Plan>
class OnednnPlanCache {
 public:
  // The plan for key, made by make() when absent (outside the lock: making may throw
  // dnnl::error, which reaches the caller and caches nothing).
  template <typename Make>
  std::shared_ptr<Plan> get(const std::string& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    std::shared_ptr<Plan> plan = make();
    std::lock_guard<std::mutex> lock(mutex_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_[key] = plan;
    return plan;
  }

 private:
  static constexpr size_t kMaxPlans = 512;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Plan>> plans_;
};

}  // namespace kiln::cpu
