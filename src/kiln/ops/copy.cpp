// Copies between dtypes and devices. Same-device copies run the device's strided-copy
// kernel; cross-device copies go through the backends' copy_async on the current streams.
#include "kiln/ops/copy.h"

#include "kiln/core/convert.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/memory_format.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/guard.h"

namespace kiln {

namespace {

Backend::CopyKind copy_kind(Device dst, Device src) {
  if (src.is_cpu()) return Backend::CopyKind::HostToDevice;
  if (dst.is_cpu()) return Backend::CopyKind::DeviceToHost;
  return Backend::CopyKind::DeviceToDevice;
}

// Copies the bytes of contiguous src into contiguous dst (same dtype and numel) across
// devices. Host reads wait for the device; host writes finish before returning unless
// non_blocking (then the host tensor is kept alive until the stream passes the copy).
void copy_contiguous_across(const Tensor& dst, const Tensor& src, bool non_blocking) {
  size_t n = dst.nbytes();
  if (n == 0) return;
  Device d = dst.device(), s = src.device();
  if (!d.is_cpu() && !s.is_cpu()) {
    // Between two accelerators: stage through the host (simple and always correct).
    Tensor host = empty_tensor(src.shape(), src.dtype(), Device(DeviceType::CPU, 0));
    copy_contiguous_across(host, src, false);
    copy_contiguous_across(dst, host, non_blocking);
    return;
  }
  Device accel = d.is_cpu() ? s : d;
  Backend& backend = get_backend(accel.type);
  Stream stream = current_stream(accel);
  backend.copy_async(dst.raw_data(), src.raw_data(), n, copy_kind(d, s), stream);
  if (d.is_cpu() || !non_blocking) {
    stream.synchronize();
  } else {
    // Keep the host storage alive until the stream has read it.
    backend.launch(stream, [keep = src.impl()->storage()] {});
  }
}

std::vector<TensorMeta> copy_meta(const OpCall& call) {
  const Tensor& dst = call.outs[0];
  const Tensor& src = call.inputs[0];
  KILN_CHECK(broadcast_shapes(dst.shape(), src.shape()) == dst.shape(), ShapeError,
             "copy_: source of shape ", shape_str(src.shape()),
             " can't be broadcast to the destination shape ", shape_str(dst.shape()));
  return {{dst.shape(), dst.dtype()}};
}

// copy_(self, src, non_blocking): composite so interceptors see one op.
std::vector<Tensor> copy_composite(OpCall& call) {
  Tensor dst = call.outs[0];
  const Tensor& src = call.inputs[0];
  bool non_blocking = call.has_attr(0) && call.bool_attr(0);
  if (dst.device() == src.device()) {
    Tensor s = src;
    if (ops::partially_overlaps(dst, src)) s = clone(src);  // never read what we wrote
    call_op_out(KILN_OP("_copy_strided"), {s}, {}, {dst});
    return {dst};
  }
  KILN_CHECK(broadcast_shapes(dst.shape(), src.shape()) == dst.shape(), ShapeError,
             "copy_: source of shape ", shape_str(src.shape()),
             " can't be broadcast to the destination shape ", shape_str(dst.shape()));
  dst.impl()->bump_version();
  // Convert and lay out on the source device, move bytes, then scatter into dst's layout.
  Tensor staged = to_dtype(src, dst.dtype()).expand(dst.shape()).contiguous();
  if (dst.is_contiguous()) {
    copy_contiguous_across(dst, staged, non_blocking);
  } else {
    Tensor tmp = empty_tensor(dst.shape(), dst.dtype(), dst.device());
    copy_contiguous_across(tmp, staged, non_blocking);
    call_op_out(KILN_OP("_copy_strided"), {tmp}, {}, {dst});
  }
  return {dst};
}

// _to_copy(self, dtype, device): a new tensor with the given dtype on the given device, in
// the source's layout (PyTorch's preserve_format for clone and `to`): a source whose strides
// are a permutation of a contiguous layout (channels-last, a transpose) keeps them; any other
// (a slice, an expansion) gets dense strides in the same order.
std::vector<Tensor> to_copy_composite(OpCall& call) {
  const Tensor& src = call.inputs[0];
  DType dtype = call.dtype_attr(0);
  Device device = std::get<Device>(call.attrs[1]);
  const Strides strides = preserve_format_strides(src.shape(), src.strides());
  Tensor out = strides == contiguous_strides(src.shape())
                   ? empty_tensor(src.shape(), dtype, device)
                   : empty_strided_tensor(src.shape(), strides, dtype, device);
  copy_(out, src, call.has_attr(2) && call.bool_attr(2));
  return {out};
}

}  // namespace

Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking) {
  OpCall call;
  call.op = &KILN_OP("copy_");
  call.inputs = {src};
  call.outs = {dst};
  call.attrs = {non_blocking};
  dispatch(call);
  return dst;
}

Tensor to_dtype(const Tensor& t, DType dtype, bool copy) {
  if (t.dtype() == dtype && !copy) return t;
  return call_op(KILN_OP("_to_copy"), {t}, {dtype, t.device(), false});
}

Tensor to_device(const Tensor& t, Device device, bool non_blocking) {
  device = resolve_device(device);
  if (t.device() == device) return t;
  return call_op(KILN_OP("_to_copy"), {t}, {t.dtype(), device, non_blocking});
}

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  // clone keeps a permuted layout; it is contiguous for the rest (slices, expansions).
  if (preserve_format_strides(t.shape(), t.strides()) == contiguous_strides(t.shape()))
    return clone(t);
  Tensor out = empty_tensor(t.shape(), t.dtype(), t.device());
  copy_(out, t);  // recorded by autograd like any copy
  return out;
}

Tensor clone(const Tensor& t) {
  return call_op(KILN_OP("_to_copy"), {t}, {t.dtype(), t.device(), false});
}

namespace ops {
void register_copy_ops() {
  register_op("_copy_strided", "_copy_strided(Tensor src, *, Tensor(a!) out) -> Tensor(a!)",
              copy_meta);
  register_composite_op("copy_", "copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
                        copy_composite);
  register_composite_op("_to_copy",
                        "_to_copy(Tensor self, ScalarType dtype, Device device, bool non_blocking=False) -> Tensor",
                        to_copy_composite);
}
}  // namespace ops

}  // namespace kiln
