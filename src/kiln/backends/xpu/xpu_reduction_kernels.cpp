// xpu kernels of reductions (sum, mean, prod, amax, amin, all, any, argmax / argmin,
// max.dim / min.dim), softmax / log_softmax, layer_norm and rms_norm. Every one first views
// its input as rows: the reduced dims moved last and made contiguous, so that one work-group
// reduces one row (or one piece of a long row, then a second pass combines the pieces).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

constexpr size_t kGroup = 256;

// The tree combine of a work-group's partial values in local memory, under the macro
// COMBINE(x, y) (result into x).
constexpr const char* kGroupCombine = R"CL(
#define GROUP_COMBINE(acc, scratch)                                   \
  scratch[get_local_id(0)] = acc;                                     \
  barrier(CLK_LOCAL_MEM_FENCE);                                       \
  for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {              \
    if (get_local_id(0) < s) {                                        \
      ACC x = scratch[get_local_id(0)], y = scratch[get_local_id(0) + s]; \
      COMBINE(x, y);                                                  \
      scratch[get_local_id(0)] = x;                                   \
    }                                                                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                     \
  }                                                                   \
  acc = scratch[0];                                                   \
  barrier(CLK_LOCAL_MEM_FENCE);
)CL";

// Input rows: t viewed with `reduced` dims last, contiguous, as [rows, len].
struct Rows {
  Tensor data;  // contiguous, numel rows * len
  int64_t rows = 1, len = 1;
};

Rows rows_of(const Tensor& t, const std::vector<int64_t>& reduced) {
  std::vector<int64_t> order;
  std::vector<bool> is_reduced(size_t(t.dim()), false);
  for (int64_t d : reduced) is_reduced[size_t(d)] = true;
  Rows r;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (!is_reduced[size_t(d)]) {
      order.push_back(d);
      r.rows *= t.size(d);
    }
  for (int64_t d : reduced) {
    order.push_back(d);
    r.len *= t.size(d);
  }
  r.data = contiguous_on_device(permuted_view(t, order));
  return r;
}

struct ReduceKind {
  std::string init;       // the accumulator's start
  std::string combine;    // COMBINE(x, y)
  std::string transform;  // of each input value y on the first pass (norm's |y|^p)
  std::string finish;     // of a row's result v on the last pass (norm's root)
};

// p of norm(p): 2 and 1 in closed form, inf / -inf as max / min of |y|, 0 counts nonzeros.
ReduceKind reduce_kind(const std::string& op, double p) {
  if (op == "sum" || op == "mean") return {"(ACC)0", "x = x + y", "", ""};
  if (op == "prod") return {"(ACC)1", "x = x * y", "", ""};
  if (op == "amax") return {"LOWEST", "x = (y > x || y != y) ? y : x", "", ""};
  if (op == "amin") return {"HIGHEST", "x = (y < x || y != y) ? y : x", "", ""};
  if (op == "all") return {"(ACC)1", "x = (x != 0) && (y != 0)", "", ""};
  if (op == "any") return {"(ACC)0", "x = (x != 0) || (y != 0)", "", ""};
  // norm
  if (std::isinf(p))
    return {p > 0 ? "(ACC)0" : "HIGHEST",
            p > 0 ? "x = (y > x || y != y) ? y : x" : "x = (y < x || y != y) ? y : x", "y = fabs(y);", ""};
  if (p == 0) return {"(ACC)0", "x = x + y", "y = (y != (ACC)0) ? (ACC)1 : (ACC)0;", ""};
  if (p == 1) return {"(ACC)0", "x = x + y", "y = fabs(y);", ""};
  if (p == 2) return {"(ACC)0", "x = x + y", "y = y * y;", "v = sqrt(v);"};
  const std::string ps = std::to_string(p);
  return {"(ACC)0", "x = x + y", "y = pow(fabs(y), (ACC)" + ps + ");", "v = pow(v, (ACC)1 / (ACC)" + ps + ");"};
}

