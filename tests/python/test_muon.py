"""kiln.optim.Muon against torch.optim.Muon (2.13).

The bfloat16 Newton-Schulz iteration is compared bit for bit with torch's on identical input.
The parameter trajectories (identical parameters and gradients, float32 / float64 / bfloat16)
are compared with a bfloat16 tolerance: kiln's lerp rounds differently from torch's (torch's
CPU kernel uses an fma), so the momentum buffers differ in the last float32 bit, and that can
flip a bfloat16 rounding inside the iteration; a flip moves an entry by one bfloat16 ulp of the
update (at most 2^-7 for entries below 2) times the step size, so the tolerance is
lr_adjusted * 2^-6 (the largest error seen is 2^-7; a 2% change of the step size fails). Then defaults, argument and step-time errors (same class and message), closure, tensor
lr, state_dict resume."""
import copy

import numpy as np
import pytest
import torch
from torch.optim._muon import _zeropower_via_newtonschulz as torch_ns

import kiln
from kiln.optim.muon import _zeropower_via_newtonschulz as kiln_ns

SHAPES = [(8, 16), (16, 8), (12, 12), (1, 5)]


def _k(a):
    return kiln.from_numpy(np.ascontiguousarray(a).copy())


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a).copy())


def _np(x):
    """float32 numpy view of a kiln or torch tensor (bfloat16 values are exact in float32)."""
    return x.detach().float().numpy()


@pytest.mark.parametrize("shape", SHAPES + [(3, 40), (40, 3)])
@pytest.mark.parametrize("scale", [1.0, 1e-4, 1e3])
def test_newton_schulz_bitwise_equal_to_torch(shape, scale):
    rng = np.random.default_rng(sum(shape))
    g = (rng.standard_normal(shape) * scale).astype(np.float32)
    got = kiln_ns(_k(g), (3.4445, -4.775, 2.0315), 5, 1e-7)
    want = torch_ns(_t(g), (3.4445, -4.775, 2.0315), 5, 1e-7)
    assert str(got.dtype) == "kiln.bfloat16" and want.dtype == torch.bfloat16
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(_np(got), _np(want))
    # it is (nearly) orthogonal: singular values of the wide orientation in about [0.5, 1.5]
    s = np.linalg.svd(_np(want), compute_uv=False)
    assert s.min() > 0.3 and s.max() < 1.6


def test_newton_schulz_other_coefficients_and_zero_input():
    rng = np.random.default_rng(1)
    g = rng.standard_normal((6, 9)).astype(np.float32)
    for coeffs, steps in [((2.0, -1.5, 0.5), 3), ((3.4445, -4.775, 2.0315), 0)]:
        np.testing.assert_array_equal(_np(kiln_ns(_k(g), coeffs, steps, 1e-7)),
                                      _np(torch_ns(_t(g), coeffs, steps, 1e-7)))
    z = np.zeros((4, 3), np.float32)  # the norm is clamped to eps: zeros stay zeros
    np.testing.assert_array_equal(_np(kiln_ns(_k(z), (3.4445, -4.775, 2.0315), 5, 1e-7)),
                                  _np(torch_ns(_t(z), (3.4445, -4.775, 2.0315), 5, 1e-7)))


