"""torch-compatibility fixes checked against torch 2.13: the dtype rules of
kiln.linalg.vector_norm / matrix_norm / norm (floating or complex inputs only; dtype= of the
input's kind, never narrowing, and computed in), kiln.norm's p='nuc' and 'fro' rules, and
kiln.save / kiln.load on file-like objects."""
import io
import math

import numpy as np
import pytest
import safetensors.torch
import torch

import kiln

INF = math.inf
INPUT_DTYPES = ["int64", "bool", "float16", "float32", "float64", "complex64", "complex128"]
DTYPES = [None, "int64", "bool", "float16", "bfloat16", "float32", "float64", "complex64",
          "complex128"]


def _input(name, shape=(3, 4), seed=0):
    """The same values as a torch and a kiln tensor."""
    t = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    if name in ("int64", "bool"):
        t = (t * 3).round()
    if name.startswith("complex"):
        t = torch.complex(t, t.flip(-1) if t.dim() else -t)
    t = t.to(getattr(torch, name))
    return t, kiln.tensor(t.numpy())


def _dt(name):
    return (None, None) if name is None else (getattr(torch, name), getattr(kiln, name))


def _outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001  (the outcome is compared, whatever it is)
        return None, e


def _same(fn_t, fn_k, where=""):
    """kiln's call ends as torch's: the same exception type and message, or a result of the
    same dtype, shape and values."""
    rt, et = _outcome(fn_t)
    rk, ek = _outcome(fn_k)
    if et is not None or ek is not None:
        assert et is not None and ek is not None, (where, et, ek, rt, rk)
        assert type(ek).__name__ == type(et).__name__, (where, et, ek)
        assert str(ek).splitlines()[0] == str(et).splitlines()[0], (where, str(et), str(ek))
        return
    assert str(rk.dtype).split(".")[-1] == str(rt.dtype).split(".")[-1], (where, rt, rk)
    assert tuple(rk.shape) == tuple(rt.shape), (where, rt.shape, rk.shape)
    tol = 5e-3 if rt.dtype in (torch.float16, torch.bfloat16) else 1e-5
    got = np.asarray(rk.float().tolist(), dtype=np.float64).reshape(tuple(rt.shape))
    np.testing.assert_allclose(got, rt.double().numpy(), rtol=tol, atol=tol, err_msg=where)


# --- kiln.linalg.vector_norm / matrix_norm / norm: dtype rules --------------------------

@pytest.mark.parametrize("in_name", INPUT_DTYPES)
def test_vector_norm_dtype_rules(in_name):
    t, k = _input(in_name)
    for dt_name in DTYPES:
        dt, dk = _dt(dt_name)
        for ord in (2, 1, 0, INF, -INF, 3, -1):
            _same(lambda: torch.linalg.vector_norm(t, ord, dtype=dt),
                  lambda: kiln.linalg.vector_norm(k, ord, dtype=dk), f"{dt_name} {ord}")
        _same(lambda: torch.linalg.vector_norm(t, 2, (0,), True, dtype=dt),
              lambda: kiln.linalg.vector_norm(k, 2, (0,), True, dtype=dk), f"{dt_name} dim")


@pytest.mark.parametrize("in_name", INPUT_DTYPES)
def test_matrix_norm_and_linalg_norm_dtype_rules(in_name):
    t, k = _input(in_name)
    for dt_name in DTYPES:
        dt, dk = _dt(dt_name)
        for ord in ("fro", "nuc", 1, -1, 2, -2, INF, -INF):
            _same(lambda: torch.linalg.matrix_norm(t, ord, dtype=dt),
                  lambda: kiln.linalg.matrix_norm(k, ord, dtype=dk), f"matrix {dt_name} {ord}")
        for ord in (None, "fro", "nuc", 2, 1, INF):
            _same(lambda: torch.linalg.norm(t, ord, dtype=dt),
                  lambda: kiln.linalg.norm(k, ord, dtype=dk), f"norm {dt_name} {ord}")
            _same(lambda: torch.linalg.norm(t[0], ord, dtype=dt),
                  lambda: kiln.linalg.norm(k[0], ord, dtype=dk), f"norm 1-D {dt_name} {ord}")