// One pass: each work-group reduces piece `get_group_id(0) % parts` of row
// `get_group_id(0) / parts` into out[group] (times scale on the last pass of a mean).
std::string reduce_source(DType in, DType out, DType acc, const ReduceKind& k, bool first, bool last) {
  const bool additive = k.combine == "x = x + y" && is_floating(acc);
  std::string s = "typedef CT_" + std::string(dtype_tag(acc)) + " ACC;\n";
  const bool fl = is_floating(acc);
  s += std::string("#define LOWEST ") + (fl ? "(ACC)(-INFINITY)" : "(ACC)(-0x7fffffffffffffffL - 1)") + "\n";
  s += std::string("#define HIGHEST ") + (fl ? "(ACC)(INFINITY)" : "(ACC)0x7fffffffffffffffL") + "\n";
  s += "#define COMBINE(x, y) " + k.combine + "\n";
  s += kGroupCombine;
  s += "__kernel void kiln_reduce(__global char* ob, ulong oo, __global const char* ib, ulong io,\n"
       "                          long rows, long len, long parts, SC_" + std::string(dtype_tag(acc)) +
       " scale, int apply_scale) {\n"
       "  __local ACC scratch[256];\n"
       "  __global char* op = ob + oo; __global const char* ip = ib + io;\n"
       "  for (long g = get_group_id(0); g < rows * parts; g += get_num_groups(0)) {\n"
       "    long row = g / parts, part = g % parts;\n"
       "    long chunk = (len + parts - 1) / parts;\n"
       "    long begin = part * chunk, end = min(len, begin + chunk);\n"
       "    ACC acc = " + k.init + ", comp = 0;\n"
       "    for (long j = begin + get_local_id(0); j < end; j += get_local_size(0)) {\n"
       "      ACC x = acc, y = (ACC)LD_" + dtype_tag(in) + "(ip, row * len + j);\n"
       "      " + (first ? k.transform : std::string()) + "\n" +
       // Sums compensated (Kahan): an item adds thousands of terms of a long row in float.
       (additive ? "      ACC yk = y - comp, tk = acc + yk; comp = (tk - acc) - yk; acc = tk;\n"
                 : "      COMBINE(x, y); acc = x;\n") +
       "    }\n"
       "    GROUP_COMBINE(acc, scratch)\n"
       "    if (get_local_id(0) == 0) { ACC v = acc; " + (last ? k.finish : std::string()) +
       " if (apply_scale) v = v * (ACC)scale; SV_" +
       dtype_tag(out) + "(op, g, v); }\n"
       "  }\n"
       "}\n";
  return s;
}

// The accumulator dtype: the output's compute precision (float for the 16-bit floats),
// int64 for integers and bool.
DType accumulator(DType out) {
  if (out == DType::F64) return DType::F64;
  if (is_floating(out)) return DType::F32;
  return DType::I64;
}

void run_reduce_pass(const Tensor& out, const Tensor& in, DType acc, const ReduceKind& kind, bool first,
                     bool last, int64_t rows, int64_t len, int64_t parts, double scale, bool apply_scale) {
  const int device = in.device().index;
  Launch l(device, program_source(device, reduce_source(in.dtype(), out.dtype(), acc, kind, first, last)),
           "kiln_reduce");
  l.tensor(out).tensor(in).value(cl_long(rows)).value(cl_long(len)).value(cl_long(parts));
  if (acc == DType::F64) l.value(cl_double(scale));
  else if (acc == DType::F32) l.value(cl_float(float(scale)));
  else l.value(cl_long(0));
  l.value(cl_int(apply_scale ? 1 : 0));
  const size_t groups = size_t(std::min<int64_t>(rows * parts, 65536));
  l.run(groups * kGroup, kGroup);
}