def _pair(dtype, seed, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    kp = [kiln.nn.Parameter(_k(a).to(getattr(kiln, dtype))) for a in arrays]
    tp = [torch.nn.Parameter(_t(a).to(getattr(torch, dtype))) for a in arrays]
    return kp, tp


def _set_grads(kp, tp, rng, scale=1.0):
    for k, t in zip(kp, tp):
        g = (rng.standard_normal(tuple(t.shape)) * scale).astype(np.float32)
        k.grad = _k(g).to(k.dtype)
        t.grad = _t(g).to(t.dtype)


def _adjusted(lr, fn, shape):
    a, b = shape
    return lr * (0.2 * max(a, b) ** 0.5 if fn == "match_rms_adamw" else max(1, a / b) ** 0.5)


def _close(kp, tp, kw, step, extra=0.0):
    lr = kw.get("lr", 1e-3)
    for i, (k, t) in enumerate(zip(kp, tp)):
        assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        # not growing with the steps: the gradients are given, so a flip does not feed back
        tol = _adjusted(lr, kw.get("adjust_lr_fn"), tuple(t.shape)) * 2 ** -6
        err = np.abs(_np(k) - _np(t)).max()
        assert err <= tol + extra, f"param {i} {tuple(t.shape)} step {step}: {err:.3g} > {tol:.3g}"


CONFIGS = [
    {},
    {"lr": 0.02, "nesterov": False},
    {"lr": 0.05, "adjust_lr_fn": "match_rms_adamw", "weight_decay": 0.0},
    {"lr": 0.01, "momentum": 0.0, "adjust_lr_fn": "original"},
    {"lr": 0.03, "ns_steps": 3, "ns_coefficients": (2.0, -1.5, 0.5), "weight_decay": 0.5},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_muon_trajectory_matches_torch(dtype, config):
    kw = CONFIGS[config]
    kp, tp = _pair(dtype, seed=config)
    ko, to = kiln.optim.Muon(kp, **kw), torch.optim.Muon(tp, **kw)
    rng = np.random.default_rng(50 + config)
    for step in range(6):
        _set_grads(kp, tp, rng, scale=[1.0, 1e-3, 10.0][step % 3])
        ko.step()
        to.step()
        _close(kp, tp, kw, step)
        for k, t in zip(kp, tp):  # the momentum buffers: a few float32 ulps apart at most
            np.testing.assert_allclose(ko.state[k]["momentum_buffer"].numpy(),
                                       to.state[t]["momentum_buffer"].numpy(),
                                       rtol=1e-5, atol=1e-6)


def test_muon_bfloat16_parameters():
    # bfloat16 parameters: torch's bfloat16() then returns the momentum buffer itself and the
    # normalisation writes into it (nesterov=False); kiln follows the same operations. The
    # parameter is rounded to bfloat16 at each step: one bfloat16 ulp of it more tolerance.
    for kw in ({"lr": 0.02}, {"lr": 0.02, "nesterov": False}):
        kp, tp = _pair("bfloat16", seed=3)
        ko, to = kiln.optim.Muon(kp, **kw), torch.optim.Muon(tp, **kw)
        rng = np.random.default_rng(7)
        for step in range(4):
            _set_grads(kp, tp, rng)
            ko.step()
            to.step()
            _close(kp, tp, kw, step, extra=(step + 1) * 2 ** -7 * 4)
            for k, t in zip(kp, tp):
                np.testing.assert_allclose(_np(ko.state[k]["momentum_buffer"]),
                                           _np(to.state[t]["momentum_buffer"]),
                                           rtol=2 ** -6, atol=1e-2)


def test_muon_defaults_and_state_layout():
    kp, tp = _pair("float32", 0)
    ko, to = kiln.optim.Muon(kp), torch.optim.Muon(tp)
    assert list(ko.defaults) == list(to.defaults)
    for key, value in to.defaults.items():
        assert ko.defaults[key] == value, key
    _set_grads(kp, tp, np.random.default_rng(0))
    kp[1].grad = None
    tp[1].grad = None
    ko.step()
    to.step()
    assert len(ko.state) == len(to.state) == len(kp) - 1
    for k, t in zip(kp, tp):
        if t in to.state:
            assert sorted(ko.state[k]) == sorted(to.state[t]) == ["momentum_buffer"]
        else:
            assert k not in ko.state
    np.testing.assert_array_equal(kp[1].detach().numpy(), tp[1].detach().numpy())  # no grad


def _err(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@pytest.mark.parametrize("kw", [{"lr": -1.0}, {"momentum": -0.1}, {"weight_decay": -1e-3},
                                {"adjust_lr_fn": "sqrt"}, {"maximize": True},
                                {"foreach": True}])
def test_muon_argument_errors_match_torch(kw):
    kp, tp = _pair("float32", 0)
    ke = _err(lambda: kiln.optim.Muon(kp, **kw))
    te = _err(lambda: torch.optim.Muon(tp, **kw))
    assert type(ke) is type(te)
    if isinstance(te, ValueError):
        assert str(ke) == str(te)


def test_muon_tensor_lr_and_its_error():
    kp, tp = _pair("float32", 0)
    ke = _err(lambda: kiln.optim.Muon(kp, lr=kiln.tensor([0.1, 0.2])))
    te = _err(lambda: torch.optim.Muon(tp, lr=torch.tensor([0.1, 0.2])))
    assert type(ke) is type(te) is ValueError and str(ke) == str(te)
    ko = kiln.optim.Muon(kp, lr=kiln.tensor(0.02))
    to = torch.optim.Muon(tp, lr=torch.tensor(0.02))
    rng = np.random.default_rng(4)
    for step in range(3):
        _set_grads(kp, tp, rng)
        ko.step()
        to.step()
        _close(kp, tp, {"lr": 0.02}, step)


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4), ()])
def test_muon_rejects_non_2d_parameters_as_torch(shape):
    kp = kiln.nn.Parameter(kiln.zeros(shape))
    tp = torch.nn.Parameter(torch.zeros(shape))
    ke = _err(lambda: kiln.optim.Muon([kp]))
    te = _err(lambda: torch.optim.Muon([tp]))
    assert type(ke) is type(te) is ValueError
    # the same text up to the size's repr (kiln.Size([...]) against torch.Size([...]))
    assert str(ke).replace("kiln.Size", "torch.Size") == str(te)


