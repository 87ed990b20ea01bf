// xpu kernels of pooling over 1-3 spatial dims: max_pool (values and the flat spatial index
// of each maximum, NaN winning as in torch), avg_pool (ceil_mode, count_include_pad,
// divisor_override as torch), adaptive_avg_pool and adaptive_max_pool (a later NaN in a window
// replacing an earlier one, as the CPU kernel), one work item per output element walking
// its window; their backward ops (adaptive max pooling's is a scatter_add of a per-element
// index, which stages through the host), one work item per input element gathering from the outputs whose windows hold it.
// Leading dims (batch, channels) are planes.
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

struct PoolGeometry {
  cl_long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  cl_long planes, divisor;  // divisor: avg_pool's override, 0 when none
  cl_int count_include_pad;
};

// The geometry of pooling `in` (an input-shaped tensor) to `out` over their last nd dims,
// padded to three; the window attrs are given for the windowed pools (null: adaptive).
PoolGeometry pool_geometry(const Tensor& in, const Tensor& out, int64_t nd,
                           const std::vector<int64_t>* ksize, const std::vector<int64_t>* stride,
                           const std::vector<int64_t>* padding, const std::vector<int64_t>* dilation) {
  PoolGeometry g{};
  for (int d = 0; d < 3; ++d) {
    g.in_size[d] = g.out_size[d] = g.ksize[d] = g.stride[d] = g.dilation[d] = 1;
    g.padding[d] = 0;
  }
  for (int64_t d = 0; d < nd; ++d) {
    const size_t s = size_t(3 - nd + d), i = size_t(d);
    g.in_size[s] = in.size(in.dim() - nd + d);
    g.out_size[s] = out.size(out.dim() - nd + d);
    if (ksize) g.ksize[s] = (*ksize)[i];
    if (stride) g.stride[s] = (*stride)[i];
    if (padding) g.padding[s] = (*padding)[i];
    if (dilation) g.dilation[s] = (*dilation)[i];
  }
  g.planes = 1;
  for (int64_t d = 0; d < in.dim() - nd; ++d) g.planes *= in.size(d);
  return g;
}

constexpr const char* kPool = R"CL(
typedef struct {
  long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  long planes, divisor;
  int count_include_pad;
} PoolGeometry;
__kernel void kiln_pool(__global char* ob, ulong oo, __global char* ib_, ulong io,
                        __global const char* xb, ulong xo, PoolGeometry g) {
  __global const char* xp = xb + xo;
  const long out_plane = g.out_size[0] * g.out_size[1] * g.out_size[2];
  const long in_plane = g.in_size[0] * g.in_size[1] * g.in_size[2];
  const long total = g.planes * out_plane;
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long plane = e / out_plane, o = e % out_plane;
    long oc[3] = {o / (g.out_size[1] * g.out_size[2]), (o / g.out_size[2]) % g.out_size[1], o % g.out_size[2]};
    long lo[3], hi[3];
    long pool = 1;
    for (int d = 0; d < 3; ++d) {
#if KIND >= 2
      lo[d] = (oc[d] * g.in_size[d]) / g.out_size[d];
      hi[d] = ((oc[d] + 1) * g.in_size[d] + g.out_size[d] - 1) / g.out_size[d];
#else
      lo[d] = oc[d] * g.stride[d] - g.padding[d];
      hi[d] = min(lo[d] + g.ksize[d], g.in_size[d] + g.padding[d]);
      pool *= hi[d] - lo[d];
#endif
    }
    const long base = plane * in_plane;
#if KIND == 0
    ACC best = 0; long bi = -1;
    for (long kd = 0; kd < g.ksize[0]; ++kd) {
      const long id = lo[0] + kd * g.dilation[0];
      if (id < 0 || id >= g.in_size[0]) continue;
      for (long kh = 0; kh < g.ksize[1]; ++kh) {
        const long ih = lo[1] + kh * g.dilation[1];
        if (ih < 0 || ih >= g.in_size[1]) continue;
        for (long kw = 0; kw < g.ksize[2]; ++kw) {
          const long iw = lo[2] + kw * g.dilation[2];
          if (iw < 0 || iw >= g.in_size[2]) continue;
          const long at = (id * g.in_size[1] + ih) * g.in_size[2] + iw;
          const ACC v = (ACC)LD_T(xp, base + at);
          if (bi < 0 || v > best || (v != v && best == best)) { best = v; bi = at; }
        }
      }
    }
    SV_T(ob + oo, e, best);
    ((__global long*)(ib_ + io))[e] = bi;
#elif KIND == 3
    // The CPU's adaptive max: a later NaN replaces an earlier one.
    ACC best = 0; long bi = -1;
    for (long id = lo[0]; id < hi[0]; ++id)
      for (long ih = lo[1]; ih < hi[1]; ++ih)
        for (long iw = lo[2]; iw < hi[2]; ++iw) {
          const long at = (id * g.in_size[1] + ih) * g.in_size[2] + iw;
          const ACC v = (ACC)LD_T(xp, base + at);
          if (bi < 0 || v > best || v != v) { best = v; bi = at; }
        }
    SV_T(ob + oo, e, best);
    ((__global long*)(ib_ + io))[e] = bi;
#else
    long clo[3], chi[3], count = 1;
    for (int d = 0; d < 3; ++d) {
      clo[d] = max(lo[d], 0L);
      chi[d] = min(hi[d], g.in_size[d]);
      count *= chi[d] - clo[d];
    }
    ACC sum = 0;
    for (long id = clo[0]; id < chi[0]; ++id)
      for (long ih = clo[1]; ih < chi[1]; ++ih)
        for (long iw = clo[2]; iw < chi[2]; ++iw)
          sum += (ACC)LD_T(xp, base + (id * g.in_size[1] + ih) * g.in_size[2] + iw);
#if KIND == 1
    const long divide = g.divisor > 0 ? g.divisor : (g.count_include_pad ? pool : count);
#else
    const long divide = count;
#endif
    SV_T(ob + oo, e, sum / (ACC)divide);
#endif
  }
}
)CL";