def test_integer_input_is_refused_even_with_a_float_dtype():
    k = kiln.arange(6).reshape(2, 3)
    msg = "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long"
    with pytest.raises(RuntimeError, match=msg):
        kiln.linalg.vector_norm(k, dtype=kiln.float32)
    with pytest.raises(RuntimeError, match=msg.replace("vector", "matrix")):
        kiln.linalg.matrix_norm(k, dtype=kiln.float64)
    with pytest.raises(RuntimeError, match="dtype should be floating point or complex, but got"
                                           " Long"):
        kiln.linalg.vector_norm(kiln.ones(3), dtype=kiln.int64)
    with pytest.raises(RuntimeError, match=r"the dtype of the input \(Double\) should be "
                                           r"convertible without narrowing to the specified "
                                           r"dtype \(Float\)"):
        kiln.linalg.vector_norm(kiln.ones(3, dtype=kiln.float64), dtype=kiln.float32)
    with pytest.raises(RuntimeError, match="dtype should be real for real inputs, but got "
                                           "ComplexFloat"):
        kiln.linalg.vector_norm(kiln.ones(3), dtype=kiln.complex64)


def test_dtype_is_the_dtype_computed_in():
    # float16 squares overflow; computed in float32 they do not (torch: 84852.8125)
    t = torch.tensor([60000.0, 60000.0], dtype=torch.float16)
    k = kiln.tensor([60000.0, 60000.0], dtype=kiln.float16)
    for fn_t, fn_k in ((torch.linalg.vector_norm, kiln.linalg.vector_norm),
                       (torch.linalg.norm, kiln.linalg.norm), (torch.norm, kiln.norm)):
        _same(lambda: fn_t(t, dtype=torch.float32), lambda: fn_k(k, dtype=kiln.float32))
        _same(lambda: fn_t(t), lambda: fn_k(k))  # inf in float16, as torch
    assert kiln.linalg.vector_norm(k, dtype=kiln.float32).item() == pytest.approx(84852.8125)
    # float32 input, float64 dtype: the float64 norm of the same values
    t, k = _input("float32", (50,))
    r = kiln.linalg.vector_norm(k, 3, dtype=kiln.float64)
    assert r.dtype == kiln.float64
    assert r.item() == torch.linalg.vector_norm(t.double(), 3).item()
    _same(lambda: torch.linalg.matrix_norm(t.reshape(5, 10), "fro", dtype=torch.float64),
          lambda: kiln.linalg.matrix_norm(k.reshape(5, 10), "fro", dtype=kiln.float64))


def test_complex_norms_use_both_parts():
    t, k = _input("complex64", (4, 3))
    for ord in (2, 1, 0, 3, INF):
        _same(lambda: torch.linalg.vector_norm(t, ord), lambda: kiln.linalg.vector_norm(k, ord))
        _same(lambda: torch.linalg.vector_norm(t, ord, 1, dtype=torch.complex128),
              lambda: kiln.linalg.vector_norm(k, ord, 1, dtype=kiln.complex128))


