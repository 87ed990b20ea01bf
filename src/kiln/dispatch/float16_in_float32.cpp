// The ops whose float16 calls on the CPU run the float32 kernels on widened copies
// (dispatcher.cpp). The CPU's float16 kernels are its generic element loops, converting every
// value on its own in baseline code: on one Zen 5 core with two threads, [1024, 1024] float16
// relu took 4.4 ms, add 1.7 ms, softmax 11.5 ms and a 1024^3 matmul 645 ms, 17-80x PyTorch
// 2.13's times. Widening (F16C), the float32 kernel and one rounding back cost about three
// memory passes more than a float16 kernel of their own would, and give the same values. A
// backend claims the calls its float16 kernels run in one pass with the same values
// (float16_native: the CPU's dense elementwise ops and few-row products, decision 0066).
#include "float16_in_float32.h"

#include <atomic>
#include <string_view>
#include <unordered_set>

namespace kiln {

bool computes_float16_in_float32(std::string_view name) {
  static const std::unordered_set<std::string_view> ops = {
      // unary math
      "exp", "exp2", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "sin", "cos", "tan",
      "tanh", "sigmoid", "relu", "erf", "reciprocal", "silu", "silu_backward", "gelu", "gelu_backward",
      "threshold_backward", "clamp_backward", "leaky_relu_backward", "softplus_backward",
      "erfc", "erfinv", "lgamma", "digamma", "trigamma",
      "softplus", "leaky_relu", "clamp",
      // binary and ternary arithmetic, comparisons
      "add", "sub", "mul", "div", "pow", "atan2", "fmod", "remainder", "maximum", "minimum",
      "lerp", "addcmul", "addcdiv", "eq", "ne", "lt", "le", "gt", "ge",
      // reductions and scans
      "sum", "mean", "prod", "var", "std", "norm", "logsumexp", "amax", "amin", "max.dim",
      "min.dim", "argmax", "argmin", "cumsum", "cumprod",
      // rows, normalisations, pooling, losses
      "softmax", "log_softmax", "native_layer_norm", "native_rms_norm", "native_batch_norm",
      "native_batch_norm_backward", "native_group_norm", "native_group_norm_backward",
      "max_pool", "avg_pool", "avg_pool_backward",
      "adaptive_avg_pool", "adaptive_avg_pool_backward", "nll_loss", "nll_loss_backward",
      // products
      "matmul", "mm", "bmm", "addmm", "baddbmm", "dot", "fused_linear", "convolution",
      "convolution_activation", "convolution_weight_grad"};
  return ops.count(name) != 0;
}

namespace {
std::atomic<Float16Native> g_native{nullptr};
}  // namespace

void set_float16_native(Float16Native native) { g_native.store(native); }
bool float16_native(const OpCall& call) {
  const Float16Native native = g_native.load(std::memory_order_relaxed);
  return native && native(call);
}

}  // namespace kiln
