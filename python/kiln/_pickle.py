"""Pickling of tensors (pickle, copy.copy, multiprocessing queues, DataLoader workers).

A tensor pickles as its values (a contiguous host copy held in a numpy array; bfloat16 as its
raw 16-bit patterns, which numpy has no type for), dtype, device and requires_grad, and is
rebuilt contiguous, with its Python attributes; a meta tensor as its shape and dtype. As torch,
a tensor that requires grad comes back as a leaf that requires grad (no graph, no .grad). Differences from torch: views are not rebuilt as views of one
storage (each pickled tensor gets its own copy) and strides are not kept."""
import numpy as np

from . import _C


def tensor_state(t):
    """(values as a numpy array, dtype name, device string) of t, detached."""
    t = t.detach()
    dtype = str(t.dtype).split(".")[-1]
    host = t.cpu().contiguous() if t.device.type != "cpu" else t.contiguous()
    if t.dtype == _C.bfloat16:
        host = host.view(_C.int16)
    # np.array copies: the pickle must not alias the tensor's memory
    return np.array(host.numpy(), copy=True), dtype, str(t.device)


def tensor_from_state(array, dtype, device):
    dt = getattr(_C, dtype)
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    t = _C.from_numpy(np.require(array, requirements="C"))
    if dt == _C.bfloat16:
        t = t.view(_C.bfloat16)
    elif t.dtype != dt:
        t = t.to(dt)
    return t if device == "cpu" else t.to(device)


def _rebuild_tensor(array, dtype, device, requires_grad):
    t = tensor_from_state(array, dtype, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_meta_tensor(shape, dtype, requires_grad):
    t = _C.empty(shape, dtype=getattr(_C, dtype), device="meta")
    if requires_grad:
        t.requires_grad_(True)
    return t


def _tensor_reduce_ex(self, protocol):
    # Python attributes travel as the pickle's state (restored into the new tensor's __dict__)
    state = dict(self.__dict__) or None
    if self.is_meta:  # no values: the geometry only, as torch
        args = (tuple(self.shape), str(self.dtype).split(".")[-1], bool(self.requires_grad))
        return _rebuild_meta_tensor, args, state
    array, dtype, device = tensor_state(self)
    return _rebuild_tensor, (array, dtype, device, bool(self.requires_grad)), state


def install(tensor_class):
    tensor_class.__reduce_ex__ = _tensor_reduce_ex
