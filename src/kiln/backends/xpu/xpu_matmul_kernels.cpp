// xpu kernels of the matrix products (mm, matmul, bmm, dot, addmm, baddbmm): one tiled
// OpenCL kernel over strided, batched operands. A work-group of 16x16 items computes a
// 64x64 (or, with enough blocks to fill the device, 128x128) block of C, each item 4x4
// (8x8) values, over K in steps of 16 staged in local memory.
// The loads walk whichever dim of A and B is contiguous (compile-time variants), so a
// Linear's transposed weight reads coalesced. Computes in float (double for float64).
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "xpu_gemm.h"
#include "xpu_kernel_util.h"
#include "xpu_mma_gemm.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

constexpr int kMaxBatchDims = 4;

struct GemmGeometry {
  cl_long batch_size[kMaxBatchDims];
  cl_long batch_stride[4][kMaxBatchDims];  // A, B, C, self
  cl_long rs[4];                           // row strides (elements)
  cl_long cs[4];                           // column strides
};

// What every product kernel starts with: the geometry passed by value (GemmGeometry above)
// and the element offsets of one batch in A, B, C and self.
constexpr const char* kGemmPrelude = R"CL(
typedef struct { long batch_size[4]; long batch_stride[4][4]; long rs[4]; long cs[4]; } GemmGeometry;
inline void gemm_batch_offsets(const GemmGeometry* g, int nbatch, long batch, long* oa, long* ob,
                               long* oc, long* os) {
  *oa = 0; *ob = 0; *oc = 0; *os = 0;
  for (int d = nbatch - 1; d >= 0; --d) {
    long c = batch % g->batch_size[d];
    batch /= g->batch_size[d];
    *oa += c * g->batch_stride[0][d]; *ob += c * g->batch_stride[1][d];
    *oc += c * g->batch_stride[2][d]; *os += c * g->batch_stride[3][d];
  }
}
)CL";

