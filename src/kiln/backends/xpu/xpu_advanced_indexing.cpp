// xpu kernels that read or write through index tensors: advanced indexing (index, index_put),
// scatter / scatter.value, one_hot and index_lerp (interpolate's taps). Index values are
// checked on the host first (a copy and a wait, as index_select's): an index out of range is
// the CPU kernel's error, never an access outside a buffer. Writes through duplicate indices
// (index_put without accumulate, scatter) land in an unspecified order, as on PyTorch's GPUs,
// unless kiln.use_deterministic_algorithms(True) is on: then they run the CPU kernel through
// host memory (the last write wins); accumulating writes always stage through the host
// (xpu_host_staged.cpp), which keeps the CPU's sums.
#include <algorithm>
#include <optional>
#include <string>

#include "kiln/core/determinism.h"
#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

// The first value of index outside [lo, hi), read on the host, if any.
std::optional<int64_t> first_outside(const Tensor& index, int64_t lo, int64_t hi) {
  if (index.numel() == 0) return std::nullopt;
  for (int64_t v : to_host(index).to_vector<int64_t>())
    if (v < lo || v >= hi) return v;
  return std::nullopt;
}

// out = self's values, unless out is self (an in-place call).
void copy_unless_same(const Tensor& out, const Tensor& self) {
  if (out.numel() == 0) return;
  if (out.raw_data() == self.raw_data() && out.strides() == self.strides()) return;
  elementwise(out, {self}, "r = a;", {}, /*raw=*/true);
}

// ---- index / index_put ----
// Where each dim of x[idx...] comes from (PyTorch's layout, as the CPU kernel's plan): per
// result dim, the stride in the indexed tensor (0 on the broadcast index dims), in the other
// tensor (index's output or index_put's values) and in each index tensor.
constexpr int kMaxDims = 8;
constexpr int kMaxIndices = 4;  // more index tensors (a 5-d mask) stage through the host

struct IndexGeometry {
  cl_long size[kMaxDims];
  cl_long rest[kMaxDims];
  cl_long other[kMaxDims];
  cl_long istride[kMaxIndices][kMaxDims];
  cl_long xstride[kMaxIndices];
  cl_long xsize[kMaxIndices];
};

struct IndexPlan {
  IndexGeometry g{};
  int nd = 0;
  std::vector<int64_t> dims;  // per defined index: the dim of the indexed tensor
  std::vector<Tensor> ts;     // per defined index: the tensor
};

// target: the indexed tensor; idx: one entry per leading dim; other: the tensor laid out as
// the result. nullopt where the layout exceeds the kernel's fixed geometry.
std::optional<IndexPlan> make_plan(const Tensor& target, const std::vector<Tensor>& idx,
                                   const Tensor& other) {
  IndexPlan p;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k].defined()) {
      p.dims.push_back(int64_t(k));
      p.ts.push_back(idx[k]);
    }
  KILN_INTERNAL_ASSERT(!p.dims.empty(), "advanced indexing without an index tensor");
  if (p.ts.size() > size_t(kMaxIndices) || other.dim() > kMaxDims) return std::nullopt;
  const Shape& b = p.ts[0].shape();
  const bool adjacent = p.dims.back() - p.dims.front() + 1 == int64_t(p.dims.size());
  auto indexed = [&](int64_t d) { return d < int64_t(idx.size()) && idx[size_t(d)].defined(); };
  std::vector<int64_t> from_x;  // per result dim: x's dim, or -1 - j for index dim j
  auto add_b_dims = [&] {
    for (int64_t j = 0; j < int64_t(b.size()); ++j) from_x.push_back(-1 - j);
  };
  if (adjacent) {
    for (int64_t d = 0; d < p.dims.front(); ++d) from_x.push_back(d);
    add_b_dims();
    for (int64_t d = p.dims.back() + 1; d < target.dim(); ++d) from_x.push_back(d);
  } else {
    add_b_dims();
    for (int64_t d = 0; d < target.dim(); ++d)
      if (!indexed(d)) from_x.push_back(d);
  }
  KILN_INTERNAL_ASSERT(int64_t(from_x.size()) == other.dim(), "advanced indexing: result of ",
                       from_x.size(), " dims, other tensor ", shape_str(other.shape()));
  p.nd = int(from_x.size());
  for (int r = 0; r < p.nd; ++r) {
    const int64_t src = from_x[size_t(r)];
    p.g.size[r] = other.size(r);
    p.g.other[r] = other.stride(r);
    p.g.rest[r] = src >= 0 ? target.stride(src) : 0;
    for (size_t m = 0; m < p.ts.size(); ++m) p.g.istride[m][r] = src >= 0 ? 0 : p.ts[m].stride(-1 - src);
  }
  for (size_t m = 0; m < p.ts.size(); ++m) {
    p.g.xstride[m] = target.stride(p.dims[m]);
    p.g.xsize[m] = target.size(p.dims[m]);
  }
  return p;
}

