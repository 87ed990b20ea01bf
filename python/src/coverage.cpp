// Op coverage for the test suite: kiln._C._registered_ops() lists every op in kiln's
// registry; _op_coverage_start() installs a recording interceptor in the profiler slot (test
// use only: it replaces a profiler while on) and _op_coverage_stop() removes it and returns
// the names of the ops that were dispatched.
#include <mutex>
#include <set>

#include "bind.h"

namespace kiln::py {

namespace {

class RecordingInterceptor : public Interceptor {
 public:
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen_.insert(call.op->name);
    }
    return next(call);
  }
  std::set<std::string> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(seen_);
  }

 private:
  std::mutex mutex_;
  std::set<std::string> seen_;
};

RecordingInterceptor* g_recorder = nullptr;
Interceptor* g_previous = nullptr;

}  // namespace

void bind_coverage(nb::module_& m) {
  m.def("_registered_ops", [] {
    std::vector<std::string> names;
    for (const OpDef* op : all_ops()) names.push_back(op->name);
    return names;
  });
  m.def("_op_coverage_start", [] {
    if (g_recorder) return;
    g_recorder = new RecordingInterceptor();  // lives for the process: calls may be in flight
    g_previous = get_interceptor(InterceptorSlot::Profiler);
    set_interceptor(InterceptorSlot::Profiler, g_recorder);
  });
  m.def("_op_coverage_stop", [] {
    std::vector<std::string> names;
    if (!g_recorder) return names;
    set_interceptor(InterceptorSlot::Profiler, g_previous);
    for (const std::string& n : g_recorder->take()) names.push_back(n);
    g_recorder = nullptr;  // leaked on purpose (see above)
    return names;
  });
}

}  // namespace kiln::py