void reduce_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const std::string& op = call.op->name;
  const std::vector<int64_t> dims = normalized_dims(call.ints_attr(0), in.dim());
  Rows r = rows_of(in, dims);
  const DType acc = accumulator(out.dtype());
  const double scale = r.len > 0 ? 1.0 / double(r.len) : std::numeric_limits<double>::quiet_NaN();
  const bool mean = op == "mean";
  const ReduceKind kind = reduce_kind(op, op == "norm" && call.has_attr(2) ? call.double_attr(2) : 2.0);
  // The second pass adds (or takes extremes of) the pieces: the first pass's combine, no transform.
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  // Few long rows: split each row over enough groups to fill the device, then combine.
  const int compute_units = XpuRuntime::get().info(in.device().index).compute_units;
  int64_t parts = 1;
  if (r.rows < int64_t(compute_units) * 4 && r.len >= 16384)
    parts = std::min<int64_t>((int64_t(compute_units) * 8 + r.rows - 1) / r.rows, r.len / 4096);
  if (parts > 1) {
    Tensor partial = empty_tensor({r.rows, parts}, acc, in.device());
    run_reduce_pass(partial, r.data, acc, kind, true, false, r.rows, r.len, parts, 1.0, false);
    run_reduce_pass(target, partial, acc, kind, false, true, r.rows, parts, 1, scale, mean);
  } else {
    run_reduce_pass(target, r.data, acc, kind, true, true, r.rows, r.len, 1, scale, mean);
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

// argmax / argmin / max.dim / min.dim: (value, first index) per row; NaN counts as the
// extreme (the first NaN wins), as torch.
std::string arg_source(DType in, DType val_out, bool is_max, bool with_values) {
  std::string t = dtype_tag(in);
  std::string better = is_max ? "(x > bv || (x != x && bv == bv))" : "(x < bv || (x != x && bv == bv))";
  std::string s = "typedef CT_" + t + " V;\n";
  s += "__kernel void kiln_arg(__global char* ib_, ulong io, __global char* xb, ulong xo";
  if (with_values) s += ", __global char* vb, ulong vo";
  s += ", long rows, long len) {\n"
       "  __local V sv[256]; __local long si[256];\n"
       "  __global const char* ip = ib_ + io; __global char* xp = xb + xo;\n";
  if (with_values) s += "  __global char* vp = vb + vo;\n";
  s += "  for (long row = get_group_id(0); row < rows; row += get_num_groups(0)) {\n"
       "    V bv = 0; long bi = -1;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) {\n"
       "      V x = LD_" + t + "(ip, row * len + j);\n"
       "      if (bi < 0 || " + better + ") { bv = x; bi = j; }\n"
       "    }\n"
       "    sv[get_local_id(0)] = bv; si[get_local_id(0)] = bi;\n"
       "    barrier(CLK_LOCAL_MEM_FENCE);\n"
       "    for (uint s = get_local_size(0) / 2; s > 0; s >>= 1) {\n"
       "      if (get_local_id(0) < s) {\n"
       "        V x = sv[get_local_id(0) + s]; long xi = si[get_local_id(0) + s];\n"
       "        V bv2 = sv[get_local_id(0)]; long bi2 = si[get_local_id(0)];\n"
       "        bv = bv2;\n"
       "        bool same = x == bv || (x != x && bv != bv);\n"
       "        bool take = xi >= 0 && (bi2 < 0 || " + better + " || (same && xi < bi2));\n"
       "        if (take) { sv[get_local_id(0)] = x; si[get_local_id(0)] = xi; }\n"
       "      }\n"
       "      barrier(CLK_LOCAL_MEM_FENCE);\n"
       "    }\n"
       "    if (get_local_id(0) == 0) {\n"
       "      ((__global long*)xp)[row] = si[0];\n";
  if (with_values) s += "      SV_" + std::string(dtype_tag(val_out)) + "(vp, row, sv[0]);\n";
  s += "    }\n"
       "    barrier(CLK_LOCAL_MEM_FENCE);\n"
       "  }\n"
       "}\n";
  return s;
}

template <bool kMax, bool kValues>
void arg_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const std::vector<int64_t> dims = normalized_dims(call.ints_attr(0), in.dim());
  Rows r = rows_of(in, dims);
  const Tensor& idx_out = kValues ? call.outs[1] : call.outs[0];
  Tensor idx = idx_out.is_contiguous() ? idx_out : empty_tensor(idx_out.shape(), DType::I64, in.device());
  Tensor val;
  if (kValues) {
    const Tensor& v = call.outs[0];
    val = v.is_contiguous() ? v : empty_tensor(v.shape(), v.dtype(), v.device());
  }
  const int device = in.device().index;
  {  // the launch holds the device's kernel lock: released before the copies below
    Launch l(device, program_source(device, arg_source(in.dtype(), kValues ? val.dtype() : in.dtype(), kMax, kValues)),
             "kiln_arg");
    l.tensor(r.data).tensor(idx);
    if (kValues) l.tensor(val);
    l.value(cl_long(r.rows)).value(cl_long(r.len));
    l.run(size_t(std::min<int64_t>(r.rows, 65536)) * kGroup, kGroup);
  }
  if (!idx_out.is_contiguous()) copy_into(idx_out, idx);
  if (kValues && !call.outs[0].is_contiguous()) copy_into(call.outs[0], val);
}

