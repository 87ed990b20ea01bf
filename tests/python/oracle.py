"""The oracle: runs one op on kiln and on PyTorch with the same random inputs and compares
results (dtype, shape, values with per-dtype tolerances), gradients, and errors.

An op is an `Op` entry in a table: `fn(L, *inputs, **kwargs)` is called once with L = kiln
and once with L = torch, so one lambda describes both. Inputs are given as specs:
  (3, 4)           a contiguous tensor of that shape (() is 0-d, (0, 3) is empty)
  ("t", (3, 4))    a non-contiguous one: a (4, 3) tensor transposed
  ("s", (3, 4))    a non-contiguous one: every other element of a (3, 8) tensor
  "scalar"         a Python number of the dtype's kind
The module keeps counts for the summary line "oracle: N ops, M cases".
"""
import collections
import dataclasses
import zlib

import numpy as np
import torch  # a missing torch is an error, never a skip

import kiln

ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
       "float64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
NUMERIC = INTS + FLOATS
GRAD_DTYPES = ("float32", "float64")

# (rtol, atol) per result dtype; integer and bool results must match exactly.
TOLERANCES = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
}

STATS = {"ops": set(), "cases": 0,
         "known": collections.Counter(), "not_implemented": collections.Counter()}


def record(op_name, n=1):
    """Counts n compared cases; op_name None: cases that belong to no op table entry."""
    if op_name is not None:
        STATS["ops"].add(op_name)
    STATS["cases"] += n


@dataclasses.dataclass
class Op:
    name: str
    fn: object                      # fn(L, *inputs, **kwargs)
    inputs: list                    # list of tuples of input specs (one tuple per case)
    dtypes: list = dataclasses.field(default_factory=lambda: list(ALL))
    kwargs: list = dataclasses.field(default_factory=lambda: [{}])
    domain: object = "real"         # str, or a tuple with one domain per input
    grad: bool = True               # compare gradients for float32/float64
    grad_of: object = None          # picks the tensor to backprop from the result
    tol: float = 1.0                # tolerance multiplier (reductions, matmul)
    check_strides: bool = False     # views: strides and storage offset must match torch's
    input_dtypes: object = None     # per-input dtype override: tuple of names or None

    def __repr__(self):
        return self.name


def lib_dtype(L, name):
    return getattr(L, name)


def nnf(L):
    """torch.nn.functional for torch; kiln's functional ops live at the top level for now."""
    return torch.nn.functional if L is torch else kiln


def _seed(*parts):
    return zlib.crc32("|".join(map(str, parts)).encode())


