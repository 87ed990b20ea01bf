// The xpu kernels' shared machinery: prelude, launcher, and the strided elementwise kernel.
#include "xpu_kernel_util.h"

#include <algorithm>
#include <array>

#include "kiln/core/error.h"
#include "kiln/runtime/stream.h"

namespace kiln::xpu {

namespace {

// Loads give the compute type (float for the 16-bit floats, int for bool), stores take it.
// bfloat16 rounds to nearest even with NaN kept quiet, as the CPU's conversion does;
// float16 uses the core vload_half / vstore_half_rte (no cl_khr_fp16 needed).
constexpr const char* kPrelude = R"CL(
inline float kiln_bf16_to_f32(ushort v) { return as_float(((uint)v) << 16); }
inline ushort kiln_f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}
#define ST_F32 float
#define CT_F32 float
#define LD_F32(p, i) (((__global const float*)(p))[i])
#define SV_F32(p, i, v) (((__global float*)(p))[i] = (float)(v))
#define ST_BF16 ushort
#define CT_BF16 float
#define LD_BF16(p, i) kiln_bf16_to_f32(((__global const ushort*)(p))[i])
#define SV_BF16(p, i, v) (((__global ushort*)(p))[i] = kiln_f32_to_bf16((float)(v)))
#define ST_F16 ushort
#define CT_F16 float
#define LD_F16(p, i) vload_half((i), (__global const half*)(p))
#define SV_F16(p, i, v) vstore_half_rte((float)(v), (i), (__global half*)(p))
#define ST_I64 long
#define CT_I64 long
#define LD_I64(p, i) (((__global const long*)(p))[i])
#define SV_I64(p, i, v) (((__global long*)(p))[i] = (long)(v))
#define ST_I32 int
#define CT_I32 int
#define LD_I32(p, i) (((__global const int*)(p))[i])
#define SV_I32(p, i, v) (((__global int*)(p))[i] = (int)(v))
#define ST_I16 short
#define CT_I16 short
#define LD_I16(p, i) (((__global const short*)(p))[i])
#define SV_I16(p, i, v) (((__global short*)(p))[i] = (short)(v))
#define ST_I8 char
#define CT_I8 char
#define LD_I8(p, i) (((__global const char*)(p))[i])
#define SV_I8(p, i, v) (((__global char*)(p))[i] = (char)(v))
#define ST_U8 uchar
#define CT_U8 uchar
#define LD_U8(p, i) (((__global const uchar*)(p))[i])
#define SV_U8(p, i, v) (((__global uchar*)(p))[i] = (uchar)(v))
#define ST_BOOL uchar
#define CT_BOOL int
#define LD_BOOL(p, i) ((int)(((__global const uchar*)(p))[i] != 0))
#define SV_BOOL(p, i, v) (((__global uchar*)(p))[i] = (uchar)((v) != 0))
#define SC_F32 float
#define SC_BF16 float
#define SC_F16 float
#define SC_I64 long
#define SC_I32 long
#define SC_I16 long
#define SC_I8 long
#define SC_U8 long
#define SC_BOOL long
#define KILN_CAT2(a, b) a##b
#define KILN_CAT(a, b) KILN_CAT2(a, b)
)CL";

constexpr const char* kPreludeF64 = R"CL(
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define ST_F64 double
#define CT_F64 double
#define SC_F64 double
#define LD_F64(p, i) (((__global const double*)(p))[i])
#define SV_F64(p, i, v) (((__global double*)(p))[i] = (double)(v))
)CL";

