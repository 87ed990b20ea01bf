// xpu kernel of forward convolution (1-3 spatial dims, stride, padding, dilation, groups,
// bias; any input layout, channels-last included): the input unfolded into columns
// [N, groups, C/groups * kernel volume, output positions] by one kernel, then per group a
// batched product weight [Cout/groups, C/groups * kernel] x columns (xpu_gemm.h) written
// straight into the output with the bias as the product's added term. Transposed convolution
// (the input gradient) is the product W^T x followed by a gathering fold; the weight
// gradient is one product per group over all samples.
#include <algorithm>
#include <cstdlib>
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
// The window of a convolution over up to 3 spatial dims, padded to three (size 1, stride 1,
// no padding): the leading fields of both geometries below (the OpenCL structs list them flat).
struct ConvWindow {
  cl_long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
};

struct UnfoldGeometry {
  ConvWindow w;
  cl_long in_stride[5];  // N, C, D, H, W of the input, in elements
  cl_long channels_per_group, groups, batch;
};

constexpr const char* kUnfold = R"CL(
typedef struct {
  long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  long in_stride[5];
  long channels_per_group, groups, batch;
} UnfoldGeometry;
// Items: dim 0 walks the output positions of one column row (neighbouring items write
// neighbouring columns), dim 1 the rows; the row's decomposition is shared by the items of a
// group. IDX is int where every offset fits (the host checks), since 64-bit division is
// several times slower on GPUs and the kernel is mostly index arithmetic.
__kernel void kiln_unfold(__global char* cb, ulong co, __global const char* xb, ulong xo,
                          UnfoldGeometry g) {
  __global ST_T* col = (__global ST_T*)(cb + co);
  __global const ST_T* x = (__global const ST_T*)(xb + xo);
  const IDX ow_n = (IDX)g.out_size[2], oh_n = (IDX)g.out_size[1];
  const IDX L = (IDX)g.out_size[0] * oh_n * ow_n;
  const IDX kw_n = (IDX)g.ksize[2], kh_n = (IDX)g.ksize[1];
  const IDX kv = (IDX)g.ksize[0] * kh_n * kw_n;
  const IDX Kg = (IDX)g.channels_per_group * kv;
  const IDX rows = Kg * (IDX)g.groups * (IDX)g.batch;
  for (IDX r = get_global_id(1); r < rows; r += get_global_size(1)) {
#if N_INNER  // columns [groups, Kg, N, L] (the weight gradient's layout)
    const IDX n = r % (IDX)g.batch, r2 = r / (IDX)g.batch;
    const IDX kk = r2 % Kg, grp = r2 / Kg;
#else        // columns [N, groups, Kg, L]
    const IDX kk = r % Kg, ng = r / Kg;
    const IDX grp = ng % (IDX)g.groups, n = ng / (IDX)g.groups;
#endif
    const IDX kw = kk % kw_n, kh = (kk / kw_n) % kh_n, kd = (kk / (kw_n * kh_n)) % (IDX)g.ksize[0];
    const IDX c = grp * (IDX)g.channels_per_group + kk / kv;
    const IDX base = n * (IDX)g.in_stride[0] + c * (IDX)g.in_stride[1];
    const IDX dd = kd * (IDX)g.dilation[0] - (IDX)g.padding[0];
    const IDX dh = kh * (IDX)g.dilation[1] - (IDX)g.padding[1];
    const IDX dw = kw * (IDX)g.dilation[2] - (IDX)g.padding[2];
    for (IDX l = get_global_id(0); l < L; l += get_global_size(0)) {
      const IDX ow = l % ow_n, oh = (l / ow_n) % oh_n, od = l / (ow_n * oh_n);
      const IDX id = od * (IDX)g.stride[0] + dd;
      const IDX ih = oh * (IDX)g.stride[1] + dh;
      const IDX iw = ow * (IDX)g.stride[2] + dw;
      ST_T v = 0;
      if (id >= 0 && id < (IDX)g.in_size[0] && ih >= 0 && ih < (IDX)g.in_size[1] && iw >= 0 &&
          iw < (IDX)g.in_size[2])
        v = x[base + id * (IDX)g.in_stride[2] + ih * (IDX)g.in_stride[3] + iw * (IDX)g.in_stride[4]];
      col[r * L + l] = v;
    }
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

// The window of a convolution reading x ([N, C, spatial...]) into out_spatial positions with
// a kernel of the given spatial size; attrs {stride, padding, dilation} from `first`.
ConvWindow conv_window(const Tensor& x, const Shape& kernel, const Shape& out_spatial,
                       const OpCall& call, size_t first) {
  const int64_t nd = x.dim() - 2;
  KILN_CHECK(nd >= 1 && nd <= 3, NotImplementedError, "xpu convolution: 1 to 3 spatial dims, got ", nd);
  ConvWindow w{};
  for (int d = 0; d < 3; ++d) {
    w.in_size[d] = w.out_size[d] = w.ksize[d] = w.stride[d] = w.dilation[d] = 1;
    w.padding[d] = 0;
  }
  for (int64_t d = 0; d < nd; ++d) {
    const size_t s = size_t(3 - nd + d), i = size_t(d);
    w.in_size[s] = x.size(2 + d);
    w.out_size[s] = out_spatial[i];
    w.ksize[s] = kernel[i];
    w.stride[s] = call.ints_attr(first)[i];
    w.padding[s] = call.ints_attr(first + 1)[i];
    w.dilation[s] = call.ints_attr(first + 2)[i];
  }
  return w;
}

// t's strides as N, C, then the spatial dims padded to three (0 for the missing ones).
void strides5(const Tensor& t, cl_long* out) {
  const int64_t nd = t.dim() - 2;
  out[0] = t.stride(0);
  out[1] = t.stride(1);
  for (int d = 0; d < 3; ++d) out[2 + d] = 0;
  for (int64_t d = 0; d < nd; ++d) out[2 + 3 - nd + d] = t.stride(2 + d);
}

UnfoldGeometry unfold_geometry(const Tensor& x, const Shape& kernel, const Shape& out_spatial,
                               const OpCall& call, size_t first, int64_t groups) {
  UnfoldGeometry g{};
  g.w = conv_window(x, kernel, out_spatial, call, first);
  strides5(x, g.in_stride);
  g.channels_per_group = x.size(1) / groups;
  g.groups = groups;
  g.batch = x.size(0);
  return g;
}

int64_t volume(const cl_long* v) { return v[0] * v[1] * v[2]; }

// Columns of x: [N, groups, Kg, L], or [groups, Kg, N, L] with n_inner.
Tensor unfold(const Tensor& x, const UnfoldGeometry& g, bool n_inner) {
  const int64_t Kg = g.channels_per_group * volume(g.w.ksize), L = volume(g.w.out_size);
  Tensor col = n_inner ? empty_tensor({g.groups, Kg, g.batch, L}, x.dtype(), x.device())
                       : empty_tensor({g.batch, g.groups, Kg, L}, x.dtype(), x.device());
  if (col.numel() == 0) return col;
  const int device = x.device().index;
  // 32-bit indices where the columns and every input offset fit.
  int64_t x_extent = 1;
  for (int64_t d = 0; d < x.dim(); ++d) x_extent += (x.size(d) - 1) * std::abs(x.stride(d));
  const bool small = col.numel() < (int64_t(1) << 31) && x_extent < (int64_t(1) << 31);
  Launch l(device,
           program_source(device, std::string("#define ST_T ST_") + dtype_tag(x.dtype()) +
                                      "\n#define N_INNER " + (n_inner ? "1" : "0") +
                                      "\ntypedef " + (small ? "int" : "long") + " IDX;\n" + kUnfold),
           "kiln_unfold");
  l.tensor(col).tensor(x).value(g);
  const size_t local = default_local_size(device);
  const size_t rows = size_t(col.numel() / L);
  // Groups of 64 positions x (local / 64) rows; 8 positions where rows are shorter.
  const size_t l0 = std::min<size_t>(local, L >= 64 ? 64 : 8), l1 = local / l0;
  l.run_2d(std::min<size_t>(size_t(L), 1024), std::min<size_t>(rows, 65535), l0, l1);
  return col;
}

Shape spatial_of(const Tensor& t) { return Shape(t.shape().begin() + 2, t.shape().end()); }

// A matrix operand over a batch of one dim.
GemmOperand operand(const Tensor& base, int64_t offset, int64_t batch_stride, int64_t rs, int64_t cs) {
  GemmOperand o;
  o.t = make_view(base, {1}, {1}, base.storage_offset() + offset);
  o.batch = {batch_stride};
  o.rs = rs;
  o.cs = cs;
  return o;
}

void transposed_convolution(OpCall& call);

void convolution_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (call.bool_attr(3)) {
    transposed_convolution(call);
    return;
  }
  if (out.numel() == 0) return;
  const Tensor w = contiguous_on_device(call.inputs[1]);
  const Tensor& bias = call.inputs[2];
  const int64_t groups = call.int_attr(5);
  const UnfoldGeometry g = unfold_geometry(x, spatial_of(w), spatial_of(out), call, 0, groups);
  const int64_t N = x.size(0), Cout = w.size(0);
  const int64_t Kg = g.channels_per_group * volume(g.w.ksize), L = volume(g.w.out_size);
  const Tensor col = unfold(x, g, false);
  // out as [N][Cout][L]: straight when its positions merge into one run, else a temporary.
  const int64_t step = spatial_step(out);
  Tensor target = step != 0 ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const int64_t tstep = step != 0 ? step : 1;
  const int64_t cg = Cout / groups;
  for (int64_t grp = 0; grp < groups; ++grp) {
    GemmOperand a = operand(w, grp * cg * Kg, 0, Kg, 1);
    GemmOperand b = operand(col, grp * Kg * L, groups * Kg * L, L, 1);
    GemmOperand c = operand(target, grp * cg * target.stride(1), target.stride(0), target.stride(1), tstep);
    GemmOperand s;
    if (bias.defined()) s = operand(bias, grp * cg * bias.stride(0), 0, bias.stride(0), 0);
    run_gemm(c.t, a, b, bias.defined() ? &s : nullptr, c, {N}, cg, L, Kg, Scalar(int64_t(1)),
             Scalar(int64_t(bias.defined() ? 1 : 0)));
  }
  if (step == 0) copy_into(out, target);
}

// Transposed convolution: per group the columns W^T x ([Cout/G * kernel, L_in] per sample),
// then a fold that gathers, for each output element, the columns whose window covers it
// (no atomics: each output is written by one item), plus the bias.
constexpr const char* kFold = R"CL(
typedef struct {
  long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  long out_stride[5];
  long cout_per_group, groups, batch, has_bias;
} FoldGeometry;
__kernel void kiln_fold(__global char* ob, ulong oo, __global const char* colb, ulong colo,
                        __global const char* bb, ulong bo, FoldGeometry g, long total) {
  const long L = g.in_size[0] * g.in_size[1] * g.in_size[2];
  const long kv = g.ksize[0] * g.ksize[1] * g.ksize[2];
  const long cout = g.cout_per_group * g.groups;
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long ow = e % g.out_size[2], oh = (e / g.out_size[2]) % g.out_size[1];
    const long od = (e / (g.out_size[2] * g.out_size[1])) % g.out_size[0];
    const long rest = e / (g.out_size[0] * g.out_size[1] * g.out_size[2]);
    const long co = rest % cout, n = rest / cout;
    const long grp = co / g.cout_per_group, cl = co % g.cout_per_group;
    const long oc[3] = {od, oh, ow};
    ACC sum = g.has_bias ? (ACC)LD_T(bb + bo, co) : (ACC)0;
    for (long kd = 0; kd < g.ksize[0]; ++kd) {
      const long td = oc[0] + g.padding[0] - kd * g.dilation[0];
      if (td < 0 || td % g.stride[0]) continue;
      const long id = td / g.stride[0];
      if (id >= g.in_size[0]) continue;
      for (long kh = 0; kh < g.ksize[1]; ++kh) {
        const long th = oc[1] + g.padding[1] - kh * g.dilation[1];
        if (th < 0 || th % g.stride[1]) continue;
        const long ih = th / g.stride[1];
        if (ih >= g.in_size[1]) continue;
        for (long kw = 0; kw < g.ksize[2]; ++kw) {
          const long tw = oc[2] + g.padding[2] - kw * g.dilation[2];
          if (tw < 0 || tw % g.stride[2]) continue;
          const long iw = tw / g.stride[2];
          if (iw >= g.in_size[2]) continue;
          const long row = cl * kv + (kd * g.ksize[1] + kh) * g.ksize[2] + kw;
          const long at = ((n * g.groups + grp) * g.cout_per_group * kv + row) * L +
                          (id * g.in_size[1] + ih) * g.in_size[2] + iw;
          sum += (ACC)LD_T(colb + colo, at);
        }
      }
    }
    SV_T(ob + oo, n * g.out_stride[0] + co * g.out_stride[1] + od * g.out_stride[2] +
                  oh * g.out_stride[3] + ow * g.out_stride[4], sum);
  }
}
)CL";

