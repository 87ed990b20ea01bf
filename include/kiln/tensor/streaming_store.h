#pragma once
// Non-temporal ("streaming") stores for outputs far larger than the cache. An ordinary store
// first reads the destination line into the cache (read-for-ownership), so out = a + b
// moves four streams through DRAM for three counted; a streaming store writes the line
// without reading it, as memcpy does for large copies (../shared/HARDWARE.md: triad 31 GB/s
// with normal stores, 44 GB/s with non-temporal ones on two cores). Kernels compute a block
// into an L1-resident buffer and stream the block out; outputs below kStreamingStoreBytes
// keep ordinary stores, since the next op usually reads them from the cache.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace kiln::detail {

// Outputs of at least this many bytes use streaming stores: three quarters of the 32 MiB L3
// of the target CPU. A 16 MiB output written normally is still in the L3 for the next op
// (clamp of [2048, 2048] float32 0.24-0.50 ms against 0.65 ms streamed, a chain of four ops
// 1.9-2.9 against 3.6-4.0 ms); at 24 MiB the two were even, at 32 MiB streaming won (1.0-1.2
// against 1.4 ms): the output no longer fits beside its input (decision 0020).
constexpr int64_t kStreamingStoreBytes = int64_t(24) << 20;

// Copies nbytes (a multiple of 64) from src (any alignment) to dst (64-byte aligned) with
// non-temporal stores; a plain memcpy on CPUs without them.
void stream_copy(void* dst, const void* src, size_t nbytes);
// Copies nbytes from src to dst (any alignments, no overlap): the whole cache lines of dst
// with non-temporal stores, its partial first and last lines with memcpy. Call stream_fence
// after the last one.
void stream_store(void* dst, const void* src, size_t nbytes);
// Orders this thread's streaming stores before its later stores (call before the data is
// handed to another thread).
void stream_fence();

// How far ahead of its reads a streamed kernel prefetches its input. The hardware prefetchers
// alone leave the read stream idle while a kernel computes: exp of 64M floats (out=, two
// threads, Xeon with AMX) ran at 0.68-0.70x of a copy's bandwidth, and with each 512-byte
// block's input lines prefetched this far ahead at 0.99-1.02x (1 KiB: 0.91x; 4 and 8 KiB: as
// 2 KiB). Decision 0117.
constexpr int64_t kStreamPrefetchBytes = 2048;

// Prefetches into L1 the cache lines of [p, p + bytes) moved kStreamPrefetchBytes ahead: call
// it with the input block a streamed kernel is about to read. (Prefetches never fault, so the
// range may run past the end of the input.)
inline void prefetch_ahead(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p) + kStreamPrefetchBytes;
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 3);
}

// Writes out[0, n) through streaming stores: compute(dst, j, len) writes the values of
// out[j, j + len) to dst[0, len) (dst is out + j itself for the unaligned head and the tail,
// else a 512-byte buffer).
//
// The buffer is small on purpose: out = a + b on 64M floats (two threads, a standalone
// loop timing each block size in one process, four relative alignments of a, b, out) ran
// at 29-38 GB/s with 4 KiB blocks, 24-45 with 2-3 KiB, 48-57 with 1 KiB and 55-58 with
// 512 B (256 B and 128 B: no better). Long bursts of streaming stores with no loads between
// them leave the read streams idle. (Except on Intel, float32 unary and add / sub / mul / div
// outputs do not come here: their vector functions stream their own stores, decision 0150.)
template <typename Out, typename Compute>
void run_streamed(Out* out, int64_t n, Compute&& compute) {
  constexpr int64_t kBlock = 512 / int64_t(sizeof(Out));
  const auto addr = reinterpret_cast<uintptr_t>(out);
  if (addr % sizeof(Out) != 0 || n < 2 * kBlock) {
    compute(out, 0, n);
    return;
  }
  const int64_t head = std::min<int64_t>(n, int64_t((64 - addr % 64) % 64 / sizeof(Out)));
  if (head > 0) compute(out, 0, head);
  alignas(64) Out buf[kBlock];
  int64_t j = head;
  for (; j + kBlock <= n; j += kBlock) {
    compute(buf, j, kBlock);
    stream_copy(out + j, buf, sizeof buf);
  }
  const int64_t lines = (n - j) * int64_t(sizeof(Out)) / 64;
  if (lines > 0) {
    const int64_t len = lines * 64 / int64_t(sizeof(Out));
    compute(buf, j, len);
    stream_copy(out + j, buf, size_t(lines) * 64);
    j += len;
  }
  if (j < n) compute(out + j, j, n - j);
  stream_fence();
}

}  // namespace kiln::detail