// ---- softmax ----
std::string softmax_source(DType in, DType out, bool log) {
  const std::string acc = in == DType::F64 ? "F64" : "F32";
  std::string s = "typedef CT_" + acc + " ACC;\n";
  s += "#define COMBINE(x, y) x = max(x, y)\n";
  s += kGroupCombine;
  s += "#undef COMBINE\n"
       "__kernel void kiln_softmax(__global char* ob, ulong oo, __global const char* ib, ulong io,\n"
       "                           long rows, long len) {\n"
       "  __local ACC scratch[256];\n"
       "  __global char* op = ob + oo; __global const char* ip = ib + io;\n"
       "  for (long row = get_group_id(0); row < rows; row += get_num_groups(0)) {\n"
       "    ACC m = -INFINITY;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0))\n"
       "      m = max(m, (ACC)LD_" + std::string(dtype_tag(in)) + "(ip, row * len + j));\n"
       "#define COMBINE(x, y) x = max(x, y)\n"
       "    GROUP_COMBINE(m, scratch)\n"
       "#undef COMBINE\n"
       "    if (isinf(m) && m < 0) m = 0;\n"  // a row of -inf: exp(-inf - 0) = 0, as torch gives NaN after 0/0
       "    ACC sum = 0;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0))\n"
       "      sum += exp((ACC)LD_" + std::string(dtype_tag(in)) + "(ip, row * len + j) - m);\n"
       "#define COMBINE(x, y) x = x + y\n"
       "    GROUP_COMBINE(sum, scratch)\n"
       "#undef COMBINE\n";
  if (log)
    s += "    ACC lse = m + log(sum);\n"
         "    for (long j = get_local_id(0); j < len; j += get_local_size(0))\n"
         "      SV_" + std::string(dtype_tag(out)) + "(op, row * len + j, (ACC)LD_" + dtype_tag(in) +
         "(ip, row * len + j) - lse);\n";
  else
    s += "    ACC inv = (ACC)1 / sum;\n"
         "    for (long j = get_local_id(0); j < len; j += get_local_size(0))\n"
         "      SV_" + std::string(dtype_tag(out)) + "(op, row * len + j, exp((ACC)LD_" + dtype_tag(in) +
         "(ip, row * len + j) - m) * inv);\n";
  s += "  }\n}\n";
  return s;
}

