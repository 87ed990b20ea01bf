// xpu kernel of forward convolution (1-3 spatial dims, stride, padding, dilation, groups,
// bias; any input layout, channels-last included): the input unfolded into columns
// [N, groups, C/groups * kernel volume, output positions] by one kernel, then per group a
// batched product weight [Cout/groups, C/groups * kernel] x columns (xpu_gemm.h) written
// straight into the output with the bias as the product's added term. Transposed
// convolution and the backward passes have no xpu kernel (KILN_FALLBACK=cpu).
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_gemm.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

// Geometry of the unfold, spatial dims padded to 3 (size 1, stride 1, no padding).
struct UnfoldGeometry {
  cl_long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  cl_long in_stride[5];  // N, C, D, H, W of the input, in elements
  cl_long channels_per_group, groups;
};

constexpr const char* kUnfold = R"CL(
typedef struct {
  long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  long in_stride[5];
  long channels_per_group, groups;
} UnfoldGeometry;
__kernel void kiln_unfold(__global char* cb, ulong co, __global const char* xb, ulong xo,
                          UnfoldGeometry g, long total) {
  __global ST_T* col = (__global ST_T*)(cb + co);
  __global const ST_T* x = (__global const ST_T*)(xb + xo);
  const long L = g.out_size[0] * g.out_size[1] * g.out_size[2];
  const long kv = g.ksize[0] * g.ksize[1] * g.ksize[2];
  const long Kg = g.channels_per_group * kv;
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long l = e % L, r = e / L;
    const long kk = r % Kg, ng = r / Kg;
    const long grp = ng % g.groups, n = ng / g.groups;
    const long ow = l % g.out_size[2], oh = (l / g.out_size[2]) % g.out_size[1],
               od = l / (g.out_size[2] * g.out_size[1]);
    const long kw = kk % g.ksize[2], kh = (kk / g.ksize[2]) % g.ksize[1],
               kd = (kk / (g.ksize[2] * g.ksize[1])) % g.ksize[0];
    const long c = grp * g.channels_per_group + kk / kv;
    const long id = od * g.stride[0] - g.padding[0] + kd * g.dilation[0];
    const long ih = oh * g.stride[1] - g.padding[1] + kh * g.dilation[1];
    const long iw = ow * g.stride[2] - g.padding[2] + kw * g.dilation[2];
    ST_T v = 0;
    if (id >= 0 && id < g.in_size[0] && ih >= 0 && ih < g.in_size[1] && iw >= 0 && iw < g.in_size[2])
      v = x[n * g.in_stride[0] + c * g.in_stride[1] + id * g.in_stride[2] + ih * g.in_stride[3] +
            iw * g.in_stride[4]];
    col[e] = v;
  }
}
)CL";

// The step between flattened output positions when out's spatial dims merge into one run
// (contiguous and channels-last outputs do), else 0.
int64_t spatial_step(const Tensor& out) {
  const int64_t nd = out.dim();
  for (int64_t d = 2; d + 1 < nd; ++d)
    if (out.size(d) > 1 && out.stride(d) != out.stride(d + 1) * out.size(d + 1)) return 0;
  return out.stride(nd - 1);
}