struct FoldGeometry {
  ConvWindow w;
  cl_long out_stride[5];
  cl_long cout_per_group, groups, batch, has_bias;
};

void transposed_convolution(OpCall& call) {
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const Tensor x = contiguous_on_device(call.inputs[0]);
  const Tensor w = contiguous_on_device(call.inputs[1]);  // [Cin, Cout / G, kernel...]
  const Tensor& bias = call.inputs[2];
  const int64_t groups = call.int_attr(5);
  const int64_t N = x.size(0), Cin = x.size(1), cig = Cin / groups, cog = w.size(1);
  FoldGeometry g{};
  g.w = conv_window(x, spatial_of(w), spatial_of(out), call, 0);
  strides5(out, g.out_stride);
  g.cout_per_group = cog;
  g.groups = groups;
  g.batch = N;
  g.has_bias = bias.defined() ? 1 : 0;
  const int64_t kv = volume(g.w.ksize), Lin = volume(g.w.in_size), Kt = cog * kv;
  Tensor col = empty_tensor({N, groups, Kt, Lin}, x.dtype(), x.device());
  for (int64_t grp = 0; grp < groups; ++grp) {
    // W_g^T [Kt, cig]: element (r, c) of w's [cig, Kt] block at c * Kt + r.
    GemmOperand a = operand(w, grp * cig * Kt, 0, 1, Kt);
    GemmOperand b = operand(x, grp * cig * Lin, Cin * Lin, Lin, 1);
    GemmOperand c = operand(col, grp * Kt * Lin, groups * Kt * Lin, Lin, 1);
    run_gemm(c.t, a, b, nullptr, c, {N}, Kt, Lin, cig, Scalar(int64_t(1)), Scalar(int64_t(0)));
  }
  const int device = x.device().index;
  const std::string acc = x.dtype() == DType::F64 ? "F64" : "F32";
  Launch l(device,
           program_source(device, "typedef CT_" + acc + " ACC;\n#define LD_T LD_" +
                                      std::string(dtype_tag(x.dtype())) + "\n#define SV_T SV_" +
                                      dtype_tag(out.dtype()) + "\n" + kFold),
           "kiln_fold");
  l.tensor(out).tensor(col).tensor(bias.defined() ? bias : col).value(g).value(cl_long(out.numel()));
  const size_t local = default_local_size(device);
  l.run(std::min<size_t>((size_t(out.numel()) + local - 1) / local, 65536) * local, local);
}