def test_norm_shape_and_order_errors_as_torch():
    t3, k3 = _input("float32", (2, 3, 4))
    t2, k2 = _input("float32")
    t1, k1 = _input("float32", (4,))
    tz, kz = torch.tensor(2.0), kiln.tensor(2.0)
    cases = [
        ("matrix_norm", (t1, "fro"), (k1, "fro")), ("matrix_norm", (t2, 3), (k2, 3)),
        ("matrix_norm", (t2, "abc"), (k2, "abc")), ("matrix_norm", (t1, "abc"), (k1, "abc")),
        ("matrix_norm", (t2, "fro", (0, 0)), (k2, "fro", (0, 0))),
        ("matrix_norm", (t2, "nuc", (0, -2)), (k2, "nuc", (0, -2))),
        ("matrix_norm", (t2, "fro", (0, 5)), (k2, "fro", (0, 5))),
        ("matrix_norm", (t3, "fro", (0, 1, 2)), (k3, "fro", (0, 1, 2))),
        ("matrix_norm", (t3, "nuc", (2, 0)), (k3, "nuc", (2, 0))),
        ("matrix_norm", (t2.half(), "nuc"), (k2.half(), "nuc")),
        ("matrix_norm", (t2.half(), 2), (k2.half(), 2)),
        ("matrix_norm", (t2.half(), 1), (k2.half(), 1)),
        ("norm", (t3, "fro"), (k3, "fro")), ("norm", (t3, 2), (k3, 2)), ("norm", (t3,), (k3,)),
        ("norm", (t3, None, (0, 1, 2)), (k3, None, (0, 1, 2))),
        ("norm", (t2, 2, ()), (k2, 2, ())), ("norm", (t2, "fro", 0), (k2, "fro", 0)),
        ("norm", (t2, 2, (0,)), (k2, 2, (0,))), ("norm", (tz, 2), (kz, 2)), ("norm", (tz,), (kz,)),
        ("norm", (t1, "nuc"), (k1, "nuc")), ("norm", (t2, 3), (k2, 3)),
        ("vector_norm", (t2, 2, ()), (k2, 2, ())), ("vector_norm", (t2, "fro"), (k2, "fro")),
        ("vector_norm", (tz, INF, 0), (kz, INF, 0)), ("vector_norm", (tz, INF, 1), (kz, INF, 1)),
    ]
    for name, args_t, args_k in cases:
        _same(lambda: getattr(torch.linalg, name)(*args_t),
              lambda: getattr(kiln.linalg, name)(*args_k), f"{name}{args_k[1:]}")


def test_empty_dims_without_identity():
    t, k = _input("float32", (2, 0, 3))
    for ord in (INF, -INF, -1, -0.5, 0, 1, 2):
        for dim in (None, 1, (0, 1), (2, -2), (2, 1), (1, 7), (7, 1), 0):
            for dt_name in (None, "int64", "float64"):
                dt, dk = _dt(dt_name)
                _same(lambda: torch.linalg.vector_norm(t, ord, dim, dtype=dt),
                      lambda: kiln.linalg.vector_norm(k, ord, dim, dtype=dk),
                      f"{ord} {dim} {dt_name}")
                _same(lambda: torch.norm(t, ord, dim, dtype=dt),
                      lambda: kiln.norm(k, ord, dim, dtype=dk), f"norm {ord} {dim} {dt_name}")


def test_vector_norm_gradient_unchanged():
    x = torch.tensor([[0.0, -2.0, 3.0], [1.0, 0.5, -4.0]], requires_grad=True)
    kx = kiln.tensor(x.detach().numpy(), requires_grad=True)
    for ord in (2, 1, 3, INF):  # (ord 0: torch leaves no grad through dtype=; kiln zeros)
        torch.linalg.vector_norm(x, ord, dtype=torch.float64).backward()
        kiln.linalg.vector_norm(kx, ord, dtype=kiln.float64).backward()
        np.testing.assert_allclose(kx.grad.numpy(), x.grad.numpy(), rtol=1e-5, err_msg=str(ord))
        x.grad, kx.grad = None, None


# --- kiln.norm (torch.norm) -------------------------------------------------------------

INPUTS = {"1-D": (4,), "2-D": (3, 4), "3-D": (2, 3, 4), "4-D": (2, 3, 4, 5), "0-D": ()}
DIMS = [None, 0, -1, (0,), (0, 1), (-1, -2), [0, 1], (0, 2), (1, 3), (0, 1, 2), (),
        (0, 5), 5]


@pytest.mark.parametrize("shape_name", list(INPUTS))
def test_norm_p_rules_as_torch(shape_name):
    t, k = _input("float32", INPUTS[shape_name])
    for p in ("nuc", "fro", "abc", "Fro", None, 2, 1, 0, 3, -1, INF, -INF, 0.5):
        for dim in DIMS:
            where = f"{shape_name} p={p!r} dim={dim}"
            _same(lambda: torch.norm(t, p, dim), lambda: kiln.norm(k, p, dim), where)
            _same(lambda: torch.norm(t, p, dim, True), lambda: kiln.norm(k, p, dim, True),
                  where + " keepdim")
            _same(lambda: t.norm(p, dim), lambda: k.norm(p, dim), where + " method")