void check_indices(const char* op, const IndexPlan& p) {
  for (size_t m = 0; m < p.ts.size(); ++m) {
    const int64_t size = p.g.xsize[m];
    if (auto bad = first_outside(p.ts[m], -size, size))
      KILN_THROW(IndexError, op, ": index ", *bad, " is out of bounds for dimension ", p.dims[m],
                 " with size ", size);
  }
}

// put: indexed[at] = other[lin], else other[lin] = indexed[at].
std::string index_source(DType t, const std::vector<Tensor>& ts, bool put) {
  const std::string st = std::string("ST_") + dtype_tag(t);
  std::string s =
      "typedef struct { long size[8]; long rest[8]; long other[8]; long istride[4][8];\n"
      "                 long xstride[4]; long xsize[4]; } IndexGeometry;\n"
      "__kernel void kiln_index(__global char* xb, ulong xo, __global char* ob, ulong oo";
  for (size_t m = 0; m < ts.size(); ++m)
    s += ", __global const char* ib" + std::to_string(m) + ", ulong io" + std::to_string(m);
  s += ", IndexGeometry g, int nd, long n) {\n"
       "  __global " + st + "* xp = (__global " + st + "*)(xb + xo);\n"
       "  __global " + st + "* op = (__global " + st + "*)(ob + oo);\n"
       "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
       "    long rest = i, at = 0, lin = 0";
  for (size_t m = 0; m < ts.size(); ++m) s += ", p" + std::to_string(m) + " = 0";
  s += ";\n"
       "    for (int d = nd - 1; d >= 0; --d) {\n"
       "      const long c = rest % g.size[d];\n"
       "      rest /= g.size[d];\n"
       "      at += c * g.rest[d];\n"
       "      lin += c * g.other[d];\n";
  for (size_t m = 0; m < ts.size(); ++m)
    s += "      p" + std::to_string(m) + " += c * g.istride[" + std::to_string(m) + "][d];\n";
  s += "    }\n";
  for (size_t m = 0; m < ts.size(); ++m) {
    const std::string k = std::to_string(m);
    s += "    { long v = (long)LD_" + std::string(dtype_tag(ts[m].dtype())) + "(ib" + k + " + io" + k +
         ", p" + k + "); if (v < 0) v += g.xsize[" + k + "]; at += v * g.xstride[" + k + "]; }\n";
  }
  s += put ? "    xp[at] = op[lin];\n" : "    op[lin] = xp[at];\n";
  s += "  }\n}\n";
  return s;
}

void run_index(const Tensor& indexed, const Tensor& other, const IndexPlan& p, bool put) {
  const int64_t n = other.numel();
  if (n == 0) return;
  const int device = indexed.device().index;
  Launch l(device, program_source(device, index_source(indexed.dtype(), p.ts, put)), "kiln_index");
  l.tensor(indexed).tensor(other);
  for (const Tensor& t : p.ts) l.tensor(t);
  l.value(p.g).value(cl_int(p.nd)).value(cl_long(n));
  l.run(grid_size(device, n), default_local_size(device));
}

// inputs: self, index per dim (undefined: whole dim), the defined ones broadcast to one shape.
void index_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  std::vector<Tensor> idx(call.inputs.begin() + 1, call.inputs.end());
  std::optional<IndexPlan> p = make_plan(x, idx, out);
  if (!p) return run_on_host(call);
  check_indices("index", *p);
  run_index(x, out, *p, /*put=*/false);
}

