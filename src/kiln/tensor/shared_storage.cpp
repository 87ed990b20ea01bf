// Tensors in shared host memory (kiln/tensor/shared_storage.h).
#include "kiln/tensor/shared_storage.h"

#include <cstring>

#include "kiln/runtime/shared_memory.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln {

void share_memory(const Tensor& t) {
  const Storage& storage = t.impl()->storage();
  if (storage->is_shared() || t.device().type != DeviceType::CPU) return;
  int fd = -1;
  DataPtr shared = allocate_shared_host(storage->nbytes(), fd);
  if (storage->nbytes() > 0) std::memcpy(shared.get(), storage->data(), storage->nbytes());
  storage->adopt_shared(std::move(shared), fd);
}

Tensor empty_shared(const Shape& shape, DType dtype) {
  size_t n = 1;
  for (int64_t d : shape) {
    KILN_CHECK(d >= 0, ValueError, "empty_shared: negative dimension in ", shape_str(shape));
    n *= size_t(d);
  }
  int fd = -1;
  DataPtr data = allocate_shared_host(n * element_size(dtype), fd);
  auto storage = std::make_shared<StorageImpl>(std::move(data), n * element_size(dtype));
  storage->mark_shared(fd);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape,
                                             contiguous_strides(shape), dtype));
}

Tensor tensor_from_shared_memory(int fd, size_t nbytes, int64_t offset, const Shape& shape,
                                 const Strides& strides, DType dtype) {
  KILN_CHECK(shape.size() == strides.size(), ValueError, "shared tensor: shape ",
             shape_str(shape), " and strides of ", strides.size(), " dims do not match");
  KILN_CHECK(offset >= 0, ValueError, "shared tensor: negative storage offset ", offset);
  // The last element the view reaches must lie inside the storage.
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_CHECK(shape[i] >= 0 && strides[i] >= 0, ValueError, "shared tensor: bad shape ",
               shape_str(shape), " or strides");
    if (shape[i] == 0) empty = true;
    else last += (shape[i] - 1) * strides[i];
  }
  size_t item = element_size(dtype);
  KILN_CHECK(empty || size_t(last + 1) * item <= nbytes, ValueError, "shared tensor: a view "
             "of shape ", shape_str(shape), " at offset ", offset, " reaches byte ",
             size_t(last + 1) * item, " of a ", nbytes, "-byte storage");
  int own_fd = -1;
  DataPtr data = map_shared_host(fd, nbytes, own_fd);
  auto storage = std::make_shared<StorageImpl>(std::move(data), nbytes);
  storage->mark_shared(own_fd);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), offset, shape, strides, dtype));
}

}  // namespace kiln
