// scatter_add on xpu where the index holds one key per position along dim (constant along
// the other dims: index_select's, embedding's and index_add's gradients, an expanded 1-d
// index). Only the keys go to the host: they are read (one copy and a wait, as every index
// check), grouped by key in position order (a counting sort) and sent back as a compressed
// list; then one work item per (key, other coordinates) adds its positions' values in order
// onto the output's value, in the CPU kernel's accumulator (float32 for float32 and the
// 16-bit floats, double for float64, wrapping int64 for integers and bool), so the result is
// the CPU's bit for bit, with no float atomics (which OpenCL 1.2 lacks). Staging the op
// whole moved the output and the source through the host instead: GPT-2's embedding
// gradient, [50257, 768] float32, is 154 MB each way per step. Other index forms (and int32
// keys, for which the CPU sums 16-bit floats in double) still stage whole.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

constexpr int kMaxDims = 8;

struct ScatterAddGeometry {
  cl_long index_size[kMaxDims];  // index's extent per dim (1 at dim: the key loop covers it)
  cl_long out_stride[kMaxDims];
  cl_long src_stride[kMaxDims];
};

// The keys' accumulator type in OpenCL C, as the CPU kernel's.
const char* accumulator(DType t) {
  if (t == DType::F64) return "double";
  if (is_floating(t)) return "float";
  return "long";
}

// True where index[c] depends only on c[dim].
bool keys_along_dim(const Tensor& index, int64_t dim) {
  for (int64_t d = 0; d < index.dim(); ++d)
    if (d != dim && index.size(d) > 1 && index.stride(d) != 0) return false;
  return true;
}

void scatter_add_kernel(OpCall& call) {
  const Tensor& self = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const Tensor& src = call.inputs[2];
  const Tensor& out = call.outs[0];
  const int64_t nd = out.dim();
  const int64_t dim = nd == 0 ? 0 : (call.int_attr(0) < 0 ? call.int_attr(0) + nd : call.int_attr(0));
  if (nd == 0 || nd > kMaxDims || index.dim() != nd || index.dtype() != DType::I64 ||
      !keys_along_dim(index, dim))
    return run_on_host(call);
  const int64_t n = index.size(dim), size = out.size(dim);
  // The keys: index along dim at the other dims' first position.
  Tensor keys_view = make_view(index, {n}, {index.stride(dim)}, index.storage_offset());
  const std::vector<int64_t> keys = to_host(keys_view).to_vector<int64_t>();
  for (int64_t v : keys)
    KILN_CHECK(v >= 0 && v < size, Error, "scatter_add(): index ", v, " is out of bounds for dimension ",
               dim, " with size ", size);
  if (out.raw_data() != self.raw_data() || out.strides() != self.strides())
    elementwise(out, {self}, "r = a;", {}, /*raw=*/true);
  int64_t lines = 1;  // the other coordinates' count, over index's extent
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim) lines *= index.size(d);
  if (n == 0 || lines == 0) return;
  // Counting sort: the distinct keys in order, each one's positions in increasing order.
  std::vector<int64_t> count(static_cast<size_t>(size), 0);
  for (int64_t v : keys) ++count[size_t(v)];
  std::vector<int64_t> distinct, start;
  std::vector<int64_t> slot(static_cast<size_t>(size), -1);
  int64_t at = 0;
  for (int64_t v = 0; v < size; ++v) {
    if (count[size_t(v)] == 0) continue;
    slot[size_t(v)] = at;
    distinct.push_back(v);
    start.push_back(at);
    at += count[size_t(v)];
  }
  start.push_back(at);
  const int64_t u = int64_t(distinct.size());
  // One int64 list on the device: keys [u], starts [u + 1], positions [n].
  Tensor host = empty_tensor({2 * u + 1 + n}, DType::I64, Device(DeviceType::CPU, 0));
  int64_t* h = host.data_ptr<int64_t>();
  std::memcpy(h, distinct.data(), size_t(u) * sizeof(int64_t));
  std::memcpy(h + u, start.data(), size_t(u + 1) * sizeof(int64_t));
  int64_t* pos = h + 2 * u + 1;
  for (int64_t k = 0; k < n; ++k) pos[slot[size_t(keys[size_t(k)])]++] = k;
  Tensor list = empty_tensor(host.shape(), DType::I64, out.device());
  from_host(list, host);

  ScatterAddGeometry g{};
  for (int64_t d = 0; d < nd; ++d) {
    g.index_size[d] = d == dim ? 1 : index.size(d);
    g.out_stride[d] = out.stride(d);
    g.src_stride[d] = src.stride(d);
  }
  const std::string t = dtype_tag(out.dtype());
  const std::string acc = accumulator(out.dtype());
  const std::string add = acc == std::string("long") ? "a = (long)((ulong)a + (ulong)(long)LD_" + t + "(sb + so, from + k * sdim));"
                                                     : "a += (" + acc + ")LD_" + t + "(sb + so, from + k * sdim);";
  const std::string s =
      "#pragma OPENCL FP_CONTRACT OFF\n"
      "typedef struct { long index_size[8]; long out_stride[8]; long src_stride[8]; } ScatterAddGeometry;\n"
      "__kernel void kiln_scatter_add(__global char* ob, ulong oo, __global const char* sb, ulong so,\n"
      "    __global const char* lb, ulong lo, ScatterAddGeometry g, int nd, int dim, long u, long lines) {\n"
      "  __global const long* keys = (__global const long*)(lb + lo);\n"
      "  __global const long* start = keys + u;\n"
      "  __global const long* pos = start + u + 1;\n"
      "  const long odim = g.out_stride[dim], sdim = g.src_stride[dim];\n"
      "  for (long item = get_global_id(0); item < u * lines; item += get_global_size(0)) {\n"
      "    const long key = item / lines;\n"
      "    long rest = item % lines, to = 0, from = 0;\n"
      "    for (int d = nd - 1; d >= 0; --d) {\n"
      "      const long c = rest % g.index_size[d];\n"
      "      rest /= g.index_size[d];\n"
      "      to += c * g.out_stride[d];\n"
      "      from += c * g.src_stride[d];\n"
      "    }\n"
      "    to += keys[key] * odim;\n"
      "    " + acc + " a = (" + acc + ")LD_" + t + "(ob + oo, to);\n"
      "    for (long p = start[key]; p < start[key + 1]; ++p) {\n"
      "      const long k = pos[p];\n"
      "      " + add + "\n"
      "    }\n"
      "    SV_" + t + "(ob + oo, to, a);\n"
      "  }\n}\n";
  const int device = out.device().index;
  Launch l(device, program_source(device, s), "kiln_scatter_add");
  l.tensor(out).tensor(src).tensor(list).value(g);
  l.value(cl_int(nd)).value(cl_int(dim)).value(cl_long(u)).value(cl_long(lines));
  l.run(grid_size(device, u * lines), default_local_size(device));
}

}  // namespace

void register_scatter_add_kernel() {
  register_kernel("scatter_add", DeviceType::XPU, scatter_add_kernel, kAllDTypes);
}

}  // namespace kiln::xpu
