"""kiln.autograd.Function against torch.autograd.Function: the same custom function class
body written once over L (kiln or torch) gives the same outputs, gradients and errors."""
import numpy as np
import pytest
import torch

import kiln
import oracle


def make_functions(L):
    Function = L.autograd.Function

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class ScaledMul(Function):  # non-tensor argument, two tensor inputs
        @staticmethod
        def forward(ctx, a, b, scale):
            ctx.save_for_backward(a, b)
            ctx.scale = scale
            return a * b * scale

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            ga = g * b * ctx.scale if ctx.needs_input_grad[0] else None
            gb = g * a * ctx.scale if ctx.needs_input_grad[1] else None
            return ga, gb, None

    class SplitStats(Function):  # two outputs, one of them possibly unused
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sum(1), (x * x).sum(1)

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return g1.unsqueeze(1) + 2 * x * g2.unsqueeze(1)

    class ArgMaxAndMax(Function):  # a non-differentiable integer output
        @staticmethod
        def forward(ctx, x):
            m, i = x.max(1)
            ctx.save_for_backward(x, i)
            ctx.mark_non_differentiable(i)
            return m, i

        @staticmethod
        def backward(ctx, g, _gi):
            x, i = ctx.saved_tensors
            out = L.zeros_like(x)
            return out.scatter(1, i.unsqueeze(1), g.unsqueeze(1))

    class BroadcastGrad(Function):  # backward returns a gradient of the broadcast shape
        @staticmethod
        def forward(ctx, x, bias):
            return x + bias

        @staticmethod
        def backward(ctx, g):
            return g, g

    class SetupCtx(Function):  # forward without ctx, setup_context separately
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    class WrongCount(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum(0)[:1]

    class Identity(Function):  # returns its input as is
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return 3 * g

    return dict(Exp=Exp, ScaledMul=ScaledMul, SplitStats=SplitStats,
                ArgMaxAndMax=ArgMaxAndMax, BroadcastGrad=BroadcastGrad, SetupCtx=SetupCtx,
                WrongCount=WrongCount, WrongShape=WrongShape, Identity=Identity)


KF, TF = make_functions(kiln), make_functions(torch)

CASES = {
    "Exp": (lambda F, a, b: F["Exp"].apply(a) * 2, [(3, 4)]),
    "Exp_chain": (lambda F, a, b: F["Exp"].apply(F["Exp"].apply(a * 0.3)).sum(), [(5,)]),
    "ScaledMul": (lambda F, a, b: F["ScaledMul"].apply(a, b, 1.5), [(3, 4), (3, 4)]),
    "ScaledMul_const_b": (lambda F, a, b: F["ScaledMul"].apply(a, b.detach(), -2.0),
                          [(3, 4), (3, 4)]),
    "SplitStats_both": (lambda F, a, b: sum(o.sum() for o in F["SplitStats"].apply(a)),
                        [(3, 4)]),
    "SplitStats_first_only": (lambda F, a, b: F["SplitStats"].apply(a)[0], [(3, 4)]),
    "ArgMaxAndMax": (lambda F, a, b: F["ArgMaxAndMax"].apply(a)[0], [("spread", (3, 4))]),
    "BroadcastGrad": (lambda F, a, b: F["BroadcastGrad"].apply(a, b), [(3, 4), (4,)]),
    "SetupCtx": (lambda F, a, b: F["SetupCtx"].apply(a, 3.0), [(2, 3)]),
    "Identity": (lambda F, a, b: F["Identity"].apply(a) * 1, [(2, 3)]),
}


def _inputs(L, specs, dtype, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if isinstance(s, tuple) and s and s[0] == "spread":
            a = oracle.gen_array(rng, s[1], dtype, "spread")
        else:
            a = rng.uniform(-1, 1, size=s).astype(dtype)
        out.append(L.tensor(a, dtype=getattr(L, dtype)).requires_grad_(True))
    return out + [None] * (2 - len(out))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_function_vs_torch(name, dtype):
    fn, specs = CASES[name]
    tin = _inputs(torch, specs, dtype, 1)
    kin = _inputs(kiln, specs, dtype, 1)
    tr, kr = fn(TF, *tin), fn(KF, *kin)
    oracle.assert_same(kr, tr, where=name)
    assert kr.requires_grad and kr.grad_fn is not None
    g = np.random.default_rng(2).uniform(-1, 1, size=tuple(tr.shape)).astype(dtype)
    tr.backward(torch.tensor(g))
    kr.backward(kiln.tensor(g))
    for i, (t, k) in enumerate(zip(tin, kin)):
        if t is None:
            continue
        if t.grad is None:
            assert k.grad is None, f"{name}: input {i}"
        else:
            oracle.assert_same(k.grad, t.grad, 4, where=f"{name} grad {i}")
    oracle.record(f"autograd.Function.{name}", 2)


def test_grad_fn_name_needs_input_grad_and_no_grad():
    x = kiln.ones(3, requires_grad=True)
    y = KF["Exp"].apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    with kiln.no_grad():
        z = KF["Exp"].apply(x)
    assert not z.requires_grad and z.grad_fn is None
    w = KF["Exp"].apply(kiln.ones(3))  # no input requires grad: no graph
    assert not w.requires_grad
    m, i = KF["ArgMaxAndMax"].apply(kiln.tensor([[1.0, 3.0, 2.0]], requires_grad=True))
    assert m.requires_grad and not i.requires_grad and i.dtype == kiln.int64
    g, = kiln.autograd.grad(KF["Exp"].apply(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.e, rtol=1e-6)
    oracle.record("autograd.Function.semantics", 5)


def _errors(F, L):
    def backward_twice():
        x = L.ones(3, requires_grad=True)
        y = F["Exp"].apply(x).sum()
        y.backward()
        y.backward()

    def retain_graph_ok():
        x = L.ones(3, requires_grad=True)
        y = F["Exp"].apply(x).sum()
        y.backward(retain_graph=True)
        y.backward()
        if float(x.grad.sum()) != pytest.approx(6 * np.e):
            raise AssertionError("retain_graph gradients wrong")
        raise KeyError("ok")  # both must get here

    def modified_saved():
        x = L.ones(3, requires_grad=True)
        y = F["Exp"].apply(x)
        z = y.sum()
        with L.no_grad():
            y.mul_(2)
        z.backward()

    def wrong_count():
        x = L.ones(3, requires_grad=True)
        F["WrongCount"].apply(x).sum().backward()

    def wrong_shape():
        x = L.ones(3, 2, requires_grad=True)
        F["WrongShape"].apply(x).sum().backward()

    def raising_backward():
        class Boom(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                raise ValueError("boom")
        Boom.apply(L.ones(2, requires_grad=True)).sum().backward()

    def no_forward():
        class Empty(L.autograd.Function):
            pass
        Empty.apply(L.ones(2))

    return dict(backward_twice=backward_twice, retain_graph_ok=retain_graph_ok,
                modified_saved=modified_saved, wrong_count=wrong_count,
                wrong_shape=wrong_shape, raising_backward=raising_backward,
                no_forward=no_forward)


@pytest.mark.parametrize("name", list(_errors(KF, kiln)))
def test_function_errors_vs_torch(name):
    with pytest.raises(Exception) as te:
        _errors(TF, torch)[name]()
    with pytest.raises(Exception) as ke:
        _errors(KF, kiln)[name]()
    assert type(ke.value) is type(te.value), (ke.value, te.value)
    if name == "raising_backward":
        assert str(ke.value) == "boom"
    oracle.record("autograd.Function.errors")


def _mark_dirty_functions(L):
    class MulInPlace(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class ScaleInPlace(L.autograd.Function):  # saves the dirty input; x may not need grad
        @staticmethod
        def forward(ctx, x, w):
            x.mul_(w)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x, w)
            return x

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w, g * x / w

    class NotReturned(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    return MulInPlace, ScaleInPlace, NotReturned


def test_function_mark_dirty():
    """The in-place custom Function pattern on a non-leaf: as in torch, apply returns the
    input object itself, which now has the Function in its history, so gradients are right
    whether the caller goes on with the returned tensor or with the old name (kiln's
    y.grad_fn is the node of an in-place copy whose only edge is MulInPlaceBackward, where
    torch's is MulInPlaceBackward itself)."""
    weights = np.array([1.0, 10.0, 100.0])
    results = []
    for L in (torch, kiln):
        MulInPlace = _mark_dirty_functions(L)[0]
        a = L.tensor(np.array([1.0, -2.0, 3.0]), dtype=L.float64, requires_grad=True)
        y = a * 1
        out = MulInPlace.apply(y)
        assert out is y and y.requires_grad and y.grad_fn is not None
        assert y.grad_fn.name() != "mulBackward" and y.grad_fn.name() != "MulBackward0"
        w = L.tensor(weights, dtype=L.float64)
        (out * w).sum().backward(retain_graph=True)
        g_out = a.grad.clone()
        a.grad = None
        (y * w).sum().backward()  # the old name: the same graph
        results.append((out, g_out, a.grad))
    (tout, tg1, tg2), (kout, kg1, kg2) = results
    oracle.assert_same(kout, tout, where="mark_dirty value")
    oracle.assert_same(kg1, tg1, where="mark_dirty grad via output")
    oracle.assert_same(kg2, tg2, where="mark_dirty grad via input name")
    np.testing.assert_allclose(kg2.numpy(), 2 * weights)
    oracle.record("autograd.Function.mark_dirty", 3)


def test_function_mark_dirty_more_cases():
    results = []
    for L in (torch, kiln):
        MulInPlace, ScaleInPlace, NotReturned = _mark_dirty_functions(L)
        f64 = dict(dtype=L.float64)
        r = {}
        # a view of a non-leaf: rebased through its base
        a = L.tensor([1.0, 2.0, 3.0], requires_grad=True, **f64)
        b = a * 1
        v = b[1:]
        assert MulInPlace.apply(v) is v
        (b * L.tensor([1.0, 10.0, 100.0], **f64)).sum().backward()
        r["view_value"], r["view_grad"] = b.detach(), a.grad
        # the dirty input does not require grad, another input does; forward saves it
        x = L.ones(2, **f64)
        w = L.tensor([2.0, 3.0], requires_grad=True, **f64)
        out = ScaleInPlace.apply(x, w)
        assert out is x and x.requires_grad and not x.is_leaf
        (out * out).sum().backward()
        r["saved_value"], r["saved_grad"] = out.detach(), w.grad
        # no graph recorded: the input itself, unchanged history
        with L.no_grad():
            z = L.ones(2, **f64)
            assert MulInPlace.apply(z) is z and not z.requires_grad
        r["nograd_value"] = z
        # errors: a leaf that requires grad; a dirty input not returned (even without grad)
        for name, fn in (("leaf", lambda: MulInPlace.apply(L.ones(2, requires_grad=True))),
                         ("not_returned", lambda: NotReturned.apply(L.ones(2) * 1)),
                         ("not_returned_grad",
                          lambda: NotReturned.apply(L.ones(2, requires_grad=True) * 1))):
            with pytest.raises(Exception) as e:
                fn()
            r[name] = (type(e.value), str(e.value))
        results.append(r)
    t, k = results
    for key in t:
        if isinstance(t[key], tuple):
            assert k[key] == t[key], key
        else:
            oracle.assert_same(k[key], t[key], where=key)
    oracle.record("autograd.Function.mark_dirty", 8)
