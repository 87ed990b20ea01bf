#include <atomic>

#include "kiln/autograd/autograd.h"

namespace kiln::autograd {
namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_inference = false;
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }
bool is_inference_mode_enabled() { return t_inference; }

namespace {
std::atomic<bool> g_anomaly{false}, g_anomaly_nan{true};
}  // namespace
bool is_anomaly_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
bool is_anomaly_check_nan_enabled() { return g_anomaly_nan.load(std::memory_order_relaxed); }
void set_anomaly_enabled(bool enabled, bool check_nan) {
  g_anomaly.store(enabled);
  g_anomaly_nan.store(check_nan);
}

InferenceMode::InferenceMode(bool enabled) : prev_grad_(t_grad_enabled), prev_inference_(t_inference) {
  if (enabled) {
    t_grad_enabled = false;
    t_inference = true;
  }
}
InferenceMode::~InferenceMode() {
  t_grad_enabled = prev_grad_;
  t_inference = prev_inference_;
}
}  // namespace kiln::autograd
