"""Error cases against PyTorch: the same mistake must raise in both, with the same Python
exception type (kiln's C++ errors map to IndexError, ValueError, TypeError,
NotImplementedError or RuntimeError as PyTorch's do). Where kiln deliberately raises another
type, the case is listed in TYPE_DIFFERENCES with the reason."""
import numpy as np
import pytest
import torch

import kiln
import oracle


def _backward_twice(L):
    x = L.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _set_requires_grad_nonleaf(L):
    x = L.ones(3, requires_grad=True)
    (x * 2).requires_grad = False


ERRORS = {
    "add_shape_mismatch": lambda L: L.ones(2, 3) + L.ones(4),
    "matmul_shape_mismatch": lambda L: L.ones(2, 3) @ L.ones(4, 5),
    "mm_not_2d": lambda L: L.mm(L.ones(3), L.ones(3, 2)),
    "index_out_of_range": lambda L: L.ones(3)[5],
    "negative_index_out_of_range": lambda L: L.ones(3)[-4],
    "tensor_index_out_of_range": lambda L: L.ones(3)[L.tensor([5])],
    "too_many_indices": lambda L: L.ones(3)[0, 0],
    "index_0d": lambda L: L.tensor(1.0)[0],
    "float_index": lambda L: L.ones(3)[1.5],
    "zero_step": lambda L: L.ones(3)[::0],
    "negative_step": lambda L: L.ones(3)[::-1],
    "float_tensor_index": lambda L: L.ones(3)[L.tensor([0.0])],
    "sum_dim_out_of_range": lambda L: L.ones(2, 3).sum(dim=5),
    "transpose_dim_out_of_range": lambda L: L.ones(2).transpose(0, 3),
    "squeeze_dim_out_of_range": lambda L: L.ones(2).squeeze(3),
    "select_out_of_range": lambda L: L.ones(2, 3).select(1, 3),
    "narrow_out_of_range": lambda L: L.ones(3).narrow(0, 2, 2),
    "view_bad_numel": lambda L: L.ones(2, 3).view(4),
    "view_non_contiguous": lambda L: L.ones(2, 3).t().view(6),
    "reshape_bad_numel": lambda L: L.ones(2, 3).reshape(5, -1),
    "reshape_two_minus_one": lambda L: L.ones(2, 3).reshape(-1, -1),
    "expand_bad": lambda L: L.ones(2, 3).expand(4, 3),
    "permute_wrong_count": lambda L: L.ones(2, 3).permute(0),
    "cat_ndim_mismatch": lambda L: L.cat([L.ones(2, 3), L.ones(3)]),
    "cat_shape_mismatch": lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)]),
    "stack_empty": lambda L: L.stack([]),
    "stack_shape_mismatch": lambda L: L.stack([L.ones(2), L.ones(3)]),
    "item_many": lambda L: L.ones(3).item(),
    "bool_ambiguous": lambda L: bool(L.ones(3)),
    "len_0d": lambda L: len(L.tensor(1.0)),
    "iter_0d": lambda L: iter(L.tensor(1.0)),
    "float_many": lambda L: float(L.ones(2)),
    "requires_grad_int": lambda L: L.ones(3, dtype=L.int64).requires_grad_(),
    "backward_non_scalar": lambda L: L.ones(3, requires_grad=True).mul(2).backward(),
    "backward_no_grad": lambda L: L.ones(3).sum().backward(),
    "backward_twice": _backward_twice,
    "requires_grad_false_nonleaf": _set_requires_grad_nonleaf,
    "grad_wrong_shape": lambda L: setattr(L.ones(3, requires_grad=True), "grad", L.ones(2)),
    "hook_no_grad": lambda L: L.ones(3).register_hook(lambda g: g),
    "tensor_ragged": lambda L: L.tensor([[1, 2], [3]]),
    "tensor_ragged_deep": lambda L: L.tensor([[1, 2], 3]),
    "tensor_string": lambda L: L.tensor("a"),
    "tensor_object": lambda L: L.tensor([object()]),
    "default_dtype_int": lambda L: L.set_default_dtype(L.int64),
    "dtype_as_string": lambda L: L.zeros(2, dtype="float32"),
    "unknown_kwarg": lambda L: L.zeros(2, foo=1),
    "zeros_bad_size": lambda L: L.zeros("a"),
    "zeros_negative": lambda L: L.zeros(-1),
    "invert_float": lambda L: ~L.ones(2),
    "neg_bool": lambda L: -L.ones(2, dtype=L.bool),
    "sub_bool": lambda L: L.ones(2, dtype=L.bool) - L.ones(2, dtype=L.bool),
    "randint_empty_range": lambda L: L.randint(3, 3, (2,)),
    "bad_device": lambda L: L.device("nonexistent"),
    "bad_device_index_syntax": lambda L: L.device("cpu:x"),
    "numpy_requires_grad": lambda L: L.ones(2, requires_grad=True).numpy(),
    "from_numpy_list": lambda L: L.from_numpy([1, 2]),
    "from_numpy_negative_strides": lambda L: L.from_numpy(np.arange(4)[::-1]),
    "from_numpy_unsupported_dtype": lambda L: L.from_numpy(np.array(["a"])),
    "mean_int": lambda L: L.ones(3, dtype=L.int64).mean(),
    "masked_fill_non_bool_mask": lambda L: L.ones(3).masked_fill(L.ones(3), 0.0),
    "gather_out_of_range": lambda L: L.gather(L.ones(3), 0, L.tensor([5])),
    "index_select_out_of_range": lambda L: L.index_select(L.ones(3), 0, L.tensor([3])),
    "one_hot_out_of_range": lambda L: (L.nn.functional.one_hot if L is torch else L.one_hot)(
        L.tensor([5]), 3),
    "int_pow_negative": lambda L: L.tensor([2]) ** -1,
    "int_div_by_zero": lambda L: L.tensor([2]) // 0,
    "int_remainder_by_zero": lambda L: L.tensor([2]) % 0,
    "div_bad_rounding_mode": lambda L: L.div(L.ones(2), 2, rounding_mode="round"),
    "clamp_no_bounds": lambda L: L.clamp(L.ones(2)),
    "topk_k_too_big": lambda L: L.topk(L.ones(3), 4),
    "softmax_int": lambda L: L.softmax(L.ones(3, dtype=L.int64), 0),
    "linear_shape_mismatch": lambda L: (L.nn.functional.linear if L is torch else L.linear)(
        L.ones(2, 3), L.ones(4, 5)),
    "bitwise_and_float": lambda L: L.ones(2) & L.ones(2),
    "setitem_shape_mismatch": lambda L: L.ones(2, 3).__setitem__(0, L.ones(4)),
    "where_non_bool": lambda L: L.where(L.ones(2), L.ones(2), L.ones(2)),
    "unflatten_bad": lambda L: L.ones(6).unflatten(0, (4, 2)),
    "arange_zero_step": lambda L: L.arange(0, 3, 0),
}

