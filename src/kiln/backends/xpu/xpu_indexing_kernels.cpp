// xpu kernels of the indexing and shape ops a model's forward pass needs: cat, index_select
// (embedding lookups), gather, masked_fill, tril / triu, flip, roll, repeat.
#include <algorithm>
#include <optional>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

std::string result_type(DType t) { return std::string("typedef CT_") + dtype_tag(t) + " R; "; }

// The first index outside [0, size), read on the host (a copy and a wait), if any: the kernels
// below then never read outside their source buffer.
std::optional<int64_t> first_out_of_range(const Tensor& index, int64_t size) {
  for (int64_t v : to_host(index).to_vector<int64_t>())
    if (v < 0 || v >= size) return v;
  return std::nullopt;
}

void cat_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  int64_t dim = call.int_attr(0);
  if (dim < 0) dim += out.dim();
  int64_t at = 0;
  for (const Tensor& t : call.inputs) {
    if (t.numel() == 0 && t.dim() == 1 && out.dim() != 1) continue;  // legacy empty [0] inputs
    const int64_t n = t.size(dim);
    if (n > 0) {
      Shape shape = out.shape();
      shape[size_t(dim)] = n;
      Tensor slice = make_view(out, shape, out.strides(), out.storage_offset() + at * out.stride(dim));
      if (t.dtype() == out.dtype()) elementwise(slice, {t}, "r = a;", {}, /*raw=*/true);
      else elementwise(slice, {t}, result_type(out.dtype()) + "r = (R)a;");
    }
    at += n;
  }
}

