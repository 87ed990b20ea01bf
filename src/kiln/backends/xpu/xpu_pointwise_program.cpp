// xpu kernel of pointwise_program (include/kiln/ops/pointwise_program.h), the op that graph
// mode's fuse_pointwise pass puts in place of a chain of float32 elementwise nodes: the chain
// becomes one generated OpenCL kernel (one read and one write of the tensor instead of one
// per step). Each step is the statement the eager xpu op runs (xpu_elementwise_bodies.h), in
// float32 registers, so the fused result equals the unfused ops' bit for bit. Scalars are
// kernel arguments (programs that differ only in constants share a compiled kernel); channel
// vectors are device tensors broadcast as extra inputs, uploaded once per program and kept.
#include <map>
#include <mutex>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/pointwise_program.h"
#include "kiln/tensor/empty.h"
#include "xpu_elementwise_bodies.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

// The elementwise kernel reads x and at most five more inputs.
constexpr size_t kMaxChannelVectors = 5;

const char* op_name(PointwiseOp op) {
  switch (op) {
    case PointwiseOp::Add: return "add";
    case PointwiseOp::Sub: return "sub";
    case PointwiseOp::Mul: return "mul";
    case PointwiseOp::Div: return "div";
    case PointwiseOp::Max: return "maximum";
    case PointwiseOp::Min: return "minimum";
    case PointwiseOp::Relu: return "relu";
    case PointwiseOp::Neg: return "neg";
    case PointwiseOp::Abs: return "abs";
    case PointwiseOp::Erf: return "erf";
    case PointwiseOp::Sqrt: return "sqrt";
    case PointwiseOp::Clamp: return "clamp";
  }
  return "";
}

// The kernel body: registers r0 (the input) .. r{registers - 1}, one block per step naming
// its operands a and b as the op's statement expects.
std::string program_body(const PointwiseProgram& p) {
  std::string s = "typedef float R; float r0 = a;";
  for (int64_t k = 1; k < p.registers; ++k) s += " float r" + std::to_string(k) + " = 0;";
  static const char* inputs[] = {"b", "c", "d", "e", "f"};
  for (size_t v = 0; v < p.channels.size(); ++v) s += " float v" + std::to_string(v) + " = " + inputs[v] + ";";
  for (const PointwiseStep& st : p.steps) {
    const std::string a = "r" + std::to_string(st.a), dst = "r" + std::to_string(st.dst);
    // No contraction of one step's product into the next step's sum (a fused multiply-add
    // rounds once where the separate ops round twice).
    s += "\n{\n#pragma OPENCL FP_CONTRACT OFF\n";
    if (st.op == PointwiseOp::Clamp) {
      // clamp's eager statement with both bounds (NaN stays NaN; lo > hi gives hi).
      const std::string lo = "s" + std::to_string(st.b), hi = "s" + std::to_string(st.b + 1);
      s += "float r = " + a + "; if (r < " + lo + ") r = " + lo + "; if (r > " + hi + ") r = " + hi + "; ";
    } else {
      const std::string body = float_elementwise_body(op_name(st.op));
      KILN_CHECK(!body.empty(), Error, "xpu pointwise_program: no statement for step op ", int64_t(st.op));
      if (st.op >= PointwiseOp::Relu) {
        s += "float a = " + a + "; float r; " + body + " ";
      } else {
        const std::string b = st.kind == PointwiseOperand::Register ? "r" + std::to_string(st.b)
                              : st.kind == PointwiseOperand::Scalar ? "s" + std::to_string(st.b)
                                                                    : "v" + std::to_string(st.b);
        s += st.reversed ? "float a = " + b + "; float b = " + a + "; "
                         : "float a = " + a + "; float b = " + b + "; ";
        s += "float r; " + body + " ";
      }
    }
    s += dst + " = r; }";
  }
  s += "\nr = r" + std::to_string(p.steps.back().dst) + ";";
  return s;
}

// The program's channel vectors on the device as one [V, C] tensor, uploaded once per
// (device, vectors) and kept (a compiled graph runs the same program every call).
Tensor device_channels(const PointwiseProgram& p, Device device) {
  static std::mutex mutex;
  static std::map<std::pair<int, std::vector<std::vector<float>>>, Tensor> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(device.index, p.channels);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 256) cache.clear();  // bounded: programs are few per graph
  const int64_t V = int64_t(p.channels.size()), C = int64_t(p.channels[0].size());
  Tensor host = empty_tensor({V, C}, DType::F32, Device(DeviceType::CPU));
  float* d = host.data_ptr<float>();
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c) d[v * C + c] = p.channels[size_t(v)][size_t(c)];
  Tensor t = empty_tensor({V, C}, DType::F32, device);
  from_host(t, host);
  cache.emplace(std::move(key), t);
  return t;
}

void pointwise_program_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const PointwiseProgram p = decode_pointwise_program(call.ints_attr(0));
  if (out.numel() == 0) return;
  if (p.channels.size() > kMaxChannelVectors) {  // more inputs than the kernel takes
    copy_into(out, run_pointwise_steps(x, p));
    return;
  }
  std::vector<Tensor> inputs{x};
  if (!p.channels.empty()) {
    const Tensor all = device_channels(p, x.device());
    const int64_t C = all.size(1);
    // Vector v as a view broadcasting along x: [C] for the last dim, [C, 1, ...] for dim 1.
    Shape shape = p.last_dim ? Shape{C} : Shape(size_t(x.dim() - 1), 1);
    if (!p.last_dim) shape[0] = C;
    Shape strides(shape.size(), 0);
    strides[0] = 1;
    for (size_t v = 0; v < p.channels.size(); ++v)
      inputs.push_back(make_view(all, shape, strides, all.storage_offset() + int64_t(v) * C));
  }
  std::vector<ScalarArg> scalars;
  for (float f : p.scalars) scalars.push_back({Scalar(double(f)), DType::F32});
  elementwise(out, inputs, program_body(p), scalars);
}

}  // namespace

void register_pointwise_program_kernel() {
  register_kernel("pointwise_program", DeviceType::XPU, pointwise_program_kernel, dtype_bit(DType::F32));
}

}  // namespace kiln::xpu