// R (4 or 8) values per item and dim: 64x64 or 128x128 blocks of C per group of 16x16 items.
// An item's values are rows ty * 4 + {0..3} (+ 64 for R = 8) and the same of columns, so its
// operands come out of local memory as 4-vectors (a quarter of the scalar reads, which held
// the float32 kernel at a third of cuBLAS); the next step's tiles are loaded into registers
// while the current step computes.
constexpr const char* kGemm = R"CL(
#define TM (16 * R)
#define TN (16 * R)
#define TK 16
#define PADDED (TM + 4)
#define PER_ITEM ((TM * TK) / 256)
__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void kiln_gemm(__global char* cb, ulong co, __global const char* ab, ulong ao,
               __global const char* bb, ulong bo, __global const char* sb, ulong so,
               GemmGeometry g, int nbatch, long M, long N, long K, ACC alpha, ACC beta, int has_self) {
  __local ACC As[TK * PADDED];
  __local ACC Bs[TK * PADDED];
  const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * 16 + tx;
  const long n0 = (long)get_group_id(0) * TN, m0 = (long)get_group_id(1) * TM;
  long oa, ob_, oc, os;
  gemm_batch_offsets(&g, nbatch, get_group_id(2), &oa, &ob_, &oc, &os);
  __global const char* ap = ab + ao;
  __global const char* bp = bb + bo;
  ACC acc[R][R];
  for (int i = 0; i < R; ++i) for (int j = 0; j < R; ++j) acc[i][j] = 0;
  ACC ra[PER_ITEM], rb[PER_ITEM];
#if A_K_FAST
#define A_POS(e, m, k) const int m = (e) / TK, k = (e) % TK
#else
#define A_POS(e, m, k) const int m = (e) % TM, k = (e) / TM
#endif
#if B_K_FAST
#define B_POS(e, n, k) const int n = (e) / TK, k = (e) % TK
#else
#define B_POS(e, n, k) const int n = (e) % TN, k = (e) / TN
#endif
#define LOAD_REGS(K0)                                                                      \
  for (int q = 0; q < PER_ITEM; ++q) {                                                     \
    const int e = tid + 256 * q;                                                           \
    A_POS(e, m, k);                                                                        \
    const long gm = m0 + m, gk = (K0) + k;                                                 \
    ra[q] = (gm < M && gk < K) ? (ACC)LD_T(ap, oa + gm * g.rs[0] + gk * g.cs[0]) : (ACC)0;  \
    B_POS(e, n, k2);                                                                       \
    const long gn = n0 + n, gk2 = (K0) + k2;                                               \
    rb[q] = (gn < N && gk2 < K) ? (ACC)LD_T(bp, ob_ + gk2 * g.rs[1] + gn * g.cs[1]) : (ACC)0; \
  }
  LOAD_REGS(0)
  for (long k0 = 0; k0 < K; k0 += TK) {
    for (int q = 0; q < PER_ITEM; ++q) {
      const int e = tid + 256 * q;
      A_POS(e, m, k);
      As[k * PADDED + m] = ra[q];
      B_POS(e, n, k2);
      Bs[k2 * PADDED + n] = rb[q];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + TK < K) { LOAD_REGS(k0 + TK) }
    for (int kk = 0; kk < TK; ++kk) {
      ACC a[R], b[R];
      for (int h = 0; h < R / 4; ++h) {
        const ACC4 av = vload4(0, As + kk * PADDED + h * 64 + ty * 4);
        const ACC4 bv = vload4(0, Bs + kk * PADDED + h * 64 + tx * 4);
        a[4 * h] = av.x; a[4 * h + 1] = av.y; a[4 * h + 2] = av.z; a[4 * h + 3] = av.w;
        b[4 * h] = bv.x; b[4 * h + 1] = bv.y; b[4 * h + 2] = bv.z; b[4 * h + 3] = bv.w;
      }
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  __global char* cp = cb + co;
  __global const char* sp = sb + so;
  for (int i = 0; i < R; ++i) {
    const long m = m0 + (i / 4) * 64 + ty * 4 + i % 4;
    if (m >= M) continue;
    for (int j = 0; j < R; ++j) {
      const long n = n0 + (j / 4) * 64 + tx * 4 + j % 4;
      if (n >= N) continue;
      ACC v = alpha * acc[i][j];
      if (has_self) v += beta * (ACC)LD_T(sp, os + m * g.rs[3] + n * g.cs[3]);
      SV_T(cp, oc + m * g.rs[2] + n * g.cs[2], v);
    }
  }
}
)CL";

// Few rows of A (decoding's matrix-vector products): the tiles above would leave 63 of 64
// rows idle and read B once per 64 columns with too few groups to fill a GPU. Here B is
// streamed once: where B's K dim is contiguous (a Linear's W.t()), 32 lanes of a group
// share one column, each reading every 32nd element, then add their sums in local memory;
// otherwise each item owns one column and walks K (neighbours read neighbouring columns).
constexpr int kGemvMaxRows = 8;

constexpr const char* kGemv = R"CL(
#define MAXM 8
__kernel void kiln_gemv(__global char* cb, ulong co, __global const char* ab, ulong ao,
                        __global const char* bb, ulong bo, __global const char* sb, ulong so,
                        GemmGeometry g, int nbatch, long M, long N, long K, ACC alpha, ACC beta,
                        int has_self) {
  long oa, ob_, oc, os;
  gemm_batch_offsets(&g, nbatch, get_group_id(1), &oa, &ob_, &oc, &os);
  __global const char* ap = ab + ao;
  __global const char* bp = bb + bo;
  ACC acc[MAXM];
  for (int m = 0; m < MAXM; ++m) acc[m] = 0;
#if B_K_FAST
  __local ACC red[8][33];
  const int lane = get_local_id(0) % 32, row = get_local_id(0) / 32;
  const long n = (long)get_group_id(0) * 8 + row;
  if (n < N) {
    const long col = ob_ + n * g.cs[1];
    long k = lane;
#if BF16_PAIRS
    // bfloat16 weights two at a time (one 32-bit load per lane: half the load instructions
    // of the element loop, which left the M=1 product at a third of the memory's speed).
    __global const uint* wp = (__global const uint*)(bp + 2 * col);
    for (k = 2 * lane; k + 192 < K; k += 256) {
      uint p0 = wp[k / 2], p1 = wp[k / 2 + 32], p2 = wp[k / 2 + 64], p3 = wp[k / 2 + 96];
      ACC w[8] = {as_float(p0 << 16), as_float(p0 & 0xffff0000u), as_float(p1 << 16),
                  as_float(p1 & 0xffff0000u), as_float(p2 << 16), as_float(p2 & 0xffff0000u),
                  as_float(p3 << 16), as_float(p3 & 0xffff0000u)};
      for (int m = 0; m < MAXM; ++m) {
        if (m < M) {
          const long ar = oa + m * g.rs[0];
          for (int q = 0; q < 4; ++q) {
            acc[m] = fma(w[2 * q], (ACC)LD_T(ap, ar + (k + 64 * q) * g.cs[0]), acc[m]);
            acc[m] = fma(w[2 * q + 1], (ACC)LD_T(ap, ar + (k + 64 * q + 1) * g.cs[0]), acc[m]);
          }
        }
      }
    }
    for (; k < K; k += 64) {
      uint p0 = wp[k / 2];
      ACC w0 = as_float(p0 << 16), w1 = as_float(p0 & 0xffff0000u);
      for (int m = 0; m < MAXM; ++m)
        if (m < M) {
          const long ar = oa + m * g.rs[0];
          acc[m] = fma(w0, (ACC)LD_T(ap, ar + k * g.cs[0]), acc[m]);
          acc[m] = fma(w1, (ACC)LD_T(ap, ar + (k + 1) * g.cs[0]), acc[m]);
        }
    }
    k = K;  // done: skip the element loops below
#endif
    for (; k + 96 < K; k += 128) {
      ACC w0 = LD_T(bp, col + k), w1 = LD_T(bp, col + k + 32);
      ACC w2 = LD_T(bp, col + k + 64), w3 = LD_T(bp, col + k + 96);
      for (int m = 0; m < MAXM; ++m) {
        if (m < M) {
          const long ar = oa + m * g.rs[0];
          acc[m] = fma(w0, (ACC)LD_T(ap, ar + k * g.cs[0]), acc[m]);
          acc[m] = fma(w1, (ACC)LD_T(ap, ar + (k + 32) * g.cs[0]), acc[m]);
          acc[m] = fma(w2, (ACC)LD_T(ap, ar + (k + 64) * g.cs[0]), acc[m]);
          acc[m] = fma(w3, (ACC)LD_T(ap, ar + (k + 96) * g.cs[0]), acc[m]);
        }
      }
    }
    for (; k < K; k += 32) {
      ACC w = LD_T(bp, col + k);
      for (int m = 0; m < MAXM; ++m)
        if (m < M) acc[m] = fma(w, (ACC)LD_T(ap, oa + m * g.rs[0] + k * g.cs[0]), acc[m]);
    }
  }
  for (int m = 0; m < MAXM; ++m) {
    if (m >= M) break;
    red[row][lane] = acc[m];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 16; s > 0; s >>= 1) {
      if (lane < s) red[row][lane] += red[row][lane + s];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0 && n < N) {
      ACC v = alpha * red[row][0];
      if (has_self) v += beta * (ACC)LD_T(sb + so, os + m * g.rs[3] + n * g.cs[3]);
      SV_T(cb + co, oc + m * g.rs[2] + n * g.cs[2], v);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  const long n = get_global_id(0);
  if (n >= N) return;
  for (long k = 0; k < K; ++k) {
    ACC w = LD_T(bp, ob_ + k * g.rs[1] + n * g.cs[1]);
    for (int m = 0; m < MAXM; ++m)
      if (m < M) acc[m] = fma(w, (ACC)LD_T(ap, oa + m * g.rs[0] + k * g.cs[0]), acc[m]);
  }
  for (int m = 0; m < MAXM; ++m) {
    if (m >= M) break;
    ACC v = alpha * acc[m];
    if (has_self) v += beta * (ACC)LD_T(sb + so, os + m * g.rs[3] + n * g.cs[3]);
    SV_T(cb + co, oc + m * g.rs[2] + n * g.cs[2], v);
  }
#endif
}
)CL";

using Operand = GemmOperand;

Operand matrix(const Tensor& t, const Shape& batch, bool vector_as_row, bool is_vector) {
  Operand o;
  o.t = t;
  const size_t nb = batch.size();
  o.batch.assign(nb, 0);
  if (is_vector) {  // [K] as a [1, K] row (A) or a [K, 1] column (B)
    if (vector_as_row) o.cs = t.stride(0);
    else o.rs = t.stride(0);
    return o;
  }
  const int64_t tb = t.dim() - 2;
  for (int64_t d = 0; d < tb; ++d) {
    const size_t od = nb - size_t(tb) + size_t(d);
    o.batch[od] = t.size(d) == 1 ? 0 : t.stride(d);
  }
  o.rs = t.size(t.dim() - 2) == 1 ? 0 : t.stride(t.dim() - 2);
  o.cs = t.size(t.dim() - 1) == 1 ? 0 : t.stride(t.dim() - 1);
  return o;
}

}  // namespace