# Where kiln raises another exception type than PyTorch for the same mistake:
# case -> (kiln type, reason). Empty: every case raises torch's type.
TYPE_DIFFERENCES = {}

# Mistakes PyTorch refuses but kiln's library accepts (kiln must still accept them, so a
# fix is noticed): case -> reason.
NOT_RAISED_BY_KILN = {
    "int_pow_negative": "kiln computes integer ** negative integer (torch refuses it)",
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_error(name):
    fn = ERRORS[name]
    with pytest.raises(Exception) as te:
        fn(torch)
    if name in NOT_RAISED_BY_KILN:
        fn(kiln)  # still accepted: the known difference holds
        oracle.STATS["known"][f"errors: {NOT_RAISED_BY_KILN[name]}"] += 1
        return
    with pytest.raises(Exception) as ke:
        fn(kiln)
    expected = type(te.value)
    if name in TYPE_DIFFERENCES:
        expected = TYPE_DIFFERENCES[name][0]
    assert type(ke.value) is expected, (
        f"{name}: kiln raised {type(ke.value).__name__}: {ke.value}; torch raised "
        f"{type(te.value).__name__}: {te.value}")
    assert str(ke.value), f"{name}: kiln's error has no message"
    oracle.record(None)


def test_out_of_memory_is_a_runtime_error():
    assert issubclass(kiln.OutOfMemoryError, RuntimeError)
    dev = kiln.device("testing:1")
    kiln.set_memory_limit(dev, 1 << 20)
    try:
        with pytest.raises(kiln.OutOfMemoryError) as e:
            kiln.empty(1 << 22, dtype=kiln.float32, device=dev)
        assert "bytes" in str(e.value) or "memory" in str(e.value).lower()
    finally:
        kiln.set_memory_limit(dev, -1)
        kiln.empty_cache(dev)
    oracle.record(None)