// out = self[..., index[j], ...] along dim, self viewed as [outer, size, inner] (contiguous).
// The indices are checked on the host first (a copy and a wait): an index out of range is an
// IndexError, never a read outside the buffer.
void index_select_kernel(OpCall& call) {
  const Tensor& self = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const int64_t dim = self.dim() == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + self.dim() : call.int_attr(0));
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  if (auto bad = first_out_of_range(index, size))
    KILN_THROW(IndexError, "index_select(): index ", *bad, " is out of bounds for dimension ", dim,
               " with size ", size);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.size(d);
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= self.size(d);
  Tensor src = contiguous_on_device(self);
  Tensor idx = contiguous_on_device(index);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const std::string t = dtype_tag(self.dtype()), it = dtype_tag(index.dtype());
  const std::string source =
      "__kernel void kiln_index_select(__global char* ob, ulong oo, __global const char* sb, ulong so,\n"
      "    __global const char* ib, ulong io, long outer, long size, long inner, long count) {\n"
      "  __global ST_" + t + "* op = (__global ST_" + t + "*)(ob + oo);\n"
      "  __global const ST_" + t + "* sp = (__global const ST_" + t + "*)(sb + so);\n"
      "  __global const char* ip = ib + io;\n"
      "  long n = outer * count * inner;\n"
      "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
      "    long k = i % inner, j = (i / inner) % count, o = i / (inner * count);\n"
      "    long v = (long)LD_" + it + "(ip, j);\n"
      "    op[i] = sp[(o * size + v) * inner + k];\n"
      "  }\n"
      "}\n";
  const int device = self.device().index;
  {  // the launch holds the device's kernel lock: released before the copy below
    Launch l(device, program_source(device, source), "kiln_index_select");
    l.tensor(target).tensor(src).tensor(idx);
    l.value(cl_long(outer)).value(cl_long(size)).value(cl_long(inner)).value(cl_long(index.numel()));
    const size_t local = default_local_size(device);
    const size_t groups = std::min<size_t>((size_t(out.numel()) + local - 1) / local, 65536);
    l.run(groups * local, local);
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

// gather(self, dim, index): out[c] = self[c with c[dim] = index[c]], out shaped as index (whose
// other dims may be shorter than self's). Indices checked on the host as index_select's; an
// index out of range is the CPU kernel's error (a RuntimeError in Python, as torch's).
constexpr int kMaxGatherDims = 8;

struct GatherGeometry {
  cl_long index_size[kMaxGatherDims];
  cl_long self_stride[kMaxGatherDims];
};

void gather_kernel(OpCall& call) {
  const Tensor& self = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  KILN_CHECK(nd <= kMaxGatherDims, NotImplementedError, "gather on xpu: at most ", kMaxGatherDims,
             " dims, got ", nd);
  const int64_t dim = self.dim() == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + self.dim() : call.int_attr(0));
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  if (auto bad = first_out_of_range(index, size))
    KILN_THROW(Error, "gather(): index ", *bad, " is out of bounds for dimension ", dim, " with size ", size);
  GatherGeometry g{};
  for (int64_t d = 0; d < nd; ++d) {
    g.index_size[d] = index.dim() == 0 ? 1 : index.size(d);
    g.self_stride[d] = self.dim() == 0 ? 0 : self.stride(d);
  }
  Tensor idx = contiguous_on_device(index);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const std::string t = dtype_tag(self.dtype()), it = dtype_tag(index.dtype());
  const std::string source =
      "typedef struct { long index_size[8]; long self_stride[8]; } GatherGeometry;\n"
      "__kernel void kiln_gather(__global char* ob, ulong oo, __global const char* sb, ulong so,\n"
      "    __global const char* ib, ulong io, GatherGeometry g, int nd, int dim, long n) {\n"
      "  __global ST_" + t + "* op = (__global ST_" + t + "*)(ob + oo);\n"
      "  __global const ST_" + t + "* sp = (__global const ST_" + t + "*)(sb + so);\n"
      "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
      "    long rest = i, at = 0;\n"
      "    for (int d = nd - 1; d >= 0; --d) {\n"
      "      const long c = rest % g.index_size[d];\n"
      "      rest /= g.index_size[d];\n"
      "      if (d != dim) at += c * g.self_stride[d];\n"
      "    }\n"
      "    at += (long)LD_" + it + "(ib + io, i) * g.self_stride[dim];\n"
      "    op[i] = sp[at];\n"
      "  }\n"
      "}\n";
  const int device = self.device().index;
  {  // the launch holds the device's kernel lock: released before the copy below
    Launch l(device, program_source(device, source), "kiln_gather");
    l.tensor(target).tensor(self).tensor(idx).value(g);
    l.value(cl_int(nd)).value(cl_int(dim)).value(cl_long(out.numel()));
    const size_t local = default_local_size(device);
    l.run(std::min<size_t>((size_t(out.numel()) + local - 1) / local, 65536) * local, local);
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

void masked_fill_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  elementwise(out, {call.inputs[0], call.inputs[1]}, result_type(out.dtype()) + "r = b ? (R)s0 : a;",
              {{call.scalar_attr(0), out.dtype()}});
}

template <bool kLower>
void tri_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const int64_t diagonal = call.has_attr(0) ? call.int_attr(0) : 0;
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const int64_t rows = out.size(out.dim() - 2), cols = out.size(out.dim() - 1);
  // i is target's flat (row-major) index: its column and row follow from it.
  std::string keep = kLower ? "(col - row <= s0)" : "(col - row >= s0)";
  elementwise(target, {call.inputs[0]},
              result_type(out.dtype()) + "long col = i % s2, row = (i / s2) % s1; r = " + keep +
                  " ? a : (R)0;",
              {{Scalar(diagonal), DType::I64}, {Scalar(rows), DType::I64}, {Scalar(cols), DType::I64}});
  if (!out.is_contiguous()) copy_into(out, target);
}

// A view of t narrowed to [start, start + length) along dim (no data moved).
Tensor narrowed(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  Shape shape = t.shape();
  shape[size_t(dim)] = length;
  return make_view(t, shape, t.strides(), t.storage_offset() + start * t.stride(dim));
}

void raw_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() > 0) elementwise(dst, {src}, "r = a;", {}, /*raw=*/true);
}

