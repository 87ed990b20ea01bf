"""kiln.optim against torch.optim: the same parameters and the same loss, 10 steps, the
parameters compared after every step (float64: rtol 1e-10; float32: rtol 1e-5), then the
state_dicts (same layout, same values) and a load_state_dict resume. LR schedulers: the
learning rates (and cycled momenta) of 10+ steps must equal torch's."""
import math

import numpy as np
import pytest
import torch

import kiln
import oracle

SHAPES = [(3, 4), (4,), (2, 3, 2)]


def _params(L, dtype, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=s) for s in SHAPES]
    return [(torch.nn.Parameter if L is torch else kiln.nn.Parameter)(
        L.tensor(a, dtype=getattr(L, dtype))) for a in arrays]


def _loss(L, params, step):
    """A smooth non-quadratic loss whose gradient changes from step to step."""
    total = 0
    for i, p in enumerate(params):
        c = 0.1 * (i + 1) + 0.05 * step
        total = total + ((p - c) ** 2).sum() * 0.5 + (p * c).sin().sum()
    return total


OPTIMS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.02, "amsgrad": True}),
    ("Adam", {"lr": 0.02, "maximize": True, "amsgrad": True, "weight_decay": 0.05}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True}),
    ("RMSprop", {"lr": 0.01, "weight_decay": 0.1, "centered": True, "maximize": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.5}),
]

TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6)}


def _assert_close(k, t, dtype, where):
    """Elementwise rtol, with an atol scaled by the largest magnitude of the tensor (an
    element that is a small difference of large ones, e.g. centered RMSprop's
    square_avg - grad_avg^2, carries the rounding of the large ones)."""
    rtol, atol = TOL[dtype]
    tv = t.detach().numpy()
    scale = float(np.abs(tv).max()) if tv.size else 0.0
    np.testing.assert_allclose(k.detach().numpy(), tv, rtol=rtol, atol=atol + rtol * scale,
                               err_msg=where)


def _run(opt, params, L, steps, start=0):
    for s in range(start, start + steps):
        opt.zero_grad()
        loss = _loss(L, params, s)
        loss.backward()
        opt.step()


def _compare_states(ko, to, dtype, where):
    ks, ts = ko.state_dict(), to.state_dict()
    assert ks["param_groups"] == ts["param_groups"], where
    assert sorted(ks["state"]) == sorted(ts["state"]), where
    for i in ts["state"]:
        assert sorted(ks["state"][i]) == sorted(ts["state"][i]), where
        for key, tv in ts["state"][i].items():
            kv = ks["state"][i][key]
            if isinstance(tv, torch.Tensor):
                assert str(kv.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], \
                    f"{where}: state {key} dtype"
                _assert_close(kv, tv, dtype, f"{where}: state {i}.{key}")
            else:
                assert kv == tv


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kwargs", OPTIMS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMS)])
def test_optimizer_vs_torch(name, kwargs, dtype):
    tp, kp = _params(torch, dtype), _params(kiln, dtype)
    to = getattr(torch.optim, name)(tp, **kwargs)
    ko = getattr(kiln.optim, name)(kp, **kwargs)
    where = f"{name}{kwargs}[{dtype}]"
    for s in range(10):
        for opt, params, L in ((to, tp, torch), (ko, kp, kiln)):
            opt.zero_grad()
            _loss(L, params, s).backward()
            opt.step()
        for i, (a, b) in enumerate(zip(kp, tp)):
            _assert_close(a, b, dtype, f"{where} step {s} param {i}")
    _compare_states(ko, to, dtype, where)
    # resume: a fresh optimizer loading the state continues identically
    kp2 = [kiln.nn.Parameter(p.detach().clone()) for p in kp]
    ko2 = getattr(kiln.optim, name)(kp2, **kwargs)
    ko2.load_state_dict(ko.state_dict())
    _run(ko, kp, kiln, 3, 10)
    _run(ko2, kp2, kiln, 3, 10)
    _run(to, tp, torch, 3, 10)
    for a, b, c in zip(kp, kp2, tp):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        _assert_close(a, c, dtype, where + " after resume")
    oracle.record(f"optim.{name}", 12)


