// xpu kernels of the indexing and shape ops a model's forward pass needs: cat, index_select
// (embedding lookups), masked_fill, tril / triu.
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

std::string result_type(DType t) { return std::string("typedef CT_") + dtype_tag(t) + " R; "; }

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
  Tensor host_index = to_host(index);
  const std::vector<int64_t> values = host_index.to_vector<int64_t>();
  for (int64_t v : values)
    KILN_CHECK(v >= 0 && v < size, IndexError, "index_select(): index ", v,
               " is out of bounds for dimension ", dim, " with size ", size);
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

}  // namespace

void register_indexing_kernels() {
  register_kernel("cat", DeviceType::XPU, cat_kernel, kAllDTypes);
  register_kernel("index_select", DeviceType::XPU, index_select_kernel, kAllDTypes);
  register_kernel("masked_fill", DeviceType::XPU, masked_fill_kernel, kAllDTypes);
  register_kernel("tril", DeviceType::XPU, tri_kernel<true>, kAllDTypes);
  register_kernel("triu", DeviceType::XPU, tri_kernel<false>, kAllDTypes);
}

}  // namespace kiln::xpu
