// lstm_cell on the CPU (include/kiln/ops/lstm_cell.h): per batch row, the four gate blocks
// through the ISA's sigmoid / tanh (the functions the eager ops use on contiguous rows, each
// block starting at a multiple of H, so the lanes group as there), then the state update in
// one loop with each product rounded before its sum.
#include <cmath>
#include <vector>

#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"

namespace kiln::cpu {

namespace {

// The eager ops' scalar formulas, for the baseline level (no vector table).
void sigmoid_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}
void tanh_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

__attribute__((optimize("fp-contract=off"))) void update_state(
    const float* i, const float* f, const float* g, const float* c, float* c_new, int64_t n) {
  for (int64_t j = 0; j < n; ++j) c_new[j] = f[j] * c[j] + i[j] * g[j];
}
__attribute__((optimize("fp-contract=off"))) void output(const float* o, const float* t,
                                                         float* h, int64_t n) {
  for (int64_t j = 0; j < n; ++j) h[j] = o[j] * t[j];
}

void lstm_cell_kernel(OpCall& call) {
  const Tensor& gates = call.inputs[0];
  const Tensor& c = call.inputs[1];
  const int64_t batch = c.size(0), H = c.size(1);
  const VecMathF32& vm = vec_math_f32();
  const VecUnaryF32 sigmoid = vm.sigmoid ? vm.sigmoid : sigmoid_scalar;
  const VecUnaryF32 tanh = vm.tanh ? vm.tanh : tanh_scalar;
  const float* g = static_cast<const float*>(gates.raw_data());
  const float* cs = static_cast<const float*>(c.raw_data());
  float* h_out = static_cast<float*>(call.outs[0].raw_data());
  float* c_out = static_cast<float*>(call.outs[1].raw_data());
  std::vector<float> act(static_cast<size_t>(5 * H));  // i, o, f, g, tanh(c')
  float* i = act.data();
  float* o = i + H;
  float* f = o + H;
  float* cell = f + H;
  float* t = cell + H;
  for (int64_t b = 0; b < batch; ++b) {
    const float* row = g + b * 4 * H;
    sigmoid(row, i, H);
    sigmoid(row + H, o, H);
    sigmoid(row + 2 * H, f, H);
    tanh(row + 3 * H, cell, H);
    update_state(i, f, cell, cs + b * H, c_out + b * H, H);
    tanh(c_out + b * H, t, H);
    output(o, t, h_out + b * H, H);
  }
}

}  // namespace

void register_lstm_cell_kernel() {
  register_kernel("lstm_cell", DeviceType::CPU, lstm_cell_kernel, dtype_bit(DType::F32));
}

}  // namespace kiln::cpu