def test_param_groups_and_closure():
    tp, kp = _params(torch, "float64"), _params(kiln, "float64")
    to = torch.optim.SGD([{"params": tp[:2]}, {"params": tp[2:], "lr": 0.5, "momentum": 0.9}],
                         lr=0.1)
    ko = kiln.optim.SGD([{"params": kp[:2]}, {"params": kp[2:], "lr": 0.5, "momentum": 0.9}],
                        lr=0.1)
    for s in range(5):
        for opt, params, L in ((to, tp, torch), (ko, kp, kiln)):
            def closure(params=params, L=L, opt=opt):
                opt.zero_grad()
                loss = _loss(L, params, s)
                loss.backward()
                return loss
            loss = opt.step(closure)
            assert loss is not None
    for a, b in zip(kp, tp):
        _assert_close(a, b, "float64", "param groups")
    assert ko.state_dict()["param_groups"] == to.state_dict()["param_groups"]
    assert repr(ko) == repr(to)
    # zero_grad(set_to_none=False) keeps zero tensors
    ko.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in kp)
    ko.zero_grad()
    assert all(p.grad is None for p in kp)
    oracle.record("optim.param_groups", 4)


OPTIM_ERRORS = {
    "empty_params": lambda L: L.optim.SGD([], lr=0.1),
    "tensor_params": lambda L: L.optim.SGD(L.ones(2, requires_grad=True), lr=0.1),
    "negative_lr": lambda L: L.optim.Adam([L.ones(2, requires_grad=True)], lr=-1),
    "bad_beta": lambda L: L.optim.Adam([L.ones(2, requires_grad=True)], betas=(1.0, 0.9)),
    "nesterov_no_momentum": lambda L: L.optim.SGD([L.ones(2, requires_grad=True)], lr=0.1,
                                                  nesterov=True),
    "non_leaf": lambda L: L.optim.SGD([L.ones(2, requires_grad=True) * 2], lr=0.1),
    "duplicate_groups": lambda L: _dup_groups(L),
    "set_group_params": lambda L: L.optim.SGD([{"params": {L.ones(2, requires_grad=True)}}],
                                              lr=0.1),
    "non_tensor_param": lambda L: L.optim.SGD([1.0], lr=0.1),
    "load_wrong_groups": lambda L: L.optim.SGD([L.ones(2, requires_grad=True)], lr=0.1)
    .load_state_dict({"state": {}, "param_groups": []}),
    "rmsprop_bad_alpha": lambda L: L.optim.RMSprop([L.ones(2, requires_grad=True)], alpha=-1),
    "adagrad_bad_lr_decay": lambda L: L.optim.Adagrad([L.ones(2, requires_grad=True)],
                                                      lr_decay=-1),
    "linearlr_bad_factor": lambda L: L.optim.lr_scheduler.LinearLR(
        L.optim.SGD([L.ones(2, requires_grad=True)], lr=0.1), start_factor=0),
    "onecycle_no_steps": lambda L: L.optim.lr_scheduler.OneCycleLR(
        L.optim.SGD([L.ones(2, requires_grad=True)], lr=0.1), max_lr=1.0),
    "scheduler_not_optimizer": lambda L: L.optim.lr_scheduler.StepLR(object(), 2),
}


def _dup_groups(L):
    p = L.ones(2, requires_grad=True)
    return L.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


@pytest.mark.parametrize("name", list(OPTIM_ERRORS))
def test_optim_errors_vs_torch(name):
    fn = OPTIM_ERRORS[name]
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as ke:
        fn(kiln)
    assert isinstance(ke.value, type(te.value)), (ke.value, te.value)
    assert str(ke.value).replace("kiln", "torch") == str(te.value) or name in (
        "tensor_params", "non_tensor_param", "load_wrong_groups", "scheduler_not_optimizer",
        "linearlr_bad_factor"), (str(ke.value), str(te.value))
    oracle.record("optim.errors")


# --- schedulers -----------------------------------------------------------------------------

