#include "xpu_mma_gemm.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "xpu_runtime.h"

namespace kiln::xpu {

namespace {
std::atomic<uint64_t> g_failed{0};        // bit per device index (< 64)
std::atomic<uint64_t> g_async_failed{0};  // the same for the pipelined kernel
}

bool mma_gemm_usable(int device) {
  const char* env = std::getenv("KILN_XPU_MMA");
  if (env && std::strcmp(env, "0") == 0) return false;
  if (g_failed.load() & (uint64_t(1) << device)) return false;
  return XpuRuntime::get().info(device).nv_compute_major >= 8;
}

void mark_mma_gemm_unusable(int device) { g_failed.fetch_or(uint64_t(1) << device); }

bool mma_async_usable(int device) {
  const char* env = std::getenv("KILN_XPU_MMA");
  if (env && std::strcmp(env, "1") == 0) return false;
  return mma_gemm_usable(device) && !(g_async_failed.load() & (uint64_t(1) << device));
}

void mark_mma_async_unusable(int device) { g_async_failed.fetch_or(uint64_t(1) << device); }

// Block 128x128 of C, 8 warps as 2 (rows) x 4 (columns), each warp 64x32 as 4x4 mma tiles
// of 16x8. A and B stage through local memory as bfloat16 with k innermost, rows padded to
// 40 elements so that the fragment reads of a warp (8 rows x 4 k-pairs) hit 32 banks.
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16): lane = 4 * group + t;
//   A: a0 = (row g, k 2t..2t+1), a1 = (row g+8, same k), a2 = (row g, k 2t+8..), a3 = (row g+8, k 2t+8..)
//   B: b0 = (k 2t..2t+1, col g), b1 = (k 2t+8.., col g)
//   C: c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, same cols)
const char* const kSource = R"CL(
#define BM 128
#define BN 128
#define BK 32
#define PAD 40
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void kiln_gemm_mma(__global char* cb, ulong co, __global const char* ab, ulong ao,
                   __global const char* bb, ulong bo, __global const char* sb, ulong so,
                   GemmGeometry g, int nbatch, long M, long N, long K, float alpha, float beta,
                   int has_self) {
  // Declared as 16-byte vectors: the vector tile stores need that alignment, the fragment
  // reads are 32-bit, the element stores 16-bit (views below). Rows are PAD = 40 elements
  // (80 bytes, five vectors).
  __local uint4 As128[BM * PAD / 8];
  __local uint4 Bs128[BN * PAD / 8];
  __local uint* As32 = (__local uint*)As128;
  __local uint* Bs32 = (__local uint*)Bs128;
  __local ushort* As = (__local ushort*)As128;
  __local ushort* Bs = (__local ushort*)Bs128;
  const int tid = get_local_id(0), lane = tid % 32, warp = tid / 32;
  const int grp = lane / 4, t = lane % 4;
  const int wm = warp / 4, wn = warp % 4;
  const long n0 = (long)get_group_id(0) * BN, m0 = (long)get_group_id(1) * BM;
  long oa, ob_, oc, os;
  gemm_batch_offsets(&g, nbatch, get_group_id(2), &oa, &ob_, &oc, &os);
  __global const ushort* ap = (__global const ushort*)(ab + ao);
  __global const ushort* bp = (__global const ushort*)(bb + bo);
  float acc[4][4][4];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
#if VEC
  // 8 elements per 16-byte load (the host checked K, strides and starts are multiples of
  // 8 elements): 2 vectors of A and 2 of B per item and step, the next step's loaded into
  // registers while the current one computes.
  uint4 ra[2], rb[2];
#define LOAD_TILES(K0)                                                                    \
  for (int q = 0; q < 2; ++q) {                                                           \
    const int c = tid + 256 * q;                                                          \
    const int row = c >> 2, kc = (c & 3) * 8;                                             \
    const long gm = m0 + row;                                                             \
    ra[q] = (gm < M && (K0) + kc < K) ? vload4(0, (__global const uint*)(ap + oa + gm * g.rs[0] + (K0) + kc)) : (uint4)(0); \
    LOAD_B(q, c, K0)                                                                      \
  }
#if B_K_FAST
#define LOAD_B(q, c, K0)                                                                  \
  { const long gn = n0 + (c >> 2);                                                        \
    rb[q] = (gn < N && (K0) + (c & 3) * 8 < K) ? vload4(0, (__global const uint*)(bp + ob_ + gn * g.cs[1] + (K0) + (c & 3) * 8)) : (uint4)(0); }
#else
#define LOAD_B(q, c, K0)                                                                  \
  { const long gk = (K0) + (c >> 4), gn = n0 + (c & 15) * 8;                              \
    rb[q] = (gn < N && gk < K) ? vload4(0, (__global const uint*)(bp + ob_ + gk * g.rs[1] + gn)) : (uint4)(0); }
#endif
  LOAD_TILES(0)
  for (long k0 = 0; k0 < K; k0 += BK) {
    for (int q = 0; q < 2; ++q) {
      const int c = tid + 256 * q;
      As128[((c >> 2) * PAD + (c & 3) * 8) / 8] = ra[q];
#if B_K_FAST
      Bs128[((c >> 2) * PAD + (c & 3) * 8) / 8] = rb[q];
#else
      // B row-major: 8 columns of one k row, written down 8 rows of Bs (k innermost there).
      const int k = c >> 4, nc = (c & 15) * 8;
      const uint w[4] = {rb[q].x, rb[q].y, rb[q].z, rb[q].w};
      for (int e = 0; e < 4; ++e) {
        Bs[(nc + 2 * e) * PAD + k] = (ushort)(w[e] & 0xffffu);
        Bs[(nc + 2 * e + 1) * PAD + k] = (ushort)(w[e] >> 16);
      }
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + BK < K) { LOAD_TILES(k0 + BK) }
#else
  for (long k0 = 0; k0 < K; k0 += BK) {
    for (int q = 0; q < (BM * BK) / 256; ++q) {
      const int e = tid + 256 * q;
#if A_K_FAST
      const int m = e / BK, k = e % BK;
#else
      const int m = e % BM, k = e / BM;
#endif
      const long gm = m0 + m, gk = k0 + k;
      As[m * PAD + k] = (gm < M && gk < K) ? ap[oa + gm * g.rs[0] + gk * g.cs[0]] : (ushort)0;
#if B_K_FAST
      const int n = e / BK, k2 = e % BK;
#else
      const int n = e % BN, k2 = e / BN;
#endif
      const long gn = n0 + n, gk2 = k0 + k2;
      Bs[n * PAD + k2] = (gn < N && gk2 < K) ? bp[ob_ + gk2 * g.rs[1] + gn * g.cs[1]] : (ushort)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    __local const uint* A32 = As32;
    __local const uint* B32 = Bs32;
    for (int kk = 0; kk < BK; kk += 16) {
      uint a[4][4], b[4][2];
      for (int i = 0; i < 4; ++i) {
        const int r = wm * 64 + i * 16 + grp;
        a[i][0] = A32[(r * PAD + kk + 2 * t) / 2];
        a[i][1] = A32[((r + 8) * PAD + kk + 2 * t) / 2];
        a[i][2] = A32[(r * PAD + kk + 2 * t + 8) / 2];
        a[i][3] = A32[((r + 8) * PAD + kk + 2 * t + 8) / 2];
      }
      for (int j = 0; j < 4; ++j) {
        const int c = wn * 32 + j * 8 + grp;
        b[j][0] = B32[(c * PAD + kk + 2 * t) / 2];
        b[j][1] = B32[(c * PAD + kk + 2 * t + 8) / 2];
      }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
              : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
              : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  __global char* cp = cb + co;
  __global const char* sp = sb + so;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int q = 0; q < 4; ++q) {
        const long m = m0 + wm * 64 + i * 16 + grp + (q >= 2 ? 8 : 0);
        const long n = n0 + wn * 32 + j * 8 + 2 * t + (q & 1);
        if (m >= M || n >= N) continue;
        float v = alpha * acc[i][j][q];
        if (has_self) v += beta * LD_BF16(sp, os + m * g.rs[3] + n * g.cs[3]);
        SV_BF16(cp, oc + m * g.rs[2] + n * g.cs[2], v);
      }
}
)CL";

const char* mma_gemm_source() { return kSource; }

}  // namespace kiln::xpu
