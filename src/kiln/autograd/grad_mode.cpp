#include "kiln/autograd/autograd.h"

namespace kiln::autograd {
namespace {
thread_local bool t_grad_enabled = true;
thread_local bool t_inference = false;
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }
bool is_inference_mode_enabled() { return t_inference; }

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