template <bool kLog>
void softmax_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (in.numel() == 0) return;
  const int64_t dim = normalized_dims({call.int_attr(0)}, in.dim()).empty()
                          ? 0 : normalized_dims({call.int_attr(0)}, in.dim())[0];
  std::vector<int64_t> order;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (d != dim) order.push_back(d);
  if (in.dim() > 0) order.push_back(dim);
  Rows r = rows_of(in, in.dim() > 0 ? std::vector<int64_t>{dim} : std::vector<int64_t>{});
  Tensor out_rows = permuted_view(out, order);
  Tensor target = out_rows.is_contiguous() ? out_rows
                                           : empty_tensor(out_rows.shape(), out.dtype(), out.device());
  const int device = in.device().index;
  {  // the launch holds the device's kernel lock: released before the copy below
    Launch l(device, program_source(device, softmax_source(in.dtype(), out.dtype(), kLog)), "kiln_softmax");
    l.tensor(target).tensor(r.data).value(cl_long(r.rows)).value(cl_long(r.len));
    l.run(size_t(std::min<int64_t>(r.rows, 65536)) * kGroup, kGroup);
  }
  if (!out_rows.is_contiguous()) copy_into(out_rows, target);
}

// ---- layer_norm / rms_norm ----
std::string norm_source(DType in, DType stat, bool rms, bool has_weight, bool has_bias) {
  const std::string acc = in == DType::F64 ? "F64" : "F32";
  const std::string t = dtype_tag(in);
  std::string s = "typedef CT_" + acc + " ACC;\n#define COMBINE(x, y) x = x + y\n";
  s += kGroupCombine;
  s += "__kernel void kiln_norm(__global char* yb, ulong yo, __global char* mb, ulong mo,\n"
       "    __global char* rb, ulong ro, __global const char* xb, ulong xo,\n"
       "    __global const char* wb, ulong wo, __global const char* bb, ulong bo,\n"
       "    long rows, long len, ACC eps) {\n"
       "  __local ACC scratch[256];\n"
       "  __global char* yp = yb + yo; __global char* mp = mb + mo; __global char* rp = rb + ro;\n"
       "  __global const char* xp = xb + xo; __global const char* wp = wb + wo; __global const char* bp = bb + bo;\n"
       "  for (long row = get_group_id(0); row < rows; row += get_num_groups(0)) {\n"
       "    ACC mean = 0;\n";
  if (!rms)
    s += "    ACC sum = 0;\n"
         "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) sum += (ACC)LD_" + t + "(xp, row * len + j);\n"
         "    GROUP_COMBINE(sum, scratch)\n"
         "    mean = sum / (ACC)len;\n";
  s += "    ACC sq = 0;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) {\n"
       "      ACC d = (ACC)LD_" + t + "(xp, row * len + j) - mean; sq += d * d; }\n"
       "    GROUP_COMBINE(sq, scratch)\n"
       "    ACC rstd = (ACC)1 / sqrt(sq / (ACC)len + eps);\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) {\n"
       "      ACC v = ((ACC)LD_" + t + "(xp, row * len + j) - mean) * rstd;\n";
  if (has_weight) s += "      v = v * (ACC)LD_" + t + "(wp, j);\n";
  if (has_bias) s += "      v = v + (ACC)LD_" + t + "(bp, j);\n";
  s += "      SV_" + t + "(yp, row * len + j, v);\n"
       "    }\n"
       "    if (get_local_id(0) == 0) {\n";
  if (!rms) s += "      SV_" + std::string(dtype_tag(stat)) + "(mp, row, mean);\n";
  s += "      SV_" + std::string(dtype_tag(stat)) + "(rp, row, rstd);\n"
       "    }\n"
       "  }\n"
       "}\n";
  return s;
}

