"""kiln.testing (assert_close, assert_allclose, make_tensor) against torch.testing 2.13: the
same inputs built in both libraries must pass or fail alike, with the same exception type
and (after naming kiln instead of torch) the same message."""
import collections
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kiln  # noqa: E402
import kiln.testing  # noqa: E402


def _normalize(text):
    """torch's wording of a message with kiln's names."""
    text = text.replace("<class 'torch.Tensor'>", "<class 'kiln._C.Tensor'>")
    text = text.replace("torch.testing", "kiln.testing")
    return re.sub(r"\btorch\.", "kiln.", text)


def _outcome(fn, *args, **kwargs):
    """None when fn passes, else (exception type, normalized message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (the type is part of what is compared)
        return type(error), _normalize(str(error))
    return None


def _both(case, **kwargs):
    """(kiln outcome, torch outcome) of assert_close on the inputs case(lib) builds."""
    return (_outcome(kiln.testing.assert_close, *case(kiln), **kwargs),
            _outcome(torch.testing.assert_close, *case(torch), **kwargs))


def _changed(lib, base, dtype, edits):
    a = lib.tensor(base, dtype=getattr(lib, dtype))
    b = a.clone()
    for index, value in edits:
        b[index] = value
    return a, b


NAN, INF = float("nan"), float("inf")

# name -> case(lib) -> (actual, expected)
CASES = {
    "float32_equal": lambda L: (L.arange(6.0), L.arange(6.0)),
    "float32_within_tol": lambda L: (L.tensor([1.0, 2.0]), L.tensor([1.0 + 1e-6, 2.0])),
    "float32_mismatch": lambda L: _changed(L, [[0.0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], "float32",
                                           [((0, 1), 1.5), ((1, 3), NAN), ((1, 4), 9.9)]),
    "float64_mismatch": lambda L: _changed(L, [1.0, 2.0, 3.0, 0.0], "float64",
                                           [(1, 2.0 + 1e-6), (3, 1e-3)]),
    "float16_mismatch": lambda L: _changed(L, [1.0, 2.0, 3.0], "float16", [(2, 3.01)]),
    "bfloat16_mismatch": lambda L: _changed(L, [1.0, 2.0, 30.0], "bfloat16", [(2, 31.0)]),
    "bfloat16_within_tol": lambda L: _changed(L, [100.0], "bfloat16", [(0, 101.0)]),
    "int32_mismatch": lambda L: _changed(L, [[1, 2], [3, 4]], "int32", [((1, 0), 7)]),
    "int8_no_wrap": lambda L: (L.tensor([-128, 0], dtype=L.int8),
                               L.tensor([127, 0], dtype=L.int8)),
    "uint8_mismatch": lambda L: (L.tensor([0, 200], dtype=L.uint8),
                                 L.tensor([3, 200], dtype=L.uint8)),
    "bool_mismatch": lambda L: (L.tensor([True, False, True]), L.tensor([True, True, False])),
    "complex64_mismatch": lambda L: (L.tensor([1 + 2j, 3 - 1j]), L.tensor([1 + 2j, 3 - 1.5j])),
    "zero_dim_mismatch": lambda L: (L.tensor(1.0), L.tensor(1.5)),
    "zero_dim_expected_zero": lambda L: (L.tensor(1.0), L.tensor(0.0)),
    "inf_same_sign": lambda L: (L.tensor([INF, -INF]), L.tensor([INF, -INF])),
    "inf_opposite_sign": lambda L: (L.tensor([INF, 1.0]), L.tensor([-INF, 1.0])),
    "nan_vs_nan": lambda L: (L.tensor([NAN, 1.0]), L.tensor([NAN, 1.0])),
    "empty": lambda L: (L.zeros(0, 3), L.zeros(0, 3)),
    "shape": lambda L: (L.zeros(2, 3), L.zeros(3, 2)),
    "dtype": lambda L: (L.zeros(2), L.zeros(2, dtype=L.float64)),
    "int_vs_float": lambda L: (L.tensor([1, 2]), L.tensor([1.0, 2.5])),
    "half_vs_float": lambda L: (L.tensor([1.0], dtype=L.float16), L.tensor([1.0005])),
    "stride": lambda L: (L.zeros(3, 2).t(), L.zeros(2, 3)),
    "requires_grad": lambda L: (L.tensor([1.0, 2.0], requires_grad=True), L.tensor([1.0, 2.5])),
    # Python and numpy scalars
    "int_vs_int": lambda L: (3, 4),
    "int_vs_float_number": lambda L: (1, 1.0),
    "float_numbers": lambda L: (1.0, 1.1),
    "float_numbers_close": lambda L: (1.0, 1.0 + 1e-9),
    "float_expected_zero": lambda L: (1e-3, 0.0),
    "complex_numbers": lambda L: (1 + 1j, 1 + 2j),
    "nan_numbers": lambda L: (NAN, NAN),
    "inf_numbers": lambda L: (INF, INF),
    "bools": lambda L: (True, False),
    "numpy_bools": lambda L: (np.bool_(True), True),
    "numpy_numbers": lambda L: (np.float32(1.0), np.float32(1.5)),
    "none_vs_none": lambda L: (None, None),
    "none_vs_number": lambda L: (None, 1),
    "strings": lambda L: ("a", "a"),
    # numpy arrays and mixed kinds
    "numpy_arrays": lambda L: (np.array([1.0, 2.0]), np.array([1.0, 2.5])),
    "numpy_vs_tensor": lambda L: (np.array([1.0]), L.tensor([1.0], dtype=L.float64)),
    "tensor_vs_number": lambda L: (L.tensor(1.0), 1.0),
    "tensor_vs_list": lambda L: (L.tensor([1.0]), [1.0]),
    # containers
    "lists": lambda L: ([L.tensor([1.0]), 2, (3.0, L.tensor([4]))],
                        [L.tensor([1.0]), 2, (3.0, L.tensor([5]))]),
    "list_length": lambda L: ([1, 2], [1, 2, 3]),
    "dicts": lambda L: ({"a": L.tensor([1.0]), "b": [1, 2.0]},
                        {"a": L.tensor([1.0]), "b": [1, 2.5]}),
    "dict_keys": lambda L: ({"a": 1, "b": 2}, {"a": 1, "c": 2}),
    "ordered_dict": lambda L: (collections.OrderedDict(x=L.tensor([1.0])),
                               {"x": L.tensor([2.0])}),
    "list_vs_tuple": lambda L: ([1.0, 2.0], (1.0, 2.0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_assert_close_matches_torch(name):
    got, want = _both(CASES[name])
    assert got == want


OPTION_CASES = [
    ("float32_mismatch", dict(rtol=0.0, atol=0.6, equal_nan=True)),
    ("float32_mismatch", dict(rtol=0.2, atol=0.0)),
    ("float32_mismatch", dict(rtol=0.0, atol=0.0)),
    ("float32_mismatch", dict(rtol=1e-3)),
    ("float32_mismatch", dict(atol=1e-3)),
    ("nan_vs_nan", dict(equal_nan=True)),
    ("nan_numbers", dict(equal_nan=True)),
    ("float_numbers", dict(rtol=0.2, atol=0.0)),
    ("int_vs_float_number", dict(check_dtype=False)),
    ("int_vs_float", dict(check_dtype=False)),
    ("half_vs_float", dict(check_dtype=False)),
    ("dtype", dict(check_dtype=False)),
    ("stride", dict(check_stride=True)),
    ("int32_mismatch", dict(rtol=0.0, atol=5)),
    ("lists", dict(msg="custom message")),
    ("lists", dict(msg=lambda m: f"Header\n\n{m}\n\nFooter")),
    ("list_length", dict(msg="ignored for structural errors")),
    ("float32_mismatch", dict(check_layout=False, check_device=False)),
]


@pytest.mark.parametrize("name,options", OPTION_CASES,
                         ids=[f"{n}-{'-'.join(o)}" for n, o in OPTION_CASES])
def test_assert_close_options_match_torch(name, options):
    got, want = _both(CASES[name], **options)
    assert got == want


def test_expected_messages_spelled_out():
    # A literal check of the format, independent of the torch oracle.
    x = kiln.arange(10.0)
    y = x.clone()
    y[2], y[5], y[9] = 2.5, -1.0, 9.5
    with pytest.raises(AssertionError) as info:
        kiln.testing.assert_close(y, x)
    assert str(info.value) == (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 3 / 10 (30.0%)\n"
        "Greatest absolute difference: 6.0 at index (5,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 1.2000000476837158 at index (5,) (up to 1.3e-06 allowed)")


def test_item_position_in_nested_failure():
    with pytest.raises(AssertionError, match=r"The failure occurred for item \[1\]\['w'\]"):
        kiln.testing.assert_close([1, {"w": kiln.ones(2)}], [1, {"w": kiln.zeros(2)}])


def test_device_mismatch_and_check_device():
    a = kiln.ones(3)
    b = kiln.ones(3, device="testing:0")
    with pytest.raises(AssertionError,
                       match=r"The values for attribute 'device' do not match: cpu != testing:0"):
        kiln.testing.assert_close(a, b)
    kiln.testing.assert_close(a, b, check_device=False)
    with pytest.raises(AssertionError, match="Tensor-likes are not close!"):
        kiln.testing.assert_close(a, b * 2, check_device=False)


def test_allow_subclasses():
    p = kiln.nn.Parameter(kiln.ones(2))
    kiln.testing.assert_close(p, kiln.ones(2))
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs"):
        kiln.testing.assert_close(p, kiln.ones(2), allow_subclasses=False)
    with pytest.raises(TypeError):
        torch.testing.assert_close(torch.nn.Parameter(torch.ones(2)), torch.ones(2),
                                   allow_subclasses=False)


def test_kiln_and_torch_tensors_are_not_related():
    with pytest.raises(TypeError, match="No comparison pair"):
        kiln.testing.assert_close(kiln.ones(1), torch.ones(1))


# --- assert_allclose ------------------------------------------------------------------------

ALLCLOSE_CASES = {
    "loose_float32": lambda L: (L.tensor([1.0, 2.0]), L.tensor([1.00005, 2.0])),
    "float32_mismatch": lambda L: (L.tensor([1.0, 2.0]), L.tensor([1.001, 2.0])),
    "nan_equal_by_default": lambda L: (L.tensor([NAN]), L.tensor([NAN])),
    "list_expected": lambda L: (L.tensor([1.0, 2.0], dtype=L.float64), [1.0, 2.0]),
    "list_actual": lambda L: ([1, 2], L.tensor([1, 3])),
    "dtype_ignored": lambda L: (L.tensor([1.0]), L.tensor([1.0], dtype=L.float64)),
    "float64_loose": lambda L: (L.tensor([1.0], dtype=L.float64),
                                L.tensor([1.000001], dtype=L.float64)),
    "int_exact": lambda L: (L.tensor([1, 2]), L.tensor([1, 3])),
}


@pytest.mark.parametrize("name", sorted(ALLCLOSE_CASES))
def test_assert_allclose_matches_torch(name):
    case = ALLCLOSE_CASES[name]
    assert (_outcome(kiln.testing.assert_allclose, *case(kiln))
            == _outcome(torch.testing.assert_allclose, *case(torch)))


def test_assert_allclose_options_and_warning():
    with pytest.warns(FutureWarning, match="assert_allclose"):
        kiln.testing.assert_allclose(kiln.tensor([1.0]), kiln.tensor([1.0]))
    for kwargs in (dict(rtol=0.0, atol=0.0), dict(equal_nan=False), dict(msg="boom")):
        case = (lambda L: (L.tensor([1.0, NAN]), L.tensor([1.0 + 1e-7, NAN])))
        assert (_outcome(kiln.testing.assert_allclose, *case(kiln), **kwargs)
                == _outcome(torch.testing.assert_allclose, *case(torch), **kwargs))


# --- make_tensor ----------------------------------------------------------------------------

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]


def _range(t):
    """(min, max) of the values (of both parts, for complex) as Python floats."""
    t = t.detach()
    if t.dtype.is_complex:
        t = kiln.view_as_real(t)
    t = t.to(kiln.float64)
    return t.min().item(), t.max().item()


@pytest.mark.parametrize("dtype", DTYPES)
def test_make_tensor_default_range_matches_torch(dtype):
    k = kiln.testing.make_tensor(2000, dtype=getattr(kiln, dtype), device="cpu")
    t = torch.testing.make_tensor(2000, dtype=getattr(torch, dtype), device="cpu")
    assert k.dtype == getattr(kiln, dtype) and tuple(k.shape) == (2000,)
    lo, hi = _range(k)
    tlo, thi = _range(kiln.from_numpy(t.numpy().copy()) if dtype != "bfloat16"
                      else kiln.from_numpy(t.float().numpy().copy()))
    # Both draw from the same interval: with 2000 samples the extremes lie close to it.
    assert min(lo, tlo) >= -9 and max(hi, thi) <= 9 + (dtype in DTYPES[:6])
    assert abs(lo - tlo) <= 1.0 and abs(hi - thi) <= 1.0


@pytest.mark.parametrize("dtype,low,high", [
    ("int8", -1000, 1000), ("uint8", -5, 3), ("float16", -1e6, 1e6), ("float32", -INF, INF),
    ("int32", 2.5, 4.5), ("bool", None, 1), ("float64", 0.25, 0.5), ("complex64", 1, 2)])
def test_make_tensor_low_high_clamped(dtype, low, high):
    k = kiln.testing.make_tensor((50, 40), dtype=getattr(kiln, dtype), device="cpu",
                                 low=low, high=high)
    t = torch.testing.make_tensor((50, 40), dtype=getattr(torch, dtype), device="cpu",
                                  low=low, high=high)
    tt = t.float() if dtype in ("float16", "bool", "int8", "uint8", "int32") else t
    tlo, thi = _range(kiln.from_numpy(tt.numpy().copy()))
    lo, hi = _range(k)
    # Values stay inside the clamped interval torch uses (checked on torch's own draw too).
    span = max(abs(thi - tlo), 1.0)
    assert lo >= tlo - 0.05 * span and hi <= thi + 0.05 * span
    assert tlo >= lo - 0.05 * span and thi <= hi + 0.05 * span


def test_make_tensor_shapes():
    for shape in [(2, 3), ((2, 3),), ([2, 3],), (kiln.Size([2, 3]),), ((),), ()]:
        k = kiln.testing.make_tensor(*shape, dtype=kiln.float32, device="cpu")
        t = torch.testing.make_tensor(*[tuple(s) if isinstance(s, kiln.Size) else s
                                        for s in shape], dtype=torch.float32, device="cpu")
        assert tuple(k.shape) == tuple(t.shape)


def test_make_tensor_layouts():
    k = kiln.testing.make_tensor(3, 4, dtype=kiln.float32, device="cpu", noncontiguous=True)
    t = torch.testing.make_tensor(3, 4, dtype=torch.float32, device="cpu", noncontiguous=True)
    assert not k.is_contiguous() and k.stride() == t.stride() and tuple(k.shape) == (3, 4)
    one = kiln.testing.make_tensor(1, dtype=kiln.float32, device="cpu", noncontiguous=True)
    assert one.is_contiguous()  # fewer than two elements: noncontiguous is ignored, as torch
    k = kiln.testing.make_tensor(2, 3, 4, 5, dtype=kiln.float32, device="cpu",
                                 memory_format=kiln.channels_last)
    t = torch.testing.make_tensor(2, 3, 4, 5, dtype=torch.float32, device="cpu",
                                  memory_format=torch.channels_last)
    assert k.stride() == t.stride()
    d = kiln.testing.make_tensor(4, dtype=kiln.float32, device="testing:0")
    assert d.device == kiln.device("testing:0")


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "float32", "bfloat16", "complex64"])
def test_make_tensor_exclude_zero(dtype):
    # A range that only holds 0 for integers / bools, so every element gets replaced.
    kw = dict(low=0, high=1) if dtype in ("bool", "int8", "uint8") else {}
    k = kiln.testing.make_tensor(500, dtype=getattr(kiln, dtype), device="cpu",
                                 exclude_zero=True, **kw)
    assert not bool((k == 0).any())
    if kw:
        t = torch.testing.make_tensor(500, dtype=getattr(torch, dtype), device="cpu",
                                      exclude_zero=True, **kw)
        assert k.to(kiln.int64).tolist() == t.to(torch.int64).tolist()


def test_make_tensor_requires_grad():
    k = kiln.testing.make_tensor(3, dtype=kiln.float64, device="cpu", requires_grad=True)
    assert k.requires_grad and k.is_leaf
    k = kiln.testing.make_tensor(3, 4, dtype=kiln.float32, device="cpu", requires_grad=True,
                                 noncontiguous=True)
    assert k.requires_grad and k.is_leaf
    (k * 2).sum().backward()
    assert k.grad is not None


MAKE_TENSOR_ERRORS = [
    dict(dtype="int32", requires_grad=True),
    dict(dtype="bool", requires_grad=True),
    dict(dtype="float32", low=2, high=1),
    dict(dtype="int64", low=5, high=5),
    dict(dtype="float32", low=NAN),
    dict(dtype="float64", high=NAN),
    dict(dtype="uint8", low=300, high=400),
    dict(dtype="int8", low=-500, high=-200),
    dict(dtype="bool", low=2, high=3),
]


@pytest.mark.parametrize("kw", MAKE_TENSOR_ERRORS, ids=[str(i) for i in range(9)])
def test_make_tensor_errors_match_torch(kw):
    kw = dict(kw)
    name = kw.pop("dtype")
    got = _outcome(kiln.testing.make_tensor, 3, dtype=getattr(kiln, name), device="cpu", **kw)
    want = _outcome(torch.testing.make_tensor, 3, dtype=getattr(torch, name), device="cpu",
                    **kw)
    assert got is not None and got == want


def test_make_tensor_other_errors():
    with pytest.raises(ValueError, match="mutually exclusive"):
        kiln.testing.make_tensor(2, 2, dtype=kiln.float32, device="cpu", noncontiguous=True,
                                 memory_format=kiln.contiguous_format)
    with pytest.raises(TypeError, match="not supported by kiln.testing.make_tensor"):
        kiln.testing.make_tensor(2, dtype=torch.float32, device="cpu")
    with pytest.warns(FutureWarning, match="low==high"):
        k = kiln.testing.make_tensor(4, dtype=kiln.float32, device="cpu", low=2.0, high=2.0)
    assert k.tolist() == [2.0] * 4


def test_exports():
    import torch.testing
    for name in ("assert_close", "assert_allclose", "make_tensor"):
        assert hasattr(torch.testing, name) and callable(getattr(kiln.testing, name))
