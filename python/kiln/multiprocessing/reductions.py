"""How kiln tensors cross process boundaries through multiprocessing (queues, pipes, Process
arguments): a CPU tensor's storage moves into shared memory (once; Tensor.share_memory_) and
the receiving process maps the same pages from the memory file's descriptor, which Python's
multiprocessing passes on (DupFd). No values are copied, and writes on either side are seen
by the other, as with torch.multiprocessing. Tensors on other devices, and empty ones, travel
as copies (kiln/_pickle.py). Plain pickle.dumps still copies values: only multiprocessing's
ForkingPickler uses these reductions."""
import os
from multiprocessing.reduction import DupFd, ForkingPickler

from .. import _C

_NON_LEAF_MESSAGE = (
    "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
    "not support crossing process boundaries.  If you just want to transfer the data, call "
    "detach() on the tensor before serializing (e.g., putting it on the queue).")


def rebuild_shared_tensor(dup_fd, nbytes, offset, shape, strides, dtype, requires_grad):
    fd = dup_fd.detach()
    try:
        t = _C._tensor_from_shared_memory(fd, nbytes, offset, shape, strides,
                                          getattr(_C, dtype))
    finally:
        os.close(fd)  # the mapping holds its own duplicate
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_tensor(t):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(_NON_LEAF_MESSAGE)
    if t.device.type != "cpu" or t.numel() == 0:
        return t.__reduce_ex__(2)
    fd, nbytes, offset, strides = _C._shared_memory_handle(t)
    dtype = str(t.dtype).split(".")[-1]
    return (rebuild_shared_tensor,
            (DupFd(fd), nbytes, offset, tuple(t.shape), tuple(strides), dtype,
             bool(t.requires_grad)))


def rebuild_shared_parameter(dup_fd, nbytes, offset, shape, strides, dtype, requires_grad):
    from ..nn.parameter import Parameter
    data = rebuild_shared_tensor(dup_fd, nbytes, offset, shape, strides, dtype, False)
    return Parameter(data, requires_grad)


def reduce_parameter(p):
    rebuild, args = reduce_tensor(p.detach())
    if rebuild is not rebuild_shared_tensor:  # (a copy: another device, or empty)
        return p.__reduce_ex__(2)
    return (rebuild_shared_parameter, args[:-1] + (bool(p.requires_grad),))


def init_reductions():
    # The pickler looks reducers up by exact type: parameters have their own (a Parameter
    # comes back as a Parameter over the same shared memory).
    from ..nn.parameter import Parameter
    ForkingPickler.register(_C.Tensor, reduce_tensor)
    ForkingPickler.register(Parameter, reduce_parameter)
