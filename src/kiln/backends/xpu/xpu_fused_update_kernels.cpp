// xpu kernels of the fused update ops: adam_step_ (one pass over parameter, gradient and
// moments where the composed AdamW step was about 8 ops and 20 memory streams) and lstm_cell
// (the gates' activations and the state update in one pass). Both repeat the CPU kernels'
// float32 operations in order with contraction off, so they agree with them to the rounding
// of the device's exp / tanh (adam_step_: bit for bit where sqrt and division are correctly
// rounded, which the runtime asks for).
#include <cmath>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "xpu_kernel_util.h"

namespace kiln::xpu {

namespace {

// inputs: param, grad, exp_avg, exp_avg_sq; outputs: param, exp_avg, exp_avg_sq (the same
// tensors, contiguous float32). attrs: decay, lerp weight t, beta2, 1 - beta2, sqrt of the
// second bias correction, eps, -step size, maximize. The first moment follows lerp's formula
// on the side the weight picks, rounded once as the CPU's (|t| < 0.5: fma(t, g - m, m), else
// fma(t - 1, g - m, g)).
void adam_step_kernel(OpCall& call) {
  const Tensor& param = call.outs[0];
  const Tensor& exp_avg = call.outs[1];
  const Tensor& exp_avg_sq = call.outs[2];
  KILN_CHECK(param.raw_data() == call.inputs[0].raw_data() &&
                 exp_avg.raw_data() == call.inputs[2].raw_data() &&
                 exp_avg_sq.raw_data() == call.inputs[3].raw_data(),
             Error, "adam_step_ updates its parameter and moments in place");
  const int64_t n = param.numel();
  if (n == 0) return;
  const float t = float(call.double_attr(1));
  const bool low = std::fabs(t) < 0.5f, maximize = call.bool_attr(7);
  const std::string s = std::string(
      "#pragma OPENCL FP_CONTRACT OFF\n"
      "__kernel void kiln_adam_step(__global char* pb, ulong po, __global const char* gb, ulong go,\n"
      "    __global char* mb, ulong mo, __global char* vb, ulong vo, float decay, float t,\n"
      "    float t_minus_one, float beta2, float one_minus_beta2, float bc2_sqrt, float eps,\n"
      "    float neg_step, long n) {\n"
      "  __global float* p = (__global float*)(pb + po);\n"
      "  __global const float* g = (__global const float*)(gb + go);\n"
      "  __global float* m = (__global float*)(mb + mo);\n"
      "  __global float* v = (__global float*)(vb + vo);\n"
      "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n") +
      (maximize ? "    const float gi = -g[i];\n" : "    const float gi = g[i];\n") +
      "    const float pi = p[i] * decay;\n" +
      (low ? "    const float mi = fma(t, gi - m[i], m[i]);\n"
           : "    const float mi = fma(t_minus_one, gi - m[i], gi);\n") +
      "    const float vi = v[i] * beta2 + one_minus_beta2 * (gi * gi);\n"
      "    const float denom = sqrt(vi) / bc2_sqrt + eps;\n"
      "    m[i] = mi;\n"
      "    v[i] = vi;\n"
      "    p[i] = pi + neg_step * (mi / denom);\n"
      "  }\n}\n";
  const int device = param.device().index;
  Launch l(device, program_source(device, s), "kiln_adam_step");
  l.tensor(param).tensor(call.inputs[1]).tensor(exp_avg).tensor(exp_avg_sq);
  l.value(cl_float(float(call.double_attr(0)))).value(cl_float(t)).value(cl_float(t - 1.0f));
  for (int a = 2; a <= 6; ++a) l.value(cl_float(float(call.double_attr(size_t(a)))));
  l.value(cl_long(n));
  l.run(grid_size(device, n), default_local_size(device));
}

// lstm_cell(gates [B, 4H] in blocks i, o, f, g; c [B, H]) -> (h, c'): c' = f c + i g, h = o
// tanh(c'), with i, o, f = sigmoid and g = tanh of their blocks (the eager ops' formulas).
void lstm_cell_kernel(OpCall& call) {
  const Tensor& gates = call.inputs[0];
  const Tensor& c = call.inputs[1];
  const int64_t batch = c.size(0), H = c.size(1);
  if (batch * H == 0) return;
  const std::string s =
      "#pragma OPENCL FP_CONTRACT OFF\n"
      "inline float kiln_sigmoid(float a) { return 1.0f / (1.0f + exp(-a)); }\n"
      "__kernel void kiln_lstm_cell(__global char* hb, ulong ho, __global char* cnb, ulong cno,\n"
      "    __global const char* gb, ulong go, __global const char* cb, ulong co, long H, long n) {\n"
      "  __global float* h = (__global float*)(hb + ho);\n"
      "  __global float* cn = (__global float*)(cnb + cno);\n"
      "  __global const float* g = (__global const float*)(gb + go);\n"
      "  __global const float* c = (__global const float*)(cb + co);\n"
      "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
      "    const long b = i / H, j = i % H;\n"
      "    __global const float* row = g + b * 4 * H;\n"
      "    const float ig = kiln_sigmoid(row[j]), og = kiln_sigmoid(row[H + j]);\n"
      "    const float fg = kiln_sigmoid(row[2 * H + j]), cell = tanh(row[3 * H + j]);\n"
      "    const float state = fg * c[i] + ig * cell;\n"
      "    cn[i] = state;\n"
      "    h[i] = og * tanh(state);\n"
      "  }\n}\n";
  const int device = gates.device().index;
  Launch l(device, program_source(device, s), "kiln_lstm_cell");
  l.tensor(call.outs[0]).tensor(call.outs[1]).tensor(gates).tensor(c);
  l.value(cl_long(H)).value(cl_long(batch * H));
  l.run(grid_size(device, batch * H), default_local_size(device));
}

}  // namespace

void register_fused_update_kernels() {
  register_kernel("adam_step_", DeviceType::XPU, adam_step_kernel, dtype_bit(DType::F32));
  register_kernel("lstm_cell", DeviceType::XPU, lstm_cell_kernel, dtype_bit(DType::F32));
}

}  // namespace kiln::xpu
