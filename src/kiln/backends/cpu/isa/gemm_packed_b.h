#pragma once
// B packed whole, once, in the panels of one blocked GEMM kernel, for products that use the
// same B again (a Linear weight): the kernel then skips its per-call packing (10% of a
// [128, 768] x [768, 3072] float32 product at the AVX2 level; more where the products
// themselves are faster, as on AMX tiles). Decision 0043.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "kiln/backends/cpu/host_memory.h"
#include "../parallel_region.h"

namespace kiln::cpu {

struct GemmPackedB {
  const void* kernel = nullptr;  // the run function that reads this layout (it checks the tag)
  int64_t K = 0, N = 0;
  std::vector<int64_t> block_offset;  // per K block of the kernel: its first word

  // 4-byte words (float32 panels, or bfloat16 pairs / int8 quadruples), 64-byte aligned,
  // zeroed before packing. In host memory (host_memory.h): from 2 MiB the copy is advised as
  // huge pages, as oneDNN's packed weights are (decision 0046), since a network's Linear
  // layers stream their weights from memory on every call. On the AMX host of decision 0119
  // they are granted, and BERT's float32 shapes with cold weights ran the same without them.
  const uint32_t* words() const { return static_cast<const uint32_t*>(storage_.get()); }
  uint32_t* words() { return static_cast<uint32_t*>(storage_.get()); }
  void allocate(size_t n_words) {
    bytes_ = n_words * 4;
    storage_.reset(host_allocate(bytes_), host_free);
    if (!storage_) throw std::bad_alloc();
    std::memset(storage_.get(), 0, bytes_);
  }
  size_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<void> storage_;
  size_t bytes_ = 0;
};

namespace {  // internal linkage: instantiated in each ISA translation unit with its own flags

// B packed whole for a blocked kernel whose K blocks hold kc_max values and whose panels hold
// panel_cols columns of 4-byte words: per K block, the panels of all N, panel_rows(kc) rows
// each, the block's first word in block_offset. Tasks of `chunk` panels of one K block go over
// the threads; pack_task(k0, kc, j0, nc, out) lays out one task exactly as the kernel packs a
// block for itself, so the kernel reads either the same way.
template <typename PanelRows, typename PackTask>
GemmPackedB pack_whole_b(int64_t K, int64_t N, int64_t kc_max, int64_t panel_cols, int64_t chunk,
                         PanelRows panel_rows, PackTask pack_task, const void* kernel) {
  GemmPackedB out;
  out.kernel = kernel;
  out.K = K;
  out.N = N;
  const int64_t panels = (N + panel_cols - 1) / panel_cols;
  int64_t words = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kc_max) {
    out.block_offset.push_back(words);
    words += panel_rows(std::min(kc_max, K - k0)) * panel_cols * panels;
  }
  out.allocate(size_t(words));
  const int64_t blocks = int64_t(out.block_offset.size());
  const int64_t chunks = (panels + chunk - 1) / chunk;
  parallel_region(K * N >= (int64_t(1) << 16), [&] {
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < blocks * chunks; ++task) {
      const int64_t kb = task / chunks, p0 = task % chunks * chunk;
      const int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
      const int64_t j0 = p0 * panel_cols, nc = std::min(chunk * panel_cols, N - j0);
      pack_task(k0, kc, j0, nc,
                out.words() + out.block_offset[size_t(kb)] + p0 * panel_rows(kc) * panel_cols);
    }
  });
  return out;
}

}  // namespace

// Packs B [K, N] (element strides b_rs, b_cs; elements of the kernel's input type).
using GemmPackBFn = GemmPackedB (*)(int64_t K, int64_t N, const void* B, int64_t b_rs,
                                    int64_t b_cs);