def test_norm_nuc_values_and_batches():
    t, k = _input("float64", (2, 3, 4, 5))
    for dim in ((0, 1), (1, 3), (-1, -2), (3, 0)):
        for keepdim in (False, True):
            _same(lambda: torch.norm(t, "nuc", dim, keepdim),
                  lambda: kiln.norm(k, "nuc", dim, keepdim), f"{dim} {keepdim}")
    t, k = _input("float32", (5, 3))
    assert kiln.norm(k, "nuc").item() == pytest.approx(torch.norm(t, "nuc").item(), rel=1e-5)
    # the sum of the singular values
    s = torch.linalg.svdvals(t.double()).sum().item()
    assert kiln.norm(k, "nuc").item() == pytest.approx(s, rel=1e-5)
    tc, kc = _input("complex64", (3, 3))
    _same(lambda: torch.norm(tc, "nuc"), lambda: kiln.norm(kc, "nuc"))
    _same(lambda: torch.norm(tc, "fro"), lambda: kiln.norm(kc, "fro"))
    _same(lambda: torch.norm(tc, 2, 1), lambda: kiln.norm(kc, 2, 1))


def test_norm_fro_over_more_than_two_dims_is_an_error():
    k = kiln.ones(2, 3, 4)
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: dim must be a 2-tuple. "
                                           "Got 0 1 2"):
        kiln.norm(k, "fro", (0, 1, 2))
    with pytest.raises(RuntimeError, match="dim must be a 2-tuple"):
        k.norm("fro", [0, 1, 2])
    with pytest.raises(RuntimeError, match="dim must be a 2-tuple. Got 0 1 2"):
        kiln.norm(k, "nuc")  # dim=None: every dim
    assert kiln.norm(k, "fro").item() == pytest.approx(24 ** 0.5)  # None: every dim


@pytest.mark.parametrize("in_name", ["int64", "float16", "float32", "float64", "complex64"])
def test_norm_dtype_rules(in_name):
    t, k = _input(in_name)
    for dt_name in DTYPES:
        dt, dk = _dt(dt_name)
        for p in ("fro", "nuc", 2, 1, INF, None):
            _same(lambda: torch.norm(t, p, dtype=dt), lambda: kiln.norm(k, p, dtype=dk),
                  f"{dt_name} {p}")
            _same(lambda: torch.norm(t, p, (0, 1), dtype=dt),
                  lambda: kiln.norm(k, p, (0, 1), dtype=dk), f"{dt_name} {p} dim")


def test_norm_out_and_gradient():
    t, k = _input("float32")
    out = kiln.empty(3)
    r = kiln.norm(k, 2, 1, out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), torch.norm(t, 2, 1).numpy(), rtol=1e-6)
    out = kiln.empty(())
    assert kiln.norm(k, "nuc", out=out) is out
    assert out.item() == pytest.approx(torch.norm(t, "nuc").item(), rel=1e-5)
    tg = t.clone().requires_grad_(True)
    kg = kiln.tensor(t.numpy(), requires_grad=True)
    torch.norm(tg, "nuc").backward()
    kiln.norm(kg, "nuc").backward()
    np.testing.assert_allclose(kg.grad.numpy(), tg.grad.numpy(), rtol=1e-4, atol=1e-5)
    tg.grad, kg.grad = None, None
    tg.norm(3, 0).sum().backward()
    kg.norm(3, 0).sum().backward()
    np.testing.assert_allclose(kg.grad.numpy(), tg.grad.numpy(), rtol=1e-4, atol=1e-6)


# --- kiln.save / kiln.load on file-like objects -------------------------------------------

def _state():
    return {"w": kiln.arange(12.0).reshape(3, 4), "b": kiln.tensor([1, -2, 3]),
            "h": kiln.ones(2, 2, dtype=kiln.float16), "m": kiln.tensor([True, False]),
            "t": kiln.arange(6.0).reshape(2, 3).t(), "e": kiln.zeros(0, 3)}


def _assert_same_state(loaded, state):
    assert sorted(loaded) == sorted(state)
    for name, v in state.items():
        assert loaded[name].dtype == v.dtype, name
        assert loaded[name].shape == v.shape, name
        assert loaded[name].tolist() == v.tolist(), name


