// Tensors in shared host memory (kiln/tensor/shared_storage.h).
#include "kiln/tensor/shared_storage.h"

#include <cstring>
#include <string>

#include "kiln/runtime/shared_memory.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln {

void share_memory(const Tensor& t) {
  const Storage& storage = t.impl()->storage();
  if (t.device().type != DeviceType::CPU) return;
  // A received storage is shared but holds no descriptor: sending it on copies it into a
  // memory file of its own (the sender's pages are not re-shared).
  if (storage->is_shared() && (storage->shared_fd() >= 0 || storage->nbytes() == 0)) return;
  int fd = -1;
  DataPtr shared = allocate_shared_host(storage->nbytes(), fd);
  if (storage->nbytes() > 0) std::memcpy(shared.get(), storage->data(), storage->nbytes());
  storage->adopt_shared(std::move(shared), fd);
}

Tensor empty_shared(const Shape& shape, DType dtype) {
  int64_t bytes = 0;
  KILN_CHECK(!__builtin_mul_overflow(numel_of(shape), int64_t(element_size(dtype)), &bytes),
             Error, "Storage size calculation overflowed: shape ", shape_str(shape));
  int fd = -1;
  DataPtr data = allocate_shared_host(size_t(bytes), fd);
  auto storage = std::make_shared<StorageImpl>(std::move(data), size_t(bytes));
  storage->mark_shared(fd);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape,
                                             contiguous_strides(shape), dtype));
}

Tensor tensor_from_shared_memory(int fd, size_t nbytes, int64_t offset, const Shape& shape,
                                 const Strides& strides, DType dtype) {
  KILN_CHECK(shape.size() == strides.size(), ValueError, "shared tensor: shape ",
             shape_str(shape), " and strides of ", strides.size(), " dims do not match");
  KILN_CHECK(offset >= 0, ValueError, "shared tensor: negative storage offset ", offset);
  // The last element the view reaches must lie inside the storage (the geometry comes from
  // another process: every step is overflow-checked).
  int64_t last = offset;
  bool empty = false, overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_CHECK(shape[i] >= 0 && strides[i] >= 0, ValueError, "shared tensor: bad shape ",
               shape_str(shape), " or strides");
    if (shape[i] == 0) {
      empty = true;
      continue;
    }
    int64_t reach = 0;
    overflow = overflow || __builtin_mul_overflow(shape[i] - 1, strides[i], &reach) ||
               __builtin_add_overflow(last, reach, &last);
  }
  int64_t end_byte = 0;
  overflow = overflow || __builtin_add_overflow(last, int64_t(1), &end_byte) ||
             __builtin_mul_overflow(end_byte, int64_t(element_size(dtype)), &end_byte);
  KILN_CHECK(empty || (!overflow && size_t(end_byte) <= nbytes), ValueError,
             "shared tensor: a view of shape ", shape_str(shape), " at offset ", offset,
             " reaches byte ", overflow ? std::string("(overflow)") : std::to_string(end_byte),
             " of a ", nbytes, "-byte storage");
  DataPtr data = map_shared_host(fd, nbytes);
  auto storage = std::make_shared<StorageImpl>(std::move(data), nbytes);
  storage->mark_shared(-1);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), offset, shape, strides, dtype));
}

}  // namespace kiln
