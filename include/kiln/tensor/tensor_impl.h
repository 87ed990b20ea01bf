#pragma once
// TensorImpl: what a tensor is. Views share the storage and the version counter of their
// base; in-place writes bump the counter (autograd uses it to detect stale saved tensors).
#include <atomic>
#include <cstdint>
#include <memory>

#include "kiln/core/dtype.h"
#include "kiln/core/shape.h"
#include "kiln/tensor/storage.h"

namespace kiln {

struct AutogradMeta;  // defined by the autograd layer

struct VersionCounter {
  std::atomic<uint64_t> version{0};
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, int64_t offset, Shape shape, Strides strides, DType dtype,
             std::shared_ptr<VersionCounter> version = nullptr);

  const Storage& storage() const { return storage_; }
  int64_t storage_offset() const { return offset_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return contiguous_; }

  const std::shared_ptr<VersionCounter>& version_counter() const { return version_; }
  uint64_t version() const { return version_->version.load(std::memory_order_relaxed); }
  void bump_version() { version_->version.fetch_add(1, std::memory_order_relaxed); }

  // A 0-d tensor made from a Python/C++ number: it takes part in type promotion like a
  // scalar (see tensor/promotion.h).
  bool is_wrapped_number = false;

  // The tensor this one is a view of (nullptr if not a view), as PyTorch's _base.
  std::shared_ptr<TensorImpl> view_base;

  // Autograd state; nullptr for tensors that never took part in autograd.
  std::shared_ptr<AutogradMeta> autograd_meta;

  // Changes geometry in place (used by resize of out= tensors and set_ of views).
  void set_geometry(int64_t offset, Shape shape, Strides strides);
  // Points this tensor at other storage (resizing an empty out= tensor).
  void set_storage(Storage storage, int64_t offset, Shape shape, Strides strides);

 private:
  void refresh();
  Storage storage_;
  int64_t offset_;
  Shape shape_;
  Strides strides_;
  DType dtype_;
  int64_t numel_ = 0;
  bool contiguous_ = true;
  std::shared_ptr<VersionCounter> version_;
};

}  // namespace kiln