void run_gemm(const Tensor& out, const Operand& a, const Operand& b, const Operand* self,
              const Operand& c, const Shape& batch, int64_t M, int64_t N, int64_t K,
              const Scalar& alpha, const Scalar& beta) {
  if (M == 0 || N == 0) return;
  KILN_CHECK(batch.size() <= size_t(kMaxBatchDims), NotImplementedError, "xpu matmul: at most ",
             kMaxBatchDims, " batch dims, got ", batch.size());
  int64_t nbatch = 1;
  for (int64_t s : batch) nbatch *= s;
  if (nbatch == 0) return;
  GemmGeometry g{};
  for (size_t d = 0; d < batch.size(); ++d) {
    g.batch_size[d] = batch[d];
    g.batch_stride[0][d] = a.batch[d];
    g.batch_stride[1][d] = b.batch[d];
    g.batch_stride[2][d] = c.batch[d];
    g.batch_stride[3][d] = self ? self->batch[d] : 0;
  }
  const Operand* ops[4] = {&a, &b, &c, self ? self : &c};
  for (int k = 0; k < 4; ++k) {
    g.rs[k] = ops[k]->rs;
    g.cs[k] = ops[k]->cs;
  }
  const DType t = out.dtype();
  const bool f64 = t == DType::F64;
  const bool a_k_fast = a.cs == 1 || (a.rs != 1 && std::abs(a.cs) < std::abs(a.rs));
  const bool b_k_fast = b.rs == 1 && b.cs != 1;
  std::string src = kGemmPrelude + std::string("typedef CT_") + (f64 ? "F64" : "F32") + " ACC;\n" +
                    (f64 ? "typedef double4 ACC4;\n" : "typedef float4 ACC4;\n");
  src += std::string("#define LD_T LD_") + dtype_tag(t) + "\n#define SV_T SV_" + dtype_tag(t) + "\n";
  src += std::string("#define A_K_FAST ") + (a_k_fast ? "1" : "0") + "\n";
  src += std::string("#define B_K_FAST ") + (b_k_fast ? "1" : "0") + "\n";
  // bfloat16 pairs: even K and column stride and a 4-byte aligned start, so that every pair
  // is one aligned 32-bit word.
  bool pairs = t == DType::BF16 && b_k_fast && K % 2 == 0 && b.cs % 2 == 0 &&
               XpuRuntime::get().resolve(b.t.raw_data()).offset % 4 == 0;
  for (int64_t st : b.batch) pairs = pairs && st % 2 == 0;
  src += std::string("#define BF16_PAIRS ") + (pairs ? "1" : "0") + "\n";
  const bool gemv = M <= kGemvMaxRows;
  const int device = out.device().index;
  const bool has_self = self != nullptr && (beta.is_floating() ? beta.to_double() != 0.0 : beta.to_int() != 0);
  if (t == DType::BF16 && !gemv && mma_gemm_usable(device)) {
    // 16-byte loads: K, the strides that step between rows and batches, and both starts
    // multiples of 8 elements (16 bytes); A k-contiguous, B k- or n-contiguous.
    auto multiple_of_8 = [](const Operand& o, int64_t step) {
      bool ok = step % 8 == 0 && XpuRuntime::get().resolve(o.t.raw_data()).offset % 16 == 0;
      for (int64_t st : o.batch) ok = ok && st % 8 == 0;
      return ok;
    };
    const bool vec = K % 8 == 0 && a.cs == 1 && multiple_of_8(a, a.rs) &&
                     (b.rs == 1 ? multiple_of_8(b, b.cs) : (b.cs == 1 && N % 8 == 0 && multiple_of_8(b, b.rs)));
    // Both tensor-core kernels take kiln_gemm's arguments (alpha and beta as float); false
    // (after a warning, once) where the driver's compiler refuses the program.
    auto try_mma = [&](const std::string& source, const char* name, int rows_per_block, int threads,
                       const char* what, void (*mark_unusable)(int)) {
      std::unique_ptr<Launch> l;
      try {
        l = std::make_unique<Launch>(device, program_source(device, kGemmPrelude + source), name);
      } catch (const DeviceError& e) {
        std::cerr << "kiln warning: xpu:" << device << ": the " << what << " did not build; "
                  << "using another kernel. " << std::string(e.what()).substr(0, 1500) << "\n";
        mark_unusable(device);
        return false;
      }
      l->tensor(out).tensor(a.t).tensor(b.t).tensor(has_self ? self->t : out);
      l->value(g).value(cl_int(batch.size())).value(cl_long(M)).value(cl_long(N)).value(cl_long(K));
      l->value(cl_float(float(alpha.to_double()))).value(cl_float(float(beta.to_double())));
      l->value(cl_int(has_self ? 1 : 0));
      l->run_3d(size_t((N + 127) / 128) * size_t(threads), size_t((M + rows_per_block - 1) / rows_per_block),
                size_t(nbatch), size_t(threads), 1, 1);
      return true;
    };
    const std::string b_k_fast_define = std::string("#define B_K_FAST ") + (b.rs == 1 ? "1" : "0") + "\n";
    // Blocks of 64 rows where A is that short (a convolution's output channels), so that half
    // of each block does not idle.
    const int bm = M <= 64 ? 64 : 128;
    // Warps of 64 columns (4 warps per block) where there are blocks for every compute unit:
    // half the fragment reads per product of 32 (H200, bfloat16 4096^3: 184 -> 238 TFLOP/s);
    // warps of 32 columns (8 per block) otherwise, more items to hide latency (1024^3: 65 vs 61).
    const int64_t blocks = ((M + bm - 1) / bm) * ((N + 127) / 128) * nbatch;
    const int wn = blocks >= XpuRuntime::get().info(device).compute_units ? 8 : 4;
    if (vec && mma_async_usable(device) &&
        try_mma("#define BM " + std::to_string(bm) + "\n#define WN " + std::to_string(wn) + "\n" + b_k_fast_define +
                    mma_gemm_async_source(),
                "kiln_gemm_mma_async", bm, 64 * (128 / (8 * wn)), "pipelined tensor-core bfloat16 kernel",
                mark_mma_async_unusable))
      return;
    if (try_mma(std::string("#define A_K_FAST ") + (a_k_fast ? "1" : "0") + "\n" + b_k_fast_define +
                    "#define VEC " + (vec ? "1" : "0") + "\n" + mma_gemm_source(),
                "kiln_gemm_mma", 128, 256, "tensor-core bfloat16 kernel", mark_mma_gemm_unusable))
      return;
  }
  // 128x128 blocks where there are enough of them to give every compute unit one and
  // neither side is short enough to leave half of each block idle (a convolution's 64
  // output channels).
  const int64_t units = XpuRuntime::get().info(out.device().index).compute_units;
  const bool big = M > 64 && N > 64 && ((M + 127) / 128) * ((N + 127) / 128) * nbatch >= units;
  const int r = big ? 8 : 4;
  src += "#define R " + std::to_string(r) + "\n";
  src += gemv ? kGemv : kGemm;
  Launch l(device, program_source(device, src), gemv ? "kiln_gemv" : "kiln_gemm");
  l.tensor(out).tensor(a.t).tensor(b.t).tensor(has_self ? self->t : out);
  l.value(g).value(cl_int(batch.size())).value(cl_long(M)).value(cl_long(N)).value(cl_long(K));
  if (f64) l.value(cl_double(alpha.to_double())).value(cl_double(beta.to_double()));
  else l.value(cl_float(float(alpha.to_double()))).value(cl_float(float(beta.to_double())));
  l.value(cl_int(has_self ? 1 : 0));
  if (gemv) {
    // k-contiguous B: 8 columns per group of 256 (32 lanes each); else one column per item.
    const size_t items = b_k_fast ? size_t((N + 7) / 8) * 256 : size_t(N);
    l.run_3d(items, size_t(nbatch), 1, 256, 1, 1);
    return;
  }
  const int64_t tile = 16 * r;
  const size_t gx = size_t((N + tile - 1) / tile) * 16, gy = size_t((M + tile - 1) / tile) * 16;
  l.run_3d(gx, gy, size_t(nbatch), 16, 16, 1);
}

