// xpu kernels of nll_loss and its backward (cross_entropy is log_softmax + nll_loss). The
// targets are checked on the host first (a copy and a wait: an out-of-range class is an
// IndexError, never a read outside the input), then one work-group sums the N * D terms in
// float (double for float64) and every item of the backward writes one gradient element.
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/nll_loss.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

using ops::NllReduction;

void check_targets(const Tensor& target, int64_t classes, int64_t ignore_index, const char* op) {
  const std::vector<int64_t> values = to_host(target).to_vector<int64_t>();
  for (int64_t c : values)
    KILN_CHECK(c == ignore_index || (c >= 0 && c < classes), IndexError, op, ": target ", c,
               " is out of bounds for ", classes, " classes (ignore_index is ", ignore_index, ")");
}

std::string acc_type(DType t) { return t == DType::F64 ? "F64" : "F32"; }

// inputs {input [N, C, D], target [N, D] int64, weight? [C]}, attrs {reduction, ignore_index};
// outs {loss, total_weight}.
void nll_loss_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& target = call.inputs[1];
  const Tensor& weight = call.inputs[2];
  const int64_t N = x.size(0), C = x.size(1), D = x.size(2);
  const auto reduction = NllReduction(call.int_attr(0));
  const int64_t ignore = call.int_attr(1);
  check_targets(target, C, ignore, "nll_loss");
  const Tensor& loss = call.outs[0];
  const Tensor& total = call.outs[1];
  KILN_CHECK(loss.is_contiguous(), NotImplementedError, "nll_loss on xpu: expected a contiguous loss");
  const std::string t = dtype_tag(x.dtype());
  std::string s = "typedef CT_" + acc_type(x.dtype()) + " ACC;\n";
  s += "__kernel void kiln_nll(__global char* lb, ulong lo, __global char* tb, ulong to,\n"
       "    __global const char* xb, ulong xo, __global const char* ib, ulong io,\n"
       "    __global const char* wb, ulong wo, long N, long C, long D, long s0, long s1, long s2,\n"
       "    long ignore, int reduction, int has_weight) {\n"
       "  __local ACC ls[256]; __local ACC ws[256];\n"
       "  __global const char* xp = xb + xo; __global const long* ip = (__global const long*)(ib + io);\n"
       "  __global const char* wp = wb + wo;\n"
       "  ACC l = 0, w = 0;\n"
       "  for (long i = get_local_id(0); i < N * D; i += get_local_size(0)) {\n"
       "    long c = ip[i];\n"
       "    ACC li = 0, wi = 0;\n"
       "    if (c != ignore) {\n"
       "      wi = has_weight ? (ACC)LD_" + t + "(wp, c) : (ACC)1;\n"
       "      li = -wi * (ACC)LD_" + t + "(xp, (i / D) * s0 + c * s1 + (i % D) * s2);\n"
       "    }\n"
       "    if (reduction == 0) SV_" + t + "(lb + lo, i, li);\n"
       "    l += li; w += wi;\n"
       "  }\n"
       "  ls[get_local_id(0)] = l; ws[get_local_id(0)] = w;\n"
       "  barrier(CLK_LOCAL_MEM_FENCE);\n"
       "  for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {\n"
       "    if (get_local_id(0) < s) { ls[get_local_id(0)] += ls[get_local_id(0) + s]; ws[get_local_id(0)] += ws[get_local_id(0) + s]; }\n"
       "    barrier(CLK_LOCAL_MEM_FENCE);\n"
       "  }\n"
       "  if (get_local_id(0) == 0) {\n"
       "    SV_" + t + "(tb + to, 0, ws[0]);\n"
       "    if (reduction == 2) SV_" + t + "(lb + lo, 0, ls[0]);\n"
       "    if (reduction == 1) SV_" + t + "(lb + lo, 0, ls[0] / ws[0]);\n"
       "  }\n"
       "}\n";
  const int device = x.device().index;
  Launch l(device, program_source(device, s), "kiln_nll");
  l.tensor(loss).tensor(total).tensor(x).tensor(target).tensor(weight.defined() ? weight : x);
  l.value(cl_long(N)).value(cl_long(C)).value(cl_long(D));
  l.value(cl_long(x.stride(0))).value(cl_long(x.stride(1))).value(cl_long(x.stride(2)));
  l.value(cl_long(ignore)).value(cl_int(int(reduction))).value(cl_int(weight.defined() ? 1 : 0));
  l.run(256, 256);
}