// The backward of avg pooling (KIND 1) and adaptive avg pooling (KIND 2), gathered: one item
// per input element adds grad / divisor over the outputs whose window covers it (no atomics).
constexpr const char* kPoolBackward = R"CL(
typedef struct {
  long in_size[3], out_size[3], ksize[3], stride[3], padding[3], dilation[3];
  long planes, divisor;
  int count_include_pad;
} PoolGeometry;
// Output o's window along dim d: [lo, hi) clamped, and (avg) its unclamped size.
inline void window(const PoolGeometry* g, int d, long o, long* lo, long* hi, long* full) {
#if KIND == 2
  *lo = (o * g->in_size[d]) / g->out_size[d];
  *hi = ((o + 1) * g->in_size[d] + g->out_size[d] - 1) / g->out_size[d];
  *full = *hi - *lo;
#else
  long a = o * g->stride[d] - g->padding[d];
  long b = min(a + g->ksize[d], g->in_size[d] + g->padding[d]);
  *full = b - a;
  *lo = max(a, 0L);
  *hi = min(b, g->in_size[d]);
#endif
}
__kernel void kiln_pool_backward(__global char* gib, ulong gio, __global const char* gb, ulong go,
                                 __global const char* ixb, ulong ixo, PoolGeometry g) {
  const long in_plane = g.in_size[0] * g.in_size[1] * g.in_size[2];
  const long out_plane = g.out_size[0] * g.out_size[1] * g.out_size[2];
  const long total = g.planes * in_plane;
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    const long plane = e / in_plane, i = e % in_plane;
    const long ic[3] = {i / (g.in_size[1] * g.in_size[2]), (i / g.in_size[2]) % g.in_size[1], i % g.in_size[2]};
    long first[3], last[3];
    for (int d = 0; d < 3; ++d) {
#if KIND == 0
      // o * s - p + j * dilation == i for some tap j < k
      const long t = ic[d] + g.padding[d] - g.dilation[d] * (g.ksize[d] - 1);
      first[d] = t <= 0 ? 0 : (t + g.stride[d] - 1) / g.stride[d];
      last[d] = min((ic[d] + g.padding[d]) / g.stride[d], g.out_size[d] - 1);
#elif KIND == 2
      first[d] = max((ic[d] * g.out_size[d]) / g.in_size[d] - 1, 0L);
      last[d] = min(((ic[d] + 1) * g.out_size[d]) / g.in_size[d] + 1, g.out_size[d] - 1);
#else
      // o * s - p <= i < o * s - p + k
      const long t = ic[d] + g.padding[d] - g.ksize[d] + 1;
      first[d] = max(t <= 0 ? 0 : (t + g.stride[d] - 1) / g.stride[d], 0L);
      last[d] = min((ic[d] + g.padding[d]) / g.stride[d], g.out_size[d] - 1);
#endif
    }
    ACC sum = 0;
    for (long od = first[0]; od <= last[0]; ++od)
      for (long oh = first[1]; oh <= last[1]; ++oh)
        for (long ow = first[2]; ow <= last[2]; ++ow) {
          const long oc[3] = {od, oh, ow};
#if KIND == 0
          // The outputs whose window has i as a tap, in output order (the CPU's order of
          // sums); each adds its gradient where its index names i.
          bool tap = true;
          for (int d = 0; d < 3; ++d) tap = tap && (ic[d] + g.padding[d] - oc[d] * g.stride[d]) % g.dilation[d] == 0;
          const long o = plane * out_plane + (od * g.out_size[1] + oh) * g.out_size[2] + ow;
          if (tap && ((__global const long*)(ixb + ixo))[o] == i) sum += (ACC)LD_T(gb + go, o);
          continue;
#endif
          long count = 1, pool = 1;
          bool inside = true;
          for (int d = 0; d < 3; ++d) {
            long lo, hi, full;
            window(&g, d, oc[d], &lo, &hi, &full);
            inside = inside && ic[d] >= lo && ic[d] < hi;
            count *= hi - lo;
            pool *= full;
          }
          if (!inside) continue;
#if KIND == 1
          const long divide = g.divisor > 0 ? g.divisor : (g.count_include_pad ? pool : count);
#else
          const long divide = count;
#endif
          sum += (ACC)LD_T(gb + go, plane * out_plane + (od * g.out_size[1] + oh) * g.out_size[2] + ow) / (ACC)divide;
        }
    SV_T(gib + gio, e, sum);
  }
}
)CL";

