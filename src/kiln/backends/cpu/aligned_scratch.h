#pragma once
// Scratch vectors whose data starts on a cache line. glibc's malloc returns 16-byte aligned
// blocks (16 bytes past a page for large ones), so every 512-bit (256-bit: every other) load
// and store of a std::vector<float> buffer spans two cache lines; softmax's exponentials in
// such a buffer ran [65536, 1024] float32 in 14.1-14.2 ms against 10.4-10.6 ms aligned (Zen 4, two
// threads). Use AlignedVector for buffers that vector kernels read and write.
#include <cstddef>
#include <new>
#include <vector>

namespace kiln::cpu {

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace kiln::cpu
