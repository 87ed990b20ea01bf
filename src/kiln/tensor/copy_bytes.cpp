// The vector copy behind kiln/tensor/copy_bytes.h. SSE2 is part of x86-64, so no ISA
// dispatch; 16-byte moves already run at the speed of memcpy's good cases (wider ones were
// not needed to get there).
#include "kiln/tensor/copy_bytes.h"

#include <algorithm>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define KILN_HAVE_SSE2_COPY 1
#endif

namespace kiln::detail {

void copy_bytes_by_vectors(void* dst, const void* src, size_t n) {
#ifdef KILN_HAVE_SSE2_COPY
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Unaligned head up to dst's next 16-byte boundary, so every store below is aligned.
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_store_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_store_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_store_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_store_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  for (; i + 16 <= n; i += 16)
    _mm_store_si128(reinterpret_cast<__m128i*>(d + i),
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace kiln::detail
