"""kiln.nn.Module backward hooks (register_full_backward_hook, register_full_backward_pre_hook)
against torch.nn.Module: the same model class, written once over `nn` and built with
torch.nn and kiln.nn on identical float64 weights, must give the same parameter and input
gradients, and its hooks must be called in the same order with the same grad_input and
grad_output (None in the same places, equal values)."""
import warnings

import numpy as np
import pytest
import torch

import kiln
import oracle

RTOL, ATOL = 1e-12, 1e-13


def _np(x):
    return None if x is None else x.detach().cpu().numpy().copy()


def _same_values(k, t, where):
    """Nested tuples/lists of tensors or None (kiln k, torch t) hold the same values."""
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t), f"{where}: {k!r} vs {t!r}"
        for i, (a, b) in enumerate(zip(k, t)):
            _same_values(a, b, f"{where}[{i}]")
    elif t is None:
        assert k is None, f"{where}: kiln has a value where torch has None"
    elif isinstance(t, torch.Tensor):
        assert k is not None, f"{where}: kiln has None where torch has a tensor"
        assert isinstance(k, kiln.Tensor), f"{where}: kiln gave {type(k).__name__}"
        assert oracle.dtype_name(k.dtype) == oracle.dtype_name(t.dtype), where
        assert tuple(k.shape) == tuple(t.shape), f"{where}: {tuple(k.shape)} vs {tuple(t.shape)}"
        np.testing.assert_allclose(_np(k), _np(t), rtol=RTOL, atol=ATOL, err_msg=where)
    else:
        assert k == t, f"{where}: {k!r} vs {t!r}"


class Recorder:
    """Hooks that log (tag, kind, grads) as numpy copies; kinds "pre" and "full"."""

    def __init__(self):
        self.log = []

    def pre(self, tag, result=None):
        def hook(module, grad_output):
            self.log.append((tag, "pre", (tuple(_np(g) for g in grad_output),)))
            return result(grad_output) if result else None
        return hook

    def full(self, tag, result=None):
        def hook(module, grad_input, grad_output):
            self.log.append((tag, "full", (tuple(_np(g) for g in grad_input),
                                           tuple(_np(g) for g in grad_output))))
            return result(grad_input) if result else None
        return hook


def _same_logs(k, t):
    assert [e[:2] for e in k.log] == [e[:2] for e in t.log]
    for (tag, kind, kv), (_, _, tv) in zip(k.log, t.log):
        _compare_np(kv, tv, f"{tag} {kind}")


def _compare_np(k, t, where):
    if isinstance(t, tuple):
        assert isinstance(k, tuple) and len(k) == len(t), f"{where}: {k!r} vs {t!r}"
        for i, (a, b) in enumerate(zip(k, t)):
            _compare_np(a, b, f"{where}[{i}]")
    elif t is None:
        assert k is None, f"{where}: kiln has a value where torch has None"
    else:
        assert k is not None, f"{where}: kiln has None where torch has a value"
        assert k.shape == t.shape and k.dtype == t.dtype, f"{where}: {k.shape} vs {t.shape}"
        np.testing.assert_allclose(k, t, rtol=RTOL, atol=ATOL, err_msg=where)


def _build(make, seed=0):
    """make(nn, L) -> module class; returns (torch module, kiln module) with equal float64
    weights (random, not the default init)."""
    t = make(torch.nn, torch)().double()
    k = make(kiln.nn, kiln)().double()
    rng = np.random.default_rng(seed)
    sd = {n: rng.uniform(-1, 1, size=tuple(v.shape)) for n, v in t.state_dict().items()}
    t.load_state_dict({n: torch.tensor(v) for n, v in sd.items()})
    k.load_state_dict({n: kiln.tensor(v) for n, v in sd.items()})
    return t, k


def _data(shape, seed, requires_grad=True):
    a = np.random.default_rng(seed).uniform(-1, 1, size=shape)
    return (torch.tensor(a, requires_grad=requires_grad),
            kiln.tensor(a, dtype=kiln.float64).requires_grad_(requires_grad))


