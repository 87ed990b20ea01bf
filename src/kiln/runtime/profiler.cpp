#include "kiln/runtime/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "kiln/core/error.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/dispatch/op_call.h"
#include "kiln/dispatch/registry.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln::profiler {
namespace {

thread_local int t_depth = 0;  // op calls in progress on this thread

class ProfilerInterceptor : public Interceptor {
 public:
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    if (t_depth > 0) return next(call);  // nested: counted in the outer call's time
    ++t_depth;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out;
    try {
      out = next(call);
    } catch (...) {
      --t_depth;
      throw;
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    --t_depth;
    record(call, us);
    return out;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    records_.clear();
  }
  std::vector<OpStats> snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<OpStats> v;
    for (const auto& [key, s] : records_) v.push_back(s);
    return v;
  }

 private:
  void record(const OpCall& call, double us) {
    std::string device;
    if (!call.inputs.empty() && call.inputs[0].defined())
      device = std::string(device_type_name(call.inputs[0].device().type));
    else if (call.device)
      device = std::string(device_type_name(call.device->type));
    else
      device = "cpu";
    std::lock_guard<std::mutex> lock(mutex_);
    OpStats& s = records_[{call.op->name, device}];
    if (s.calls == 0) {
      s.name = call.op->name;
      s.device = device;
    }
    ++s.calls;
    s.total_us += us;
    s.max_us = std::max(s.max_us, us);
  }

  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, OpStats> records_;
};

ProfilerInterceptor& interceptor() {
  static ProfilerInterceptor p;
  return p;
}
std::mutex g_state_mutex;
bool g_enabled = false;

}  // namespace

void start() {
  std::lock_guard<std::mutex> lock(g_state_mutex);
  KILN_CHECK(!g_enabled, Error, "profiler: already started (stop it before starting again)");
  interceptor().clear();
  set_interceptor(InterceptorSlot::Profiler, &interceptor());
  g_enabled = true;
}

void stop() {
  std::lock_guard<std::mutex> lock(g_state_mutex);
  set_interceptor(InterceptorSlot::Profiler, nullptr);
  g_enabled = false;
}

bool is_enabled() {
  std::lock_guard<std::mutex> lock(g_state_mutex);
  return g_enabled;
}

std::vector<OpStats> stats() {
  std::vector<OpStats> v = interceptor().snapshot();
  std::stable_sort(v.begin(), v.end(),
                   [](const OpStats& a, const OpStats& b) { return a.total_us > b.total_us; });
  return v;
}

std::string table(int row_limit) {
  std::vector<OpStats> v = stats();
  double total = 0;
  int64_t calls = 0;
  for (const auto& s : v) {
    total += s.total_us;
    calls += s.calls;
  }
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-32s %-8s %8s %12s %7s %10s %10s\n", "op", "device", "calls",
                "total us", "%", "avg us", "max us");
  out += line;
  int rows = 0;
  for (const auto& s : v) {
    if (row_limit > 0 && rows++ >= row_limit) break;
    std::snprintf(line, sizeof line, "%-32s %-8s %8lld %12.1f %6.1f%% %10.2f %10.1f\n",
                  s.name.c_str(), s.device.c_str(), static_cast<long long>(s.calls), s.total_us,
                  total > 0 ? 100.0 * s.total_us / total : 0.0, s.total_us / double(s.calls),
                  s.max_us);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-32s %-8s %8lld %12.1f\n", "total", "", static_cast<long long>(calls),
                total);
  out += line;
  return out;
}

}  // namespace kiln::profiler