template <bool kRms>
void norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs.size() > 1 ? call.inputs[1] : Tensor();
  const Tensor& b = !kRms && call.inputs.size() > 2 ? call.inputs[2] : Tensor();
  const int64_t k = call.int_attr(0);
  const double eps = call.double_attr(1);
  int64_t len = 1;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) len *= x.size(d);
  const int64_t rows = len > 0 ? x.numel() / len : 0;
  const Tensor& y = call.outs[0];
  const Tensor& mean_out = kRms ? call.outs[1] : call.outs[1];
  const Tensor& rstd_out = kRms ? call.outs[1] : call.outs[2];
  for (const Tensor* t : {&y, &mean_out, &rstd_out})
    KILN_CHECK(t->is_contiguous(), NotImplementedError, call.op->name,
               " on xpu: expected contiguous outputs");
  if (x.numel() == 0) return;
  Tensor xc = contiguous_on_device(x);
  Tensor wc = w.defined() ? contiguous_on_device(w) : xc;
  Tensor bc = b.defined() ? contiguous_on_device(b) : xc;
  const int device = x.device().index;
  Launch l(device, program_source(device, norm_source(x.dtype(), rstd_out.dtype(), kRms, w.defined(), b.defined())),
           "kiln_norm");
  l.tensor(y).tensor(mean_out).tensor(rstd_out).tensor(xc).tensor(wc).tensor(bc);
  l.value(cl_long(rows)).value(cl_long(len));
  if (x.dtype() == DType::F64) l.value(cl_double(eps));
  else l.value(cl_float(float(eps)));
  l.run(size_t(std::min<int64_t>(rows, 65536)) * kGroup, kGroup);
}

// var / std over dims (attrs {dims, keepdim, correction}): per row the mean, then the sum of
// squared deviations (two passes over the row, as the CPU), divided by len - correction.
template <bool kStd>
void var_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  const std::vector<int64_t> dims = normalized_dims(call.ints_attr(0), in.dim());
  const double correction = call.has_attr(2) ? call.double_attr(2) : 1.0;
  Rows r = rows_of(in, dims);
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const std::string acc = in.dtype() == DType::F64 ? "F64" : "F32";
  const std::string t = dtype_tag(in.dtype());
  std::string s = "typedef CT_" + acc + " ACC;\n#define COMBINE(x, y) x = x + y\n";
  s += kGroupCombine;
  s += "__kernel void kiln_var(__global char* ob, ulong oo, __global const char* ib, ulong io,\n"
       "                       long rows, long len, ACC divisor) {\n"
       "  __local ACC scratch[256];\n"
       "  __global const char* ip = ib + io;\n"
       "  for (long row = get_group_id(0); row < rows; row += get_num_groups(0)) {\n"
       "    ACC sum = 0;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) sum += (ACC)LD_" + t + "(ip, row * len + j);\n"
       "    GROUP_COMBINE(sum, scratch)\n"
       "    const ACC mean = sum / (ACC)len;\n"
       "    ACC sq = 0;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) {\n"
       "      ACC d = (ACC)LD_" + t + "(ip, row * len + j) - mean; sq += d * d; }\n"
       "    GROUP_COMBINE(sq, scratch)\n"
       "    if (get_local_id(0) == 0) { ACC v = sq / divisor; " + (kStd ? "v = sqrt(v); " : "") +
       "SV_" + dtype_tag(out.dtype()) + "(ob + oo, row, v); }\n"
       "  }\n"
       "}\n";
  const int device = in.device().index;
  {
    Launch l(device, program_source(device, s), "kiln_var");
    l.tensor(target).tensor(r.data).value(cl_long(r.rows)).value(cl_long(r.len));
    const double divisor = std::max(double(r.len) - correction, 0.0);
    if (in.dtype() == DType::F64) l.value(cl_double(divisor));
    else l.value(cl_float(float(divisor)));
    l.run(size_t(std::min<int64_t>(r.rows, 65536)) * kGroup, kGroup);
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

// logsumexp over dims (attrs {dims, keepdim}): per row the max, then log(sum(exp(x - max))) +
// max, an infinite max taken as 0 (all -inf gives -inf, any +inf gives +inf), as the CPU.
void logsumexp_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (out.numel() == 0) return;
  Rows r = rows_of(in, normalized_dims(call.ints_attr(0), in.dim()));
  Tensor target = out.is_contiguous() ? out : empty_tensor(out.shape(), out.dtype(), out.device());
  const std::string acc = in.dtype() == DType::F64 ? "F64" : "F32";
  const std::string t = dtype_tag(in.dtype());
  std::string s = "typedef CT_" + acc + " ACC;\n";
  s += kGroupCombine;
  s += "__kernel void kiln_logsumexp(__global char* ob, ulong oo, __global const char* ib, ulong io,\n"
       "                             long rows, long len) {\n"
       "  __local ACC scratch[256];\n"
       "  __global const char* ip = ib + io;\n"
       "  for (long row = get_group_id(0); row < rows; row += get_num_groups(0)) {\n"
       "    ACC m = -INFINITY;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0)) {\n"
       "      const ACC y = (ACC)LD_" + t + "(ip, row * len + j); m = (y > m || y != y) ? y : m; }\n"
       "#define COMBINE(x, y) x = (y > x || y != y) ? y : x\n"
       "    GROUP_COMBINE(m, scratch)\n"
       "#undef COMBINE\n"
       "    if (isinf(m)) m = 0;\n"
       "    ACC sum = 0;\n"
       "    for (long j = get_local_id(0); j < len; j += get_local_size(0))\n"
       "      sum += exp((ACC)LD_" + t + "(ip, row * len + j) - m);\n"
       "#define COMBINE(x, y) x = x + y\n"
       "    GROUP_COMBINE(sum, scratch)\n"
       "#undef COMBINE\n"
       "    if (get_local_id(0) == 0) SV_" + std::string(dtype_tag(out.dtype())) + "(ob + oo, row, log(sum) + m);\n"
       "  }\n"
       "}\n";
  const int device = in.device().index;
  {  // the launch holds the device's kernel lock: released before the copy below
    Launch l(device, program_source(device, s), "kiln_logsumexp");
    l.tensor(target).tensor(r.data).value(cl_long(r.rows)).value(cl_long(r.len));
    l.run(size_t(std::min<int64_t>(r.rows, 65536)) * kGroup, kGroup);
  }
  if (!out.is_contiguous()) copy_into(out, target);
}

}  // namespace