def _same_param_grads(k, t):
    tp = dict(t.named_parameters())
    for n, p in k.named_parameters():
        _same_values(p.grad, tp[n].grad, f"{n}.grad")


def _linear(nn, L):
    return lambda: nn.Linear(3, 4)


def test_linear_full_hook_and_pre_hook():
    t, k = _build(_linear)
    tx, kx = _data((5, 3), 1)
    tg, kg = _data((5, 4), 2, requires_grad=False)
    recs = []
    for m, x, g in ((t, tx, tg), (k, kx, kg)):
        r = Recorder()
        m.register_full_backward_pre_hook(r.pre("lin"))
        m.register_full_backward_hook(r.full("lin"))
        out = m(x)
        assert out.grad_fn.name() == "BackwardHookFunctionBackward"
        assert r.log == []  # nothing runs before backward
        out.backward(g)
        recs.append(r)
    _same_logs(recs[1], recs[0])
    assert [e[:2] for e in recs[0].log] == [("lin", "pre"), ("lin", "full")]
    _same_values(kx.grad, tx.grad, "x.grad")
    _same_param_grads(k, t)
    oracle.record("nn.Module.backward_hooks.linear", 5)


def _nested(nn, L):
    def make():
        return nn.Sequential(nn.Linear(3, 4), nn.Tanh(),
                             nn.Sequential(nn.Linear(4, 4), nn.Sigmoid()), nn.Linear(4, 2))
    return make


def _hook_all(model, rec):
    handles = []
    for name, mod in model.named_modules():
        tag = name or "root"
        handles.append(mod.register_full_backward_pre_hook(rec.pre(tag)))
        handles.append(mod.register_full_backward_hook(rec.full(tag)))
    return handles


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_nested_sequential_order_and_values(input_requires_grad):
    t, k = _build(_nested)
    tx, kx = _data((2, 3), 3, requires_grad=input_requires_grad)
    recs, caught = [], []
    for m, x in ((t, tx), (k, kx)):
        r = Recorder()
        _hook_all(m, r)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            (m(x) ** 2).sum().backward()
        caught.append(sorted({str(i.message)[:40] for i in w
                              if issubclass(i.category, UserWarning)}))
        recs.append(r)
    _same_logs(recs[1], recs[0])
    assert caught[1] == caught[0]
    if not input_requires_grad:  # the first layer's (and root's) grad_input is all None
        assert caught[0] == ["Full backward hook is firing when gradie"]
        fulls = {tag: v for tag, kind, v in recs[1].log if kind == "full"}
        assert fulls["root"][0] == (None,) and fulls["0"][0] == (None,)
        assert kx.grad is None
    else:
        _same_values(kx.grad, tx.grad, "x.grad")
    _same_param_grads(k, t)
    # the outer module's pre-hook runs first; its full hook last, or at once when no input
    # requires grad
    assert recs[1].log[0][:2] == ("root", "pre")
    assert recs[1].log[-1 if input_requires_grad else 1][:2] == ("root", "full")
    oracle.record("nn.Module.backward_hooks.nested", 3)


