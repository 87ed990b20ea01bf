"""kiln.optim.Adafactor against torch.optim.Adafactor (2.13): the same parameters (0-d, 1-d,
2-d, 3-d) and gradients, the parameters compared after every step (float64: rtol 1e-12;
float32: 1e-5 relative to the largest entry), for the defaults and for weight decay, maximize,
d, given eps and lr; then state, argument checks and a state_dict resume."""
import numpy as np
import pytest
import torch

import kiln

SHAPES = [(5,), (3, 4), (2, 3, 4), (), (1, 6)]


def _pair(dtype, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(rng.standard_normal(s), dtype=dtype) for s in SHAPES]
    return ([kiln.nn.Parameter(kiln.from_numpy(a.copy())) for a in arrays],
            [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in arrays])


def _set_grads(kp, tp, rng, dtype, scale=1.0):
    for k, t in zip(kp, tp):
        g = np.asarray(rng.standard_normal(tuple(t.shape)) * scale, dtype=dtype)
        k.grad = kiln.from_numpy(g.copy())
        t.grad = torch.from_numpy(g.copy())


def _close(kp, tp, dtype, step):
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for i, (k, t) in enumerate(zip(kp, tp)):
        got, want = k.detach().numpy(), t.detach().numpy()
        assert got.dtype == want.dtype
        err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
        assert err <= tol, f"param {i} {SHAPES[i]} step {step}: relative error {err:.3g}"


CONFIGS = [
    {},
    {"lr": 0.05, "weight_decay": 0.1},
    {"maximize": True, "d": 1.5},
    {"eps": (1e-4, 1e-2), "beta2_decay": -0.5},
    {"lr": 0.5},  # lr above 1/sqrt(step): rho_t = min(lr, 1/sqrt(step)) switches
    {"foreach": True},
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_adafactor_trajectory_matches_torch(dtype, config):
    kw = CONFIGS[config]
    kp, tp = _pair(dtype, seed=config)
    ko, to = kiln.optim.Adafactor(kp, **kw), torch.optim.Adafactor(tp, **kw)
    rng = np.random.default_rng(100 + config)
    for step in range(8):
        # gradients of different sizes over time (tiny ones exercise eps1 / eps2)
        _set_grads(kp, tp, rng, dtype, scale=[1.0, 1e-3, 10.0, 1e-9][step % 4])
        ko.step()
        to.step()
        _close(kp, tp, dtype, step)


def test_adafactor_defaults_and_state_layout():
    kp, tp = _pair(np.float64)
    ko, to = kiln.optim.Adafactor(kp), torch.optim.Adafactor(tp)
    for key, value in to.defaults.items():
        assert ko.defaults[key] == value, key
    _set_grads(kp, tp, np.random.default_rng(0), np.float64)
    ko.step()
    to.step()
    for k, t in zip(kp, tp):
        ks, ts = ko.state[k], to.state[t]
        assert sorted(ks) == sorted(ts)
        for key in ts:
            assert tuple(ks[key].shape) == tuple(ts[key].shape), key
            assert str(ks[key].dtype).split(".")[-1] == str(ts[key].dtype).split(".")[-1], key
            np.testing.assert_allclose(ks[key].numpy(), ts[key].numpy(), rtol=1e-12, atol=0)


def test_adafactor_skips_params_without_grad_and_closure():
    kp, tp = _pair(np.float64)
    ko, to = kiln.optim.Adafactor(kp), torch.optim.Adafactor(tp)
    rng = np.random.default_rng(3)
    _set_grads(kp, tp, rng, np.float64)
    kp[1].grad = None
    tp[1].grad = None
    assert ko.step(lambda: 1.5) == to.step(lambda: 1.5) == 1.5
    _close(kp, tp, np.float64, 0)
    assert len(ko.state[kp[1]]) == 0


def test_adafactor_state_dict_resume_matches_uninterrupted_run():
    kp, tp = _pair(np.float32)
    ko, to = kiln.optim.Adafactor(kp, lr=0.03), torch.optim.Adafactor(tp, lr=0.03)
    rng = np.random.default_rng(5)
    for step in range(3):
        _set_grads(kp, tp, rng, np.float32)
        ko.step()
        to.step()
    fresh = kiln.optim.Adafactor(kp, lr=0.03)
    fresh.load_state_dict(ko.state_dict())
    for step in range(3, 6):
        _set_grads(kp, tp, rng, np.float32)
        fresh.step()
        to.step()
        _close(kp, tp, np.float32, step)


@pytest.mark.parametrize("kw", [{"lr": -1.0}, {"beta2_decay": 0.5}, {"eps": (-1.0, 1e-3)},
                                {"eps": (None, -1.0)}, {"d": 0.5}, {"weight_decay": -0.1}])
def test_adafactor_argument_errors_match_torch(kw):
    with pytest.raises(ValueError) as k:
        kiln.optim.Adafactor([kiln.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as t:
        torch.optim.Adafactor([torch.zeros(2, requires_grad=True)], **kw)
    assert str(k.value) == str(t.value)


def test_adafactor_complex_params_rejected():
    z = kiln.from_numpy(np.array([1 + 1j, 2 - 1j])).requires_grad_()
    z.grad = kiln.from_numpy(np.array([0.5 + 0j, 1j]))
    with pytest.raises(RuntimeError, match="Adafactor does not support complex parameters"):
        kiln.optim.Adafactor([z]).step()