// C[M, N] = alpha * A[M, K] @ B + bias (A of the kernel's input type with element strides
// a_rs, a_cs; C float32 with row stride c_rs, overwritten; bias [N] float32 or null, added to
// each row's scaled sums, as a separate pass would add it, but while they are in registers).
using GemmPackedRunFn = void (*)(int64_t M, const void* A, int64_t a_rs, int64_t a_cs,
                                 const GemmPackedB& B, float* C, int64_t c_rs, float alpha,
                                 const float* bias);
// bfloat16 kernels that round inside (decision 0119): C[M, N] = bfloat16(A @ B + bias), C
// bfloat16 with row stride c_rs, bias [N] float32 or null.
using GemmPackedRunBf16Fn = void (*)(int64_t M, const void* A, int64_t a_rs, int64_t a_cs,
                                     const GemmPackedB& B, uint16_t* C, int64_t c_rs,
                                     const float* bias);
struct GemmPackedKernel {
  GemmPackBFn pack = nullptr;
  GemmPackedRunFn run = nullptr;
  GemmPackedRunBf16Fn run_to_bf16 = nullptr;  // where the kernel has that form (AMX)
  explicit operator bool() const { return pack && run; }
};

// The variants (gemm_f32_blocked.inc in gemm_f32_avx2.cpp / gemm_f32_avx512.cpp;
// gemm_amx.cpp).
GemmPackedB gemm_f32_avx2_pack(int64_t, int64_t, const void*, int64_t, int64_t);
GemmPackedB gemm_f32_avx512_pack(int64_t, int64_t, const void*, int64_t, int64_t);
GemmPackedB gemm_bf16_amx_pack(int64_t, int64_t, const void*, int64_t, int64_t);
void gemm_f32_avx2_packed(int64_t, const void*, int64_t, int64_t, const GemmPackedB&, float*,
                          int64_t, float, const float*);
void gemm_f32_avx512_packed(int64_t, const void*, int64_t, int64_t, const GemmPackedB&, float*,
                            int64_t, float, const float*);
void gemm_bf16_amx_packed(int64_t, const void*, int64_t, int64_t, const GemmPackedB&, float*,
                          int64_t, float, const float*);
void gemm_bf16_amx_packed_to_bf16(int64_t, const void*, int64_t, int64_t, const GemmPackedB&,
                                  uint16_t*, int64_t, const float*);

// The level's kernels for float32 and bfloat16 operands (gemm_f32_select.cpp,
// gemm_bf16_select.cpp); empty where the level has none: float32 at the baseline level;
// bfloat16 below AMX (below AVX-512 BF16 the kernels widen B to float32 panels, a packed copy
// twice the weight's size; at AVX-512 BF16 oneDNN takes the tall products with its own packed
// weights).
GemmPackedKernel gemm_f32_packed_kernel();
GemmPackedKernel gemm_bf16_packed_kernel();

// int8: B stored as [N, K] (a Linear weight; pack) or row-major [K, N] (pack_rows: a B that
// int_mm sees again unchanged) and an A of M rows x K bytes, signed or not; C int32 [M, N].
// AMX only (gemm_amx.cpp); empty elsewhere.
using GemmS8PackBFn = GemmPackedB (*)(int64_t K, int64_t N, const int8_t* W);
using GemmS8PackedRunFn = void (*)(int64_t M, const uint8_t* A, bool a_signed,
                                   const GemmPackedB& B, int32_t* C);
struct GemmS8PackedKernel {
  GemmS8PackBFn pack = nullptr;
  GemmS8PackedRunFn run = nullptr;
  GemmS8PackBFn pack_rows = nullptr;
  explicit operator bool() const { return pack && run && pack_rows; }
};
GemmPackedB gemm_s8_amx_pack(int64_t K, int64_t N, const int8_t* W);
GemmPackedB gemm_s8_amx_pack_rows(int64_t K, int64_t N, const int8_t* B);
void gemm_s8_amx_packed(int64_t M, const uint8_t* A, bool a_signed, const GemmPackedB& B,
                        int32_t* C);
GemmS8PackedKernel gemm_s8_packed_kernel();

}  // namespace kiln::cpu
