#pragma once
// memcpy for tensor data, without the cliff of glibc's string copy on the AMD Zen CPUs in use.
// From a few KiB glibc 2.36 copies with `rep movsb`, and there a destination 1-15 bytes past
// the source modulo 4 KiB (a row shifted by a few elements: roll, pad, cat) runs at 2.5-3.5
// GB/s instead of 35-49 (one row of 4000 bytes or 64 KiB, cached, both alignments of the
// source); 16-63 bytes past it runs at 27-35. Those distances take an SSE2 loop (unaligned
// loads, aligned stores: 34-38 GB/s at every distance); all others stay with memcpy
// (decision 0047).
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kiln::detail {

// Below this many bytes glibc does not use `rep movsb` (measured fast at 2 KiB and below).
constexpr size_t kCloseCopyMinBytes = 1024;

// dst[0, n) = src[0, n) for buffers that do not overlap, by 16-byte vector moves.
void copy_bytes_by_vectors(void* dst, const void* src, size_t n);

// dst[0, n) = src[0, n) for buffers that do not overlap (memcpy's contract). An empty range
// is a no-op even when a pointer is null (an empty tensor's data), which memcpy does not allow.
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  const uintptr_t ahead =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) % 4096;
  if (n >= kCloseCopyMinBytes && ahead - 1 < 63) {
    copy_bytes_by_vectors(dst, src, n);
    return;
  }
  std::memcpy(dst, src, n);
}

}  // namespace kiln::detail
