// pointwise_program: the op behind fused elementwise chains (include/kiln/ops/pointwise_program.h).
// The CPU kernel is backends/cpu/pointwise_program_kernel.cpp; run_pointwise_steps is the
// same program as ordinary ops, for other devices and as the tests' reference.
#include "kiln/ops/pointwise_program.h"

#include <cstring>
#include <string>

#include "kiln/dispatch/dispatcher.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

constexpr int64_t kStepInts = 6;

bool is_binary(PointwiseOp op) { return op <= PointwiseOp::Min; }

int64_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

float bits_float(int64_t v) {
  const uint32_t u = uint32_t(v);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

void check_pointwise_program(const PointwiseProgram& p) {
  KILN_CHECK(!p.steps.empty(), ValueError, "pointwise_program: the program has no step");
  KILN_CHECK(p.registers >= 1 && p.registers <= 64, ValueError,
             "pointwise_program: expected 1 to 64 registers, got ", p.registers);
  const size_t channel_len = p.channels.empty() ? 0 : p.channels[0].size();
  for (const auto& c : p.channels)
    KILN_CHECK(c.size() == channel_len && channel_len > 0, ValueError,
               "pointwise_program: channel vectors must share one nonzero length, got ",
               c.size(), " and ", channel_len);
  std::vector<bool> written(size_t(p.registers), false);
  written[0] = true;  // the input
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PointwiseStep& s = p.steps[i];
    const std::string where = "pointwise_program: step " + std::to_string(i);
    KILN_CHECK(s.op >= PointwiseOp::Add && s.op <= PointwiseOp::Sqrt, ValueError, where,
               " has an unknown operation ", int64_t(s.op));
    KILN_CHECK(s.dst >= 0 && s.dst < p.registers && s.a >= 0 && s.a < p.registers, ValueError,
               where, " names register ", s.dst, " / ", s.a, " of ", p.registers);
    if (s.op == PointwiseOp::Clamp) {
      KILN_CHECK(s.b >= 0 && s.b + 1 < int64_t(p.scalars.size()), ValueError, where,
                 " needs scalars ", s.b, " and ", s.b + 1, " of ", p.scalars.size());
    } else if (is_binary(s.op)) {
      const int64_t limit = s.kind == PointwiseOperand::Register ? p.registers
                            : s.kind == PointwiseOperand::Scalar ? int64_t(p.scalars.size())
                            : s.kind == PointwiseOperand::Channel ? int64_t(p.channels.size())
                                                                  : -1;
      KILN_CHECK(limit >= 0, ValueError, where, " has an unknown operand kind ", int64_t(s.kind));
      KILN_CHECK(s.b >= 0 && s.b < limit, ValueError, where, " names operand ", s.b, " of ",
                 limit);
      KILN_CHECK(s.kind != PointwiseOperand::Register || written[size_t(s.b)], ValueError, where,
                 " reads register ", s.b, " before any step writes it");
    }
    KILN_CHECK(written[size_t(s.a)], ValueError, where, " reads register ", s.a,
               " before any step writes it");
    written[size_t(s.dst)] = true;
  }
}

std::vector<int64_t> encode_pointwise_program(const PointwiseProgram& p) {
  std::vector<int64_t> code{p.registers, int64_t(p.steps.size())};
  for (const PointwiseStep& s : p.steps)
    code.insert(code.end(), {int64_t(s.op), s.dst, s.a, int64_t(s.kind), s.b, int64_t(s.reversed)});
  code.push_back(int64_t(p.scalars.size()));
  for (float f : p.scalars) code.push_back(float_bits(f));
  code.push_back(int64_t(p.last_dim));
  code.push_back(int64_t(p.channels.size()));
  code.push_back(p.channels.empty() ? 0 : int64_t(p.channels[0].size()));
  for (const auto& c : p.channels)
    for (float f : c) code.push_back(float_bits(f));
  return code;
}

PointwiseProgram decode_pointwise_program(const std::vector<int64_t>& code) {
  size_t at = 0;
  auto next = [&]() {
    KILN_CHECK(at < code.size(), ValueError, "pointwise_program: the encoded program ends early");
    return code[at++];
  };
  PointwiseProgram p;
  p.registers = next();
  const int64_t steps = next();
  KILN_CHECK(steps >= 0 && steps <= int64_t(code.size()) / kStepInts, ValueError,
             "pointwise_program: bad step count ", steps);
  for (int64_t i = 0; i < steps; ++i) {
    PointwiseStep s;
    s.op = PointwiseOp(next());
    s.dst = next();
    s.a = next();
    s.kind = PointwiseOperand(next());
    s.b = next();
    s.reversed = next() != 0;
    p.steps.push_back(s);
  }
  const int64_t scalars = next();
  KILN_CHECK(scalars >= 0 && scalars <= int64_t(code.size()), ValueError,
             "pointwise_program: bad scalar count ", scalars);
  for (int64_t i = 0; i < scalars; ++i) p.scalars.push_back(bits_float(next()));
  p.last_dim = next() != 0;
  const int64_t vectors = next(), len = next();
  KILN_CHECK(vectors >= 0 && len >= 0 && vectors * len <= int64_t(code.size()), ValueError,
             "pointwise_program: bad channel vectors ", vectors, " x ", len);
  for (int64_t i = 0; i < vectors; ++i) {
    std::vector<float> c;
    for (int64_t j = 0; j < len; ++j) c.push_back(bits_float(next()));
    p.channels.push_back(std::move(c));
  }
  check_pointwise_program(p);
  return p;
}

