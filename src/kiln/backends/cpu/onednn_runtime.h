#pragma once
// What kiln's oneDNN paths (onednn_conv.cpp, onednn_matmul.cpp) share: the engine, the
// KILN_ONEDNN switch and the ISA cap. The oneDNN types appear only when kiln is built with
// it (KILN_HAVE_DNNL); onednn_apply_isa_cap is always declared (`kiln bench` calls it).
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "kiln/backends/cpu/cpu_info.h"  // isa_level
#include "kiln/backends/cpu/onednn.h"    // onednn_enabled / set_onednn_enabled

#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kiln::cpu {

// Caps oneDNN's instruction set at kiln's ISA level (KILN_CPU_ISA), once, before oneDNN
// creates its first primitive. A no-op without oneDNN.
void onednn_apply_isa_cap();

#ifdef KILN_HAVE_DNNL
// The CPU engine, created once after the ISA cap.
dnnl::engine& onednn_engine();
// Decision 0017's rule for matrix products: oneDNN takes those with at least kOnednnMinRows
// rows and kOnednnMinWork multiply-adds (M * N * K, all batches together); fewer rows stay
// on kiln's streaming matrix-vector kernels, which read the weight once without packing.
// Not at the AVX2 level (decision 0041): there oneDNN 2.6's kernels ran BERT-base's and
// GPT-2's float32 Linear layers slower than kiln's blocked AVX2 kernel (BERT b1 s128: 734-762
// against 614-666 ms of Linear time per 5 forwards); at the baseline level oneDNN's SSE4.1
// kernels are 1.4-2.9x faster than kiln's plain loops, and at AVX-512 1.4-1.6x faster than
// kiln's blocked kernel, so it keeps those.
// At ISA level amx kiln's own tile kernels (gemm_amx.cpp, decision 0042) take the bfloat16 and
// int8 products instead: oneDNN 2.6 reached 16-45% of the tile peak there (HARDWARE.md).
inline bool own_tile_kernels_take_products() { return isa_level() >= IsaLevel::Amx; }
inline constexpr int64_t kOnednnMinRows = 16;
inline constexpr int64_t kOnednnMinWork = int64_t(1) << 18;
// What every oneDNN product needs: oneDNN switched on, enough work, a level other than AVX2.
inline bool onednn_takes_work(int64_t work, int64_t K) {
  return onednn_enabled() && work >= kOnednnMinWork && K > 0 && isa_level() != IsaLevel::Avx2;
}
inline bool onednn_takes_product(int64_t M, int64_t work, int64_t K) {
  return M >= kOnednnMinRows && onednn_takes_work(work, K);
}
// float32 products that kiln's blocked kernel takes at the AVX-512 levels although oneDNN
// could (decision 0118): from kOwnF32MinWork multiply-adds, A row-major (a_cs 1), or B
// row-major with N >= 2560. Timed with operands freshly written by a parallel op, as in a
// training step (Xeon with AMX, two threads), oneDNN 2.6 ran a row-major B of N = 3072, 5120 or
// 6144 columns at 137-205 GFLOP/s against kiln's 289-380, and kiln matched or beat it
// (0.94-1.26x) for the other row-major A at 768-2048; with A transposed and N < 2560 oneDNN
// stays 5-20% faster, and at 256^3-512^3 (B reused, which oneDNN packs once) 2-7% faster.
inline constexpr int64_t kOwnF32MinWork = int64_t(1) << 28;
inline bool own_kernel_takes_f32_product(int64_t work, int64_t N, int64_t a_cs, int64_t b_cs) {
  return isa_level() >= IsaLevel::Avx512 && work >= kOwnF32MinWork &&
         (a_cs == 1 || (b_cs == 1 && N >= 2560));
}
// float32 Linear layers of kOwnF32LinearMinRows rows or more take kiln's packed blocked kernel
// at the AVX-512 levels (decision 0119): a network's weights are cold in memory on each
// forward, and kiln's kernel prefetches each next weight block (and the next layer's first
// one) into L2 while it computes. Weights rotated through 400 MB, two threads, Xeon with AMX:
// kiln's time over oneDNN's 0.84-0.97x at M = 32-1024 (BERT's, GPT-2's and LLaMA's shapes);
// with one weight reused (in L3) 0.92-1.07x; at 16 rows 1.00x cold and 1.07-1.15x hot.
inline constexpr int64_t kOwnF32LinearMinRows = 32;
inline bool own_kernel_takes_f32_linear(int64_t M) {
  return isa_level() >= IsaLevel::Avx512 && M >= kOwnF32LinearMinRows;
}
// Linear layers (fused_linear, int_mm with W.t()) keep their weight packed in oneDNN's layout,
// which from 4 rows is faster than kiln's dot tiles on the plain weight (decision 0045:
// [M, 4096] x [11008, 4096]^T float32 at M = 8 6.3-7.0 against 8.9-9.3 ms, bfloat16 at M = 15
// 4.5-4.6 against 5.8-6.2 ms); at 2 rows the tiles are faster (bfloat16 3.1 against 3.5-4.1).
inline constexpr int64_t kOnednnLinearMinRows = 4;
inline bool onednn_takes_linear(int64_t M, int64_t work, int64_t K) {
  return M >= kOnednnLinearMinRows && onednn_takes_work(work, K);
}
// The calling thread's stream on that engine, created once per thread.
dnnl::stream& onednn_stream();
// Memory of layout desc in one of the calling thread's reusable buffers (grown as needed,
// never shrunk): scratchpads (packing buffers of up to megabytes) and the blocked copies of
// a convolution's activations were allocated per call, paying page faults on every call.
// A buffer stays valid until the thread's next request for the same slot.
// Weights: a weight gradient in oneDNN's blocked layout before its reorder to kiln's.
enum class OnednnBuffer { Scratchpad, Source, Destination, Weights, Count };
dnnl::memory onednn_thread_memory(const dnnl::memory::desc& desc, OnednnBuffer slot);
inline dnnl::memory onednn_scratchpad(const dnnl::memory::desc& desc) {
  return onednn_thread_memory(desc, OnednnBuffer::Scratchpad);
}
// The data of that buffer, at least bytes long (same rules).
void* onednn_thread_buffer(size_t bytes, OnednnBuffer slot);