def test_muon_step_time_errors_match_torch():
    def both(kw, grad_shape=None, extra=None):
        out = []
        for lib in (kiln, torch):
            p = lib.nn.Parameter(lib.ones(4, 3))
            opt = lib.optim.Muon([p], **kw)
            if extra is not None:  # add_param_group does not check the dims (as torch)
                q = lib.nn.Parameter(lib.ones(*extra))
                opt.add_param_group({"params": [q]})
                q.grad = lib.ones(*extra)
            p.grad = lib.ones(4, 3)
            out.append(_err(opt.step))
        return out

    for kw, extra in [({"ns_steps": 100}, None), ({"ns_coefficients": (1.0, 2.0)}, None),
                      ({}, (5,))]:
        ke, te = both(kw, extra=extra)
        assert type(ke) is type(te) is ValueError and str(ke) == str(te), (kw, ke, te)


def test_muon_closure_matches_torch():
    rng = np.random.default_rng(9)
    w0 = rng.standard_normal((5, 7)).astype(np.float32)
    x = rng.standard_normal((7, 3)).astype(np.float32)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    runs = []
    for lib, conv in ((kiln, _k), (torch, _t)):
        w = lib.nn.Parameter(conv(w0))
        opt = lib.optim.Muon([w], lr=0.05)

        def closure():
            opt.zero_grad()
            loss = ((w @ conv(x) - conv(y)) ** 2).sum()
            loss.backward()
            return loss

        losses = [float(opt.step(closure).detach()) for _ in range(5)]
        runs.append((losses, _np(w)))
    (kl, kw), (tl, tw) = runs
    np.testing.assert_allclose(kl, tl, rtol=1e-2)
    assert kl[-1] < kl[0]
    np.testing.assert_allclose(kw, tw, atol=0.05 * 2 ** -5)  # 5x7: the ratio is 1


def test_muon_state_dict_resume_and_layout():
    kp, tp = _pair("float32", 5)
    ko = kiln.optim.Muon(kp, lr=0.02, adjust_lr_fn="match_rms_adamw")
    to = torch.optim.Muon(tp, lr=0.02, adjust_lr_fn="match_rms_adamw")
    rng = np.random.default_rng(11)
    grads = [[rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in tp]
             for _ in range(6)]
    for step in range(3):
        for k, t, g in zip(kp, tp, grads[step]):
            k.grad, t.grad = _k(g), _t(g)
        ko.step()
        to.step()
    ksd, tsd = ko.state_dict(), to.state_dict()
    assert ksd["param_groups"] == tsd["param_groups"]
    assert sorted(ksd["state"]) == sorted(tsd["state"])
    # resume from a copy: the same trajectory as the uninterrupted optimizer, bit for bit
    kp2 = [kiln.nn.Parameter(k.detach().clone()) for k in kp]
    ko2 = kiln.optim.Muon(kp2)
    ko2.load_state_dict(copy.deepcopy(ksd))
    assert ko2.param_groups[0]["lr"] == 0.02
    assert ko2.param_groups[0]["adjust_lr_fn"] == "match_rms_adamw"
    for step in range(3, 6):
        for k, k2, g in zip(kp, kp2, grads[step]):
            k.grad, k2.grad = _k(g), _k(g)
        ko.step()
        ko2.step()
        for k, k2 in zip(kp, kp2):
            np.testing.assert_array_equal(k.detach().numpy(), k2.detach().numpy())
    # the loaded buffers are copies: stepping one optimizer leaves the other's state alone
    assert ko2.state[kp2[0]]["momentum_buffer"] is not ko.state[kp[0]]["momentum_buffer"]
