// pad on xpu (constant, reflect, replicate, circular; negative pads crop): one work item per
// output element maps its coordinates back to the input's, as the CPU kernel's pad_source, or
// writes the fill value where the constant mode pads.
#include <algorithm>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "xpu_kernel_util.h"

namespace kiln::xpu {

namespace {

constexpr int kMaxDims = 8;

struct PadGeometry {
  cl_long out_size[kMaxDims];
  cl_long out_stride[kMaxDims];
  cl_long in_size[kMaxDims];
  cl_long in_stride[kMaxDims];
  cl_long left[kMaxDims];
};

// attrs: pad (pairs, last dim first), mode, value; validated by the op's meta function.
void pad_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& pad = call.ints_attr(0);
  const std::string& mode = call.string_attr(1);
  const int mode_id = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "replicate" ? 2 : 3;
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  KILN_CHECK(nd <= kMaxDims, NotImplementedError, "pad on xpu: at most ", kMaxDims, " dims, got ", nd);
  if (out.numel() == 0) return;
  PadGeometry g{};
  for (int64_t d = 0; d < nd; ++d) {
    const bool scalar = x.dim() == 0;
    g.out_size[d] = scalar ? 1 : out.size(d);
    g.out_stride[d] = scalar ? 0 : out.stride(d);
    g.in_size[d] = scalar ? 1 : x.size(d);
    g.in_stride[d] = scalar ? 0 : x.stride(d);
  }
  for (size_t k = 0; k < pad.size() / 2; ++k) g.left[nd - 1 - int64_t(k)] = pad[2 * k];
  const std::string t = dtype_tag(x.dtype());
  const std::string s =
      "typedef struct { long out_size[8]; long out_stride[8]; long in_size[8]; long in_stride[8];\n"
      "                 long left[8]; } PadGeometry;\n"
      "__kernel void kiln_pad(__global char* ob, ulong oo, __global const char* xb, ulong xo,\n"
      "    PadGeometry g, int nd, int mode, SC_" + t + " value, long n) {\n"
      "  __global ST_" + t + "* op = (__global ST_" + t + "*)(ob + oo);\n"
      "  __global const ST_" + t + "* xp = (__global const ST_" + t + "*)(xb + xo);\n"
      "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
      "    long rest = i, to = 0, from = 0;\n"
      "    bool fill = false;\n"
      "    for (int d = nd - 1; d >= 0; --d) {\n"
      "      const long c = rest % g.out_size[d];\n"
      "      rest /= g.out_size[d];\n"
      "      to += c * g.out_stride[d];\n"
      "      const long len = g.in_size[d];\n"
      "      long s = c - g.left[d];\n"
      "      if (s < 0 || s >= len) {\n"
      "        if (mode == 0) fill = true;\n"
      "        else if (mode == 1) s = s < 0 ? -s : 2 * (len - 1) - s;\n"
      "        else if (mode == 2) s = clamp(s, 0L, len - 1);\n"
      "        else s = ((s % len) + len) % len;\n"
      "      }\n"
      "      from += s * g.in_stride[d];\n"
      "    }\n"
      "    if (fill) SV_" + t + "(op, to, value);\n"
      "    else op[to] = xp[from];\n"
      "  }\n}\n";
  const int device = x.device().index;
  Launch l(device, program_source(device, s), "kiln_pad");
  l.tensor(out).tensor(x).value(g).value(cl_int(nd)).value(cl_int(mode_id));
  l.scalar(Scalar(call.has_attr(2) ? call.double_attr(2) : 0.0), x.dtype());
  l.value(cl_long(out.numel()));
  l.run(grid_size(device, out.numel()), default_local_size(device));
}

}  // namespace

void register_pad_kernel() { register_kernel("pad", DeviceType::XPU, pad_kernel, kAllDTypes); }

}  // namespace kiln::xpu