// convolution_weight_grad(input, grad_output): attrs {weight_shape, stride, padding,
// dilation, transposed, output_padding, groups}. Per group dW = dY^T-rows x columns^T over all
// samples at once: the columns laid out [groups, Kg, N, L] and dY as [Cout, N, L].
// A transposed convolution's weight ([Cin, Cout / G, kernel...]) gets the same computation with
// the roles swapped: it is the weight gradient of the plain convolution that maps the
// transposed one's output gradient (input) to its input (output gradient).
void convolution_weight_grad_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const bool transposed = call.bool_attr(4);
  const Tensor& x = transposed ? call.inputs[1] : call.inputs[0];
  const Tensor& gy = transposed ? call.inputs[0] : call.inputs[1];
  const int64_t groups = call.int_attr(6);
  const UnfoldGeometry g = unfold_geometry(x, spatial_of(out), spatial_of(gy), call, 1, groups);
  const int64_t N = x.size(0), Cout = gy.size(1), cg = Cout / groups;
  const int64_t Kg = g.channels_per_group * volume(g.w.ksize), L = volume(g.w.out_size);
  const Tensor col = unfold(x, g, true);
  // dY [N, Cout, L] -> [Cout, N, L].
  const Tensor dyt = contiguous_on_device(
      permuted_view(reshaped_view(contiguous_on_device(gy), {N, Cout, L}), {1, 0, 2}));
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  for (int64_t grp = 0; grp < groups; ++grp) {
    GemmOperand a = operand(dyt, grp * cg * N * L, 0, N * L, 1);
    GemmOperand b = operand(col, grp * Kg * N * L, 0, 1, N * L);
    GemmOperand c = operand(target, grp * cg * Kg, 0, Kg, 1);
    run_gemm(c.t, a, b, nullptr, c, {1}, cg, Kg, N * L, Scalar(int64_t(1)), Scalar(int64_t(0)));
  }
  if (!out.is_contiguous()) copy_into(out, target);
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
  register_kernel("convolution_weight_grad", DeviceType::XPU, convolution_weight_grad_kernel, kFloatDTypes);
}

}  // namespace kiln::xpu
