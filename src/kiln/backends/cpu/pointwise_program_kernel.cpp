// pointwise_program on the CPU (include/kiln/ops/pointwise_program.h): the input (contiguous,
// or channels-last, in memory order) is cut into blocks (one channel plane at a time when a
// contiguous input meets per-channel constants); every step runs over the block in registers
// of `block` floats, which stay in L1, through the same vector functions as the eager ops
// (isa/vec_math.h: add_f32 with a broadcast operand, clamp, relu, erf, ...), so each step
// rounds exactly as its op. The input is read once and the result written once. At the
// baseline level (no vector table) scalar loops with the eager kernels' semantics stand in.
#include <algorithm>
#include <cmath>
#include <vector>

#include <omp.h>

#include "aligned_scratch.h"
#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/pointwise_program.h"
#include "scalar_math.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace {

// Floats per register: the live registers (2 or 3 in a hard swish) stay in L1 at 2048 (8
// KiB each); longer blocks spread the cost of each step's call.
int64_t block_for(int64_t registers) { return registers <= 3 ? 2048 : registers <= 6 ? 1024 : 512; }

using Op = PointwiseOp;

float scalar_binary(Op op, float x, float y) {
  switch (op) {
    case Op::Add: return x + y;
    case Op::Sub: return x - y;
    case Op::Mul: return x * y;
    case Op::Div: return x / y;
    case Op::Max: return nan_max(x, y);
    default: return nan_min(x, y);
  }
}

VecBinaryF32 vector_binary(const VecMathF32& vm, Op op) {
  switch (op) {
    case Op::Add: return vm.add_f32;
    case Op::Sub: return vm.sub_f32;
    case Op::Mul: return vm.mul_f32;
    case Op::Div: return vm.div_f32;
    case Op::Max: return vm.max_f32;
    default: return vm.min_f32;
  }
}