// digamma, trigamma and erfinv (no OpenCL built-ins): the CPU's special_functions.h in
// KILN_SPT (double where the device has fp64, else float), without its recursion (OpenCL C
// has none): the reflection's second term is computed first, then the positive argument's.
constexpr const char* kSpecialFunctions = R"CL(
#define KILN_PI 3.14159265358979323846
inline KILN_SPT kiln_digamma(KILN_SPT x) {
  if (x == 0) return copysign((KILN_SPT)INFINITY, -x);
  KILN_SPT r = 0;
  if (x < 0) {
    if (x == floor(x)) return (KILN_SPT)NAN;
    r = -(KILN_SPT)KILN_PI / tan((KILN_SPT)KILN_PI * x);
    x = 1 - x;
  }
  while (x < 10) { r -= 1 / x; x += 1; }
  const KILN_SPT f = 1 / (x * x);
  const KILN_SPT series = f * ((KILN_SPT)1.0 / 12 - f * ((KILN_SPT)1.0 / 120 - f * ((KILN_SPT)1.0 / 252 -
      f * ((KILN_SPT)1.0 / 240 - f * ((KILN_SPT)1.0 / 132 - f * ((KILN_SPT)691.0 / 32760))))));
  return r + log(x) - (KILN_SPT)0.5 / x - series;
}
inline KILN_SPT kiln_trigamma(KILN_SPT x) {
  if (x <= 0 && x == floor(x)) return (KILN_SPT)INFINITY;
  KILN_SPT r = 0, sign = 1;
  if (x < 0) {
    const KILN_SPT s = sin((KILN_SPT)KILN_PI * x);
    r = (KILN_SPT)KILN_PI * (KILN_SPT)KILN_PI / (s * s);
    sign = -1;
    x = 1 - x;
  }
  KILN_SPT t = 0;
  while (x < 10) { t += 1 / (x * x); x += 1; }
  const KILN_SPT f = 1 / (x * x);
  const KILN_SPT series = 1 / x + f / 2 + f / x * ((KILN_SPT)1.0 / 6 - f * ((KILN_SPT)1.0 / 30 -
      f * ((KILN_SPT)1.0 / 42 - f * ((KILN_SPT)1.0 / 30 - f * ((KILN_SPT)5.0 / 66)))));
  return r + sign * (t + series);
}
inline KILN_SPT kiln_erfinv(KILN_SPT y) {
  if (isnan(y) || y < -1 || y > 1) return (KILN_SPT)NAN;
  if (y == 1 || y == -1) return copysign((KILN_SPT)INFINITY, y);
  KILN_SPT w = -log((1 - y) * (1 + y)), p, x;
  if (w < 5) {
    w -= (KILN_SPT)2.5;
    p = (KILN_SPT)2.81022636e-08;
    p = (KILN_SPT)3.43273939e-07 + p * w; p = (KILN_SPT)-3.5233877e-06 + p * w;
    p = (KILN_SPT)-4.39150654e-06 + p * w; p = (KILN_SPT)0.00021858087 + p * w;
    p = (KILN_SPT)-0.00125372503 + p * w; p = (KILN_SPT)-0.00417768164 + p * w;
    p = (KILN_SPT)0.246640727 + p * w; p = (KILN_SPT)1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = (KILN_SPT)-0.000200214257;
    p = (KILN_SPT)0.000100950558 + p * w; p = (KILN_SPT)0.00134934322 + p * w;
    p = (KILN_SPT)-0.00367342844 + p * w; p = (KILN_SPT)0.00573950773 + p * w;
    p = (KILN_SPT)-0.0076224613 + p * w; p = (KILN_SPT)0.00943887047 + p * w;
    p = (KILN_SPT)1.00167406 + p * w; p = (KILN_SPT)2.83297682 + p * w;
  }
  x = p * y;
  for (int i = 0; i < 2; ++i)
    x -= (erf(x) - y) / (2 / sqrt((KILN_SPT)KILN_PI) * exp(-x * x));
  return x;
}
)CL";

constexpr int kMaxDims = 8;
constexpr int kMaxInputs = 6;  // a fused pointwise program: x and up to 5 channel vectors

// The elementwise geometry passed by value (matching the OpenCL struct below).
struct Geometry {
  cl_long size[kMaxDims];
  cl_long stride[kMaxInputs + 1][kMaxDims];  // [0] output, [1..] inputs; elements
};

}  // namespace

