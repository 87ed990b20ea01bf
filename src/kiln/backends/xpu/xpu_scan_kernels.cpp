// cumsum / cumprod on xpu: the input viewed as [outer, L, inner] (contiguous), one work item
// per line, adjacent items on adjacent columns (coalesced reads when inner > 1). Each line
// runs in the CPU kernel's order and precision (floats accumulate in double where the device
// has it, integers wrap in int64), so results match the CPU's bit for bit there; a device
// without fp64 accumulates in float.
#include <algorithm>
#include <string>

#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

template <bool kProd>
void scan_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (in.numel() == 0) return;
  const int64_t dim = in.dim() == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + in.dim() : call.int_attr(0));
  const int64_t L = in.dim() == 0 ? 1 : in.size(dim);
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < in.dim(); ++d) inner *= in.size(d);
  const int64_t outer = in.numel() / (L * inner);
  const int device = in.device().index;
  const std::string t = dtype_tag(in.dtype());
  const std::string acc = is_floating(in.dtype()) ? (device_has_fp64(device) ? "double" : "float") : "long";
  const std::string step = kProd ? "a = a * v;" : "a = a + v;";
  // Integer products wrap as the CPU's (two's complement through ulong).
  const std::string int_step = kProd ? "a = (long)((ulong)a * (ulong)v);" : "a = (long)((ulong)a + (ulong)v);";
  const std::string s =
      "__kernel void kiln_scan(__global char* ob, ulong oo, __global const char* ib, ulong io,\n"
      "                        long outer, long len, long inner) {\n"
      "  for (long line = get_global_id(0); line < outer * inner; line += get_global_size(0)) {\n"
      "    const long base = (line / inner) * len * inner + line % inner;\n"
      "    " + acc + " a = " + (kProd ? "1" : "0") + ";\n"
      "    for (long j = 0; j < len; ++j) {\n"
      "      const " + acc + " v = (" + acc + ")LD_" + t + "(ib + io, base + j * inner);\n"
      "      " + (acc == "long" ? int_step : step) + "\n"
      "      SV_" + t + "(ob + oo, base + j * inner, a);\n"
      "    }\n"
      "  }\n}\n";
  Tensor src = contiguous_on_device(in);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  {  // the launch holds the device's kernel lock: released before the copy below
    Launch l(device, program_source(device, s), "kiln_scan");
    l.tensor(target).tensor(src).value(cl_long(outer)).value(cl_long(L)).value(cl_long(inner));
    const size_t local = std::min<size_t>(default_local_size(device), 64);
    l.run(std::min<size_t>((size_t(outer * inner) + local - 1) / local, 65536) * local, local);
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

}  // namespace

void register_scan_kernels() {
  register_kernel("cumsum", DeviceType::XPU, scan_kernel<false>, kAllDTypes);
  register_kernel("cumprod", DeviceType::XPU, scan_kernel<true>, kAllDTypes);
}

}  // namespace kiln::xpu