// inputs: self, values (the indexing result's shape), index per dim; attrs: accumulate.
void index_put_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& values = call.inputs[1];
  const Tensor& out = call.outs[0];
  std::vector<Tensor> idx(call.inputs.begin() + 2, call.inputs.end());
  std::optional<IndexPlan> p = make_plan(out, idx, values);
  if (!p || call.bool_attr(0) || deterministic_algorithms()) return run_on_host(call);
  check_indices("index_put", *p);  // every index before the first write
  copy_unless_same(out, x);
  run_index(out, values, *p, /*put=*/true);
}

// ---- scatter ----
// Per element c of index: out[c with c[dim] = index[c]] = src[c] (or the value).
struct ScatterGeometry {
  cl_long index_size[kMaxDims];
  cl_long out_stride[kMaxDims];
  cl_long src_stride[kMaxDims];
};

template <bool kValue>
void scatter_kernel(OpCall& call) {
  const Tensor& self = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const Tensor& out = call.outs[0];
  const int64_t nd = std::max<int64_t>(out.dim(), 1);
  if (nd > kMaxDims || deterministic_algorithms()) return run_on_host(call);
  const int64_t dim = out.dim() == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + out.dim() : call.int_attr(0));
  const int64_t size = out.dim() == 0 ? 1 : out.size(dim);
  if (auto bad = first_outside(index, 0, size))
    KILN_THROW(Error, "scatter(): index ", *bad, " is out of bounds for dimension ", dim, " with size ", size);
  copy_unless_same(out, self);
  if (index.numel() == 0) return;
  ScatterGeometry g{};
  const Tensor* src = kValue ? nullptr : &call.inputs[2];
  for (int64_t d = 0; d < nd; ++d) {
    g.index_size[d] = index.dim() == 0 ? 1 : index.size(d);
    g.out_stride[d] = out.dim() == 0 ? 0 : out.stride(d);
    g.src_stride[d] = !src || src->dim() == 0 ? 0 : src->stride(d);
  }
  Tensor idx = contiguous_on_device(index);
  const std::string t = dtype_tag(out.dtype()), it = dtype_tag(index.dtype());
  std::string s =
      "typedef struct { long index_size[8]; long out_stride[8]; long src_stride[8]; } ScatterGeometry;\n"
      "__kernel void kiln_scatter(__global char* ob, ulong oo, __global const char* ib, ulong io,\n";
  s += kValue ? "    SC_" + t + " value," : "    __global const char* sb, ulong so,";
  s += " ScatterGeometry g, int nd, int dim, long n) {\n"
       "  __global ST_" + t + "* op = (__global ST_" + t + "*)(ob + oo);\n";
  if (!kValue) s += "  __global const ST_" + t + "* sp = (__global const ST_" + t + "*)(sb + so);\n";
  s += "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
       "    long rest = i, at = 0, from = 0;\n"
       "    for (int d = nd - 1; d >= 0; --d) {\n"
       "      const long c = rest % g.index_size[d];\n"
       "      rest /= g.index_size[d];\n"
       "      if (d != dim) at += c * g.out_stride[d];\n"
       "      from += c * g.src_stride[d];\n"
       "    }\n"
       "    at += (long)LD_" + it + "(ib + io, i) * g.out_stride[dim];\n";
  s += kValue ? "    SV_" + t + "(op, at, value);\n" : "    op[at] = sp[from];\n";
  s += "  }\n}\n";
  const int device = out.device().index;
  Launch l(device, program_source(device, s), "kiln_scatter");
  l.tensor(out).tensor(idx);
  if (kValue) l.scalar(call.scalar_attr(1), out.dtype());
  else l.tensor(*src);
  l.value(g).value(cl_int(nd)).value(cl_int(dim)).value(cl_long(index.numel()));
  l.run(grid_size(device, index.numel()), default_local_size(device));
}