const char* dtype_tag(DType t) {
  switch (t) {
    case DType::Bool: return "BOOL";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
  }
  return "F32";
}

bool device_has_fp64(int device) { return XpuRuntime::get().info(device).fp64; }

std::string program_source(int device, const std::string& body) {
  const bool fp64 = device_has_fp64(device);
  std::string s = fp64 ? kPreludeF64 : "";
  s += kPrelude;
  s += fp64 ? "#define KILN_SPT double\n" : "#define KILN_SPT float\n";
  s += kSpecialFunctions;
  s += body;
  return s;
}

size_t grid_size(int device, int64_t n) {
  const size_t local = default_local_size(device);
  return std::min<size_t>((size_t(n) + local - 1) / local, 65536) * local;
}

size_t default_local_size(int device) {
  return std::min<size_t>(256, XpuRuntime::get().info(device).max_work_group);
}

Launch::Launch(int device, const std::string& source, const char* name)
    : Launch(device, XpuRuntime::get().kernel(device, source, name)) {}

Launch::Launch(int device, cl_kernel kernel)
    : device_(device), kernel_(kernel), lock_(XpuRuntime::get().device_mutex(device)) {}

Launch& Launch::raw(const void* p, size_t n) {
  check_cl(cl().clSetKernelArg(kernel_, next_++, n, p), "clSetKernelArg");
  return *this;
}

Launch& Launch::scalar(const Scalar& v, DType dtype) {
  switch (dtype) {
    case DType::F64: return value(cl_double(v.to_double()));
    case DType::F32: case DType::BF16: case DType::F16: return value(cl_float(float(v.to_double())));
    default: return value(cl_long(v.is_floating() ? int64_t(v.to_double()) : v.to_int()));
  }
}

Launch& Launch::local_bytes(size_t n) {
  check_cl(cl().clSetKernelArg(kernel_, next_++, n, nullptr), "clSetKernelArg (local memory)");
  return *this;
}

Launch& Launch::tensor(const Tensor& t) {
  KILN_CHECK(t.device().type == DeviceType::XPU && t.device().index == device_, DeviceError,
             "xpu kernel: expected a tensor on xpu:", device_, ", got one on ", t.device());
  BufferRef b = XpuRuntime::get().resolve(t.raw_data());
  cl_ulong offset = b.offset;
  raw(&b.mem, sizeof(cl_mem));
  return raw(&offset, sizeof(offset));
}

void Launch::run(size_t global_size, size_t local_size) {
  if (global_size == 0) return;
  size_t g = (global_size + local_size - 1) / local_size * local_size;
  cl_command_queue q = XpuRuntime::get().queue(current_stream(Device(DeviceType::XPU, device_)));
  check_cl(cl().clEnqueueNDRangeKernel(q, kernel_, 1, nullptr, &g, &local_size, 0, nullptr, nullptr),
           "clEnqueueNDRangeKernel");
}

void Launch::run_2d(size_t g0, size_t g1, size_t l0, size_t l1) {
  if (g0 == 0 || g1 == 0) return;
  size_t g[2] = {(g0 + l0 - 1) / l0 * l0, (g1 + l1 - 1) / l1 * l1};
  size_t l[2] = {l0, l1};
  cl_command_queue q = XpuRuntime::get().queue(current_stream(Device(DeviceType::XPU, device_)));
  check_cl(cl().clEnqueueNDRangeKernel(q, kernel_, 2, nullptr, g, l, 0, nullptr, nullptr),
           "clEnqueueNDRangeKernel");
}

void Launch::run_3d(size_t g0, size_t g1, size_t g2, size_t l0, size_t l1, size_t l2) {
  if (g0 == 0 || g1 == 0 || g2 == 0) return;
  size_t g[3] = {(g0 + l0 - 1) / l0 * l0, (g1 + l1 - 1) / l1 * l1, (g2 + l2 - 1) / l2 * l2};
  size_t l[3] = {l0, l1, l2};
  cl_command_queue q = XpuRuntime::get().queue(current_stream(Device(DeviceType::XPU, device_)));
  check_cl(cl().clEnqueueNDRangeKernel(q, kernel_, 3, nullptr, g, l, 0, nullptr, nullptr),
           "clEnqueueNDRangeKernel");
}

