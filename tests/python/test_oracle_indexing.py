"""x[index] and x[index] = value against PyTorch: basic (ints, slices with steps, None,
Ellipsis, negative indices), advanced (integer and bool tensors, lists, numpy arrays,
adjacent and separated index dims), and mixed forms; reads, writes and gradients."""
import numpy as np
import pytest

from oracle import ALL, Op, params, run_op

X = [((4, 5, 6),), (("t", (4, 6, 5)),)]


def idx(L, v, dtype=None):
    return L.tensor(v) if dtype is None else L.tensor(v, dtype=getattr(L, dtype))


# name -> index built for a library L (kiln or torch); the same key for both.
INDICES = {
    "int": lambda L: 1,
    "neg_int": lambda L: -1,
    "slice": lambda L: slice(1, 3),
    "slice_step": lambda L: slice(None, None, 2),
    "slice_neg": lambda L: slice(-3, -1),
    "slice_past_end": lambda L: slice(2, 100),
    "tuple_basic": lambda L: (1, slice(None, None, 2), -2),
    "none": lambda L: (None, 1),
    "ellipsis": lambda L: (Ellipsis, 2),
    "ellipsis_none": lambda L: (0, Ellipsis, None),
    "empty_tuple": lambda L: (),
    "list": lambda L: [0, 2, 3],
    "list_neg": lambda L: [-1, 0],
    "tensor": lambda L: idx(L, [3, 0, 3]),
    "tensor_int32": lambda L: idx(L, [1, 2], "int32"),
    "tensor_2d": lambda L: idx(L, [[0, 1], [2, 3]]),
    "numpy": lambda L: np.array([1, 0]),
    "two_adjacent": lambda L: (idx(L, [0, 1]), idx(L, [2, 3])),
    "separated": lambda L: (idx(L, [0, 1]), slice(None), idx(L, [2, 3])),
    "broadcast_pair": lambda L: (idx(L, [[0], [1]]), idx(L, [1, 2, 3])),
    "slice_then_tensor": lambda L: (slice(1, None), idx(L, [0, 2])),
    "int_and_tensor": lambda L: (1, idx(L, [0, 2])),
    "mask_1d": lambda L: idx(L, [True, False, True, True]),
    "mask_2d": lambda L: idx(L, [[True, False, True, False, False]] * 4),
    "mask_dim1": lambda L: (slice(None), idx(L, [False, True, True, False, True])),
    "bool_true": lambda L: True,
    "bool_false": lambda L: (False, 1),
    "ellipsis_tensor": lambda L: (Ellipsis, idx(L, [0, 5])),
    "empty_list": lambda L: idx(L, [], "int64"),
    "out_of_range_int": lambda L: 7,
    "out_of_range_tensor": lambda L: idx(L, [0, 9]),
    "too_many": lambda L: (0, 0, 0, 0),
    "float_index": lambda L: 1.5,
    "zero_step": lambda L: slice(None, None, 0),
    "neg_step": lambda L: slice(None, None, -1),
}


def getitem(name):
    return Op(f"getitem[{name}]", lambda L, x, _k=name: x[INDICES[_k](L)], X, dtypes=ALL)


def setitem(name, value):
    def fn(L, x, _k=name):
        y = x.clone()
        v = value(L, y[INDICES[_k](L)]) if callable(value) else value
        y[INDICES[_k](L)] = v
        return y
    return Op(f"setitem[{name}]", fn, X, dtypes=["float32", "float64", "int64", "bool"])


GETITEM = [getitem(k) for k in INDICES]
SETITEM = ([setitem(k, 1) for k in INDICES] +
           [setitem(k, lambda L, sel: sel * 0 + 3) for k in
            ("int", "slice_step", "tuple_basic", "tensor", "separated", "mask_2d", "list")] +
           [setitem("broadcast_row", lambda L, sel: L.ones(sel.shape[-1], dtype=sel.dtype))])
INDICES["broadcast_row"] = lambda L: (slice(None), 1)


@pytest.mark.parametrize("op,dtype", params(GETITEM))
def test_getitem(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(SETITEM))
def test_setitem(op, dtype):
    run_op(op, dtype)


@pytest.mark.parametrize("op,dtype", params(GETITEM[:20], dtypes_filter=("float32",)))
def test_getitem_on_testing_device(op, dtype):
    run_op(op, dtype, device="testing:0")