// ---- one_hot (num_classes given; inferring it stages through the host) ----
void one_hot_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const int64_t classes = call.int_attr(0);
  if (x.numel() > 0) {
    const std::vector<int64_t> v = to_host(x).to_vector<int64_t>();
    for (int64_t e : v) KILN_CHECK(e >= 0, Error, "one_hot: Class values must be non-negative, got ", e);
    for (int64_t e : v)
      KILN_CHECK(e < classes, Error, "one_hot: Class values must be smaller than num_classes (",
                 classes, "), got ", e);
  }
  if (out.numel() == 0) return;
  // x seen with a trailing dim of `classes` that repeats each value (stride 0).
  Shape shape = x.shape();
  shape.push_back(classes);
  Strides strides = x.strides();
  strides.push_back(0);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  elementwise(target, {make_view(x, shape, strides, x.storage_offset())}, "r = (a == i % s0) ? 1 : 0;",
              {{Scalar(classes), DType::I64}});
  if (!out.is_contiguous()) copy_into(out, target);
}

// ---- index_lerp: out[o, j, k] = lerp(x[o, index0[j], k], x[o, index1[j], k], weight[j]) ----
void index_lerp_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const int64_t dim = x.dim() == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + x.dim() : call.int_attr(0));
  const int64_t size = x.size(dim), n = out.size(dim);
  for (int k = 1; k <= 2; ++k)
    if (auto bad = first_outside(call.inputs[size_t(k)], 0, size))
      KILN_THROW(IndexError, "index_lerp(): index ", *bad, " is out of bounds for dimension ", dim,
                 " with size ", size);
  if (out.numel() == 0) return;
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  Tensor src = contiguous_on_device(x);
  Tensor i0 = contiguous_on_device(call.inputs[1]), i1 = contiguous_on_device(call.inputs[2]);
  Tensor w = contiguous_on_device(call.inputs[3]);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const std::string t = dtype_tag(x.dtype());
  // PyTorch's lerp (exact at both ends), each product rounded before its sum as on the CPU.
  const std::string s =
      "#pragma OPENCL FP_CONTRACT OFF\n"
      "typedef CT_" + t + " C;\n"
      "__kernel void kiln_index_lerp(__global char* ob, ulong oo, __global const char* xb, ulong xo,\n"
      "    __global const long* i0b, ulong i0o, __global const long* i1b, ulong i1o,\n"
      "    __global const char* wb, ulong wo, long size, long n, long inner, long total) {\n"
      "  __global const long* i0 = (__global const long*)((__global const char*)i0b + i0o);\n"
      "  __global const long* i1 = (__global const long*)((__global const char*)i1b + i1o);\n"
      "  for (long i = get_global_id(0); i < total; i += get_global_size(0)) {\n"
      "    const long k = i % inner, j = (i / inner) % n, o = i / (inner * n);\n"
      "    const C a = LD_" + t + "(xb + xo, (o * size + i0[j]) * inner + k);\n"
      "    const C b = LD_" + t + "(xb + xo, (o * size + i1[j]) * inner + k);\n"
      "    const C wt = LD_" + t + "(wb + wo, j);\n"
      "    const C v = fabs(wt) < (C)0.5 ? a + wt * (b - a) : b - (b - a) * ((C)1 - wt);\n"
      "    SV_" + t + "(ob + oo, i, v);\n"
      "  }\n}\n";
  const int device = x.device().index;
  {  // the launch holds the device's kernel lock: released before the copy below
    Launch l(device, program_source(device, s), "kiln_index_lerp");
    l.tensor(target).tensor(src).tensor(i0).tensor(i1).tensor(w);
    l.value(cl_long(size)).value(cl_long(n)).value(cl_long(inner)).value(cl_long(out.numel()));
    l.run(grid_size(device, out.numel()), default_local_size(device));
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

}  // namespace

void register_advanced_indexing_kernels() {
  register_kernel("index", DeviceType::XPU, index_kernel, kAllDTypes);
  register_kernel("index_put", DeviceType::XPU, index_put_kernel, kAllDTypes);
  register_kernel("scatter", DeviceType::XPU, scatter_kernel<false>, kAllDTypes);
  register_kernel("scatter.value", DeviceType::XPU, scatter_kernel<true>, kAllDTypes);
  register_kernel("one_hot", DeviceType::XPU, one_hot_kernel, dtype_bit(DType::I64));
  register_kernel("index_lerp", DeviceType::XPU, index_lerp_kernel, kFloatDTypes);
}

}  // namespace kiln::xpu
