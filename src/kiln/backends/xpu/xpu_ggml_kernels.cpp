// xpu kernel of ggml_linear (include/kiln/quant/ggml_linear.h): y = x @ W^T with W kept as
// ggml blocks (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) in device memory, so a quantised model's
// weights take about one byte per value or less on the GPU, as they do on the CPU.
//
// Every type is decoded in units of 32 values (a Q8_0 / Q4_0 block, or one of the 8
// sub-blocks of a K-quant super-block, each with its own scale), value by value, by one
// OpenCL function per type that both kernels share:
// - few activation rows (M <= 8, decoding): a matrix-vector kernel that streams each weight
//   row once. As kiln_gemv (xpu_matmul_kernels.cpp), 32 lanes share one output feature: they
//   stage the row's next 32 units in local memory, lane i takes value i of each unit and
//   applies it to every activation row (their count compiled in), then the lanes' sums are
//   added in local memory. H200, 4096 x 11008 weights, one row: Q8_0 1100 GB/s of weight
//   bytes (46 us, bfloat16 dense 53 us), Q6_K 640, Q4_K 360 (its 6-bit scales are unpacked
//   per value). The activations stay float32: unlike the CPU kernel, which quantises them to
//   8-bit blocks for integer dot products, a GPU is bound by the weight bytes here and has
//   the float throughput, so the result is x @ dequantize(W) up to float32 sums (more
//   accurate than the CPU's, which is within the 8-bit rounding of it);
// - more rows (prefill): the weight is dequantised to float32 in a scratch tensor, at most
//   kScratchValues values at a time (a range of output features), and multiplied by the
//   xpu GEMM (run_gemm); reading the weight once per product no longer dominates.
#include <algorithm>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/quant/ggml_linear.h"
#include "kiln/tensor/empty.h"
#include "xpu_gemm.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

using quant::GGMLType;

// Up to this many activation rows: the matrix-vector kernel (as kiln_gemv's limit).
constexpr int64_t kGemvMaxRows = 8;
// Largest float32 scratch of dequantised weights (64 MiB): bigger weights are multiplied a
// range of output features at a time.
constexpr int64_t kScratchValues = int64_t(1) << 24;

// ggml_value(row, u, l): value l of unit u (values 32u .. 32u + 31) of a weight row as a float,
// computed as
// the reference dequantisation (src/kiln/quant/ggml_dequantize.cpp) does. GGML_TYPE selects
// the format (ggml's type numbers), GGML_SPACE where the row is (__global, or __local where
// the matrix-vector kernel staged it). float16 scales are read with vload_half: every block
// size is even and the host makes the weight's start even, so they are 2-byte aligned.
constexpr const char* kUnitDecode = R"CL(
inline float ggml_half(GGML_SPACE const uchar* p) { return vload_half(0, (GGML_SPACE const half*)p); }