void register_reduction_kernels() {
  register_kernel("logsumexp", DeviceType::XPU, logsumexp_kernel, kFloatDTypes);
  register_kernel("var", DeviceType::XPU, var_kernel<false>, kFloatDTypes);
  register_kernel("std", DeviceType::XPU, var_kernel<true>, kFloatDTypes);
  auto reg = [](const char* name, KernelFn fn, DTypeMask mask) {
    register_kernel(name, DeviceType::XPU, fn, mask);
  };
  reg("sum", reduce_kernel, kAllDTypes);
  reg("mean", reduce_kernel, kFloatDTypes);
  reg("prod", reduce_kernel, kAllDTypes);
  reg("amax", reduce_kernel, kAllDTypes);
  reg("amin", reduce_kernel, kAllDTypes);
  reg("all", reduce_kernel, kAllDTypes);
  reg("any", reduce_kernel, kAllDTypes);
  reg("norm", reduce_kernel, kFloatDTypes);
  reg("argmax", arg_kernel<true, false>, kNumericDTypes);
  reg("argmin", arg_kernel<false, false>, kNumericDTypes);
  reg("max.dim", arg_kernel<true, true>, kNumericDTypes);
  reg("min.dim", arg_kernel<false, true>, kNumericDTypes);
  reg("softmax", softmax_kernel<false>, kFloatDTypes);
  reg("log_softmax", softmax_kernel<true>, kFloatDTypes);
  reg("native_layer_norm", norm_kernel<false>, kFloatDTypes);
  reg("native_rms_norm", norm_kernel<true>, kFloatDTypes);
}

}  // namespace kiln::xpu
