// Streaming stores (see kiln/tensor/streaming_store.h). SSE2 is part of x86-64, so the
// 16-byte non-temporal store needs no ISA dispatch; the CPU's write-combining buffers merge
// four of them into one full-line write, which is all a memory-bound copy needs.
#include "kiln/tensor/streaming_store.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define KILN_HAVE_STREAMING_STORES 1
#endif

namespace kiln::detail {

void stream_copy(void* dst, const void* src, size_t nbytes) {
#ifdef KILN_HAVE_STREAMING_STORES
  auto* d = static_cast<__m128i*>(dst);
  const auto* s = static_cast<const __m128i*>(src);
  for (size_t i = 0; i < nbytes / 16; i += 4) {
    const __m128i a = _mm_loadu_si128(s + i), b = _mm_loadu_si128(s + i + 1);
    const __m128i c = _mm_loadu_si128(s + i + 2), e = _mm_loadu_si128(s + i + 3);
    _mm_stream_si128(d + i, a);
    _mm_stream_si128(d + i + 1, b);
    _mm_stream_si128(d + i + 2, c);
    _mm_stream_si128(d + i + 3, e);
  }
#else
  std::memcpy(dst, src, nbytes);
#endif
}

void stream_store(void* dst, const void* src, size_t nbytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t head = std::min(nbytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  const size_t bulk = (nbytes - head) / 64 * 64;
  stream_copy(d + head, s + head, bulk);
  std::memcpy(d + head + bulk, s + head + bulk, nbytes - head - bulk);
}

void stream_fence() {
#ifdef KILN_HAVE_STREAMING_STORES
  _mm_sfence();
#endif
}

}  // namespace kiln::detail