namespace {

// `dense`: every tensor is one run of stride 1 after merging, so offsets are the index itself
// (no division per element: the general form divides by each dim's size).
std::string elementwise_source(DType out, const std::vector<DType>& ins,
                               const std::vector<DType>& scalars, const std::string& body,
                               bool raw, bool dense) {
  std::string s;
  s += "typedef struct { long size[" + std::to_string(kMaxDims) + "]; long stride[" + std::to_string(kMaxInputs + 1) +
       "][" + std::to_string(kMaxDims) + "]; } Geometry;\n";
  s += "__kernel void kiln_elementwise(__global char* ob, ulong oo";
  for (size_t k = 0; k < ins.size(); ++k)
    s += ", __global const char* ib" + std::to_string(k) + ", ulong io" + std::to_string(k);
  s += ", Geometry g, int ndim, long n";
  for (size_t k = 0; k < scalars.size(); ++k)
    s += std::string(", SC_") + dtype_tag(scalars[k]) + " s" + std::to_string(k);
  s += ") {\n";
  s += "  __global char* op = ob + oo;\n";
  for (size_t k = 0; k < ins.size(); ++k)
    s += "  __global const char* ip" + std::to_string(k) + " = ib" + std::to_string(k) +
         " + io" + std::to_string(k) + ";\n";
  s += "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n";
  // One offset variable per tensor (an indexed array would live in slow private memory).
  const size_t nt = ins.size() + 1;
  if (dense) {
    for (size_t t = 0; t < nt; ++t) s += "    long o" + std::to_string(t) + " = i;\n";
  } else {
    for (size_t t = 0; t < nt; ++t) s += "    long o" + std::to_string(t) + " = 0;\n";
    s += "    long rest = i;\n";
    s += "    for (int d = ndim - 1; d >= 0; --d) {\n";
    s += "      long c = rest % g.size[d];\n";
    s += "      rest /= g.size[d];\n";
    for (size_t t = 0; t < nt; ++t)
      s += "      o" + std::to_string(t) + " += c * g.stride[" + std::to_string(t) + "][d];\n";
    s += "    }\n";
  }
  static const char* names[kMaxInputs] = {"a", "b", "c", "d", "e", "f"};
  const std::string ot = dtype_tag(out);
  for (size_t k = 0; k < ins.size(); ++k) {
    const std::string t = dtype_tag(ins[k]);
    const std::string p = "ip" + std::to_string(k), o = "o" + std::to_string(k + 1);
    if (raw)
      s += "    ST_" + t + " " + names[k] + " = ((__global const ST_" + t + "*)" + p + ")[" + o + "];\n";
    else
      s += "    CT_" + t + " " + names[k] + " = LD_" + t + "(" + p + ", " + o + ");\n";
  }
  if (raw) {
    s += "    ST_" + ot + " r;\n    " + body + "\n";
    s += "    ((__global ST_" + ot + "*)op)[o0] = r;\n";
  } else {
    s += "    CT_" + ot + " r;\n    " + body + "\n";
    s += "    SV_" + ot + "(op, o0, r);\n";
  }
  s += "  }\n}\n";
  return s;
}

}  // namespace

