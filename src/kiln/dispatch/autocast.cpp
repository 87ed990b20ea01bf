// The autocast interceptor (include/kiln/dispatch/autocast.h). Op lists follow torch's CPU
// autocast lists restricted to kiln's ops: lower precision for the products and convolutions
// (mm, matmul, bmm, addmm, baddbmm, fused_linear, convolution, convolution_activation),
// float32 for nll_loss, prod, padding other than constant, and the linalg factorisations.
// Every other op runs on its inputs as given (mixed inputs promote as usual).
#include "kiln/dispatch/autocast.h"

#include <array>
#include <atomic>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/core/error.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/dispatch/registry.h"

namespace kiln {

namespace {

constexpr size_t kDeviceTypes = 8;

struct ThreadState {
  std::array<bool, kDeviceTypes> enabled{};
  std::array<DType, kDeviceTypes> dtype{};
  bool cache_enabled = true;
  int nesting = 0;
  int enabled_count = 0;  // device types enabled on this thread
  struct Cached {
    Tensor source;  // kept alive so its address is not reused while cached
    uint64_t version;
    Tensor cast;
  };
  std::unordered_map<const TensorImpl*, Cached> cache;
  ThreadState() {
    dtype.fill(DType::BF16);
    dtype[size_t(DeviceType::XPU)] = DType::F16;
  }
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

std::atomic<int> g_threads_enabled{0};  // threads with some device type enabled

enum class Policy { None, Lower, Float32 };

Policy policy_of(const OpCall& call) {
  static const std::unordered_set<std::string_view> lower = {
      "mm", "matmul", "bmm", "addmm", "baddbmm", "fused_linear", "convolution",
      "convolution_activation"};
  static const std::unordered_set<std::string_view> float32 = {
      "nll_loss", "prod", "linalg_cholesky_ex", "linalg_det", "linalg_eigh",
      "linalg_lu_factor_ex", "linalg_lu_solve", "linalg_qr", "linalg_slogdet",
      "linalg_solve_ex", "linalg_solve_triangular", "linalg_svd"};
  const std::string_view name = call.op->name;
  if (lower.count(name)) return Policy::Lower;
  if (float32.count(name)) return Policy::Float32;
  if (name == "pad" && call.has_attr(1) && call.string_attr(1) != "constant") return Policy::Float32;
  return Policy::None;
}

bool keeps_float32_weight(const OpCall& call) {
  const std::string_view name = call.op->name;
  return name == "fused_linear" || name == "convolution" || name == "convolution_activation";
}

bool records_grad(const OpCall& call) {
  if (!autograd::is_grad_enabled()) return false;
  for (const Tensor& t : call.inputs)
    if (t.defined() && autograd::requires_grad(t)) return true;
  return false;
}

bool eligible(const Tensor& t) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::F64;
}

Tensor cast(const Tensor& t, DType dtype) {
  ThreadState& s = state();
  const bool cacheable = s.cache_enabled && autograd::is_leaf(t) && autograd::requires_grad(t);
  if (!cacheable) return t.to(dtype);
  auto it = s.cache.find(t.impl());
  if (it != s.cache.end() && it->second.version == t.version() && it->second.cast.dtype() == dtype)
    return it->second.cast;
  Tensor c = t.to(dtype);
  s.cache[t.impl()] = {t, t.version(), c};
  return c;
}

class AutocastInterceptor final : public Interceptor {
 public:
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    ThreadState& s = state();
    if (s.enabled_count == 0) return next(call);
    const Tensor* first = nullptr;
    for (const Tensor& t : call.inputs)
      if (t.defined()) {
        first = &t;
        break;
      }
    if (!first || !s.enabled[size_t(first->device().type)]) return next(call);
    const Policy p = policy_of(call);
    if (p == Policy::None) return next(call);
    const DType target = p == Policy::Lower ? s.dtype[size_t(first->device().type)] : DType::F32;
    bool changed = false;
    DType original = first->dtype();
    // fused_linear and the convolutions on the CPU take a float32 weight with a bfloat16
    // input as the product with the weight rounded: their kernels keep that rounding packed
    // across forwards, where a cast here would be made, packed and dropped on every forward
    // (decision 0121). Not while autograd records the op (its backward wants one dtype).
    const bool f32_weight_kept = keeps_float32_weight(call) && first->device().is_cpu() &&
                                 target == DType::BF16 && call.inputs.size() > 1 &&
                                 call.inputs[1].defined() &&
                                 call.inputs[1].dtype() == DType::F32 && !records_grad(call);
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      Tensor& t = call.inputs[i];
      if (f32_weight_kept && i == 1) {
        changed = true;
        continue;
      }
      if (eligible(t) && t.dtype() != target) {
        t = cast(t, target);
        changed = true;
      }
    }
    // fused_linear names its output dtype (attr 1): the input's, now the cast dtype.
    if (changed && call.op->name == std::string_view("fused_linear") && call.has_attr(1) &&
        call.dtype_attr(1) == original && original != DType::F64)
      call.attrs[1] = target;
    return next(call);
  }
};

AutocastInterceptor& interceptor() {
  static AutocastInterceptor i;
  return i;
}

}  // namespace

bool is_autocast_enabled(DeviceType device) { return state().enabled[size_t(device)]; }

Tensor autocast_product_operand(const Tensor& t) {
  ThreadState& s = state();
  if (s.enabled_count == 0 || !eligible(t) || !s.enabled[size_t(t.device().type)]) return t;
  const DType target = s.dtype[size_t(t.device().type)];
  return t.dtype() == target ? t : cast(t, target);
}

void set_autocast_enabled(DeviceType device, bool enabled) {
  ThreadState& s = state();
  bool& slot = s.enabled[size_t(device)];
  if (slot == enabled) return;
  slot = enabled;
  const int before = s.enabled_count;
  s.enabled_count += enabled ? 1 : -1;
  // The interceptor is installed while any thread has autocast on (one atomic load per op
  // when none has).
  if (before == 0 && s.enabled_count == 1 && g_threads_enabled.fetch_add(1) == 0)
    set_interceptor(InterceptorSlot::Autocast, &interceptor());
  if (before == 1 && s.enabled_count == 0 && g_threads_enabled.fetch_sub(1) == 1)
    set_interceptor(InterceptorSlot::Autocast, nullptr);
}

DType get_autocast_dtype(DeviceType device) { return state().dtype[size_t(device)]; }

void set_autocast_dtype(DeviceType device, DType dtype) {
  KILN_CHECK(dtype == DType::BF16 || dtype == DType::F16, ValueError,
             "autocast: expected dtype bfloat16 or float16, got ", dtype_name(dtype));
  state().dtype[size_t(device)] = dtype;
}

bool is_autocast_cache_enabled() { return state().cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { state().cache_enabled = enabled; }

int increment_autocast_nesting() { return ++state().nesting; }
int decrement_autocast_nesting() {
  ThreadState& s = state();
  if (s.nesting > 0) --s.nesting;
  if (s.nesting == 0) s.cache.clear();
  return s.nesting;
}
void clear_autocast_cache() { state().cache.clear(); }

}  // namespace kiln