// max_pool_backward: inputs {grad_output, indices}, attrs {input_size, kernel, stride, padding,
// dilation}; avg_pool_backward: inputs {grad_output}, attrs {input_size, kernel, stride, padding,
// ceil_mode, count_include_pad, divisor?}; adaptive_avg_pool_backward: attrs {input_size,
// spatial_dims}. Outs {grad_input} of input_size. Kind 0 max, 1 avg, 2 adaptive avg.
void run_pool_backward(OpCall& call, int kind) {
  const Tensor& gy = call.inputs[0];
  const Tensor& gx = call.outs[0];
  if (gx.numel() == 0) return;
  const int64_t nd = kind == 2 ? call.int_attr(1) : int64_t(call.ints_attr(1).size());
  const bool windowed = kind < 2;
  PoolGeometry g = pool_geometry(gx, gy, nd, windowed ? &call.ints_attr(1) : nullptr,
                                 windowed ? &call.ints_attr(2) : nullptr,
                                 windowed ? &call.ints_attr(3) : nullptr,
                                 kind == 0 ? &call.ints_attr(4) : nullptr);
  if (kind == 1) {
    g.count_include_pad = call.bool_attr(5) ? 1 : 0;
    g.divisor = call.has_attr(6) ? call.int_attr(6) : 0;
  }
  Tensor gyc = contiguous_on_device(gy);
  Tensor indices = kind == 0 ? contiguous_on_device(call.inputs[1]) : gyc;
  Tensor target = gx.is_contiguous() ? gx : empty_tensor(gx.shape(), gx.dtype(), gx.device());
  const int device = gy.device().index;
  const std::string acc = gy.dtype() == DType::F64 ? "F64" : "F32";
  const std::string src = "#define KIND " + std::to_string(kind) + "\ntypedef CT_" + acc +
                          " ACC;\n#define LD_T LD_" + dtype_tag(gy.dtype()) + "\n#define SV_T SV_" +
                          dtype_tag(gx.dtype()) + "\n" + kPoolBackward;
  {
    Launch l(device, program_source(device, src), "kiln_pool_backward");
    l.tensor(target).tensor(gyc).tensor(indices).value(g);
    const size_t local = default_local_size(device);
    l.run(std::min<size_t>((size_t(gx.numel()) + local - 1) / local, 65536) * local, local);
  }
  if (!gx.is_contiguous()) copy_into(gx, target);
}

