#pragma once
// SmallVec<T, N>: a vector of trivially copyable T that keeps up to N elements inside
// itself and moves to the heap only beyond that. Per-op bookkeeping (the merged dims of an
// elementwise loop, an odometer index) has a handful of entries; a std::vector there costs a
// malloc and a free per op, which measured about a third of a small op's dispatch time.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <type_traits>

namespace kiln {

template <typename T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec holds trivially copyable types");

 public:
  SmallVec() = default;
  explicit SmallVec(size_t n, const T& value = T()) { resize(n, value); }
  SmallVec(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <typename It>
    requires(!std::is_integral_v<It>)
  SmallVec(It first, It last) {
    assign(first, last);
  }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_ ? heap_.get() : inline_; }
  const T* data() const { return heap_ ? heap_.get() : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void push_back(T v) {  // by value: v may be an element of this vector
    if (size_ == capacity_) grow(2 * capacity_);
    data()[size_++] = v;
  }
  void resize(size_t n, const T& value = T()) {
    if (n > capacity_) grow(n);
    std::fill(data() + std::min(size_, n), data() + n, value);
    size_ = n;
  }
  template <typename It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }

 private:
  void grow(size_t cap) {
    auto bigger = std::make_unique<T[]>(cap);
    std::copy(data(), data() + size_, bigger.get());
    heap_ = std::move(bigger);
    capacity_ = cap;
  }

  T inline_[N];
  std::unique_ptr<T[]> heap_;
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace kiln