void elementwise(const Tensor& out, const std::vector<Tensor>& inputs, const std::string& body,
                 const std::vector<ScalarArg>& scalars, bool raw) {
  KILN_CHECK(inputs.size() <= size_t(kMaxInputs), Error, "xpu elementwise: at most ", kMaxInputs,
             " inputs, got ", inputs.size());
  const int64_t n = out.numel();
  if (n == 0) return;
  const int device = out.device().index;
  const int64_t nd = out.dim();
  // Per tensor, strides over out's shape (0 where an input broadcasts).
  const size_t nt = inputs.size() + 1;
  std::vector<std::vector<int64_t>> strides(nt, std::vector<int64_t>(size_t(nd), 0));
  for (int64_t d = 0; d < nd; ++d) strides[0][size_t(d)] = out.stride(d);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    KILN_CHECK(t.dim() <= nd, ShapeError, "xpu elementwise: input of shape ", shape_str(t.shape()),
               " does not broadcast to ", shape_str(out.shape()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      int64_t od = nd - t.dim() + d;
      if (t.size(d) != 1) {
        KILN_CHECK(t.size(d) == out.size(od), ShapeError, "xpu elementwise: input of shape ",
                   shape_str(t.shape()), " does not broadcast to ", shape_str(out.shape()));
        strides[k + 1][size_t(od)] = t.stride(d);
      }
    }
  }
  // Merge dims, innermost first: drop size-1 dims; fold a dim into the one inside it when
  // every tensor steps over the inner dim exactly.
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> merged(nt);
  for (int64_t d = nd - 1; d >= 0; --d) {
    const int64_t sz = out.size(d);
    if (sz == 1) continue;
    bool fold = !sizes.empty();
    for (size_t t = 0; fold && t < nt; ++t)
      fold = strides[t][size_t(d)] == merged[t].back() * sizes.back();
    if (fold) {
      sizes.back() *= sz;
    } else {
      sizes.push_back(sz);
      for (size_t t = 0; t < nt; ++t) merged[t].push_back(strides[t][size_t(d)]);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (size_t t = 0; t < nt; ++t) merged[t].push_back(0);
  }
  KILN_CHECK(sizes.size() <= size_t(kMaxDims), NotImplementedError,
             "xpu elementwise: tensors whose layout needs more than ", kMaxDims,
             " dims after merging are not supported (shape ", shape_str(out.shape()), ")");
  Geometry g{};
  const int ndim = int(sizes.size());
  for (int d = 0; d < ndim; ++d) {  // back to outermost-first order
    g.size[d] = sizes[size_t(ndim - 1 - d)];
    for (size_t t = 0; t < nt; ++t) g.stride[t][d] = merged[t][size_t(ndim - 1 - d)];
  }
  std::vector<DType> in_dtypes, scalar_dtypes;
  for (const Tensor& t : inputs) in_dtypes.push_back(t.dtype());
  for (const ScalarArg& s : scalars) scalar_dtypes.push_back(s.dtype);
  bool dense = ndim == 1;
  for (size_t t = 0; t < nt; ++t) dense = dense && (g.stride[t][0] == 1 || g.size[0] == 1);
  // The kernel's identity: body, dtypes, form; its source is generated once per key.
  std::string key = body;
  key += raw ? "|raw|" : "|";
  key += dense ? "dense|" : "strided|";
  key += dtype_tag(out.dtype());
  for (DType t : in_dtypes) (key += ',') += dtype_tag(t);
  key += '|';
  for (DType t : scalar_dtypes) (key += ',') += dtype_tag(t);
  cl_kernel kernel = XpuRuntime::get().kernel_by_key(
      device, key,
      [&] {
        return program_source(device,
                              elementwise_source(out.dtype(), in_dtypes, scalar_dtypes, body, raw, dense));
      },
      "kiln_elementwise");
  Launch launch(device, kernel);
  launch.tensor(out);
  for (const Tensor& t : inputs) launch.tensor(t);
  launch.value(g).value(cl_int(ndim)).value(cl_long(n));
  for (const ScalarArg& s : scalars) launch.scalar(s.value, s.dtype);
  const size_t local = default_local_size(device);
  // A grid of at most 64K groups; each work item strides over the rest.
  const size_t groups = std::min<size_t>((size_t(n) + local - 1) / local, 65536);
  launch.run(groups * local, local);
}

}  // namespace kiln::xpu