void max_pool_backward_kernel(OpCall& call) { run_pool_backward(call, 0); }
void avg_pool_backward_kernel(OpCall& call) { run_pool_backward(call, 1); }
void adaptive_avg_pool_backward_kernel(OpCall& call) { run_pool_backward(call, 2); }

// kind 0 max, 1 avg, 2 adaptive avg, 3 adaptive max.
void run_pool(OpCall& call, int kind) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const bool windowed = kind < 2;
  const int64_t nd = int64_t(call.ints_attr(0).size());
  PoolGeometry g = pool_geometry(x, out, nd, windowed ? &call.ints_attr(0) : nullptr,
                                 windowed ? &call.ints_attr(1) : nullptr,
                                 windowed ? &call.ints_attr(2) : nullptr,
                                 kind == 0 ? &call.ints_attr(3) : nullptr);
  if (kind == 1) {
    g.count_include_pad = call.bool_attr(4) ? 1 : 0;
    g.divisor = call.has_attr(5) ? call.int_attr(5) : 0;
  }
  Tensor xc = contiguous_on_device(x);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  Tensor idx;
  const bool indices = kind == 0 || kind == 3;
  if (indices) {
    const Tensor& io = call.outs[1];
    idx = io.is_contiguous() ? io : empty_tensor(io.shape(), DType::I64, io.device());
  }
  const int device = x.device().index;
  const std::string acc = x.dtype() == DType::F64 ? "F64" : "F32";
  const std::string src = "#define KIND " + std::to_string(kind) + "\ntypedef CT_" + acc +
                          " ACC;\n#define LD_T LD_" + dtype_tag(x.dtype()) + "\n#define SV_T SV_" +
                          dtype_tag(x.dtype()) + "\n" + kPool;
  {
    Launch l(device, program_source(device, src), "kiln_pool");
    l.tensor(target).tensor(indices ? idx : target).tensor(xc).value(g);
    const size_t local = default_local_size(device);
    l.run(std::min<size_t>((size_t(out.numel()) + local - 1) / local, 65536) * local, local);
  }
  if (!out.is_contiguous()) copy_into(out, target);
  if (indices && !call.outs[1].is_contiguous()) copy_into(call.outs[1], idx);
}

void max_pool_kernel(OpCall& call) { run_pool(call, 0); }
void avg_pool_kernel(OpCall& call) { run_pool(call, 1); }
void adaptive_avg_pool_kernel(OpCall& call) { run_pool(call, 2); }
void adaptive_max_pool_kernel(OpCall& call) { run_pool(call, 3); }

}  // namespace

void register_pooling_kernels() {
  register_kernel("max_pool", DeviceType::XPU, max_pool_kernel, kFloatDTypes);
  register_kernel("avg_pool", DeviceType::XPU, avg_pool_kernel, kFloatDTypes);
  register_kernel("adaptive_avg_pool", DeviceType::XPU, adaptive_avg_pool_kernel, kFloatDTypes);
  register_kernel("adaptive_max_pool", DeviceType::XPU, adaptive_max_pool_kernel, kFloatDTypes);
  register_kernel("avg_pool_backward", DeviceType::XPU, avg_pool_backward_kernel, kFloatDTypes);
  register_kernel("max_pool_backward", DeviceType::XPU, max_pool_backward_kernel, kFloatDTypes);
  register_kernel("adaptive_avg_pool_backward", DeviceType::XPU, adaptive_avg_pool_backward_kernel,
                  kFloatDTypes);
}

}  // namespace kiln::xpu