bool pointwise_program_supported(const Tensor& x, const PointwiseProgram& p) {
  if (!x.defined() || x.dtype() != DType::F32) return false;
  if (x.device().type != DeviceType::CPU && x.device().type != DeviceType::XPU) return false;
  if (p.channels.empty()) return true;
  const int64_t c = int64_t(p.channels[0].size());
  return p.last_dim ? x.dim() >= 1 && x.size(-1) == c : x.dim() >= 2 && x.size(1) == c;
}

Tensor pointwise_program(const Tensor& x, const PointwiseProgram& p) {
  check_pointwise_program(p);
  KILN_CHECK(pointwise_program_supported(x, p), ValueError,
             "pointwise_program: expected a float32 cpu or xpu tensor",
             p.channels.empty() ? std::string()
                                : " with " + std::to_string(p.channels[0].size()) +
                                      (p.last_dim ? " values in its last dim"
                                                  : " channels in dim 1"),
             ", got ", dtype_name(x.dtype()), " ", shape_str(x.shape()), " on ", x.device().str());
  // A channels-last input is read in place and gives a channels-last result (as the
  // elementwise ops it stands for); other layouts are made contiguous.
  const bool in_place = x.is_channels_last() && !(p.last_dim && !p.channels.empty());
  return call_op(KILN_OP("pointwise_program"), {in_place ? x : x.contiguous()},
                 {encode_pointwise_program(p)});
}

Tensor run_pointwise_steps(const Tensor& x, const PointwiseProgram& p) {
  check_pointwise_program(p);
  std::vector<Tensor> r(size_t(p.registers));
  r[0] = x;
  const TensorOptions f32(DType::F32, x.device());
  auto scalar = [&](int64_t i) { return scalar_tensor(Scalar(double(p.scalars[size_t(i)])), f32); };
  auto channel = [&](int64_t i) {
    const std::vector<float>& c = p.channels[size_t(i)];
    if (p.last_dim) {  // a row broadcast over the leading dims
      KILN_CHECK(x.dim() >= 1 && x.size(-1) == int64_t(c.size()), ShapeError,
                 "pointwise_program: expected ", c.size(), " values in the last dim, got shape ",
                 shape_str(x.shape()));
      return tensor_from(c, Shape{int64_t(c.size())}, f32);
    }
    KILN_CHECK(x.dim() >= 2 && x.size(1) == int64_t(c.size()), ShapeError,
               "pointwise_program: expected ", c.size(), " channels in dim 1, got shape ",
               shape_str(x.shape()));
    Shape s(size_t(x.dim() - 1), 1);
    s[0] = int64_t(c.size());
    return tensor_from(c, s, f32);
  };
  for (const PointwiseStep& s : p.steps) {
    const Tensor& a = r[size_t(s.a)];
    Tensor out;
    if (s.op == PointwiseOp::Clamp) {
      out = clamp(a, Scalar(double(p.scalars[size_t(s.b)])),
                  Scalar(double(p.scalars[size_t(s.b + 1)])));
    } else if (s.op == PointwiseOp::Relu) {
      out = relu(a);
    } else if (s.op == PointwiseOp::Neg) {
      out = neg(a);
    } else if (s.op == PointwiseOp::Abs) {
      out = abs(a);
    } else if (s.op == PointwiseOp::Erf) {
      out = erf(a);
    } else if (s.op == PointwiseOp::Sqrt) {
      out = sqrt(a);
    } else {
      Tensor b = s.kind == PointwiseOperand::Register ? r[size_t(s.b)]
                 : s.kind == PointwiseOperand::Scalar ? scalar(s.b)
                                                       : channel(s.b);
      const Tensor& lhs = s.reversed ? b : a;
      const Tensor& rhs = s.reversed ? a : b;
      switch (s.op) {
        case PointwiseOp::Add: out = add(lhs, rhs); break;
        case PointwiseOp::Sub: out = sub(lhs, rhs); break;
        case PointwiseOp::Mul: out = mul(lhs, rhs); break;
        case PointwiseOp::Div: out = div(lhs, rhs); break;
        case PointwiseOp::Max: out = maximum(lhs, rhs); break;
        default: out = minimum(lhs, rhs); break;
      }
    }
    r[size_t(s.dst)] = out;
  }
  return r[size_t(p.steps.back().dst)];
}

namespace ops {
void register_pointwise_program_op() {
  register_op("pointwise_program", "pointwise_program(Tensor self, int[] program) -> Tensor",
              [](const OpCall& c) -> std::vector<TensorMeta> {
                return {{c.inputs[0].shape(), DType::F32}};
              })
      .keeps_channels_last = true;
}
}  // namespace ops

}  // namespace kiln