def gen_array(rng, shape, dtype, domain):
    """Random values of `dtype` in `domain`, as a numpy array (float32 for bfloat16)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INTS:
        lo, hi = (0, 19) if dtype == "uint8" else (-9, 10)
        if domain in ("pos", "small_pos"):
            lo, hi = 1, 6 if domain == "small_pos" else 10
        elif domain == "exponent":
            lo, hi = 0, 4
        elif domain == "index":
            lo, hi = 0, 3
        elif domain == "spread":  # distinct values: no ties for sort/topk/argmax
            n = int(np.prod(shape, dtype=np.int64))
            base = 0 if dtype == "uint8" else -(n // 2)
            return (rng.permutation(n) + base).reshape(shape).astype(dtype)
        a = rng.integers(lo, hi, size=shape).astype(dtype)
        if domain == "nonzero":
            a[a == 0] = 1
        return a
    np_dtype = np.float32 if dtype == "bfloat16" else np.dtype(dtype)
    if domain == "pos":
        a = rng.uniform(0.1, 3.0, size=shape)
    elif domain == "small_pos":
        a = rng.uniform(0.5, 1.5, size=shape)
    elif domain == "unit":
        a = rng.uniform(-0.9, 0.9, size=shape)
    elif domain == "nonzero":
        a = rng.uniform(0.25, 3.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    elif domain == "exponent":
        a = rng.uniform(-2.0, 2.0, size=shape)
    elif domain == "special":
        a = rng.uniform(-3.0, 3.0, size=shape)
        flat = a.reshape(-1)
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
        if flat.size:
            idx = rng.random(flat.size) < 0.4
            flat[idx] = rng.choice(specials, size=int(idx.sum()))
    elif domain == "index":
        a = rng.integers(0, 3, size=shape).astype(np.float64)
    else:
        a = rng.uniform(-3.0, 3.0, size=shape)
        if domain == "spread":  # distinct values: no ties for sort/argmax
            flat = a.reshape(-1)
            flat[:] = rng.permutation(flat.size) * 0.37 - flat.size * 0.1
    return np.asarray(a).astype(np_dtype)


def py_scalar(rng, dtype, domain):
    if dtype == "bool":
        return bool(rng.random() < 0.5)
    if dtype in INTS:
        v = int(gen_array(rng, (), dtype, domain))
        return v
    return float(gen_array(rng, (), "float64", domain))


class Built:
    """One input built for both libraries: kiln value, torch value, and their grad leaves."""

    def __init__(self, k, t, k_leaf=None, t_leaf=None):
        self.k, self.t, self.k_leaf, self.t_leaf = k, t, k_leaf, t_leaf


def build(spec, dtype, rng, domain, device, requires_grad):
    if spec == "scalar":
        v = py_scalar(rng, dtype, domain)
        return Built(v, v)
    kind, shape = ("c", spec) if isinstance(spec, tuple) and (not spec or isinstance(spec[0], int)) \
        else spec
    if kind == "t":
        base_shape = tuple(shape[:-2]) + (shape[-1], shape[-2])
    elif kind == "s":
        base_shape = tuple(shape[:-1]) + (shape[-1] * 2,)
    else:
        base_shape = tuple(shape)
    a = gen_array(rng, base_shape, dtype, domain)
    kb = kiln.tensor(a, dtype=lib_dtype(kiln, dtype), device=device)
    tb = torch.tensor(a, dtype=lib_dtype(torch, dtype))
    if requires_grad:
        kb.requires_grad_(True)
        tb.requires_grad_(True)

    def view(x):
        if kind == "t":
            return x.transpose(-1, -2)
        if kind == "s":
            return x[..., ::2]
        return x
    return Built(view(kb), view(tb), kb if requires_grad else None, tb if requires_grad else None)


def dtype_name(d):
    return str(d).split(".")[-1]


def to_numpy(x):
    x = x.detach()
    if dtype_name(x.dtype) == "bfloat16":
        x = x.float()
    return x.cpu().numpy()


def assert_same(k, t, tol_scale=1.0, check_strides=False, where=""):
    """k (kiln) must equal t (torch): type, dtype, shape, values (NaN where torch has NaN)."""
    if isinstance(t, torch.Tensor):
        assert isinstance(k, kiln.Tensor), f"{where}: kiln returned {type(k).__name__}, torch a Tensor"
        assert dtype_name(k.dtype) == dtype_name(t.dtype), \
            f"{where}: dtype kiln {k.dtype} vs torch {t.dtype}"
        assert tuple(k.shape) == tuple(t.shape), \
            f"{where}: shape kiln {tuple(k.shape)} vs torch {tuple(t.shape)}"
        if check_strides and t._is_view():
            assert k.stride() == t.stride(), f"{where}: strides kiln {k.stride()} vs torch {t.stride()}"
            assert k.storage_offset() == t.storage_offset(), f"{where}: storage offset differs"
        kv, tv = to_numpy(k), to_numpy(t)
        name = dtype_name(t.dtype)
        if name in TOLERANCES:
            rtol, atol = TOLERANCES[name]
            np.testing.assert_allclose(kv.astype(np.float64), tv.astype(np.float64),
                                       rtol=rtol * tol_scale, atol=atol * tol_scale,
                                       equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(kv, tv, err_msg=where)
    elif isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)), f"{where}: kiln returned {type(k).__name__}, torch a sequence"
        assert len(k) == len(t), f"{where}: kiln returned {len(k)} results, torch {len(t)}"
        for i, (a, b) in enumerate(zip(k, t)):
            assert_same(a, b, tol_scale, check_strides, f"{where}[{i}]")
    elif isinstance(t, torch.Size):
        assert tuple(k) == tuple(t), f"{where}: kiln {k} vs torch {t}"
    else:
        assert type(k) is type(t), f"{where}: kiln {k!r} ({type(k).__name__}) vs torch {t!r}"
        if isinstance(t, float) and np.isnan(t):
            assert np.isnan(k), f"{where}: kiln {k!r} vs torch nan"
        elif isinstance(t, float):
            assert np.isclose(k, t, rtol=1e-6, atol=1e-7), f"{where}: kiln {k!r} vs torch {t!r}"
        else:
            assert k == t, f"{where}: kiln {k!r} vs torch {t!r}"


def run_both(fn_k, fn_t):
    """Returns (kiln_result, kiln_exc, torch_result, torch_exc)."""
    kr = tr = ke = te = None
    try:
        tr = fn_t()
    except Exception as e:  # noqa: BLE001 - any torch error is a reference error
        te = e
    try:
        kr = fn_k()
    except Exception as e:  # noqa: BLE001
        ke = e
    return kr, ke, tr, te


def check_errors_agree(op_name, ke, te, where):
    """torch raised te: kiln must raise the same exception type."""
    assert ke is not None, f"{where}: torch raised {type(te).__name__}: {te} but kiln succeeded"
    assert type(ke) is type(te), (f"{where}: kiln raised {type(ke).__name__}: {ke}; torch raised "
                                  f"{type(te).__name__}: {te}")


def _grad_target(op, res):
    if op.grad_of is not None:
        return op.grad_of(res)
    return res


def run_op(op, dtype, device="cpu"):
    """Runs every case of op for one dtype; returns the number of cases compared."""
    n = 0
    known_hits = 0
    for ci, specs in enumerate(op.inputs):
        for ki, kwargs in enumerate(op.kwargs):
            known = known_difference(op.name, dtype, specs, kwargs)
            try:
                n += run_case(op, dtype, device, ci, ki, specs, kwargs)
            except AssertionError:
                if known is None:
                    raise
                STATS["known"][f"{op.name}: {known}"] += 1
                known_hits += 1
    if known_hits == 0 and known_difference(op.name, dtype, None, None, any_case=True):
        raise AssertionError(f"{op.name}[{dtype}]: the known difference "
                             f"'{known_difference(op.name, dtype, None, None, any_case=True)}' "
                             f"no longer happens: remove it from KNOWN in tests/python/oracle.py")
    record(op.name, n)
    return n


def run_case(op, dtype, device, ci, ki, specs, kwargs):
    rng = np.random.default_rng(_seed(op.name, dtype, device, ci, ki))
    domains = op.domain if isinstance(op.domain, tuple) else (op.domain,) * len(specs)
    dts = op.input_dtypes or (dtype,) * len(specs)
    dts = tuple(dtype if d is None else d for d in dts)
    ins = [build(s, d, rng, dom, device, False) for s, d, dom in zip(specs, dts, domains)]
    where = f"{op.name}[{dtype}, {device}] inputs={specs} kwargs={kwargs}"
    kr, ke, tr, te = run_both(lambda: op.fn(kiln, *[b.k for b in ins], **kwargs),
                              lambda: op.fn(torch, *[b.t for b in ins], **kwargs))
    if te is not None:
        check_errors_agree(op.name, ke, te, where)
        return 1
    if isinstance(ke, NotImplementedError):  # an explicit gap: reported, not failed
        STATS["not_implemented"][f"{op.name}: {ke}"] += 1
        return 0
    if ke is not None:
        raise AssertionError(f"{where}: kiln raised {type(ke).__name__}: {ke}") from ke
    assert_same(kr, tr, op.tol, op.check_strides, where)
    n = 1
    if op.grad and dtype in GRAD_DTYPES:
        try:
            n += run_backward(op, specs, dts, domains, kwargs, dtype, device, ci, ki, where)
        except AssertionError:
            raise
        except NotImplementedError as e:  # kiln has no derivative: a gap, reported
            STATS["not_implemented"][f"{op.name} backward: {e}"] += 1
        except Exception as e:  # noqa: BLE001 - kiln failing in backward is a difference
            raise AssertionError(f"backward of {where}: {type(e).__name__}: {e}") from e
    return n


def run_backward(op, specs, dts, domains, kwargs, dtype, device, ci, ki, where):
    rng = np.random.default_rng(_seed("grad", op.name, dtype, device, ci, ki))
    ins = [build(s, d, rng, dom, device, d in GRAD_DTYPES and s != "scalar")
           for s, d, dom in zip(specs, dts, domains)]
    tr = _grad_target(op, op.fn(torch, *[b.t for b in ins], **kwargs))
    if not isinstance(tr, torch.Tensor) or not tr.requires_grad:
        return 0
    kr = _grad_target(op, op.fn(kiln, *[b.k for b in ins], **kwargs))
    where = "backward of " + where
    assert kr.requires_grad, f"{where}: kiln result does not require grad (no derivative?)"
    g = gen_array(rng, tuple(tr.shape), dtype_name(tr.dtype), "real")
    try:
        tr.backward(torch.tensor(g, dtype=tr.dtype))
    except RuntimeError as e:  # torch has no derivative here: nothing to compare
        if "not implemented" in str(e):
            return 0
        raise
    kr.backward(kiln.tensor(g, dtype=kr.dtype, device=device))
    for i, b in enumerate(ins):
        if b.t_leaf is None:
            continue
        if b.t_leaf.grad is None:
            assert b.k_leaf.grad is None or not to_numpy(b.k_leaf.grad).any(), \
                f"{where}: input {i}: torch has no grad, kiln has one"
            continue
        if b.k_leaf.grad is None and not to_numpy(b.t_leaf.grad).any():
            continue  # no gradient reached the input; torch materialised zeros
        assert b.k_leaf.grad is not None, f"{where}: input {i}: kiln computed no grad"
        assert_same(b.k_leaf.grad, b.t_leaf.grad, op.tol * 4, False, f"{where} grad of input {i}")
    return 1


# Known differences between kiln and PyTorch. A case listed here must still differ (so a
# fix is noticed: the suite then fails until the entry is removed); every other case of the
# same op is compared as usual. Key: (op, dtype or None for every dtype); value: (reason,
# predicate(specs, kwargs) or None for every case).
KNOWN = {
    ("argmax", "bool"): ("kiln accepts bool input (torch refuses it)", None),
    ("argmin", "bool"): ("kiln accepts bool input (torch refuses it)", None),
    ("topk", "bool"): ("kiln accepts bool input (torch refuses it on the CPU)", None),
    ("topk_smallest", "bool"): ("kiln accepts bool input (torch refuses it on the CPU)", None),
    ("all", "uint8"): ("kiln returns bool for uint8 input (torch keeps uint8)", None),
    ("any", "uint8"): ("kiln returns bool for uint8 input (torch keeps uint8)", None),
}


def known_difference(op_name, dtype, specs, kwargs, any_case=False):
    """The reason a case is known to differ, or None. An (op, dtype) with an entry must show
    the difference in at least one case, or the suite fails (the entry is stale)."""
    for key in ((op_name, dtype), (op_name, None)):
        if key in KNOWN:
            reason, pred, dtypes = (KNOWN[key] + (None,))[:3]
            if dtypes is not None and dtype not in dtypes:
                continue
            if any_case or pred is None or pred(specs, kwargs):
                return reason
    return None


def params(ops, dtypes_filter=None):
    """pytest parameters (op, dtype) for a table."""
    import pytest
    out = []
    for op in ops:
        for d in op.dtypes:
            if dtypes_filter and d not in dtypes_filter:
                continue
            out.append(pytest.param(op, d, id=f"{op.name}-{d}"))
    return out


def check_same_error_class(case, name):
    """case(L) raises with L = torch; with L = kiln it must raise the same exception class."""
    import pytest
    with pytest.raises(Exception) as te:
        case(torch)
    with pytest.raises(type(te.value)):
        case(kiln)
    record(name)


def check_rejected_with_message(case, name):
    """case(L) raises with L = torch; with L = kiln it must raise too, with a message."""
    import pytest
    with pytest.raises(Exception):
        case(torch)
    with pytest.raises(Exception) as e:
        case(kiln)
    assert str(e.value), name
    record(name)