#if GGML_TYPE == 12 || GGML_TYPE == 13
// Q4_K / Q5_K: 6-bit scale and minimum j (0..7) of the 12 packed bytes.
inline void ggml_scale_min(int j, GGML_SPACE const uchar* q, float* sc, float* mn) {
  if (j < 4) {
    *sc = (float)(q[j] & 63);
    *mn = (float)(q[j + 4] & 63);
  } else {
    *sc = (float)((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4));
    *mn = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}
#endif

// Value l (0..31) of unit u.
inline float ggml_value(GGML_SPACE const uchar* row, long u, int l) {
#if GGML_TYPE == 8
  // Q8_0, 34 bytes: d, 32 int8.
  GGML_SPACE const uchar* b = row + u * 34;
  return ggml_half(b) * (float)as_char(b[2 + l]);
#elif GGML_TYPE == 2
  // Q4_0, 18 bytes: d, 16 bytes; value l the low nibble of byte l, l + 16 the high, less 8.
  GGML_SPACE const uchar* b = row + u * 18;
  const int q = b[2 + (l & 15)];
  return ggml_half(b) * (float)((l < 16 ? (q & 15) : (q >> 4)) - 8);
#elif GGML_TYPE == 12 || GGML_TYPE == 13
  // Q4_K (144 bytes) / Q5_K (176): d, dmin, 12 bytes of scales, (Q5_K: 32 bytes of fifth
  // bits), 128 bytes of nibbles. Sub-block j takes the low (even j) or high (odd j) nibbles
  // of bytes 32 (j / 2) .. + 31, and Q5_K's bit j of qh[l] as its fifth bit.
#if GGML_TYPE == 12
  GGML_SPACE const uchar* b = row + (u >> 3) * 144;
  GGML_SPACE const uchar* q = b + 16;
#else
  GGML_SPACE const uchar* b = row + (u >> 3) * 176;
  GGML_SPACE const uchar* qh = b + 16;
  GGML_SPACE const uchar* q = b + 48;
#endif
  const int j = (int)(u & 7);
  float sc, mn;
  ggml_scale_min(j, b + 4, &sc, &mn);
  const float dl = ggml_half(b) * sc, ml = ggml_half(b + 2) * mn;
  int v = (q[32 * (j >> 1) + l] >> (4 * (j & 1))) & 15;
#if GGML_TYPE == 13
  v |= ((qh[l] >> j) & 1) << 4;
#endif
  return dl * (float)v - ml;
#elif GGML_TYPE == 14
  // Q6_K, 210 bytes: low 4 bits (128 bytes), high 2 bits (64), 16 int8 scales, d. Half h
  // (128 values) of the super-block, quarter t: low nibbles (t < 2) or high of ql bytes
  // 64h + 32 (t & 1) + l, bits 2t of qh[32h + l], scale 8h + 2t + l / 16; values less 32.
  GGML_SPACE const uchar* b = row + (u >> 3) * 210;
  const int h = (int)((u >> 2) & 1), t = (int)(u & 3);
  GGML_SPACE const uchar* ql = b + 64 * h + 32 * (t & 1);
  GGML_SPACE const uchar* qh = b + 128 + 32 * h;
  const float ds = ggml_half(b + 208) * (float)as_char(b[192 + 8 * h + 2 * t + (l >> 4)]);
  const int v = (((ql[l] >> (4 * (t >> 1))) & 15) | (((qh[l] >> (2 * t)) & 3) << 4)) - 32;
  return ds * (float)v;
#else
#error "ggml_value: unsupported GGML_TYPE"
#endif
}
)CL";