def test_save_load_bytesio_round_trip(tmp_path):
    state = _state()
    buf = io.BytesIO()
    assert kiln.save(state, buf, metadata={"format": "pt"}) is None
    size = buf.tell()
    buf.seek(0)
    _assert_same_state(kiln.load(buf), state)
    assert buf.tell() == size
    # the same bytes as a file written through a path: the format is unchanged
    path = tmp_path / "s.safetensors"
    kiln.save(state, path, metadata={"format": "pt"})
    assert path.read_bytes() == buf.getvalue()
    # and safetensors reads them, as it reads the file
    loaded = safetensors.torch.load(buf.getvalue())
    assert sorted(loaded) == sorted(state)
    np.testing.assert_array_equal(loaded["w"].numpy(), state["w"].numpy())


def test_load_reads_torch_safetensors_bytes():
    tsd = {"a": torch.arange(6.0).reshape(2, 3), "i": torch.tensor([7, 8], dtype=torch.int32)}
    loaded = kiln.load(io.BytesIO(safetensors.torch.save(tsd)))
    assert loaded["a"].tolist() == tsd["a"].tolist()
    assert loaded["i"].dtype == kiln.int32 and loaded["i"].tolist() == [7, 8]


def test_save_load_open_file_round_trip(tmp_path):
    state = _state()
    path = tmp_path / "f.safetensors"
    with open(path, "wb") as f:
        kiln.save(state, f)
    with open(path, "rb") as f:
        loaded = kiln.load(f, map_location="cpu")
    _assert_same_state(loaded, state)
    _assert_same_state(kiln.load(str(path)), state)  # the file is an ordinary one
    # load reads from the stream's current position
    with open(path, "rb") as src, open(tmp_path / "p.bin", "wb") as f:
        f.write(b"header bytes")
        f.write(src.read())
    with open(tmp_path / "p.bin", "rb") as f:
        f.seek(len(b"header bytes"))
        _assert_same_state(kiln.load(f), state)


class _WriteOnly:
    def __init__(self):
        self.data = b""

    def write(self, b):
        self.data += bytes(b)
        return len(b)


def test_save_to_any_object_with_write():
    w = _WriteOnly()
    kiln.save({"x": kiln.ones(3)}, w)
    assert kiln.load(io.BytesIO(w.data))["x"].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("bad", [123, None, object(), 1.5])
def test_save_load_bad_target_errors(bad):
    state, tstate = {"x": kiln.ones(2)}, {"x": torch.ones(2)}
    with pytest.raises(AttributeError) as te:
        torch.save(tstate, bad)
    with pytest.raises(AttributeError, match="expected 'f' to be string, path, or a file-like "
                                             "object with a 'write' attribute") as ke:
        kiln.save(state, bad)
    assert type(ke.value) is type(te.value)
    with pytest.raises(AttributeError) as te:
        torch.load(bad)
    with pytest.raises(AttributeError, match="kiln.load takes a path or a seekable binary "
                                             "file-like object") as ke:
        kiln.load(bad)
    assert type(ke.value) is type(te.value)


def test_save_load_stream_errors(tmp_path):
    class ReadOnly:
        def read(self, n=-1):
            return b""
    with pytest.raises(AttributeError, match="has no attribute 'seek'"):
        kiln.load(ReadOnly())
    with pytest.raises(TypeError, match=r"open the file in binary mode \('wb'\)"):
        kiln.save({"x": kiln.ones(2)}, io.StringIO())
    with open(tmp_path / "t.txt", "w") as f:
        with pytest.raises(TypeError, match="binary mode"):
            kiln.save({"x": kiln.ones(2)}, f)
    with pytest.raises(TypeError, match=r"binary mode \('rb'\)"):
        kiln.load(io.StringIO("abc"))
    # corrupt or empty streams: kiln's safetensors errors, naming the stream, not a temp file
    for data in (b"", b"garbage!garbage", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      "):
        with pytest.raises(ValueError, match="safetensors file '<file-like object>'") as e:
            kiln.load(io.BytesIO(data))
        assert "kiln-load-" not in str(e.value)
    # a value that is not a tensor is refused before anything is written (metadata: the
    # stream gets safetensors, not torch's format)
    buf = io.BytesIO()
    with pytest.raises(TypeError, match="not a Tensor"):
        kiln.save({"x": 1}, buf, metadata={"format": "pt"})
    assert buf.getvalue() == b""