void convolution_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  KILN_CHECK(!call.bool_attr(3), NotImplementedError,
             "transposed convolution has no xpu kernel; set KILN_FALLBACK=cpu to run it on the CPU");
  if (out.numel() == 0) return;
  const Tensor w = contiguous_on_device(call.inputs[1]);
  const Tensor& bias = call.inputs[2];
  const auto& stride = call.ints_attr(0);
  const auto& padding = call.ints_attr(1);
  const auto& dilation = call.ints_attr(2);
  const int64_t groups = call.int_attr(5);
  const int64_t nd = x.dim() - 2;
  KILN_CHECK(nd >= 1 && nd <= 3, NotImplementedError, "xpu convolution: 1 to 3 spatial dims, got ", nd);
  UnfoldGeometry g{};
  const int64_t first = 3 - nd;  // spatial dims fill the last slots of 3
  for (int d = 0; d < 3; ++d) {
    g.in_size[d] = g.out_size[d] = g.ksize[d] = g.stride[d] = g.dilation[d] = 1;
    g.padding[d] = 0;
  }
  g.in_stride[0] = x.stride(0);
  g.in_stride[1] = x.stride(1);
  for (int d = 0; d < 3; ++d) g.in_stride[2 + d] = 0;
  for (int64_t d = 0; d < nd; ++d) {
    const size_t s = size_t(first + d);
    g.in_size[s] = x.size(2 + d);
    g.out_size[s] = out.size(2 + d);
    g.ksize[s] = w.size(2 + d);
    g.stride[s] = stride[size_t(d)];
    g.padding[s] = padding[size_t(d)];
    g.dilation[s] = dilation[size_t(d)];
    g.in_stride[2 + s] = x.stride(2 + d);
  }
  const int64_t N = x.size(0), C = x.size(1), Cout = w.size(0);
  g.channels_per_group = C / groups;
  g.groups = groups;
  const int64_t kv = g.ksize[0] * g.ksize[1] * g.ksize[2];
  const int64_t Kg = g.channels_per_group * kv, L = g.out_size[0] * g.out_size[1] * g.out_size[2];
  Tensor col = empty_tensor({N, groups, Kg, L}, x.dtype(), x.device());
  const int device = x.device().index;
  {
    Launch l(device, program_source(device, std::string("#define ST_T ST_") + dtype_tag(x.dtype()) + "\n" + kUnfold),
             "kiln_unfold");
    l.tensor(col).tensor(x).value(g).value(cl_long(col.numel()));
    const size_t local = default_local_size(device);
    l.run(std::min<size_t>((size_t(col.numel()) + local - 1) / local, 65536) * local, local);
  }
  // out as [N][Cout][L]: straight when its positions merge into one run, else a temporary.
  const int64_t step = spatial_step(out);
  Tensor target = step != 0 ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const int64_t tstep = step != 0 ? step : 1;
  const int64_t cg = Cout / groups;
  for (int64_t grp = 0; grp < groups; ++grp) {
    GemmOperand a, b, c, s;
    a.t = make_view(w, {cg, Kg}, {Kg, 1}, w.storage_offset() + grp * cg * Kg);
    a.batch = {0};
    a.rs = Kg;
    a.cs = 1;
    b.t = make_view(col, {Kg, L}, {L, 1}, col.storage_offset() + grp * Kg * L);
    b.batch = {groups * Kg * L};
    b.rs = L;
    b.cs = 1;
    Tensor c_view = make_view(target, {cg, L}, {target.stride(1), tstep},
                              target.storage_offset() + grp * cg * target.stride(1));
    c.batch = {target.stride(0)};
    c.rs = target.stride(1);
    c.cs = tstep;
    if (bias.defined()) {
      s.t = make_view(bias, {cg}, {bias.stride(0)}, bias.storage_offset() + grp * cg * bias.stride(0));
      s.batch = {0};
      s.rs = bias.stride(0);
      s.cs = 0;
    }
    run_gemm(c_view, a, b, bias.defined() ? &s : nullptr, c, {N}, cg, L, Kg, Scalar(int64_t(1)),
             Scalar(int64_t(bias.defined() ? 1 : 0)));
  }
  if (step == 0) copy_into(out, target);
}

// convolution_activation: the convolution, then its activation over the output in place
// (attrs 6..8: activation, alpha, beta; the CPU kernel's formulas).
void convolution_activation_kernel(OpCall& call) {
  convolution_kernel(call);
  const Tensor& out = call.outs[0];
  const int64_t act = call.int_attr(6);
  const double alpha = call.double_attr(7), beta = call.double_attr(8);
  const char* body = nullptr;
  switch (act) {
    case 1: body = "r = a < (R)0 ? (R)0 : a;"; break;
    case 2: body = "r = fmin(fmax(a, (R)s0), (R)s1);"; break;
    case 3: body = "r = fmin(fmax((R)s0 * a + (R)s1, (R)0), (R)1);"; break;
    case 4: body = "r = a * fmin(fmax(a + (R)3, (R)0), (R)6) / (R)6;"; break;
    default: return;
  }
  elementwise(out, {out}, std::string("typedef CT_") + dtype_tag(out.dtype()) + " R; " + body,
              {{Scalar(alpha), out.dtype()}, {Scalar(beta), out.dtype()}});
}

}  // namespace

void register_conv_kernels() {
  register_kernel("convolution", DeviceType::XPU, convolution_kernel, kFloatDTypes);
  register_kernel("convolution_activation", DeviceType::XPU, convolution_activation_kernel, kFloatDTypes);
}

}  // namespace kiln::xpu