// The argument slots of onednn_bound_memory.
enum class OnednnArg { Source, Weights, Destination, Bias, Residual, Scratchpad, Count };
// The calling thread's memory object for argument `arg` of `plan`, made with `desc` on first
// use and pointed at `data` on every call: making a dnnl::memory costs about 170 ns (oneDNN
// copies its descriptor), repointing one 8 ns, and a matrix product passes four or five. The
// objects of the thread's last few plans are kept, with a reference to each plan so that its
// address (the lookup key) is not reused while they live. The reference stays valid until the
// thread asks for another plan's memory.
dnnl::memory& onednn_bound_memory(const std::shared_ptr<const void>& plan, OnednnArg arg,
                                  const dnnl::memory::desc& desc, const void* data);
// The plan's scratchpad in the thread's scratchpad buffer (onednn_thread_buffer).
inline dnnl::memory& onednn_bound_scratchpad(const std::shared_ptr<const void>& plan,
                                             const dnnl::memory::desc& desc) {
  return onednn_bound_memory(plan, OnednnArg::Scratchpad, desc,
                             onednn_thread_buffer(desc.get_size(), OnednnBuffer::Scratchpad));
}
// Runs prim on s with its arguments in an array (oneDNN's C call) and waits: the C++ API's
// std::unordered_map of arguments, built and freed per call, cost about 0.3 us.
inline void onednn_execute(const dnnl::primitive& prim, dnnl::stream& s,
                           const dnnl_exec_arg_t* args, int count) {
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), s.get(), count, args),
                          "could not execute a primitive");
  s.wait();
}
inline void onednn_execute(const dnnl::primitive& prim, dnnl::stream& s,
                           std::initializer_list<dnnl_exec_arg_t> args) {
  onednn_execute(prim, s, args.begin(), int(args.size()));
}
#endif

}  // namespace kiln::cpu