// Groups of 256 items: 8 output features, 32 lanes each. Each step the 32 lanes of a
// feature copy the next 32 units' bytes of its row into local memory with contiguous 32-bit
// (or, for rows not 4-byte aligned, 16-bit) loads, then decode value `lane` of each unit.
// One local sum per (feature, row), reduced for all rows together.
constexpr const char* kGemv = R"CL(
#define CHUNK_BYTES ((32 / UNITS_PER_BLOCK) * BLOCK_BYTES)
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void kiln_ggml_gemv(__global char* yb, ulong yo, __global const char* xb, ulong xo,
                    __global const uchar* wb, ulong wo, long M, long N, long K, long row_bytes) {
  __local float red[8][MROWS][33];
  __local uint stage[8][CHUNK_BYTES / 4];
  const int lane = get_local_id(0) % 32, col = get_local_id(0) / 32;
  const long n = (long)get_group_id(0) * 8 + col;
  const bool valid = n < N;
  __global const float* x = (__global const float*)(xb + xo);
  __global const uchar* row = wb + wo + (valid ? n : 0) * row_bytes;
  __local uchar* mine = (__local uchar*)stage[col];
  float acc[MROWS];
  for (int m = 0; m < MROWS; ++m) acc[m] = 0.0f;
  const long units = K / 32;
  for (long u0 = 0; u0 < units; u0 += 32) {
    const int nunits = (int)min(32L, units - u0);
    const long off = u0 / UNITS_PER_BLOCK * BLOCK_BYTES;
    const int nbytes = nunits / UNITS_PER_BLOCK * BLOCK_BYTES;
    if (valid) {
#if WORDS
      __global const uint* src = (__global const uint*)(row + off);
      for (int i = lane; i < nbytes / 4; i += 32) stage[col][i] = src[i];
#else
      __global const ushort* src = (__global const ushort*)(row + off);
      __local ushort* dst = (__local ushort*)stage[col];
      for (int i = lane; i < nbytes / 2; i += 32) dst[i] = src[i];
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (valid) {
      // Lane l takes value l of each unit: the activations' reads are contiguous across the
      // lanes (a lane reading its own unit's 32 activations made every load touch 32 cache
      // lines: Q8_0 weights at 215 GB/s on H200, at any size).
      // The row count is compiled in (MROWS): no per-row tests, loops unrolled.
      __global const float* xk = x + u0 * 32 + lane;
#define APPLY_UNIT(u)                                                      \
      {                                                                    \
        const float wv = ggml_value(mine, (u), lane);                      \
        for (int m = 0; m < MROWS; ++m) acc[m] = fma(wv, xk[m * K + (u) * 32], acc[m]); \
      }
      if (nunits == 32) {
#pragma unroll 4
        for (int u = 0; u < 32; ++u) APPLY_UNIT(u)
      } else {
        for (int u = 0; u < nunits; ++u) APPLY_UNIT(u)
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the next step overwrites the stage
  }
  for (int m = 0; m < MROWS; ++m) red[col][m][lane] = acc[m];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = 16; s > 0; s >>= 1) {
    if (lane < s)
      for (int m = 0; m < MROWS; ++m) red[col][m][lane] += red[col][m][lane + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && valid) {
    __global float* y = (__global float*)(yb + yo);
    for (int m = 0; m < MROWS; ++m) y[m * N + n] = red[col][m][0];
  }
}
)CL";

// One item per value (neighbouring items write neighbouring floats and read neighbouring
// bytes): rows n0 .. n0 + rows - 1 of the weight into out [rows, K].
constexpr const char* kDequantize = R"CL(
__kernel void kiln_ggml_dequantize(__global char* ob, ulong oo, __global const uchar* wb, ulong wo,
                                   long n0, long rows, long K, long row_bytes) {
  const long i = get_global_id(0);
  if (i >= rows * K) return;
  const long n = i / K, k = i % K;
  ((__global float*)(ob + oo))[i] = ggml_value(wb + wo + (n0 + n) * row_bytes, k / 32, (int)(k % 32));
}
)CL";

// The program of one kernel for one type; `defines` adds the kernel's own.
std::string source_for(int device, GGMLType type, const char* kernel, const std::string& defines) {
  return program_source(device, "#define GGML_TYPE " + std::to_string(int(type)) + "\n" + defines +
                                    kUnitDecode + kernel);
}

void ggml_linear_kernel(OpCall& call) {
  const auto type = GGMLType(call.int_attr(0));
  const int64_t K = call.int_attr(1);
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const char* name = quant::ggml_type_info(uint32_t(type)) != nullptr
                         ? quant::ggml_type_info(type).name
                         : "unknown";
  KILN_CHECK(quant::ggml_linear_has_kernel(type), NotImplementedError, "ggml_linear on xpu: no "
             "kernel for ", name, " weights (Q8_0, Q4_0, Q4_K, Q5_K and Q6_K have one); "
             "dequantise them (GGMLWeight.dequantize()) or run on the CPU");
  // The front end (quant::ggml_linear) makes these so; a direct op call might not.
  KILN_CHECK(K > 0 && K % 32 == 0 && x.dtype() == DType::F32 && x.is_contiguous() &&
             x.dim() >= 1 && x.shape().back() == K, ValueError,
             "ggml_linear on xpu: expected a contiguous float32 input [..., ", K, "], got ",
             dtype_name(x.dtype()), " ", shape_str(x.shape()));
  Tensor w = call.inputs[1];
  const int64_t row_bytes = quant::ggml_row_bytes(type, K);
  KILN_CHECK(w.dtype() == DType::U8 && w.dim() == 2 && w.is_contiguous() && w.size(1) == row_bytes,
             ValueError, "ggml_linear on xpu: expected contiguous uint8 blocks [out_features, ",
             row_bytes, "] for ", name, " rows of ", K, " values, got ", dtype_name(w.dtype()), " ",
             shape_str(w.shape()));
  const int64_t M = x.numel() / K, N = w.size(0);
  if (M == 0 || N == 0) return;
  const int device = out.device().index;
  // vload_half needs 2-byte aligned scales: a view starting at an odd byte is copied.
  if (XpuRuntime::get().resolve(w.raw_data()).offset % 2 != 0) {
    Tensor aligned = empty_tensor(w.shape(), w.dtype(), w.device());
    copy_into(aligned, w);
    w = aligned;
  }

  if (M <= kGemvMaxRows) {
    // Units per block and block bytes (the staging copy's geometry); 32-bit copies where
    // every row starts 4-byte aligned.
    const quant::GGMLTypeInfo& ti = quant::ggml_type_info(type);
    const int64_t units_per_block = ti.block_elems / 32;
    const bool words = row_bytes % 4 == 0 && XpuRuntime::get().resolve(w.raw_data()).offset % 4 == 0;
    const std::string defines = "#define GGML_SPACE __local\n#define UNITS_PER_BLOCK " +
                                std::to_string(units_per_block) + "\n#define BLOCK_BYTES " +
                                std::to_string(ti.block_bytes) + "\n#define WORDS " + (words ? "1" : "0") +
                                "\n#define MROWS " + std::to_string(M) + "\n";
    Launch l(device, source_for(device, type, kGemv, defines), "kiln_ggml_gemv");
    l.tensor(out).tensor(x).tensor(w);
    l.value(cl_long(M)).value(cl_long(N)).value(cl_long(K)).value(cl_long(row_bytes));
    l.run(size_t((N + 7) / 8) * 256, 256);
    return;
  }

  // y[:, n0:n0+rows] = x @ dequantise(W[n0:n0+rows])^T, a scratch-sized range at a time.
  const int64_t chunk = std::min(N, std::max<int64_t>(1, kScratchValues / K));
  Tensor scratch = empty_tensor({chunk, K}, DType::F32, out.device());
  const std::string dequant_src = source_for(device, type, kDequantize, "#define GGML_SPACE __global\n");
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t rows = std::min(chunk, N - n0);
    {
      Launch d(device, dequant_src, "kiln_ggml_dequantize");
      d.tensor(scratch).tensor(w);
      d.value(cl_long(n0)).value(cl_long(rows)).value(cl_long(K)).value(cl_long(row_bytes));
      d.run(size_t(rows * K), default_local_size(device));
    }
    GemmOperand a, b, c;
    a.t = x;  // [M, K], row-major
    a.rs = K;
    a.cs = 1;
    b.t = scratch;  // W^T: element (k, n) at n * K + k
    b.rs = 1;
    b.cs = K;
    c.t = make_view(out, {M, rows}, {N, 1}, out.storage_offset() + n0);
    c.rs = N;
    c.cs = 1;
    // run_gemm enqueues on the stream the dequantisation kernel ran on, so the next range
    // overwrites the scratch only after this product has read it.
    run_gemm(c.t, a, b, nullptr, c, {}, M, rows, K, Scalar(int64_t(1)), Scalar(int64_t(0)));
  }
}

}  // namespace

void register_ggml_kernels() {
  register_kernel("ggml_linear", DeviceType::XPU, ggml_linear_kernel, dtype_bit(DType::F32));
}

}  // namespace kiln::xpu
