#include "kiln/tensor/tensor_impl.h"
#include "kiln/tensor/creation_observer.h"

#include "kiln/tensor/empty.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

TensorImpl::TensorImpl(Storage storage, int64_t offset, Shape shape, Strides strides,
                       DType dtype, std::shared_ptr<VersionCounter> version)
    : storage_(std::move(storage)),
      offset_(offset),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      dtype_(dtype),
      version_(version ? std::move(version) : std::make_shared<VersionCounter>()) {
  KILN_INTERNAL_ASSERT(shape_.size() == strides_.size());
  refresh();
}

void TensorImpl::set_geometry(int64_t offset, Shape shape, Strides strides) {
  KILN_INTERNAL_ASSERT(shape.size() == strides.size());
  offset_ = offset;
  shape_ = std::move(shape);
  strides_ = std::move(strides);
  refresh();
}

void TensorImpl::set_storage(Storage storage, int64_t offset, Shape shape, Strides strides) {
  storage_ = std::move(storage);
  set_geometry(offset, std::move(shape), std::move(strides));
}

void TensorImpl::refresh() {
  numel_ = numel_of(shape_);
  // Contiguous: row-major strides, ignoring dims of size 1 (as PyTorch).
  contiguous_ = true;
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) {
      contiguous_ = numel_ == 0;
      break;
    }
    expected *= shape_[i];
  }
}

Storage make_storage(Device device, size_t nbytes) {
  return std::make_shared<StorageImpl>(allocate_on(device, nbytes), nbytes);
}

Tensor empty_tensor(const Shape& shape, DType dtype, Device device) {
  return empty_tensor(Shape(shape), dtype, device);
}

namespace {
thread_local TensorCreationObserver t_creation_observer = nullptr;
Tensor observed(Tensor t) {
  if (__builtin_expect(t_creation_observer != nullptr, 0)) t_creation_observer(t);
  return t;
}
}  // namespace

TensorCreationObserver set_tensor_creation_observer(TensorCreationObserver observer) {
  TensorCreationObserver previous = t_creation_observer;
  t_creation_observer = observer;
  return previous;
}

namespace {
// count elements of dtype in bytes; Error where that overflows (2^62 float32 elements are
// representable as a count but not as bytes: the wrapped size would allocate too little).
size_t storage_bytes(int64_t count, DType dtype, const Shape& shape) {
  int64_t bytes = 0;
  KILN_CHECK(!__builtin_mul_overflow(count, int64_t(element_size(dtype)), &bytes), Error,
             "Storage size calculation overflowed: ", count, " elements of ",
             dtype_name(dtype), " (shape ", shape_str(shape), ")");
  return size_t(bytes);
}
}  // namespace

Tensor empty_tensor(Shape&& shape, DType dtype, Device device) {
  int64_t n = numel_of(shape);
  device = resolve_device(device);
  auto storage = make_storage(device, storage_bytes(n, dtype, shape));
  Strides strides = contiguous_strides(shape);
  return observed(Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, std::move(shape),
                                                      std::move(strides), dtype)));
}

Tensor empty_strided_tensor(const Shape& shape, const Strides& strides, DType dtype,
                            Device device) {
  KILN_CHECK(shape.size() == strides.size(), ValueError, "empty_strided: shape ",
             shape_str(shape), " and strides ", shape_str(strides),
             " must have the same length");
  int64_t n = numel_of(shape);
  int64_t extent = 0;
  if (n > 0) {
    extent = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      KILN_CHECK(strides[i] >= 0, ValueError, "empty_strided: negative stride ", strides[i]);
      int64_t reach = 0;
      KILN_CHECK(!__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) &&
                     !__builtin_add_overflow(extent, reach, &extent),
                 Error, "Storage size calculation overflowed: shape ", shape_str(shape),
                 " with strides ", shape_str(strides));
    }
  }
  device = resolve_device(device);
  auto storage = make_storage(device, storage_bytes(extent, dtype, shape));
  return observed(Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, strides,
                                                      dtype)));
}

Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset) {
  return make_view(t, std::move(shape), std::move(strides), offset, t.dtype());
}

Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset, DType dtype) {
  auto* base = t.impl();
  auto impl = std::make_shared<TensorImpl>(base->storage(), offset, std::move(shape),
                                           std::move(strides), dtype, base->version_counter());
  impl->view_base = base->view_base ? base->view_base : t.impl_ptr();
  return Tensor(std::move(impl));
}

}  // namespace kiln
