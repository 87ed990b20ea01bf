// Tensor.resize_ / resize_as_ (include/kiln/ops/copy.h).
#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln {

Tensor& resize_(Tensor& t, const Shape& shape) {
  KILN_CHECK(!autograd::requires_grad(t), Error,
             "cannot resize variables that require grad");
  for (int64_t s : shape)
    KILN_CHECK(s >= 0, Error, "Trying to create tensor with negative dimension ", s, ": ",
               shape_str(shape));
  if (t.shape() == shape) return t;  // as PyTorch: the same sizes change nothing, strides too
  TensorImpl& impl = *t.impl();
  const size_t es = t.element_size();
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  const size_t needed = (size_t(impl.storage_offset()) + size_t(numel)) * es;
  const size_t have = impl.storage()->nbytes();
  if (needed <= have) {
    impl.set_geometry(impl.storage_offset(), shape, contiguous_strides(shape));
  } else {
    KILN_CHECK(!impl.storage()->foreign(), Error,
               "Trying to resize storage that is not resizable (memory shared with NumPy or "
               "DLPack: ", have, " bytes, ", needed, " needed)");
    // A larger block with the old bytes at the start. (PyTorch grows the storage object
    // itself, so other views of it follow; here only this tensor moves to the new block.)
    Tensor fresh = empty_tensor(Shape{int64_t(needed / es)}, t.dtype(), t.device());
    const int64_t old_elems = int64_t(have / es);
    if (old_elems > 0) {
      Tensor old_flat(std::make_shared<TensorImpl>(impl.storage(), 0, Shape{old_elems},
                                                   Strides{1}, t.dtype()));
      Tensor head(std::make_shared<TensorImpl>(fresh.impl()->storage(), 0, Shape{old_elems},
                                               Strides{1}, t.dtype()));
      copy_(head, old_flat);
    }
    impl.set_storage(fresh.impl()->storage(), impl.storage_offset(), shape,
                     contiguous_strides(shape));
  }
  impl.bump_version();
  return t;
}

Tensor& resize_as_(Tensor& t, const Tensor& other) { return resize_(t, other.shape()); }

}  // namespace kiln
