// Tensors in shared host memory (kiln/tensor/shared_storage.h) for Python:
// Tensor.share_memory_ / is_shared and the pieces kiln.multiprocessing sends between
// processes (a memory file's descriptor plus the view's geometry).
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "kiln/tensor/shared_storage.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln::py {

void bind_shared_memory(nb::module_& m, nb::class_<Tensor>& cls) {
  cls.def("share_memory_", [](nb::handle_t<Tensor> self) {
    share_memory(nb::cast<const Tensor&>(self));
    return nb::borrow(self);
  });
  cls.def("is_shared", [](const Tensor& t) { return t.impl()->storage()->is_shared(); });
  // (fd, storage bytes, offset, strides): moves the storage into shared memory first.
  m.def("_shared_memory_handle", [](const Tensor& t) {
    KILN_CHECK(t.device().type == DeviceType::CPU, DeviceError,
               "shared memory handles exist for CPU tensors only (got a tensor on ",
               t.device().str(), ")");
    share_memory(t);
    const Storage& s = t.impl()->storage();
    std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
    return nb::make_tuple(s->shared_fd(), s->nbytes(), t.storage_offset(), strides);
  }, nb::arg("tensor"));
  m.def("_tensor_from_shared_memory", [](int fd, size_t nbytes, int64_t offset,
                                         std::vector<int64_t> shape, std::vector<int64_t> strides,
                                         nb::handle dtype) {
    DType dt = dtype_arg(dtype);
    return nogil([&] {
      return tensor_from_shared_memory(fd, nbytes, offset, Shape(shape.begin(), shape.end()),
                                       Strides(strides.begin(), strides.end()), dt);
    });
  }, nb::arg("fd"), nb::arg("nbytes"), nb::arg("offset"), nb::arg("shape"), nb::arg("strides"),
     nb::arg("dtype"));
  m.def("_empty_shared", [](std::vector<int64_t> shape, nb::handle dtype) {
    return empty_shared(Shape(shape.begin(), shape.end()), dtype_arg(dtype));
  }, nb::arg("shape"), nb::arg("dtype"));
}

}  // namespace kiln::py