// inputs {grad_output, target [N, D], weight? [C], total_weight []}, attrs {classes,
// reduction, ignore_index}; outs {grad_input [N, C, D]} (fresh, contiguous).
void nll_loss_backward_kernel(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& target = call.inputs[1];
  const Tensor& weight = call.inputs[2];
  const Tensor& total = call.inputs[3];
  const Tensor& gx = call.outs[0];
  const int64_t N = gx.size(0), C = gx.size(1), D = gx.size(2);
  const auto reduction = NllReduction(call.int_attr(1));
  const int64_t ignore = call.int_attr(2);
  check_targets(target, C, ignore, "nll_loss_backward");
  KILN_CHECK(gx.is_contiguous(), NotImplementedError, "nll_loss_backward on xpu: expected a contiguous grad_input");
  if (gx.numel() == 0) return;
  const std::string t = dtype_tag(gx.dtype());
  const std::string tt = dtype_tag(total.dtype());
  std::string s = "typedef CT_" + acc_type(gx.dtype()) + " ACC;\n";
  s += "__kernel void kiln_nll_back(__global char* gb, ulong go, __global const char* yb, ulong yo,\n"
       "    __global const char* ib, ulong io, __global const char* wb, ulong wo,\n"
       "    __global const char* tb, ulong to, long N, long C, long D, long ignore, int reduction,\n"
       "    int has_weight) {\n"
       "  __global const long* ip = (__global const long*)(ib + io);\n"
       "  ACC scale = 1;\n"
       "  if (reduction != 0) {\n"
       "    scale = (ACC)LD_" + t + "(yb + yo, 0);\n"
       "    if (reduction == 1) scale = scale / (ACC)LD_" + tt + "(tb + to, 0);\n"
       "  }\n"
       "  const long n = N * C * D;\n"
       "  for (long e = get_global_id(0); e < n; e += get_global_size(0)) {\n"
       "    long d = e % D, c = (e / D) % C, s = e / (C * D), i = s * D + d;\n"
       "    long k = ip[i];\n"
       "    ACC g = 0;\n"
       "    if (k == c && k != ignore) {\n"
       "      ACC w = has_weight ? (ACC)LD_" + t + "(wb + wo, c) : (ACC)1;\n"
       "      g = -w * (reduction == 0 ? (ACC)LD_" + t + "(yb + yo, i) : scale);\n"
       "    }\n"
       "    SV_" + t + "(gb + go, e, g);\n"
       "  }\n"
       "}\n";
  const int device = gx.device().index;
  Launch l(device, program_source(device, s), "kiln_nll_back");
  l.tensor(gx).tensor(gy).tensor(target).tensor(weight.defined() ? weight : gx).tensor(total);
  l.value(cl_long(N)).value(cl_long(C)).value(cl_long(D)).value(cl_long(ignore));
  l.value(cl_int(int(reduction))).value(cl_int(weight.defined() ? 1 : 0));
  const size_t local = default_local_size(device);
  l.run(std::min<size_t>((size_t(gx.numel()) + local - 1) / local, 65536) * local, local);
}

}  // namespace

void register_loss_kernels() {
  register_kernel("nll_loss", DeviceType::XPU, nll_loss_kernel, kFloatDTypes);
  register_kernel("nll_loss_backward", DeviceType::XPU, nll_loss_backward_kernel, kFloatDTypes);
}

}  // namespace kiln::xpu