def _scheds(L, opt):
    S = L.optim.lr_scheduler
    return {
        "StepLR": lambda: S.StepLR(opt, step_size=3, gamma=0.5),
        "MultiStepLR": lambda: S.MultiStepLR(opt, milestones=[2, 5, 5, 8], gamma=0.3),
        "ExponentialLR": lambda: S.ExponentialLR(opt, gamma=0.9),
        "CosineAnnealingLR": lambda: S.CosineAnnealingLR(opt, T_max=4, eta_min=0.01),
        "LinearLR": lambda: S.LinearLR(opt, start_factor=0.25, total_iters=6),
        "LinearLR_decay": lambda: S.LinearLR(opt, start_factor=1.0, end_factor=0.1,
                                             total_iters=4),
        "LambdaLR": lambda: S.LambdaLR(opt, lambda e: 1 / (1 + e)),
        "OneCycleLR": lambda: S.OneCycleLR(opt, max_lr=1.0, total_steps=15),
        "OneCycleLR_linear_3phase": lambda: S.OneCycleLR(opt, max_lr=[1.0, 2.0], total_steps=15,
                                                         anneal_strategy="linear",
                                                         three_phase=True),
        "OneCycleLR_adam": None,
        "SequentialLR": lambda: S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1,
                                                                total_iters=3),
                                                     S.CosineAnnealingLR(opt, T_max=8)],
                                               milestones=[3]),
    }


SCHEDS = list(_scheds(torch, None))


@pytest.mark.parametrize("name", SCHEDS)
def test_scheduler_vs_torch(name):
    lrs = {}
    for L in (torch, kiln):
        params = [L.zeros(2, requires_grad=True), L.zeros(3, requires_grad=True)]
        if name == "OneCycleLR_adam":
            opt = L.optim.Adam([{"params": params[:1]}, {"params": params[1:]}], lr=0.1)
            sched = L.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, epochs=3, steps_per_epoch=5)
        else:
            opt = L.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}],
                              lr=0.1, momentum=0.9)
            sched = _scheds(L, opt)[name]()
        seq = [list(sched.get_last_lr())]
        for _ in range(14):
            opt.step()
            sched.step()
            seq.append(list(sched.get_last_lr()))
            seq.append([g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups])
        keys = sorted(k for k in sched.state_dict() if not k.startswith("_"))
        lrs[L.__name__] = (seq, keys)
    (ks, kkeys), (ts, tkeys) = lrs["kiln"], lrs["torch"]
    assert len(ks) == len(ts)
    for a, b in zip(ks, ts):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15), (name, ks, ts)
    assert set(tkeys) <= set(kkeys) | {"_get_lr_called_within_step", "verbose"}, (kkeys, tkeys)
    oracle.record(f"lr_scheduler.{name}", 15)


def test_scheduler_state_dict_resume():
    params = [kiln.zeros(2, requires_grad=True)]
    opt = kiln.optim.SGD(params, lr=1.0)
    s = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        opt.step()
        s.step()
    sd = s.state_dict()
    opt2 = kiln.optim.SGD([kiln.zeros(2, requires_grad=True)], lr=1.0)
    opt2.load_state_dict(opt.state_dict())
    s2 = kiln.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=10)
    s2.load_state_dict(sd)
    for _ in range(3):
        s.step()
        s2.step()
    assert s.get_last_lr() == s2.get_last_lr()
    assert math.isclose(s.get_last_lr()[0], 0.5 * (1 + math.cos(math.pi * 7 / 10)), rel_tol=1e-12)
    oracle.record("lr_scheduler.resume")


@pytest.mark.parametrize("name,kwargs", [
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.03, "betas": (0.3, 0.99), "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.02, "eps": 1e-6}),
])
def test_fused_adam_step_is_the_op_sequence(name, kwargs):
    """float32 parameters take the one-pass update (include/kiln/ops/adam_step.h) unless
    fused=False: both give the same bits, step after step, and stay close to torch's."""
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=s).astype(np.float32) for s in [(257, 31), (1001,)]]
    fused = [kiln.nn.Parameter(kiln.tensor(a)) for a in arrays]
    plain = [kiln.nn.Parameter(kiln.tensor(a)) for a in arrays]
    ref = [torch.nn.Parameter(torch.tensor(a)) for a in arrays]
    opts = [getattr(kiln.optim, name)(fused, **kwargs),
            getattr(kiln.optim, name)(plain, fused=False, **kwargs),
            getattr(torch.optim, name)(ref, **kwargs)]
    for s in range(4):
        grads = [rng.normal(size=a.shape).astype(np.float32) for a in arrays]
        for params, L in ((fused, kiln), (plain, kiln), (ref, torch)):
            for p, g in zip(params, grads):
                p.grad = L.tensor(g)
        for o in opts:
            o.step()
        for a, b, c in zip(fused, plain, ref):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
            _assert_close(a, c, "float32", f"{name}{kwargs} step {s}")
