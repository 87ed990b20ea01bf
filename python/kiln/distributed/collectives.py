"""The tensor collectives of torch.distributed, on kiln CPU tensors, in place as torch's.

Each function checks its arguments on the calling thread (so errors are raised at the call,
also with async_op=True), turns the tensors into flat numpy arrays, and runs the algorithm
through the group: now, or on the group's worker thread returning a Work."""
import numpy as np

from . import _algorithms as algo
from . import _tensors as tz
from . import _world
from .reduce_op import ReduceOp, ufunc

__all__ = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "all_to_all",
           "all_to_all_single"]


def _finish(*write_backs):
    for wb in write_backs:
        wb()


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Every rank's `tensor` becomes the reduction (op) of all ranks' tensors."""
    pg = _world.resolve(group, "all_reduce")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    flat, write_back, op = tz.reduction_view(tensor, op)

    def run(tag):
        algo.all_reduce(pg, tag, flat, ufunc(op))
        if op == ReduceOp.AVG:
            flat[...] /= pg.size()
        write_back()
    return pg.run(run, async_op, [tensor])


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Every rank's `tensor` becomes a copy of rank src's."""
    pg = _world.resolve(group, "broadcast")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    root = _world.peer_rank(pg, src, group_src, "src", "broadcast")
    flat, write_back = tz.flat_view(tensor)

    def run(tag):
        algo.broadcast(pg, tag, flat, root)
        write_back()
    return pg.run(run, async_op, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Rank dst's `tensor` becomes the reduction of all ranks' tensors (the others' are left
    as they were)."""
    pg = _world.resolve(group, "reduce")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    root = _world.peer_rank(pg, dst, group_dst, "dst", "reduce")
    flat, write_back, op = tz.reduction_view(tensor, op)

    def run(tag):
        algo.reduce(pg, tag, flat, root, ufunc(op))
        if pg.rank() == root:
            if op == ReduceOp.AVG:
                flat[...] /= pg.size()
            write_back()
    return pg.run(run, async_op, [tensor])


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] becomes a copy of rank i's `tensor` on every rank."""
    pg = _world.resolve(group, "all_gather")
    if pg is None:
        return None
    tz.check_tensor_list(tensor_list, "tensor_list")
    tz.check_tensor(tensor)
    if len(tensor_list) != pg.size():
        raise RuntimeError("ProcessGroupGloo::allgather: invalid output tensor list at index "
                           f"0 (expected length {pg.size()}, got {len(tensor_list)})")
    outs, write_backs = tz.same_size_arrays(tensor_list, tensor, "allgather", "tensor_list")
    flat = tz.flat_input(tensor)

    def run(tag):
        algo.all_gather(pg, tag, flat, outs)
        _finish(*write_backs)
    return pg.run(run, async_op, tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world_size times input's size: concatenated or stacked along dim 0)
    receives every rank's input_tensor in rank order."""
    pg = _world.resolve(group, "all_gather_into_tensor")
    if pg is None:
        return None
    tz.check_tensor(output_tensor, "output_tensor")
    tz.check_tensor(input_tensor, "input_tensor")
    tz.check_same_dtype([output_tensor, input_tensor])
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError("output tensor size must be equal to world_size times input tensor "
                         f"size (got {output_tensor.numel()} and {input_tensor.numel()} "
                         f"with world_size {pg.size()})")
    out, write_back = tz.flat_view(output_tensor)
    outs = np.split(out, pg.size())
    flat = tz.flat_input(input_tensor)

    def run(tag):
        algo.all_gather(pg, tag, flat, outs, "all_gather_into_tensor")
        write_back()
    return pg.run(run, async_op, [output_tensor])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output becomes the reduction over ranks of their input_list[this rank]."""
    pg = _world.resolve(group, "reduce_scatter")
    if pg is None:
        return None
    tz.check_tensor(output, "output")
    tz.check_tensor_list(input_list, "input_list")
    if len(input_list) != pg.size():
        raise RuntimeError("invalid input tensor list size, must be world size")
    ins = [tz.reduction_input(t) for t in _checked_like(input_list, output, "reduce_scatter")]
    flat, write_back, op = tz.reduction_view(output, op)

    def run(tag):
        algo.reduce_scatter(pg, tag, ins, flat, ufunc(op))
        if op == ReduceOp.AVG:
            flat[...] /= pg.size()
        write_back()
    return pg.run(run, async_op, [output])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """reduce_scatter with the inputs as the world_size equal parts (along dim 0) of one
    tensor."""
    pg = _world.resolve(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    tz.check_tensor(output, "output")
    tz.check_tensor(input, "input")
    tz.check_same_dtype([output, input])
    if input.numel() != output.numel() * pg.size():
        raise ValueError("input tensor must be the same size as output size times world size"
                         f" (got {input.numel()} and {output.numel()} with world_size "
                         f"{pg.size()})")
    parts = list(input.detach().reshape(-1).chunk(pg.size())) if input.numel() else \
        [input.detach().reshape(-1)] * pg.size()
    flat, write_back, op = tz.reduction_view(output, op)
    ins = [tz.reduction_input(p) for p in parts]

    def run(tag):
        algo.reduce_scatter(pg, tag, ins, flat, ufunc(op), "reduce_scatter_tensor")
        if op == ReduceOp.AVG:
            flat[...] /= pg.size()
        write_back()
    return pg.run(run, async_op, [output])


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """On rank dst, gather_list[i] becomes a copy of rank i's tensor."""
    pg = _world.resolve(group, "gather")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    root = _world.peer_rank(pg, dst, group_dst, "dst", "gather")
    outs, write_backs = [], []
    if pg.rank() == root:
        if not gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
        tz.check_tensor_list(gather_list, "gather_list")
        if len(gather_list) != pg.size():
            raise RuntimeError(f"ProcessGroupGloo::gather: Incorrect output list size "
                               f"{len(gather_list)}. Output list size should be {pg.size()}, "
                               "same as size of the process group.")
        outs, write_backs = tz.same_size_arrays(gather_list, tensor, "gather", "gather_list")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    flat = tz.flat_input(tensor)

    def run(tag):
        algo.gather(pg, tag, flat, outs, root)
        _finish(*write_backs)
    return pg.run(run, async_op, gather_list or [])


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """`tensor` becomes a copy of rank src's scatter_list[this rank]."""
    pg = _world.resolve(group, "scatter")
    if pg is None:
        return None
    tz.check_tensor(tensor)
    root = _world.peer_rank(pg, src, group_src, "src", "scatter")
    ins = []
    if pg.rank() == root:
        if not scatter_list:
            raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
        tz.check_tensor_list(scatter_list, "scatter_list")
        if len(scatter_list) != pg.size():
            raise RuntimeError(f"ProcessGroupGloo::scatter: Incorrect input list size "
                               f"{len(scatter_list)}. Input list size should be {pg.size()}, "
                               "same as size of the process group.")
        ins = [tz.flat_input(t) for t in _checked_like(scatter_list, tensor, "scatter")]
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source "
                         "ranks.")
    flat, write_back = tz.flat_view(tensor)

    def run(tag):
        algo.scatter(pg, tag, ins, flat, root)
        write_back()
    return pg.run(run, async_op, [tensor])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[i] becomes rank i's input_tensor_list[this rank]."""
    pg = _world.resolve(group, "all_to_all")
    if pg is None:
        return None
    tz.check_tensor_list(output_tensor_list, "output_tensor_list")
    tz.check_tensor_list(input_tensor_list, "input_tensor_list")
    for name, lst in (("input", input_tensor_list), ("output", output_tensor_list)):
        if len(lst) != pg.size():
            raise RuntimeError(f"ProcessGroupGloo::alltoall: {name} tensor list size "
                               f"{len(lst)} does not match world size {pg.size()}")
    tz.check_same_dtype(list(output_tensor_list) + list(input_tensor_list))
    ins = [tz.flat_input(t) for t in input_tensor_list]
    views = [tz.flat_view(t) for t in output_tensor_list]
    outs = [v[0] for v in views]

    def run(tag):
        algo.all_to_all(pg, tag, ins, outs)
        _finish(*(v[1] for v in views))
    return pg.run(run, async_op, output_tensor_list)


def _splits(sizes, tensor, world_size, arg):
    """Row counts per rank: even parts of dim 0 when sizes is None or empty."""
    rows = tensor.shape[0] if tensor.dim() else 1
    if not sizes:
        if rows % world_size:
            raise ValueError(f"all_to_all_single: dim 0 of the {arg} tensor ({rows}) is not "
                             f"divisible by the world size {world_size}")
        return [rows // world_size] * world_size
    sizes = list(sizes)
    if len(sizes) != world_size or sum(sizes) != rows:
        raise ValueError(f"all_to_all_single: {arg}_split_sizes {sizes} must have "
                         f"{world_size} entries summing to dim 0 of the {arg} ({rows})")
    return sizes


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """all_to_all on the dim-0 slices of one input and one output tensor (even slices, or
    the given split sizes)."""
    pg = _world.resolve(group, "all_to_all_single")
    if pg is None:
        return None
    tz.check_tensor(output, "output")
    tz.check_tensor(input, "input")
    tz.check_same_dtype([output, input])
    in_rows = _splits(input_split_sizes, input, pg.size(), "input")
    out_rows = _splits(output_split_sizes, output, pg.size(), "output")
    src = tz.flat_input(input)
    out, write_back = tz.flat_view(output)
    in_row = input.numel() // max(input.shape[0], 1) if input.dim() else 1
    out_row = output.numel() // max(output.shape[0], 1) if output.dim() else 1
    ins = np.split(src, np.cumsum([r * in_row for r in in_rows])[:-1])
    outs = np.split(out, np.cumsum([r * out_row for r in out_rows])[:-1])

    def run(tag):
        algo.all_to_all(pg, tag, ins, outs, "all_to_all_single")
        write_back()
    return pg.run(run, async_op, [output])


def _checked_like(tensors, like, what):
    for i, t in enumerate(tensors):
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise RuntimeError(f"ProcessGroupGloo::{what}: invalid tensor at index {i}: "
                               f"expected {like.dtype} of shape {tuple(like.shape)}, got "
                               f"{t.dtype} of shape {tuple(t.shape)}")
    return tensors
