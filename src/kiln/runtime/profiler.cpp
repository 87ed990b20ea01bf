#include "kiln/runtime/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

#include "kiln/core/error.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/dispatch/op_call.h"
#include "kiln/dispatch/registry.h"
#include "kiln/core/dtype.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln::profiler {
namespace {

thread_local int t_depth = 0;  // op calls in progress on this thread

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Small per-thread numbers for the trace's thread rows (the first recording thread is 0).
std::atomic<int64_t> g_next_thread{0};
int64_t this_thread_number() {
  thread_local const int64_t n = g_next_thread.fetch_add(1, std::memory_order_relaxed);
  return n;
}

std::string device_of(const OpCall& call) {
  if (!call.inputs.empty() && call.inputs[0].defined())
    return std::string(device_type_name(call.inputs[0].device().type));
  if (call.device) return std::string(device_type_name(call.device->type));
  return "cpu";
}

class ProfilerInterceptor : public Interceptor {
 public:
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    if (t_depth > 0) return next(call);  // nested: counted in the outer call's time
    ++t_depth;
    // Shapes are taken before the call: an in-place op may change its input's geometry.
    OpEvent event;
    if (options_.trace && options_.record_shapes) record_inputs(call, event);
    const int64_t t0 = steady_now_ns();
    std::vector<Tensor> out;
    try {
      out = next(call);
    } catch (...) {
      --t_depth;
      throw;
    }
    const int64_t t1 = steady_now_ns();
    --t_depth;
    if (options_.trace && options_.record_shapes)
      for (const Tensor& t : out)
        event.output_shapes.emplace_back(t.defined() ? std::vector<int64_t>(t.shape().begin(),
                                                                             t.shape().end())
                                                     : std::vector<int64_t>());
    record(call, t0, t1, std::move(event));
    return out;
  }

  void clear(const Options& options) {
    std::lock_guard<std::mutex> lock(mutex_);
    records_.clear();
    events_.clear();
    dropped_ = 0;
    options_ = options;
  }
  std::vector<OpEvent> events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  int64_t dropped() {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }
  std::vector<OpStats> snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<OpStats> v;
    for (const auto& [key, s] : records_) v.push_back(s);
    return v;
  }

 private:
  static void record_inputs(const OpCall& call, OpEvent& event) {
    for (const Tensor& t : call.inputs) {
      if (t.defined()) {
        event.input_shapes.emplace_back(t.shape().begin(), t.shape().end());
        event.input_dtypes.emplace_back(dtype_name(t.dtype()));
      } else {
        event.input_shapes.emplace_back();
        event.input_dtypes.emplace_back();
      }
    }
  }

  void record(const OpCall& call, int64_t t0, int64_t t1, OpEvent&& event) {
    std::string device = device_of(call);
    const double us = double(t1 - t0) / 1e3;
    const int64_t thread = options_.trace ? this_thread_number() : 0;
    std::lock_guard<std::mutex> lock(mutex_);
    OpStats& s = records_[{call.op->name, device}];
    if (s.calls == 0) {
      s.name = call.op->name;
      s.device = device;
    }
    ++s.calls;
    s.total_us += us;
    s.max_us = std::max(s.max_us, us);
    if (!options_.trace) return;
    if (options_.max_events > 0 && int64_t(events_.size()) >= options_.max_events) {
      ++dropped_;
      return;
    }
    event.name = call.op->name;
    event.device = std::move(device);
    event.start_ns = t0;
    event.duration_ns = t1 - t0;
    event.thread = thread;
    event.sequence = int64_t(events_.size());
    events_.push_back(std::move(event));
  }

  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, OpStats> records_;
  std::vector<OpEvent> events_;
  int64_t dropped_ = 0;
  Options options_;  // set by clear() before the interceptor is installed
};

ProfilerInterceptor& interceptor() {
  static ProfilerInterceptor p;
  return p;
}
std::mutex g_state_mutex;
bool g_enabled = false;

}  // namespace

void start(const Options& options) {
  std::lock_guard<std::mutex> lock(g_state_mutex);
  KILN_CHECK(!g_enabled, Error, "profiler: already started (stop it before starting again)");
  KILN_CHECK(options.max_events >= 0, ValueError, "profiler: max_events must be >= 0 (0: no "
             "limit), got ", options.max_events);
  interceptor().clear(options);
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

std::vector<OpEvent> events() { return interceptor().events(); }
int64_t dropped_events() { return interceptor().dropped(); }

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