namespace {

void zero_fill(const Tensor& out) { elementwise(out, {}, "r = 0;"); }

void matmul_kernel(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  const Tensor& out = call.outs[0];
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  const int64_t M = a_vec ? 1 : a.size(a.dim() - 2);
  const int64_t K = a.shape().back();
  const int64_t N = b_vec ? 1 : b.shape().back();
  const size_t nbatch = size_t(out.dim()) - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  Shape batch(out.shape().begin(), out.shape().begin() + int64_t(nbatch));
  if (out.numel() == 0) return;
  if (K == 0) {
    zero_fill(out);
    return;
  }
  Operand oa = matrix(a, batch, true, a_vec), ob = matrix(b, batch, false, b_vec);
  Operand oc;
  oc.t = out;
  oc.batch.assign(out.strides().begin(), out.strides().begin() + int64_t(nbatch));
  oc.rs = a_vec ? 0 : out.stride(int64_t(nbatch));
  oc.cs = b_vec ? 0 : out.strides().back();
  run_gemm(out, oa, ob, nullptr, oc, batch, M, N, K, Scalar(int64_t(1)), Scalar(int64_t(0)));
}

void addmm_kernel(OpCall& call) {
  const Tensor& self = call.inputs[0];
  const Tensor& a = call.inputs[1];
  const Tensor& b = call.inputs[2];
  const Tensor& out = call.outs[0];
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t M = out.size(out.dim() - 2), N = out.shape().back(), K = a.shape().back();
  if (out.numel() == 0) return;
  Operand oa = matrix(a, batch, true, false), ob = matrix(b, batch, false, false);
  Operand oc = matrix(out, batch, true, false);
  // self broadcast to the output's shape: strides 0 where it has size 1 or no dim.
  Operand os;
  os.t = self;
  os.batch.assign(batch.size(), 0);
  const int64_t nd = out.dim();
  std::vector<int64_t> st(size_t(nd), 0);
  for (int64_t d = 0; d < self.dim(); ++d) {
    const int64_t od = nd - self.dim() + d;
    st[size_t(od)] = self.size(d) == 1 ? 0 : self.stride(d);
  }
  for (size_t d = 0; d < batch.size(); ++d) os.batch[d] = st[d];
  os.rs = st[size_t(nd - 2)];
  os.cs = st[size_t(nd - 1)];
  const Scalar beta = call.scalar_attr(0), alpha = call.scalar_attr(1);
  if (K == 0) {
    // alpha * (empty product) = 0: out = beta * self.
    elementwise(out, {self}, std::string("typedef CT_") + dtype_tag(out.dtype()) + " R; r = (R)s0 * a;",
                {{beta, out.dtype()}});
    return;
  }
  run_gemm(out, oa, ob, &os, oc, batch, M, N, K, alpha, beta);
}

}  // namespace

void register_matmul_kernels() {
  for (const char* name : {"matmul", "mm", "bmm", "dot"})
    register_kernel(name, DeviceType::XPU, matmul_kernel, kFloatDTypes);
  for (const char* name : {"addmm", "baddbmm"})
    register_kernel(name, DeviceType::XPU, addmm_kernel, kFloatDTypes);
}

}  // namespace kiln::xpu
