"""kiln.library / kiln.ops (user-defined operators, decision 0111) against torch.library
(torch 2.13): each feature is defined the same way with both and the results compared
(values, gradients, meta shapes, errors)."""
import typing
import warnings
from typing import Optional, Sequence

import numpy as np
import pytest
import torch

import kiln
import kiln.library  # noqa: F401  (binds kiln.ops)
import kiln.nn as knn
from kiln.library import opcheck as kopcheck


def _np(t):
    if isinstance(t, np.ndarray):
        return t
    return t.detach().numpy() if isinstance(t, kiln.Tensor) else t.detach().cpu().numpy()


def _k(a, requires_grad=False):
    t = kiln.tensor(np.array(a))
    return t.requires_grad_() if requires_grad else t


def _t(a, requires_grad=False):
    t = torch.tensor(np.array(a))
    return t.requires_grad_() if requires_grad else t


def _close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def _err(fn):
    """(exception type, message) of fn(); AssertionError when it does not raise."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    raise AssertionError("expected an exception")


# --- numpy-backed ops defined identically with both libraries --------------------------------

def _make_numpy_sin(lib, name, with_autograd=True, with_fake=True):
    T = lib.Tensor

    def numpy_sin(x: T) -> T:
        return lib.from_numpy(np.sin(x.detach().numpy()))

    op = lib.library.custom_op(f"kt::{name}", mutates_args=())(numpy_sin)
    if with_fake:
        op.register_fake(lambda x: lib.empty_like(x))
    if with_autograd:
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        def backward(ctx, grad):
            x, = ctx.saved_tensors
            return grad * x.cos()

        op.register_autograd(backward, setup_context=setup_context)
    return op


def test_custom_op_values_gradients_and_ops_namespace():
    kop = _make_numpy_sin(kiln, "sin1")
    top = _make_numpy_sin(torch, "sin1")
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    kx, tx = _k(a, True), _t(a, True)
    ky, ty = kop(kx), top(tx)
    _close(ky, ty)
    _close(ky, np.sin(a))
    assert ky.grad_fn is not None and type(ky.grad_fn).__name__ != "NoneType"
    assert ky.grad_fn.name() == "GeneratedBackwardFor_kt_sin1_defaultBackward"
    (ky * 3).sum().backward()
    (ty * 3).sum().backward()
    _close(kx.grad, tx.grad)
    _close(kx.grad, 3 * np.cos(a))
    # kiln.ops reaches the same operator, as torch.ops
    packet, overload = kiln.ops.kt.sin1, kiln.ops.kt.sin1.default
    assert str(packet) == str(torch.ops.kt.sin1) == "kt.sin1"
    assert str(overload) == str(torch.ops.kt.sin1.default) == "kt.sin1.default"
    assert repr(overload) == repr(torch.ops.kt.sin1.default) == \
        "<OpOverload(op='kt.sin1', overload='default')>"
    assert repr(packet) == repr(torch.ops.kt.sin1) == "<OpOverloadPacket(op='kt.sin1')>"
    assert overload.name() == torch.ops.kt.sin1.default.name() == "kt::sin1"
    assert packet.overloads() == torch.ops.kt.sin1.overloads() == ["default"]
    assert kop._opoverload is overload and kiln.ops.kt.sin1 is packet
    _close(packet(kx), top(tx))
    _close(overload(kx), top(tx))
    assert str(overload._schema) == str(torch.ops.kt.sin1.default._schema) == \
        "kt::sin1(Tensor x) -> Tensor"
    assert repr(kop) == repr(top) == "<CustomOpDef(kt::sin1)>"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        kiln.ops.kt.nope
    with pytest.raises(AttributeError, match="has no overload name 'nope'"):
        kiln.ops.kt.sin1.nope


def test_gradcheck_in_float64_against_numerical():
    op = _make_numpy_sin(kiln, "sin_gc")
    x = kiln.tensor(np.linspace(-2, 2, 7)).requires_grad_()
    assert x.dtype == kiln.float64
    assert kiln.autograd.gradcheck(op, (x,))
    # a wrong formula is caught by the same check
    op.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].sin(),
                         setup_context=lambda ctx, inputs, output:
                         ctx.save_for_backward(inputs[0]))
    with pytest.raises(Exception, match="Jacobian mismatch"):
        kiln.autograd.gradcheck(op, (x,))


# --- schema inference ------------------------------------------------------------------------

def _signatures(lib):
    T, dt, dev = lib.Tensor, lib.dtype, lib.device

    def f1(x: T, n: int, w: Optional[T] = None, dims: Optional[Sequence[int]] = None,
           s: float = 1.0, flag: bool = False, name: str = "a", d: dt = lib.float32,
           where: dev = "cpu") -> T: ...

    def f2(xs: list[T], ys: Sequence[Optional[T]], k: list[int], f: list[float],
           b: Optional[list[bool]]) -> list[T]: ...

    def f3(x: T, *, alpha: float = 2.5, beta: int = -1) -> tuple[T, int, float, bool]: ...

    def f4(x: T, y: T) -> None: ...

    def f5(x: T) -> tuple[T]: ...

    if lib is kiln:
        def f6(x: "kiln.Tensor", n: "int") -> "kiln.Tensor": ...
    else:
        def f6(x: "torch.Tensor", n: "int") -> "torch.Tensor": ...

    def f7(x: T, y: typing.List[T], z: T) -> T: ...

    return [(f1, ()), (f2, ()), (f3, ()), (f4, ("y",)), (f5, ()), (f6, ()), (f7, ("y", "x")),
            (f4, "unknown")]


@pytest.mark.parametrize("i", range(8))
def test_infer_schema_matches_torch(i):
    kf, kmut = _signatures(kiln)[i]
    tf, tmut = _signatures(torch)[i]
    ks = kiln.library.infer_schema(kf, mutates_args=kmut)
    ts = torch.library.infer_schema(tf, mutates_args=tmut)
    assert ks == ts
    assert kiln.library.infer_schema(kf, mutates_args=kmut, op_name="foo") == \
        torch.library.infer_schema(tf, mutates_args=tmut, op_name="foo")


def _bad_signatures(lib):
    T = lib.Tensor

    def no_annotation(x) -> T: ...

    def no_return(x: T): ...

    def tuple_input(x: tuple[int, int]) -> T: ...

    def dict_input(x: dict) -> T: ...

    def bad_return(x: T) -> dict: ...

    def varargs(x: T, *args) -> T: ...

    def list_default(x: T, z: list[int] = [1]) -> T: ...  # noqa: B006

    def undefined_name(x: "NoSuchType") -> T: ...  # noqa: F821

    return [(no_annotation, (), "Parameter x must have a type annotation"),
            (no_return, (), "No return type annotation was provided"),
            (tuple_input, (), "We do not support Tuple inputs"),
            (dict_input, (), "Parameter x has unsupported type"),
            (bad_return, (), "Return has unsupported type"),
            (varargs, (), "We do not support positional-only args, varargs, or varkwargs"),
            (list_default, (), "Parameter z has an unsupported default value type"),
            (undefined_name, (), "Unsupported type annotation NoSuchType"),
            (tuple_input, ("y",), None)]


@pytest.mark.parametrize("i", range(8))
def test_infer_schema_errors_match_torch(i):
    kf, kmut, message = _bad_signatures(kiln)[i]
    tf, tmut, _ = _bad_signatures(torch)[i]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tt, tm = _err(lambda: torch.library.infer_schema(tf, mutates_args=tmut))
    kt, km = _err(lambda: kiln.library.infer_schema(kf, mutates_args=kmut))
    assert kt is tt is ValueError
    assert km.startswith("infer_schema(func): ") and message in km and message in tm


def test_mutates_args_validation_matches_torch():
    for lib in (kiln, torch):
        T = lib.Tensor

        def f(x: T, n: int) -> T:
            return x + n

        with pytest.raises(ValueError, match="only Tensors or collections of Tensors can be"):
            lib.library.custom_op("kt::mut_bad1", f, mutates_args=("n",))
        with pytest.raises(ValueError, match="were not found in the custom op's signature"):
            lib.library.custom_op("kt::mut_bad2", f, mutates_args=("y",))
        with pytest.raises(ValueError, match="mutates_args must either be a sequence"):
            lib.library.custom_op("kt::mut_bad3", f, mutates_args="everything")
        with pytest.raises(ValueError, match="The schema suggests that the op mutates"):
            lib.library.custom_op("kt::mut_bad4", f, mutates_args=(),
                                  schema="(Tensor(a!) x, int n) -> Tensor")
        with pytest.raises(ValueError, match="Functions without tensor inputs are required"):
            lib.library.custom_op("kt::mut_bad5", lambda n: None, mutates_args=(),
                                  device_types="cpu", schema="(int n) -> Tensor")

        def g(x: T, *, y: T) -> T:
            return x + y

        with pytest.raises(NotImplementedError, match="kwarg-only Tensor args"):
            lib.library.custom_op("kt::mut_bad6", g, mutates_args=())
    with pytest.raises(ValueError):
        kiln.library.custom_op("no_namespace", lambda x: x, mutates_args=(),
                               schema="(Tensor x) -> Tensor")


@pytest.mark.parametrize("kind", ["same", "view", "two_same"])
def test_outputs_must_not_alias_inputs(kind):
    for lib in (kiln, torch):
        T = lib.Tensor
        if kind == "two_same":
            def f(x: T) -> tuple[T, T]:
                y = x * 2
                return y, y
        else:
            def f(x: T) -> T:
                return x if kind == "same" else x.view(-1)
        op = lib.library.custom_op(f"kt::alias_{kind}", f, mutates_args=())
        with pytest.raises(RuntimeError, match=r"must not also be an input to this custom "
                                               r"operator and \(2\) may not alias any inputs"):
            op(lib.ones(2, 3))


# --- an op that mutates an input ---------------------------------------------------------------

def _make_inplace(lib, name, mutates=("out",)):
    T = lib.Tensor

    def numpy_exp_(x: T, out: T) -> None:
        np.exp(x.detach().numpy(), out=out.detach().numpy())

    return lib.library.custom_op(f"kt::{name}", numpy_exp_, mutates_args=mutates)


def test_mutating_op_matches_torch():
    kop, top = _make_inplace(kiln, "exp_into"), _make_inplace(torch, "exp_into")
    assert str(kop._opoverload._schema) == str(top._opoverload._schema) == \
        "kt::exp_into(Tensor x, Tensor(a1!) out) -> ()"
    a = np.random.default_rng(1).standard_normal(5).astype(np.float32)
    kout, tout = kiln.zeros(5), torch.zeros(5)
    kv, tv = kout._version, tout._version
    assert kop(_k(a), kout) is None and top(_t(a), tout) is None
    _close(kout, tout)
    _close(kout, np.exp(a))
    assert kout._version > kv and tout._version > tv  # the mutation is visible to autograd
    # meta: no fake impl needed for a mutating op that returns nothing (torch's trivial one)
    assert kop(kiln.empty(5, device="meta"), kiln.empty(5, device="meta")) is None
    for op in (kop, top):
        with pytest.raises(RuntimeError, match="Cannot register autograd formula for "
                                               "non-functional operator"):
            op.register_autograd(lambda ctx, g: g)
    # the saved-tensor version check sees the numpy write
    w = kiln.ones(5, requires_grad=True)
    buf = kiln.zeros(5)
    y = w * buf
    kop(_k(a), buf)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_opcheck_passes_and_catches_undeclared_mutation():
    a = np.random.default_rng(2).standard_normal(4).astype(np.float32)
    good = _make_inplace(kiln, "exp_good")
    res = kopcheck(good, (_k(a), kiln.zeros(4)))
    assert res == {"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
                   "test_faketensor": "SUCCESS", "test_aot_dispatch_dynamic": "SUCCESS"}
    lying = {lib: _make_inplace(lib, "exp_lying", mutates=()) for lib in (kiln, torch)}
    with pytest.raises(kiln.library.OpCheckError, match="test_schema failed.*specified that "
                                                        "the operator does not mutate"):
        kopcheck(lying[kiln], (_k(a), kiln.zeros(4)))
    with pytest.raises(Exception, match="test_schema failed.*not defined as mutable but was "
                                        "mutated"):
        torch.library.opcheck(lying[torch], (_t(a), torch.zeros(4)),
                              test_utils=("test_schema",))
    r = kopcheck(lying[kiln], (_k(a), kiln.zeros(4)), raise_exception=False)
    assert isinstance(r["test_schema"], RuntimeError)
    assert r["test_autograd_registration"] == "SUCCESS"
    # not declared mutable, so it gets no trivial fake impl (as torch)
    assert "no fake impl" in str(r["test_faketensor"])


# --- multiple outputs, optional Tensor, list of ints, tensor lists ----------------------------

def _make_minmax(lib, name):
    T = lib.Tensor

    def minmax_scale(x: T, lo: float, hi: float) -> tuple[T, T]:
        a = x.detach().numpy()
        return lib.from_numpy(a * lo), lib.from_numpy(np.tanh(a) * hi)

    op = lib.library.custom_op(f"kt::{name}", minmax_scale, mutates_args=())

    @op.register_fake
    def _(x, lo, hi):
        return lib.empty_like(x), lib.empty_like(x)

    def setup_context(ctx, inputs, output):
        x, lo, hi = inputs
        ctx.save_for_backward(output[1])
        ctx.lo, ctx.hi = lo, hi

    def backward(ctx, g_scaled, g_tanh):
        t, = ctx.saved_tensors
        return g_scaled * ctx.lo + g_tanh * (ctx.hi - t * t / ctx.hi), None, None

    op.register_autograd(backward, setup_context=setup_context)
    return op


def test_multiple_outputs_match_torch():
    kop, top = _make_minmax(kiln, "mm2"), _make_minmax(torch, "mm2")
    a = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
    kx, tx = _k(a, True), _t(a, True)
    (k1, k2), (t1, t2) = kop(kx, 2.0, 0.5), top(tx, 2.0, 0.5)
    assert isinstance(kop(kx, 2.0, 0.5), tuple)
    _close(k1, t1)
    _close(k2, t2)
    (k1.sum() * 0.3 + (k2 * k2).sum()).backward()
    (t1.sum() * 0.3 + (t2 * t2).sum()).backward()
    _close(kx.grad, tx.grad)
    # only one output used: the other's gradient is materialised as zeros, as torch
    kx.grad, tx.grad = None, None
    kop(kx, 2.0, 0.5)[1].sum().backward()
    top(tx, 2.0, 0.5)[1].sum().backward()
    _close(kx.grad, tx.grad)
    m1, m2 = kop(kiln.empty(7, 3, device="meta", dtype=kiln.float64), 1.0, 1.0)
    t1, t2 = top(torch.empty(7, 3, device="meta", dtype=torch.float64), 1.0, 1.0)
    assert m1.shape == t1.shape == (7, 3) and m2.dtype == kiln.float64
    assert m1.device.type == "meta" and m2.device.type == "meta"
    x64 = kiln.tensor(np.linspace(-1, 1, 6)).requires_grad_()
    assert kiln.autograd.gradcheck(lambda x: kop(x, 1.5, 0.7), (x64,))


def _make_masked_sum(lib, name):
    T = lib.Tensor

    def masked_sum(x: T, bias: Optional[T], dims: list[int], keepdim: bool = False) -> T:
        a = x.detach().numpy()
        if bias is not None:
            a = a + bias.detach().numpy()
        return lib.from_numpy(np.ascontiguousarray(a.sum(axis=tuple(dims), keepdims=keepdim)))

    op = lib.library.custom_op(f"kt::{name}", masked_sum, mutates_args=())

    @op.register_fake
    def _(x, bias, dims, keepdim=False):
        shape = [1 if i in [d % x.dim() for d in dims] else n for i, n in enumerate(x.shape)]
        if not keepdim:
            shape = [n for i, n in enumerate(x.shape) if i not in [d % x.dim() for d in dims]]
        return x.new_empty(shape)

    def setup_context(ctx, inputs, output):
        x, bias, dims, keepdim = inputs
        ctx.shape = tuple(x.shape)
        ctx.dims = [d % x.dim() for d in dims]
        ctx.keepdim = keepdim
        ctx.bias_none = bias is None
        ctx.seen = ctx.needs_input_grad

    def backward(ctx, g):
        if not ctx.keepdim:
            for d in sorted(ctx.dims):
                g = g.unsqueeze(d)
        gx = g.expand(ctx.shape)
        gb = None if ctx.bias_none or not ctx.needs_input_grad[1] else gx
        return gx if ctx.needs_input_grad[0] else None, gb, None, None

    op.register_autograd(backward, setup_context=setup_context)
    return op


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("keepdim", [False, True])
def test_optional_tensor_and_int_list_match_torch(with_bias, keepdim):
    kop, top = _make_masked_sum(kiln, "msum"), _make_masked_sum(torch, "msum")
    assert str(kop._opoverload._schema) == str(top._opoverload._schema) == \
        "kt::msum(Tensor x, Tensor? bias, SymInt[] dims, bool keepdim=False) -> Tensor"
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    kx, tx = _k(a, True), _t(a, True)
    kb, tb = (_k(b, True), _t(b, True)) if with_bias else (None, None)
    ky = kop(kx, kb, [0, -1], keepdim=keepdim)
    ty = top(tx, tb, [0, -1], keepdim=keepdim)
    assert tuple(ky.shape) == tuple(ty.shape)
    _close(ky, ty)
    w = np.arange(ty.numel(), dtype=np.float32).reshape(tuple(ty.shape))
    (ky * _k(w)).sum().backward()
    (ty * _t(w)).sum().backward()
    _close(kx.grad, tx.grad)
    if with_bias:
        _close(kb.grad, tb.grad)
    km = kop(kiln.empty(2, 3, 4, device="meta"), None, [1], keepdim=keepdim)
    tm = top(torch.empty(2, 3, 4, device="meta"), None, [1], keepdim=keepdim)
    assert tuple(km.shape) == tuple(tm.shape)
    assert kopcheck(kop, (_k(a, True), None, [0, 2]))["test_faketensor"] == "SUCCESS"


def _make_weighted(lib, name, seen):
    T = lib.Tensor

    def weighted(xs: list[T], w: T, k: int) -> list[T]:
        return [lib.from_numpy(x.detach().numpy() * w.detach().numpy() * k) for x in xs]

    op = lib.library.custom_op(f"kt::{name}", weighted, mutates_args=())

    def setup_context(ctx, inputs, output):
        xs, w, k = inputs
        ctx.save_for_backward(*xs, w)
        ctx.k = k
        seen.append(("setup", type(inputs[0]).__name__, type(output).__name__, len(output)))

    def backward(ctx, grads):
        *xs, w = ctx.saved_tensors
        seen.append(("needs", ctx.needs_input_grad))
        gxs = [g * w * ctx.k for g in grads]
        gw = sum((g * x * ctx.k for g, x in zip(grads, xs)), start=0 * w)
        return gxs, gw, None

    op.register_autograd(backward, setup_context=setup_context)
    op.register_fake(lambda xs, w, k: [lib.empty_like(x) for x in xs])
    return op


def test_tensor_lists_in_and_out_match_torch():
    kseen, tseen = [], []
    kop, top = _make_weighted(kiln, "wsum", kseen), _make_weighted(torch, "wsum", tseen)
    rng = np.random.default_rng(5)
    a, b, w = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    ka, kb, kw = _k(a, True), _k(b), _k(w, True)
    ta, tb, tw = _t(a, True), _t(b), _t(w, True)
    kout, tout = kop([ka, kb], kw, 2), top([ta, tb], tw, 2)
    assert isinstance(kout, list) and len(kout) == 2
    for x, y in zip(kout, tout):
        _close(x, y)
    (kout[0] * 2 + kout[1]).sum().backward()
    (tout[0] * 2 + tout[1]).sum().backward()
    _close(ka.grad, ta.grad)
    _close(kw.grad, tw.grad)
    assert kb.grad is None and tb.grad is None
    assert kseen == tseen == [("setup", "list", "list", 2), ("needs", ([True, False], True,
                                                                         False))]
    mout = kop([kiln.empty(4, device="meta")], kiln.empty(4, device="meta"), 1)
    assert mout[0].shape == (4,) and mout[0].device.type == "meta"


def test_non_tensor_output_gets_none_gradient_and_double_backward():
    seen = {}
    for lib in (kiln, torch):
        T = lib.Tensor

        def cube_count(x: T) -> tuple[T, int]:
            return x * x * x, int(x.numel())

        op = lib.library.custom_op("kt::cube_count", cube_count, mutates_args=())
        calls = []

        def backward(ctx, g, g_count):
            calls.append(g_count)
            x, = ctx.saved_tensors
            return g * 3 * x * x  # composed of differentiable ops: twice differentiable

        op.register_autograd(backward, setup_context=lambda ctx, inputs, output:
                             ctx.save_for_backward(inputs[0]))
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y, n = op(x)
        g, = lib.autograd.grad(y.sum(), x, create_graph=True)
        gg, = lib.autograd.grad(g.sum(), x)
        seen[lib.__name__] = (n, calls, _np(g).tolist(), _np(gg).tolist())
    assert seen["kiln"] == seen["torch"] == (2, [None], [3.0, 12.0], [6.0, 12.0])


def test_vmap_over_a_custom_op():
    op = _make_numpy_sin(kiln, "sin_vmap")
    a = np.random.default_rng(10).standard_normal((3, 4)).astype(np.float32)
    out = kiln.vmap(op)(_k(a))
    _close(out, np.sin(a))
    seen = []
    op.register_vmap(lambda info, in_dims, x: seen.append(1))  # kept, not needed by a loop
    _close(kiln.vmap(op)(_k(a)), np.sin(a))
    assert seen == []


def test_backward_results_are_checked():
    T = kiln.Tensor

    def f(x: T, y: T) -> T:
        return kiln.from_numpy(x.detach().numpy() * y.detach().numpy())

    op = kiln.library.custom_op("kt::wrong_count", f, mutates_args=())
    op.register_autograd(lambda ctx, g: g)  # one gradient for two inputs
    x = kiln.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned 1 gradient.*2 positional input"):
        op(x, kiln.ones(2)).sum().backward()


def test_backward_without_formula_raises_like_torch():
    for lib in (kiln, torch):
        op = _make_numpy_sin(lib, "sin_nograd", with_autograd=False)
        x = lib.ones(3, requires_grad=True)
        y = op(x)
        assert y.requires_grad  # as torch: the graph exists, its backward raises
        with pytest.raises(RuntimeError, match="no autograd formula was registered"):
            y.sum().backward()
        with lib.no_grad():
            assert not op(x).requires_grad


def test_keyword_only_arguments_reach_setup_context():
    seen = {}
    for lib in (kiln, torch):
        T = lib.Tensor

        def scale(x: T, *, val: float, shift: int = 1) -> T:
            return lib.from_numpy(x.detach().numpy() * val + shift)

        op = lib.library.custom_op("kt::kwonly", scale, mutates_args=())

        def setup_context(ctx, inputs, keyword_only_inputs, output):
            ctx.val = keyword_only_inputs["val"]
            seen[lib.__name__] = (len(inputs), dict(keyword_only_inputs))

        op.register_autograd(lambda ctx, g: g * ctx.val, setup_context=setup_context)
        x = lib.ones(3, requires_grad=True)
        y = op(x, val=2.5)
        y.sum().backward()
        assert np.allclose(_np(x.grad), 2.5) and np.allclose(_np(y), 3.5)
        assert "*, float val, SymInt shift=1)" in str(op._opoverload._schema)
    assert seen["kiln"] == seen["torch"] == (1, {"val": 2.5, "shift": 1})


# --- kernels by device, fake impls, meta ---------------------------------------------------

def test_register_kernel_by_device_and_set_kernel_enabled():
    out = {}
    for lib in (kiln, torch):
        T = lib.Tensor

        def f(x: T) -> T:
            return x + 1

        op = lib.library.custom_op("kt::bydev", f, mutates_args=())
        x = lib.zeros(2)
        first = _np(op(x)).copy()

        @op.register_kernel("cpu")
        def _(x):
            return x + 10

        second = _np(op(x)).copy()
        with op.set_kernel_enabled("cpu", enabled=False):
            third = _np(op(x)).copy()
        out[lib.__name__] = (first, second, third, _np(op(x)).copy())
    for k, t in zip(out["kiln"], out["torch"]):
        np.testing.assert_array_equal(k, t)
    assert out["kiln"][1][0] == 10 and out["kiln"][2][0] == 1
    # kiln's testing device picks its own kernel (torch has no such device)
    T = kiln.Tensor

    def g(x: T) -> T:
        return x * 2

    op = kiln.library.custom_op("kt::bydev2", g, mutates_args=(), device_types="cpu")
    op.register_kernel("testing", lambda x: x * 3)
    assert _np(op(kiln.ones(2)))[0] == 2
    assert _np(op(kiln.ones(2, device="testing")).cpu())[0] == 3
    op2 = kiln.library.custom_op("kt::bydev3", g, mutates_args=(), device_types="cpu")
    with pytest.raises(NotImplementedError, match="Could not run 'kt::bydev3' with arguments "
                                                  "from the 'Testing' backend"):
        op2(kiln.ones(2, device="testing"))


def test_factory_op_with_device_argument():
    out = []
    for lib in (kiln, torch):
        T = lib.Tensor

        def make(n: int, device: lib.device) -> T:
            return lib.arange(n, device=device) * 2

        op = lib.library.custom_op("kt::factory", make, mutates_args=(), device_types="cpu")
        out.append(_np(op(4, "cpu")))
    np.testing.assert_array_equal(out[0], out[1])


def test_fake_impl_on_meta_and_errors():
    for lib in (kiln, torch):
        op = _make_numpy_sin(lib, "sin_nofake", with_fake=False)
        with pytest.raises(RuntimeError, match="There was no fake impl registered"):
            op(lib.empty(2, 3, device="meta"))
        op.register_fake(lambda x: x.new_empty(x.shape[0], 2 * x.shape[1]).to(lib.float64))
        m = op(lib.empty(2, 3, device="meta"))
        assert tuple(m.shape) == (2, 6) and m.dtype == lib.float64 and m.device.type == "meta"
        assert lib.library.get_ctx() is None  # only inside a fake impl

    def dynamic(x):
        ctx = kiln.library.get_ctx()
        assert ctx is not None
        return x.new_empty(ctx.new_dynamic_size())

    op = _make_numpy_sin(kiln, "sin_dyn", with_fake=False)
    op.register_fake(dynamic)
    with pytest.raises(NotImplementedError, match="data-dependent size"):
        op(kiln.empty(3, device="meta"))
    # torch refuses the same on meta tensors (a RuntimeError; kiln's NotImplementedError is one)
    top = _make_numpy_sin(torch, "sin_dyn", with_fake=False)
    top.register_fake(lambda x: x.new_empty(torch.library.get_ctx().new_dynamic_size()))
    with pytest.raises(RuntimeError):
        top(torch.empty(3, device="meta"))
    # gradients on meta run the backward formula on meta tensors
    op = _make_numpy_sin(kiln, "sin_meta_grad")
    x = kiln.empty(4, device="meta", requires_grad=True)
    op(x).sum().backward()
    assert x.grad.shape == (4,) and x.grad.device.type == "meta"


def test_opcheck_catches_wrong_fake_and_missing_fake():
    a = np.random.default_rng(6).standard_normal((3, 2)).astype(np.float32)
    for lib, opcheck, mk in ((kiln, kopcheck, _k), (torch, torch.library.opcheck, _t)):
        op = _make_numpy_sin(lib, "sin_badfake", with_fake=False)
        with pytest.raises(Exception, match="test_faketensor failed.*no fake impl"):
            opcheck(op, (mk(a),), test_utils="test_faketensor")
        op.register_fake(lambda x: x.new_empty(x.shape[1], x.shape[0]))
        with pytest.raises(Exception, match="test_faketensor failed.*mismatch"):
            opcheck(op, (mk(a),), test_utils="test_faketensor")
        op.register_fake(lambda x: x.new_empty(x.shape).to(lib.float64))
        with pytest.raises(Exception, match="(?i)test_faketensor failed.*dtype"):
            opcheck(op, (mk(a),), test_utils="test_faketensor")
        op.register_fake(lambda x: lib.empty_like(x))
        assert opcheck(op, (mk(a),), test_utils="test_faketensor") == \
            {"test_faketensor": "SUCCESS"}
    kop = _make_numpy_sin(kiln, "sin_goodfake")
    with pytest.raises(ValueError, match="subset of"):
        kopcheck(kop, (_k(a),), test_utils="test_nonsense")
    with pytest.raises(ValueError, match="if you specify one of rtol/atol"):
        kopcheck(kop, (_k(a),), rtol=1e-3)
    with pytest.raises(ValueError, match="op must be a CustomOpDef"):
        kopcheck(lambda x: x, (_k(a),))


# --- the Library API ------------------------------------------------------------------------

def test_library_define_impl_defaults_and_overloads():
    results = {}
    for lib in (kiln, torch):
        L = lib.library.Library("kt_lib1", "DEF")
        assert L.define("affine(Tensor x, float scale=2.0, int[] dims=[0], *, "
                        "float shift=0.5) -> (Tensor, Tensor)") == "affine"
        assert L.define("affine.ints(Tensor x, int scale) -> (Tensor, Tensor)") == "affine"

        def affine(x, scale=2.0, dims=(0,), *, shift=0.5):
            return x * scale + shift, x.sum(list(dims))

        L.impl("affine", affine, "CPU")
        L.impl("affine.ints", lambda x, scale: (x * scale * 100, x.sum()), "CPU")
        x = lib.ones(2, 3)
        r1 = lib.ops.kt_lib1.affine(x)
        r2 = lib.ops.kt_lib1.affine.default(x, 3.0, [1], shift=-1.0)
        r3 = lib.ops.kt_lib1.affine.ints(x, 2)
        r4 = lib.ops.kt_lib1.affine(x, scale=4.0)
        results[lib.__name__] = [_np(t).copy() for r in (r1, r2, r3, r4) for t in r]
        assert sorted(lib.ops.kt_lib1.affine.overloads()) == ["default", "ints"]
        schema = str(lib.ops.kt_lib1.affine.ints._schema)
        assert schema == "kt_lib1::affine.ints(Tensor x, int scale) -> (Tensor, Tensor)"
        L._destroy()
    for k, t in zip(results["kiln"], results["torch"]):
        np.testing.assert_allclose(k, t)


@pytest.mark.parametrize("call", ["missing", "type", "too_many", "unknown_kw", "int_list",
                                  "optional"])
def test_bad_arguments_raise_runtime_error_like_torch(call):
    msgs = []
    for lib in (kiln, torch):
        with lib.library._scoped_library("kt_args", "FRAGMENT") as L:
            L.define("f(Tensor x, int n, int[] dims, Tensor? w=None) -> Tensor")
            L.impl("f", lambda x, n, dims, w=None: x * n, "CPU")
            op = lib.ops.kt_args.f
            x = lib.ones(2)
            fn = {"missing": lambda: op(x),
                  "type": lambda: op(x, 1.5, [0]),
                  "too_many": lambda: op(x, 1, [0], None, 5),
                  "unknown_kw": lambda: op(x, 1, [0], bad=2),
                  "int_list": lambda: op(x, 1, [1.5]),
                  "optional": lambda: op(x, 1, [0], w=3)}[call]
            et, m = _err(fn)
            assert et is RuntimeError
            msgs.append(m.splitlines()[0])
    key = {"missing": "is missing value for argument 'n'",
           "type": "Expected a value of type 'int' for argument 'n' but instead found type "
                   "'float'",
           "too_many": "expected at most 4 argument(s) but received 5 argument(s)",
           "unknown_kw": "Unknown keyword argument 'bad' for operator 'kt_args::f'",
           "int_list": "Expected a value of type 'List[int]' for argument 'dims'",
           "optional": "Expected a value of type 'Optional[Tensor]' for argument 'w'"}[call]
    assert key in msgs[0] and key in msgs[1]


@pytest.mark.parametrize("schema", [
    "bad(Tensor x -> Tensor", "bad(Tensor x) -> Tensor2", "bad(Foo x) -> Tensor",
    "bad(Tensor x, int n=1, Tensor y) -> Tensor", "bad(Tensor x) ->", "bad(Tensor x)",
    "bad(Tensor x,) -> Tensor", "bad(Tensor) -> Tensor", "my-op(Tensor x) -> Tensor"])
def test_bad_schemas_raise_runtime_error_like_torch(schema):
    for lib in (kiln, torch):
        with lib.library._scoped_library("kt_schema", "FRAGMENT") as L:
            with pytest.raises(RuntimeError):
                L.define(schema)


def test_schema_features_parse_and_print():
    with kiln.library._scoped_library("kt_parse", "FRAGMENT") as L:
        L.define("f.out(Tensor(a!) self, Tensor(b!)[] others, int[2] k=1, int?[] m=None, "
                 "float eps=1e-5, str mode='mean', ScalarType? dtype=None, "
                 "ScalarType d2=float64, Device dev=\"cpu\", Scalar s=-2, bool b=True, *, "
                 "Tensor(c!) out) -> (Tensor(c!) r, Tensor[] q)")
        op = kiln.ops.kt_parse.f.out
        s = op._schema
        assert s.name == "kt_parse::f" and s.overload_name == "out" and s.is_mutable
        args = {a.name: a for a in s.arguments}
        assert args["self"].alias_info.is_write and args["others"].alias_info.is_write
        assert args["k"].default_value == [1, 1]
        assert args["eps"].default_value == 1e-5 and args["mode"].default_value == "mean"
        assert args["d2"].default_value == kiln.float64
        assert args["dev"].default_value == kiln.device("cpu")
        assert args["s"].default_value == -2 and args["b"].default_value is True
        assert args["out"].kwarg_only and not args["b"].kwarg_only
        assert [r.name for r in s.returns] == ["r", "q"]
        assert str(s).startswith("kt_parse::f.out(Tensor(a!) self, Tensor(b!)[] others, "
                                 "int[2] k=[1, 1], int?[] m=None, float eps=1e-05, "
                                 'str mode="mean", ScalarType? dtype=None, ScalarType '
                                 'd2=float64, Device dev=cpu, Scalar s=-2, bool b=True, *, '
                                 "Tensor(c!) out) -> (Tensor(c!) r, Tensor[] q)")
        # the printed schema parses back to itself
        assert str(kiln.library.parse_schema(str(s))) == str(s)


def test_library_kinds_and_registration_errors_like_torch():
    for lib in (kiln, torch):
        L = lib.library.Library("kt_kinds", "DEF")
        with pytest.raises(RuntimeError, match="Only a single"):
            lib.library.Library("kt_kinds", "DEF")
        with pytest.raises(ValueError, match="Unsupported kind: BAD"):
            lib.library.Library("kt_kinds", "BAD")
        with pytest.raises(ValueError, match="prim is a reserved namespace"):
            lib.library.Library("prim", "DEF")
        L.define("g(Tensor x) -> Tensor")
        with pytest.raises(RuntimeError, match="with the same name and overload name multiple "
                                               "times"):
            L.define("g(Tensor x) -> Tensor")
        with pytest.raises(TypeError, match="Input function is required to be a callable"):
            L.impl("g", 3, "CPU")
        with pytest.raises(RuntimeError, match="could not parse dispatch key: BadKey"):
            L.impl("g", lambda x: x, "BadKey")
        L.impl("g", lambda x: x * 2, "CPU")
        with pytest.raises(NotImplementedError, match="no fake impl or Meta kernel"):
            lib.ops.kt_kinds.g(lib.empty(2, device="meta"))
        L._destroy()
        # a destroyed library takes its operators with it
        assert not hasattr(lib.ops.kt_kinds, "g")
        L2 = lib.library.Library("kt_kinds", "DEF")  # the namespace is free again
        L2._destroy()


@pytest.mark.filterwarnings("ignore:.*an autograd kernel was not registered")
def test_library_composite_implicit_autograd_and_backend_only_gradients():
    grads = {}
    for lib in (kiln, torch):
        with lib.library._scoped_library("kt_cia", "FRAGMENT") as L:
            L.define("softplus2(Tensor x, float beta=1.0) -> Tensor")
            L.impl("softplus2", lambda x, beta=1.0: (1 + (beta * x).exp()).log() / beta,
                   "CompositeImplicitAutograd")
            L.define("cube(Tensor x) -> Tensor")
            L.impl("cube", lambda x: x * x * x, "CPU")
            a = np.linspace(-1, 1, 5).astype(np.float32)
            x = _k(a, True) if lib is kiln else _t(a, True)
            y = lib.ops.kt_cia.softplus2(x, 2.0) + lib.ops.kt_cia.cube(x)
            y.sum().backward()
            grads[lib.__name__] = _np(x.grad).copy()
            m = lib.ops.kt_cia.softplus2(lib.empty(3, 4, device="meta"))
            assert tuple(m.shape) == (3, 4)  # the decomposition runs on meta
            # opcheck: a backend kernel whose outputs record gradients has no autograd
            # registration -- the mistake test_autograd_registration catches
            opcheck = kopcheck if lib is kiln else torch.library.opcheck
            with pytest.raises(Exception, match="test_autograd_registration failed.*does not "
                                                "have an autograd kernel"):
                opcheck(lib.ops.kt_cia.cube.default, (x.detach().clone().requires_grad_(),),
                        test_utils="test_autograd_registration")
            assert opcheck(lib.ops.kt_cia.softplus2.default, (x.detach().clone(),),
                           test_utils="test_autograd_registration") == \
                {"test_autograd_registration": "SUCCESS"}
    np.testing.assert_allclose(grads["kiln"], grads["torch"], rtol=1e-5)
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(grads["kiln"], 1 / (1 + np.exp(-2 * x)) + 3 * x * x, rtol=1e-5)


def test_library_register_fake_meta_impl_and_register_autograd():
    grads = {}
    for lib in (kiln, torch):
        with lib.library._scoped_library("kt_reg", "FRAGMENT") as L:
            L.define("numpy_mul(Tensor x, Tensor y) -> Tensor")
            L.define("rows(Tensor x) -> Tensor")

            def numpy_mul(x, y):
                return lib.from_numpy(x.detach().numpy() * y.detach().numpy())

            lib.library.impl("kt_reg::numpy_mul", "cpu", numpy_mul, lib=L)
            lib.library.register_fake("kt_reg::numpy_mul", lambda x, y: lib.empty_like(x),
                                      lib=L)
            L.impl("rows", lambda x: lib.from_numpy(x.detach().numpy()[0].copy()), "CPU")
            L.impl("rows", lambda x: x.new_empty(x.shape[1:]), "Meta")

            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(*inputs)

            def backward(ctx, g):
                x, y = ctx.saved_tensors
                return (g * y if ctx.needs_input_grad[0] else None,
                        g * x if ctx.needs_input_grad[1] else None)

            lib.library.register_autograd("kt_reg::numpy_mul", backward,
                                          setup_context=setup_context, lib=L)
            rng = np.random.default_rng(7)
            a, b = rng.standard_normal(4), rng.standard_normal(4)
            mk = _k if lib is kiln else _t
            x, y = mk(a, True), mk(b)
            out = lib.ops.kt_reg.numpy_mul(x, y)
            out.backward(mk(np.ones(4)))
            grads[lib.__name__] = (_np(out).copy(), _np(x.grad).copy(), y.grad)
            m = lib.ops.kt_reg.numpy_mul(lib.empty(4, device="meta"),
                                         lib.empty(4, device="meta"))
            assert tuple(m.shape) == (4,) and m.device.type == "meta"
            r = lib.ops.kt_reg.rows(lib.empty(5, 6, device="meta"))
            assert tuple(r.shape) == (6,)
            np.testing.assert_array_equal(_np(lib.ops.kt_reg.rows(mk(np.eye(3)))), [1, 0, 0])
    np.testing.assert_allclose(grads["kiln"][0], grads["torch"][0])
    np.testing.assert_allclose(grads["kiln"][1], grads["torch"][1])
    assert grads["kiln"][2] is None and grads["torch"][2] is None


def test_impl_library_and_autograd_key_kernel_match_torch():
    import contextlib
    grads = {}
    for lib in (kiln, torch):
        below = (torch._C._AutoDispatchBelowAutograd if lib is torch
                 else contextlib.nullcontext)  # kiln: Function.forward already runs below
        F = lib.library.Library("kt_impl", "FRAGMENT")
        F.define("scaled(Tensor x, float s) -> Tensor")
        impl_lib = lib.library.Library("kt_impl", "IMPL")
        with pytest.raises(RuntimeError, match="(?i)cannot define an operator"):
            impl_lib.define("other(Tensor x) -> Tensor")
        with pytest.raises(RuntimeError, match="Explicitly provided namespace"):
            lib.library.Library("kt_other", "IMPL").impl("kt_impl::scaled", lambda x, s: x,
                                                          "CPU")
        impl_lib.impl("scaled", lambda x, s: lib.from_numpy(x.detach().numpy() * s), "CPU")

        class Scaled(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, s):
                ctx.s = s
                with below():
                    return lib.ops.kt_impl.scaled(x, s)

            @staticmethod
            def backward(ctx, g):
                return g * ctx.s, None

        impl_lib.impl("scaled", lambda x, s: Scaled.apply(x, s), "Autograd")
        x = lib.ones(3, requires_grad=True)
        y = lib.ops.kt_impl.scaled(x, 4.0)
        (y * y).sum().backward()
        grads[lib.__name__] = (_np(y).copy(), _np(x.grad).copy())
        impl_lib._destroy()  # its kernels go: the op has none left for CPU
        with pytest.raises(NotImplementedError, match="Could not run 'kt_impl::scaled'"):
            lib.ops.kt_impl.scaled(lib.ones(1), 1.0)
        # a fallthrough Autograd kernel: the backend kernel runs as if there were none
        F.impl("scaled", lambda x, s: x * s, "CPU")
        F.impl("scaled", lib.library.fallthrough_kernel, "Autograd")
        assert lib.ops.kt_impl.scaled(lib.ones(2, requires_grad=True), 2.0).requires_grad
        F._destroy()
    for k, t in zip(grads["kiln"], grads["torch"]):
        np.testing.assert_allclose(k, t)
    np.testing.assert_allclose(grads["kiln"][1], 32.0)


def test_register_fake_by_name_for_a_custom_op():
    for lib in (kiln, torch):
        op = _make_numpy_sin(lib, "sin_byname", with_fake=False)

        @lib.library.register_fake("kt::sin_byname")
        def _(x):
            return x.new_empty(x.shape[::-1])

        m = op(lib.empty(2, 5, device="meta"))
        assert tuple(m.shape) == (5, 2)
        assert op._abstract_fn is _  # custom_op's own slot, as torch


def test_packet_resolves_overloads_by_arguments():
    with kiln.library._scoped_library("kt_ovl", "FRAGMENT") as L:
        L.define("pick(Tensor x) -> Tensor")
        L.define("pick.int(Tensor x, int n) -> Tensor")
        L.impl("pick", lambda x: x + 1, "CPU")
        L.impl("pick.int", lambda x, n: x + n, "CPU")
        x = kiln.zeros(1)
        assert _np(kiln.ops.kt_ovl.pick(x))[0] == 1
        assert _np(kiln.ops.kt_ovl.pick(x, 7))[0] == 7
        with pytest.raises(RuntimeError, match="no overload matches the arguments"):
            kiln.ops.kt_ovl.pick(x, "seven")
    with pytest.raises(AttributeError):
        kiln.ops.kt_ovl.pick  # gone with its library


def test_legacy_define_and_impl_decorators():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lib in (kiln, torch):
            with lib.library._scoped_library("kt_legacy", "FRAGMENT") as L:
                @lib.library.define(L, "twice(Tensor x) -> Tensor")
                def twice(x):
                    return x * 2

                L.define("thrice(Tensor x) -> Tensor")

                @lib.library.impl(L, "thrice", "CPU")
                def thrice(x):
                    return x * 3

                assert _np(lib.ops.kt_legacy.twice(lib.ones(1)))[0] == 2
                assert _np(lib.ops.kt_legacy.thrice(lib.ones(1)))[0] == 3


def test_module_level_define_and_impl():
    for lib in (kiln, torch):
        lib.library.define("kt_mod::clamp01", "(Tensor x) -> Tensor")
        lib.library.impl("kt_mod::clamp01", "default", lambda x: x.clamp(0, 1))
        out = lib.ops.kt_mod.clamp01(lib.tensor([-1.0, 0.5, 2.0]))
        np.testing.assert_allclose(_np(out), [0, 0.5, 1])
        with pytest.raises(ValueError, match="expected schema to look like"):
            lib.library.define("kt_mod::other", "Tensor x -> Tensor")


# --- __torch_function__, profiling, compile, autocast -------------------------------------------

def test_torch_function_mode_and_subclass_see_the_op():
    seen = {}
    for lib in (kiln, torch):
        op = _make_numpy_sin(lib, "sin_tf")
        calls = []

        class Mode(lib.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                calls.append(str(func))
                return func(*args, **(kwargs or {}))

        with Mode():
            op(lib.ones(2))
            lib.ops.kt.sin_tf.default(lib.ones(2))
            lib.ops.kt.sin_tf(lib.ones(2))
        seen[lib.__name__] = [c for c in calls if "sin_tf" in c]

        class Sub(lib.Tensor):
            pass

        r = op(lib.ones(2).as_subclass(Sub))
        assert type(r) is Sub
        assert type(op(lib.ones(2))) is lib.Tensor
    assert seen["kiln"] == seen["torch"] == ["kt.sin_tf.default", "kt.sin_tf.default",
                                             "kt.sin_tf"]


def test_duck_type_handler_receives_the_op():
    op = _make_numpy_sin(kiln, "sin_duck")

    class Duck:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return ("handled", func)

    r = op(Duck())
    assert r == ("handled", kiln.ops.kt.sin_duck.default)


def test_profiler_records_custom_op():
    op = _make_numpy_sin(kiln, "sin_prof")
    x = kiln.ones(8)
    with kiln.profiler.profile() as prof:
        op(x)
    assert "kt::sin_prof" in [e.name for e in prof.events()]


def test_compile_runs_custom_ops_correctly():
    op = _make_numpy_sin(kiln, "sin_compile")

    def f(x):
        return op(x) * 2 + 1

    cf = kiln.compile(f)
    rng = np.random.default_rng(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):  # new values each call: no stale replay of the numpy kernel
            a = rng.standard_normal(4).astype(np.float32)
            x = _k(a, True)
            y = cf(x)
            _close(y, np.sin(a) * 2 + 1)
            y.sum().backward()
            _close(x.grad, 2 * np.cos(a))
    # a composite (CompositeImplicitAutograd) op is captured and replayed as kiln ops
    with kiln.library._scoped_library("kt_comp", "FRAGMENT") as L:
        L.define("sq(Tensor x) -> Tensor")
        L.impl("sq", lambda x: x * x, "CompositeImplicitAutograd")
        cg = kiln.compile(lambda x: kiln.ops.kt_comp.sq(x) + 1)
        for v in (2.0, 3.0):
            assert _np(cg(kiln.tensor([v])))[0] == v * v + 1
        assert cg.captures == 1 and cg.replays == 1
        assert kopcheck(kiln.ops.kt_comp.sq.default,
                        (kiln.tensor([1.0, 2.0]).requires_grad_(),)) == {
            "test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
            "test_faketensor": "SUCCESS", "test_aot_dispatch_dynamic": "SUCCESS"}


def test_register_autocast_casts_inputs():
    dts = {}
    for lib in (kiln, torch):
        T = lib.Tensor

        def f(x: T) -> T:
            return x * 2

        op = lib.library.custom_op("kt::ac", f, mutates_args=())
        op.register_autocast("cpu", lib.bfloat16)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = op(lib.ones(2))
        dts[lib.__name__] = (str(y.dtype).split(".")[-1], str(op(lib.ones(2)).dtype)
                             .split(".")[-1])
    assert dts["kiln"] == dts["torch"] == ("bfloat16", "float32")


def test_triton_is_not_available():
    with pytest.raises(NotImplementedError, match="kiln has no Triton"):
        kiln.library.triton_op("kt::tri", lambda x: x, mutates_args=())
    with pytest.raises(NotImplementedError, match="kiln has no Triton"):
        kiln.library.wrap_triton(object())
    with pytest.raises(NotImplementedError, match="register_torch_dispatch"):
        _make_numpy_sin(kiln, "sin_td").register_torch_dispatch(object, lambda *a: None)


# --- a module trained with a custom op ------------------------------------------------------

def _make_linear_op(lib):
    T = lib.Tensor

    def numpy_linear(x: T, w: T, b: T) -> T:
        return lib.from_numpy(x.detach().numpy() @ w.detach().numpy().T + b.detach().numpy())

    op = lib.library.custom_op("kt::np_linear", numpy_linear, mutates_args=())
    op.register_fake(lambda x, w, b: x.new_empty(x.shape[0], w.shape[0]))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1])

    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x, g.sum(0)

    op.register_autograd(backward, setup_context=setup_context)
    return op


def test_module_with_custom_op_trains_like_torch():
    rng = np.random.default_rng(9)
    w1 = rng.standard_normal((8, 4)).astype(np.float32) * 0.5
    b1 = rng.standard_normal(8).astype(np.float32) * 0.1
    w2 = rng.standard_normal((3, 8)).astype(np.float32) * 0.5
    b2 = rng.standard_normal(3).astype(np.float32) * 0.1
    data = rng.standard_normal((16, 4)).astype(np.float32)
    target = rng.integers(0, 3, 16)
    runs = {}
    for lib in (kiln, torch):
        nn = knn if lib is kiln else torch.nn
        op = _make_linear_op(lib)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.w1 = nn.Parameter(lib.from_numpy(w1.copy()))
                self.b1 = nn.Parameter(lib.from_numpy(b1.copy()))
                self.out = nn.Linear(8, 3)
                with lib.no_grad():
                    self.out.weight.copy_(lib.from_numpy(w2))
                    self.out.bias.copy_(lib.from_numpy(b2))

            def forward(self, x):
                return self.out(lib.tanh(op(x, self.w1, self.b1)))

        net = Net()
        optim = lib.optim.SGD(net.parameters(), lr=0.1)
        x, y = lib.from_numpy(data), lib.from_numpy(target)
        losses = []
        for _ in range(5):
            optim.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optim.step()
            losses.append(loss.item())
        runs[lib.__name__] = (losses, _np(net.w1).copy(), _np(net.b1).copy(),
                              _np(net.out.weight).copy())
        with lib.no_grad():
            m = op(lib.empty(5, 4, device="meta"), lib.empty(8, 4, device="meta"),
                   lib.empty(8, device="meta"))
        assert tuple(m.shape) == (5, 8)
    np.testing.assert_allclose(runs["kiln"][0], runs["torch"][0], rtol=1e-5)
    assert runs["kiln"][0][-1] < runs["kiln"][0][0]
    for k, t in zip(runs["kiln"][1:], runs["torch"][1:]):
        np.testing.assert_allclose(k, t, rtol=1e-4, atol=1e-6)
    assert not np.allclose(runs["kiln"][1], w1)  # the custom op's weights did train