// flip: the input read through a view whose flipped dims step backwards from their last
// element (the elementwise kernel's offsets are signed).
void flip_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (x.numel() == 0) return;
  Strides strides = x.strides();
  int64_t offset = x.storage_offset();
  std::vector<bool> flipped(size_t(x.dim()), false);
  for (int64_t d : call.ints_attr(0)) flipped[size_t(d < 0 ? d + x.dim() : d)] = true;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!flipped[size_t(d)]) continue;
    offset += (x.size(d) - 1) * strides[size_t(d)];
    strides[size_t(d)] = -strides[size_t(d)];
  }
  raw_copy(out, make_view(x, x.shape(), strides, offset));
}

// roll: per rolled dim, two slab copies (out[s:] = in[:n - s], out[:s] = in[n - s:]); more
// than one rolled dim goes through temporaries.
void roll_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (x.numel() == 0) return;
  const auto& shifts = call.ints_attr(0);
  const auto& dims = call.ints_attr(1);
  std::vector<int64_t> shift(size_t(x.dim()), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = dims[i] < 0 ? dims[i] + x.dim() : dims[i];
    const int64_t n = x.size(d);
    shift[size_t(d)] = ((shift[size_t(d)] + shifts[i] % n) % n + n) % n;
  }
  std::vector<int64_t> todo;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (shift[size_t(d)] != 0) todo.push_back(d);
  if (todo.empty()) {
    raw_copy(out, x);
    return;
  }
  Tensor src = x;
  for (size_t i = 0; i < todo.size(); ++i) {
    const int64_t d = todo[i], n = x.size(d), sh = shift[size_t(d)];
    Tensor dst = i + 1 == todo.size() ? out : empty_tensor(x.shape(), x.dtype(), x.device());
    raw_copy(narrowed(dst, d, sh, n - sh), narrowed(src, d, 0, n - sh));
    raw_copy(narrowed(dst, d, 0, sh), narrowed(src, d, n - sh, sh));
    src = dst;
  }
}

// repeat: out viewed as [r0, s0, r1, s1, ...] (contiguous) reads the input viewed with
// stride 0 over each r (leading repeats beyond the input's dims read it whole).
void repeat_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const auto& reps = call.ints_attr(0);
  const int64_t lead = int64_t(reps.size()) - x.dim();
  Shape shape;
  Strides in_strides;
  for (size_t i = 0; i < reps.size(); ++i) {
    const int64_t d = int64_t(i) - lead;
    const int64_t size = d >= 0 ? x.size(d) : 1;
    shape.push_back(reps[i]);
    in_strides.push_back(0);
    shape.push_back(size);
    in_strides.push_back(d >= 0 ? x.stride(d) : 0);
  }
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  Tensor in_view = make_view(x, shape, in_strides, x.storage_offset());
  Tensor out_view = make_view(target, shape, contiguous_strides(shape), target.storage_offset());
  raw_copy(out_view, in_view);
  if (!out.is_contiguous()) copy_into(out, target);
}

}  // namespace

void register_indexing_kernels() {
  register_kernel("flip", DeviceType::XPU, flip_kernel, kAllDTypes);
  register_kernel("roll", DeviceType::XPU, roll_kernel, kAllDTypes);
  register_kernel("repeat", DeviceType::XPU, repeat_kernel, kAllDTypes);
  register_kernel("cat", DeviceType::XPU, cat_kernel, kAllDTypes);
  register_kernel("index_select", DeviceType::XPU, index_select_kernel, kAllDTypes);
  register_kernel("gather", DeviceType::XPU, gather_kernel, kAllDTypes);
  register_kernel("masked_fill", DeviceType::XPU, masked_fill_kernel, kAllDTypes);
  register_kernel("tril", DeviceType::XPU, tri_kernel<true>, kAllDTypes);
  register_kernel("triu", DeviceType::XPU, tri_kernel<false>, kAllDTypes);
}

}  // namespace kiln::xpu
