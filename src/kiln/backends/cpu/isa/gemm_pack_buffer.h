#pragma once
// The per-thread packing buffers of the blocked GEMM kernels (gemm_f32_blocked.inc,
// gemm_bf16_avx512bf16.cpp, gemm_s8_avx512vnni.cpp). Internal linkage on purpose: each ISA
// translation unit keeps its own copy, compiled with its own flags, as for every other piece
// of code those units share.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::cpu {
namespace {

// The start of a 64-byte aligned region of n elements in a buffer that only grows (16 spare
// elements). The packed panels are read with full 64-byte vector loads: from malloc's 16-byte
// alignment every load split two cache lines, which made the int8 kernel 35% slower (512^3:
// 480-520 vs 760-850 GOP/s) depending on where the heap put each thread's buffer.
template <typename T>
T* aligned_buffer(std::vector<T>& buf, size_t n) {
  static_assert(sizeof(T) == 4);
  if (buf.size() < n + 16) buf.resize(n + 16);
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
}

}  // namespace
}  // namespace kiln::cpu
