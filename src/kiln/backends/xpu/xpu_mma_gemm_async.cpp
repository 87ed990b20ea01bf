// The pipelined tensor-core bfloat16 kernel (kiln_gemm_mma_async): for operands whose rows
// start on 16-byte boundaries (the host's VEC check), tiles move global -> local memory with
// cp.async (no trip through registers, the next tile in flight while the current one
// computes, two stages) and fragments come out of local memory with ldmatrix (one
// instruction per 8x8 bfloat16 matrix per lane group instead of four 32-bit loads);
// ldmatrix.trans reads B's fragments straight from a row-major (n-contiguous) tile, which the
// first kernel had to scatter element by element. PTX ISA 7.0+ (sm_80).
#include "xpu_mma_gemm.h"

namespace kiln::xpu {

// Block BM x 128 of C (BM = 128, or 64 for short A), warps as 2 (rows) x 128 / (8 WN) (columns),
// each warp (BM / 2) x 8 WN as MT x WN mma tiles of 16x8 (WN = 4 or 8, a define with BM). Local memory per stage: A as [BM][40]
// (k innermost, rows padded to 80 bytes so the 8 row addresses of one ldmatrix matrix hit
// distinct banks), B as [128][40] when k-contiguous or [32][136] (n innermost, 272-byte rows:
// again 8 distinct bank groups) when n-contiguous.
// Shared addresses: a __local pointer converted to an integer is its .shared offset (OpenCL
// C has no generic address space, so NVIDIA's compiler keeps local pointers in .shared).
const char* const kAsyncSource = R"CL(
#define BN 128
#define BK 32
#define MT (BM / 32)
#define WARPS_N (BN / (8 * WN))
#define NTHREADS (64 * WARPS_N)
#define APAD 40
#if B_K_FAST
#define BPITCH 40
#define B_ELEMS (BN * 40)
#else
#define BPITCH 136
#define B_ELEMS (BK * 136)
#endif
#define A_ELEMS (BM * APAD)
#define STAGE_ELEMS (A_ELEMS + B_ELEMS)

inline void cp_async16(uint dst, ulong src, uint bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
inline void cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
inline void cp_async_wait_1(void) { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
inline void ldsm_x4(uint addr, uint* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
inline void ldsm_x4_trans(uint addr, uint* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

__kernel __attribute__((reqd_work_group_size(NTHREADS, 1, 1)))
void kiln_gemm_mma_async(__global char* cb, ulong co, __global const char* ab, ulong ao,
                         __global const char* bb, ulong bo, __global const char* sb, ulong so,
                         GemmGeometry g, int nbatch, long M, long N, long K, float alpha, float beta,
                         int has_self) {
  __local uint4 smem[2 * STAGE_ELEMS / 8];
  const uint sbase = (uint)(ulong)smem;
  const int tid = get_local_id(0), lane = tid % 32, warp = tid / 32;
  const int grp = lane / 4, t = lane % 4;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const long n0 = (long)get_group_id(0) * BN, m0 = (long)get_group_id(1) * BM;
  long oa, ob_, oc, os;
  gemm_batch_offsets(&g, nbatch, get_group_id(2), &oa, &ob_, &oc, &os);
  __global const ushort* ap = (__global const ushort*)(ab + ao) + oa;
  __global const ushort* bp = (__global const ushort*)(bb + bo) + ob_;

  // One stage: A's BM x 32 and B's 32 x 128 as 16-byte chunks (8 elements; the host checked
  // that K, N (n-contiguous B), the row strides and the starts allow it), out-of-range
  // chunks zero-filled (source size 0).
#define LOAD_STAGE(S, K0)                                                                  \
  {                                                                                        \
    const uint sa = sbase + (uint)((S) * STAGE_ELEMS * 2);                                 \
    const uint sbb = sa + (uint)(A_ELEMS * 2);                                             \
    for (int c = tid; c < BM * 4; c += NTHREADS) {                                              \
      const int row = c >> 2, kc = (c & 3) * 8;                                            \
      const long gm = m0 + row, gk = (K0) + kc;                                            \
      const bool in = gm < M && gk < K;                                                    \
      cp_async16(sa + (uint)((row * APAD + kc) * 2),                                       \
                 (ulong)(in ? ap + gm * g.rs[0] + gk : ap), in ? 16u : 0u);                \
    }                                                                                      \
    for (int c = tid; c < 512; c += NTHREADS) {                                                 \
      LOAD_B_CHUNK(c, K0)                                                                  \
    }                                                                                      \
  }
#if B_K_FAST
#define LOAD_B_CHUNK(c, K0)                                                                \
  { const int nr = c >> 2, kc = (c & 3) * 8;                                               \
    const long gn = n0 + nr, gk = (K0) + kc;                                               \
    const bool in = gn < N && gk < K;                                                      \
    cp_async16(sbb + (uint)((nr * BPITCH + kc) * 2),                                       \
               (ulong)(in ? bp + gn * g.cs[1] + gk : bp), in ? 16u : 0u); }
#else
#define LOAD_B_CHUNK(c, K0)                                                                \
  { const int kr = c >> 4, nc = (c & 15) * 8;                                              \
    const long gk = (K0) + kr, gn = n0 + nc;                                               \
    const bool in = gn < N && gk < K;                                                      \
    cp_async16(sbb + (uint)((kr * BPITCH + nc) * 2),                                       \
               (ulong)(in ? bp + gk * g.rs[1] + gn : bp), in ? 16u : 0u); }
#endif

  float acc[MT][WN][4];
  for (int i = 0; i < MT; ++i) for (int j = 0; j < WN; ++j) for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

  // Lane-invariant parts of the ldmatrix addresses (bytes within a stage).
  // A: lanes 0-15 give rows 0-15 at k 0, lanes 16-31 the same rows at k 8.
  const uint a_lane = (uint)(((wm * (BM / 2) + (lane & 15)) * APAD + (lane >> 4) * 8) * 2);
#if B_K_FAST
  // B [n][k]: lanes 0-7 rows n 0-7 at k 0, 8-15 the same at k 8, 16-31 rows n 8-15.
  const uint b_lane = (uint)(((wn * 8 * WN + (lane >> 4) * 8 + (lane & 7)) * BPITCH + ((lane >> 3) & 1) * 8) * 2);
#else
  // B [k][n] (transposed reads): lanes 0-7 rows k 0-7, 8-15 rows k 8-15, 16-31 columns n + 8.
  const uint b_lane = (uint)(((lane & 7) + ((lane >> 3) & 1) * 8) * BPITCH * 2 + (wn * 8 * WN + (lane >> 4) * 8) * 2);
#endif

  const long ktiles = (K + BK - 1) / BK;
  LOAD_STAGE(0, 0)
  cp_async_commit();
  for (long kt = 0; kt < ktiles; ++kt) {
    const int s = (int)(kt & 1);
    if (kt + 1 < ktiles) LOAD_STAGE(s ^ 1, (kt + 1) * BK)
    cp_async_commit();   // possibly empty: the group count stays one per step
    cp_async_wait_1();   // this step's tile has landed (for this item) ...
    barrier(CLK_LOCAL_MEM_FENCE);  // ... and for every item
    const uint sa = sbase + (uint)(s * STAGE_ELEMS * 2);
    const uint sbb = sa + (uint)(A_ELEMS * 2);
    for (int kk = 0; kk < BK; kk += 16) {
      uint a[MT][4], b[WN][2];
      for (int i = 0; i < MT; ++i) ldsm_x4(sa + a_lane + (uint)((i * 16 * APAD + kk) * 2), a[i]);
      for (int jp = 0; jp < WN / 2; ++jp) {
        uint r[4];
#if B_K_FAST
        ldsm_x4(sbb + b_lane + (uint)((jp * 16 * BPITCH + kk) * 2), r);
#else
        ldsm_x4_trans(sbb + b_lane + (uint)((kk * BPITCH + jp * 16) * 2), r);
#endif
        b[2 * jp][0] = r[0]; b[2 * jp][1] = r[1]; b[2 * jp + 1][0] = r[2]; b[2 * jp + 1][1] = r[3];
      }
      for (int i = 0; i < MT; ++i)
        for (int j = 0; j < WN; ++j)
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
              : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
              : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the next step's loads overwrite this stage
  }
  __global char* cp = cb + co;
  __global const char* sp = sb + so;
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < WN; ++j)
      for (int q = 0; q < 4; ++q) {
        const long m = m0 + wm * (BM / 2) + i * 16 + grp + (q >= 2 ? 8 : 0);
        const long n = n0 + wn * 8 * WN + j * 8 + 2 * t + (q & 1);
        if (m >= M || n >= N) continue;
        float v = alpha * acc[i][j][q];
        if (has_self) v += beta * LD_BF16(sp, os + m * g.rs[3] + n * g.cs[3]);
        SV_BF16(cp, oc + m * g.rs[2] + n * g.cs[2], v);
      }
}
)CL";

const char* mma_gemm_async_source() { return kAsyncSource; }

}  // namespace kiln::xpu