def _two_inputs(nn, L):
    class TwoInputs(nn.Module):
        """forward(a, b, scale): a tensor that requires grad, one that does not, and a
        non-tensor; returns a tuple with a tensor, a second tensor and a non-tensor."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(L.zeros(4))

        def forward(self, a, b, scale):
            return a * b * scale + self.w, (a * a).sum(1), 7
    return TwoInputs


@pytest.mark.parametrize("use_second", [True, False])
def test_two_inputs_one_without_grad(use_second):
    t, k = _build(_two_inputs)
    ta, ka = _data((3, 4), 4)
    tb, kb = _data((3, 4), 5, requires_grad=False)
    recs = []
    for m, a, b in ((t, ta, tb), (k, ka, kb)):
        r = Recorder()
        m.register_full_backward_pre_hook(r.pre("m"))
        m.register_full_backward_hook(r.full("m"))
        y, s, seven = m(a, b, 1.5)
        assert seven == 7 and not b.requires_grad
        loss = (y * y).sum() + (s.sum() * 3 if use_second else 0)
        loss.backward()
        recs.append(r)
    _same_logs(recs[1], recs[0])
    (_, _, (gi, go)) = recs[1].log[1]
    assert gi[1] is not None and gi[2] is None  # torch: zeros for b, None for the float
    assert (go[1] is None) == (not use_second) and go[2] is None
    _same_values(ka.grad, ta.grad, "a.grad")
    assert kb.grad is None and tb.grad is None
    _same_param_grads(k, t)
    oracle.record("nn.Module.backward_hooks.two_inputs", 4)


def _two_layers(nn, L):
    return lambda: nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))


def test_full_hook_scales_grad_input():
    t, k = _build(_two_layers)
    tx, kx = _data((4, 3), 6)
    recs = []
    for m, x in ((t, tx), (k, kx)):
        r = Recorder()
        # scales what flows on to the input of the last Linear (so to layers 0 and 1 and x),
        # not the gradients of its own parameters
        m[2].register_full_backward_hook(r.full("2", lambda gi: tuple(
            None if g is None else g * 2.5 for g in gi)))
        m[0].register_full_backward_hook(r.full("0"))
        m(x).pow(3).sum().backward()
        recs.append(r)
    _same_logs(recs[1], recs[0])
    _same_values(kx.grad, tx.grad, "x.grad")
    _same_param_grads(k, t)
    oracle.record("nn.Module.backward_hooks.scale_grad_input", 3)


def test_pre_hook_replaces_grad_output():
    t, k = _build(_two_layers)
    tx, kx = _data((4, 3), 7)
    recs = []
    for m, x, L in ((t, tx, torch), (k, kx, kiln)):
        r = Recorder()
        # the last layer's pre-hook replaces grad_output; a second pre-hook sees the new one
        m[2].register_full_backward_pre_hook(r.pre("2a", lambda go: (go[0] * -3 + 1,)))
        m[2].register_full_backward_pre_hook(r.pre("2b"))
        m[2].register_full_backward_hook(r.full("2"))
        # the first layer's pre-hook is registered with prepend: it runs first
        m[0].register_full_backward_pre_hook(r.pre("0b"))
        m[0].register_full_backward_pre_hook(
            r.pre("0a", lambda go: (L.ones_like(go[0]),)), prepend=True)
        m[0].register_full_backward_hook(r.full("0"))
        m(x).sum().backward()
        recs.append(r)
    _same_logs(recs[1], recs[0])
    assert [e[0] for e in recs[1].log] == ["2a", "2b", "2", "0a", "0b", "0"]
    _same_values(kx.grad, tx.grad, "x.grad")
    _same_param_grads(k, t)
    oracle.record("nn.Module.backward_hooks.replace_grad_output", 3)


def test_remove_hooks_and_retain_graph():
    t, k = _build(_linear)
    tx, kx = _data((2, 3), 8)
    recs = []
    for m, x in ((t, tx), (k, kx)):
        r = Recorder()
        h1 = m.register_full_backward_hook(r.full("removed_before"))
        h2 = m.register_full_backward_hook(r.full("removed_after_forward"))
        h3 = m.register_full_backward_pre_hook(r.pre("pre_removed_after_forward"))
        m.register_full_backward_hook(r.full("kept"), prepend=True)
        h1.remove()
        out = m(x)
        h2.remove()  # the graph built above still calls it (hooks are taken at call time)
        h3.remove()
        out.sum().backward(retain_graph=True)
        out.sum().backward()  # the retained graph calls them again
        m(x).sum().backward()  # a new graph: only "kept"
        h1.remove()  # removing twice is harmless
        recs.append(r)
    _same_logs(recs[1], recs[0])
    assert [e[0] for e in recs[1].log] == (
        ["pre_removed_after_forward", "kept", "removed_after_forward"] * 2 + ["kept"])
    _same_values(kx.grad, tx.grad, "x.grad")
    _same_param_grads(k, t)
    oracle.record("nn.Module.backward_hooks.remove", 3)


def test_no_grad_mode_and_no_hooks_left():
    t, k = _build(_linear)
    for m, L in ((t, torch), (k, kiln)):
        calls = []
        h = m.register_full_backward_hook(lambda *a: calls.append(1))
        with L.no_grad():
            out = m(L.ones(1, 3, dtype=L.float64, requires_grad=True))
        assert not out.requires_grad and out.grad_fn is None
        h.remove()
        out = m(L.ones(1, 3, dtype=L.float64, requires_grad=True))
        assert out.grad_fn.name() != "BackwardHookFunctionBackward"
        out.sum().backward()
        assert calls == []
    oracle.record("nn.Module.backward_hooks.no_grad", 2)


def _errors(nn, L):
    def wrong_grad_input_count():
        m = nn.Linear(2, 2)
        m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
        m(L.ones(1, 2, requires_grad=True)).sum().backward()

    def wrong_grad_output_count():
        m = nn.Linear(2, 2)
        m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
        m(L.ones(1, 2, requires_grad=True)).sum().backward()

    def value_without_input_grad():
        m = nn.Linear(2, 2)
        m.register_full_backward_hook(lambda mod, gi, go: (L.ones(1, 2),))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m(L.ones(1, 2)).sum().backward()

    def inplace_input_in_forward():
        m = nn.ReLU(inplace=True)
        m.register_full_backward_hook(lambda mod, gi, go: None)
        m(L.ones(2, requires_grad=True) * 1)

    return dict(wrong_grad_input_count=wrong_grad_input_count,
                wrong_grad_output_count=wrong_grad_output_count,
                value_without_input_grad=value_without_input_grad,
                inplace_input_in_forward=inplace_input_in_forward)


@pytest.mark.parametrize("name", list(_errors(torch.nn, torch)))
def test_backward_hook_errors_vs_torch(name):
    with pytest.raises(Exception) as te:
        _errors(torch.nn, torch)[name]()
    with pytest.raises(Exception) as ke:
        _errors(kiln.nn, kiln)[name]()
    assert type(ke.value) is type(te.value), (ke.value, te.value)
    assert str(ke.value) == str(te.value)
    oracle.record("nn.Module.backward_hooks.errors")


def test_register_backward_hook_not_supported():
    # torch 2.13 runs the deprecated non-full hook on the output's grad_fn (grad_input of the
    # last autograd node, not of the module); kiln cannot hook its graph nodes from Python
    # and refuses rather than hand the hook different values.
    m = kiln.nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        m.register_backward_hook(lambda mod, gi, go: None)
    assert not m._backward_hooks


def _index_model(nn, L):
    import collections
    Pair = collections.namedtuple("Pair", "values index")

    class Gather(nn.Module):
        """An integer input (its grad_input is zeros, as torch materializes it), a keyword
        tensor input (not part of grad_input) and a namedtuple output."""

        def forward(self, x, idx, shift=None):
            return Pair(x[idx] * 2 + shift, idx)
    return Gather


def test_integer_input_keyword_input_namedtuple_output():
    t, k = _build(_index_model)
    tx, kx = _data((5,), 9)
    ts, ks = _data((3,), 10)
    recs = []
    for m, x, s, L in ((t, tx, ts, torch), (k, kx, ks, kiln)):
        r = Recorder()
        m.register_full_backward_pre_hook(r.pre("m"))
        m.register_full_backward_hook(r.full("m"))
        out = m(x, L.tensor([4, 0, 4]), shift=s)
        assert type(out).__name__ == "Pair" and not out.index.requires_grad
        (out.values * out.values).sum().backward()
        recs.append(r)
    _same_logs(recs[1], recs[0])
    assert recs[1].log[1][2][0][1].dtype == np.int64  # zeros for the index, as torch
    _same_values(kx.grad, tx.grad, "x.grad")
    _same_values(ks.grad, ts.grad, "shift.grad")
    oracle.record("nn.Module.backward_hooks.int_kwarg_namedtuple", 3)
