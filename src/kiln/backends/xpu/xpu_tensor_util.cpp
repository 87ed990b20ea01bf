#include "xpu_tensor_util.h"

#include <algorithm>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/stream.h"
#include "kiln/tensor/empty.h"
#include "xpu_kernel_util.h"

namespace kiln::xpu {

Tensor contiguous_on_device(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = empty_tensor(t.shape(), t.dtype(), t.device());
  elementwise(c, {t}, "r = a;", {}, /*raw=*/true);
  return c;
}

Tensor permuted_view(const Tensor& t, const std::vector<int64_t>& order) {
  Shape shape;
  Strides strides;
  for (int64_t d : order) {
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d));
  }
  return make_view(t, std::move(shape), std::move(strides), t.storage_offset());
}

Tensor reshaped_view(const Tensor& t, const Shape& shape) {
  KILN_INTERNAL_ASSERT(t.is_contiguous(), "reshaped_view of a non-contiguous tensor");
  return make_view(t, shape, contiguous_strides(shape), t.storage_offset());
}

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.is_contiguous() && dst.raw_data() == src.raw_data()) return;
  elementwise(dst, {reshaped_view(src, dst.shape())}, "r = a;", {}, /*raw=*/src.dtype() == dst.dtype());
}

Tensor to_host(const Tensor& t) {
  Tensor host = empty_tensor(t.shape(), t.dtype(), Device(DeviceType::CPU, 0));
  if (t.numel() == 0) return host;
  Tensor c = contiguous_on_device(t);
  Stream s = current_stream(t.device());
  get_backend(DeviceType::XPU).copy_async(host.raw_data(), c.raw_data(), host.nbytes(),
                                          Backend::CopyKind::DeviceToHost, s);
  s.synchronize();
  return host;
}

void from_host(const Tensor& dst, const Tensor& host) {
  if (dst.numel() == 0) return;
  Tensor target = dst.is_contiguous() ? dst : empty_tensor(dst.shape(), dst.dtype(), dst.device());
  Stream s = current_stream(dst.device());
  get_backend(DeviceType::XPU).copy_async(target.raw_data(), host.raw_data(), host.nbytes(),
                                          Backend::CopyKind::HostToDevice, s);
  s.synchronize();  // the host tensor may be freed when we return
  if (!dst.is_contiguous()) copy_into(dst, target);
}

std::vector<int64_t> normalized_dims(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
    KILN_CHECK(w >= 0 && w < std::max<int64_t>(ndim, 1), IndexError, "Dimension out of range (expected to be in range of [",
               -std::max<int64_t>(ndim, 1), ", ", std::max<int64_t>(ndim, 1) - 1, "], but got ", d, ")");
    if (w < ndim) out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace kiln::xpu
