// DataPtr: a move-only owner of device memory that hands it back through its deleter.
#include "kiln/runtime/allocator.h"

namespace kiln {

DataPtr& DataPtr::operator=(DataPtr&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    ctx_ = o.ctx_;
    deleter_ = o.deleter_;
    device_ = o.device_;
    o.ptr_ = nullptr;
    o.ctx_ = nullptr;
    o.deleter_ = nullptr;
  }
  return *this;
}

void DataPtr::reset() {
  Deleter del = deleter_;
  void* ctx = ctx_;
  void* ptr = ptr_;
  // Clear first so that a deleter that (indirectly) touches this DataPtr sees it empty.
  ptr_ = nullptr;
  ctx_ = nullptr;
  deleter_ = nullptr;
  if (del != nullptr) del(ctx, ptr);
}

}  // namespace kiln