// One step over n values. a and out are registers (or the input / output arrays); b is a
// register when b_step is 1, else one value.
void run_step(const VecMathF32& vm, const PointwiseStep& s, const float* a, const float* b,
              int64_t b_step, float* out, int64_t n, float lo, float hi) {
  switch (s.op) {
    case Op::Clamp:
      if (vm.clamp) return vm.clamp(a, out, n, lo, hi);
      for (int64_t i = 0; i < n; ++i) {  // NaN fails both comparisons and stays NaN
        float x = a[i] < lo ? lo : a[i];
        out[i] = x > hi ? hi : x;
      }
      return;
    case Op::Relu:
      if (vm.relu) return vm.relu(a, out, n);
      for (int64_t i = 0; i < n; ++i) out[i] = std::isnan(a[i]) ? a[i] : a[i] > 0 ? a[i] : 0.0f;
      return;
    case Op::Neg:
      if (vm.neg) return vm.neg(a, out, n);
      for (int64_t i = 0; i < n; ++i) out[i] = -a[i];
      return;
    case Op::Abs:
      if (vm.abs) return vm.abs(a, out, n);
      for (int64_t i = 0; i < n; ++i) out[i] = std::fabs(a[i]);
      return;
    // The baseline loops are the eager kernels' scalar expressions (unary_kernels.cpp).
    case Op::Erf:
      if (vm.erf) return vm.erf(a, out, n);
      for (int64_t i = 0; i < n; ++i) out[i] = std::erf(a[i]);
      return;
    case Op::Sqrt:
      if (vm.sqrt) return vm.sqrt(a, out, n);
      for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(a[i]);
      return;
    default:
      break;
  }
  if (const VecBinaryF32 fn = vector_binary(vm, s.op)) {
    if (s.reversed) return fn(b, b_step, a, 1, out, n);
    return fn(a, 1, b, b_step, out, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float y = b[i * b_step];
    out[i] = s.reversed ? scalar_binary(s.op, y, a[i]) : scalar_binary(s.op, a[i], y);
  }
}

void pointwise_program_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const PointwiseProgram p = decode_pointwise_program(call.ints_attr(0));
  const VecMathF32& vm = vec_math_f32();
  const int64_t n = x.numel();
  if (n == 0) return;
  KILN_CHECK(out.strides() == x.strides(), Error,
             "pointwise_program: the output must have the input's layout");
  const int64_t channels = p.channels.empty() ? 1 : int64_t(p.channels[0].size());
  // Contiguous: planes of one channel each (a constant per plane). Channels-last, or vectors
  // along the last dim (of a contiguous input): the vector's dim innermost, so blocks hold
  // whole pixels / rows and a vector operand is repeated over one block (`pattern`), the
  // same for every block.
  const bool interleaved = channels > 1 && (p.last_dim || x.is_channels_last());
  int64_t block = block_for(p.registers), plane = n, pattern_len = 0;
  if (interleaved) {
    // Whole pixels / rows per block, and no longer than the input (a multiple of channels):
    // each step's pattern is built on every call (a [1, 4] input through 200 steps of a
    // 4-vector built 200 patterns of 2048 floats, 1.3 ms, for 4 values).
    pattern_len = block = std::max<int64_t>(1, std::min(block, n) / channels) * channels;
  } else if (!p.channels.empty()) {
    plane = n / x.size(0) / channels;
  }
  if (plane == 0) return;
  std::vector<std::vector<float>> patterns;
  for (const auto& c : p.channels) {
    if (!interleaved) break;
    std::vector<float> v(static_cast<size_t>(pattern_len));
    for (int64_t i = 0; i < pattern_len; ++i) v[size_t(i)] = c[size_t(i % channels)];
    patterns.push_back(std::move(v));
  }
  const int64_t planes = n / plane;
  const int64_t blocks_per_plane = (plane + block - 1) / block;
  const int64_t tasks = planes * blocks_per_plane;
  const float* in = static_cast<const float*>(x.raw_data());
  float* result = static_cast<float*>(out.raw_data());
  const int64_t last = int64_t(p.steps.size()) - 1;
  parallel_region(n >= (int64_t(1) << 15) && tasks > 1, [&] {
    AlignedVector<float> storage(size_t(p.registers * block));
    std::vector<const float*> reg(size_t(p.registers));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t pl = t / blocks_per_plane, b0 = (t % blocks_per_plane) * block;
      const int64_t len = std::min(block, plane - b0), off = pl * plane + b0;
      const int64_t c = pl % channels;
      for (int64_t r = 0; r < p.registers; ++r) reg[size_t(r)] = storage.data() + r * block;
      reg[0] = in + off;  // the input is read in place
      for (int64_t i = 0; i <= last; ++i) {
        const PointwiseStep& s = p.steps[size_t(i)];
        float* dst = i == last ? result + off : storage.data() + s.dst * block;
        const float* b = nullptr;
        int64_t b_step = 0;
        float lo = 0, hi = 0;
        if (s.op == Op::Clamp) {
          lo = p.scalars[size_t(s.b)];
          hi = p.scalars[size_t(s.b + 1)];
        } else if (s.kind == PointwiseOperand::Register) {
          b = reg[size_t(s.b)];
          b_step = 1;
        } else if (s.kind == PointwiseOperand::Scalar) {
          b = &p.scalars[size_t(s.b)];
        } else if (interleaved) {
          b = patterns[size_t(s.b)].data();
          b_step = 1;
        } else {
          b = &p.channels[size_t(s.b)][size_t(c)];
        }
        run_step(vm, s, reg[size_t(s.a)], b, b_step, dst, len, lo, hi);
        reg[size_t(s.dst)] = dst;
      }
    }
  });
}

}  // namespace

void register_pointwise_program_kernel() {
  register_kernel("pointwise_program", DeviceType::CPU, pointwise_program_kernel,
                  dtype_bit(DType::F32));
}

}  // namespace kiln::cpu
