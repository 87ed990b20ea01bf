"""kiln.optim.swa_utils against torch.optim.swa_utils on identical models and data:
AveragedModel (default SWA mean, avg_fn / multi_avg_fn for SWA and EMA, use_buffers, the
copied buffers, n_averaged, state_dict), SWALR's learning rates step by step (cos / linear,
anneal_epochs 0, several groups, state_dict round trip), update_bn's recomputed statistics,
and the errors for bad input (same exception class and message)."""
import numpy as np
import pytest
import torch

import kiln
import oracle

from kiln.optim import swa_utils as KS
from torch.optim import swa_utils as TS

DTYPES = ["float32", "float64"]


def make_model(L, dtype):
    model = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.BatchNorm1d(4), L.nn.ReLU(),
                            L.nn.Linear(4, 2))
    return model.to(getattr(L, dtype))


def twins(dtype):
    torch.manual_seed(0)
    t = make_model(torch, dtype)
    k = make_model(kiln, dtype)
    k.load_state_dict({n: kiln.tensor(v.numpy()) for n, v in t.state_dict().items()})
    return k, t


def batches(dtype, n=4, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(6, 3)).astype(dtype) for _ in range(n)]


def train_step(L, model, opt, x):
    opt.zero_grad()
    model(L.tensor(x)).pow(2).mean().backward()
    opt.step()


def same_state(k, t, where):
    ks, ts = k.state_dict(), t.state_dict()
    assert list(ks) == list(ts), f"{where}: keys {list(ks)} vs {list(ts)}"
    for name in ts:
        oracle.assert_same(ks[name], ts[name], 8.0, where=f"{where} {name}")


AVERAGERS = {
    "default": lambda S: {},
    "swa avg_fn": lambda S: {"avg_fn": S.get_swa_avg_fn()},
    "ema avg_fn": lambda S: {"avg_fn": S.get_ema_avg_fn(0.8)},
    "swa multi": lambda S: {"multi_avg_fn": S.get_swa_multi_avg_fn()},
    "ema multi": lambda S: {"multi_avg_fn": S.get_ema_multi_avg_fn(0.7)},
    "ema multi buffers": lambda S: {"multi_avg_fn": S.get_ema_multi_avg_fn(0.7),
                                    "use_buffers": True},
    "default buffers": lambda S: {"use_buffers": True},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("averager", list(AVERAGERS))
def test_averaged_model_follows_torch(averager, dtype):
    k, t = twins(dtype)
    kavg = KS.AveragedModel(k, **AVERAGERS[averager](KS))
    tavg = TS.AveragedModel(t, **AVERAGERS[averager](TS))
    kopt = kiln.optim.SGD(k.parameters(), lr=0.1, momentum=0.5)
    topt = torch.optim.SGD(t.parameters(), lr=0.1, momentum=0.5)
    for step, x in enumerate(batches(dtype)):
        train_step(kiln, k, kopt, x)
        train_step(torch, t, topt, x)
        kavg.update_parameters(k)
        tavg.update_parameters(t)
        same_state(kavg, tavg, f"{averager} after update {step}")
    assert int(kavg.n_averaged) == 4
    # the averaged model's forward is its copy's forward (eval mode: running statistics)
    kavg.eval()
    tavg.eval()
    x = batches(dtype, 1, seed=9)[0]
    oracle.assert_same(kavg(kiln.tensor(x)), tavg(torch.tensor(x)), 8.0, where="forward")
    # the copy is independent of the model it was made from
    assert all(a is not b for a, b in zip(kavg.module.parameters(), k.parameters()))


def test_avg_fns_on_tensors():
    a, c = np.array([1.0, 2.0, 4.0]), np.array([3.0, -2.0, 0.5])
    for name in ("get_swa_avg_fn", "get_ema_avg_fn"):
        kr = getattr(KS, name)()(kiln.tensor(a), kiln.tensor(c), kiln.tensor(2))
        tr = getattr(TS, name)()(torch.tensor(a), torch.tensor(c), torch.tensor(2))
        oracle.assert_same(kr, tr, where=name)


def make_scheduler(L, S, swa_lr, **kwargs):
    model = L.nn.Linear(2, 2)
    opt = L.optim.SGD([{"params": [model.weight], "lr": 0.5},
                       {"params": [model.bias], "lr": 0.2}], lr=0.5)
    return opt, S.SWALR(opt, swa_lr, **kwargs)


@pytest.mark.parametrize("kwargs", [
    {"anneal_epochs": 3}, {"anneal_epochs": 4, "anneal_strategy": "linear"},
    {"anneal_epochs": 0}, {"anneal_epochs": 1, "anneal_strategy": "cos"}])
@pytest.mark.parametrize("swa_lr", [0.05, [0.05, 0.01]])
def test_swalr_rates_step_by_step(swa_lr, kwargs):
    kopt, ks = make_scheduler(kiln, KS, swa_lr, **kwargs)
    topt, ts = make_scheduler(torch, TS, swa_lr, **kwargs)
    for step in range(7):
        assert ks.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12), f"step {step}"
        assert [g["lr"] for g in kopt.param_groups] == \
            pytest.approx([g["lr"] for g in topt.param_groups], rel=1e-12)
        kopt.step()
        topt.step()
        ks.step()
        ts.step()


def test_swalr_state_dict_round_trip():
    kopt, ks = make_scheduler(kiln, KS, 0.05, anneal_epochs=5, anneal_strategy="linear")
    topt, ts = make_scheduler(torch, TS, 0.05, anneal_epochs=5, anneal_strategy="linear")
    for _ in range(2):
        kopt.step()
        topt.step()
        ks.step()
        ts.step()
    kstate, tstate = ks.state_dict(), ts.state_dict()
    assert "anneal_func" not in kstate and "optimizer" not in kstate
    assert kstate["_anneal_strategy"] == tstate["_anneal_strategy"] == "linear"
    kopt2, ks2 = make_scheduler(kiln, KS, 0.05, anneal_epochs=5)  # cos, replaced by the load
    ks2.load_state_dict(kstate)
    assert ks2.anneal_func(0.3) == pytest.approx(0.3)
    assert ks2.get_last_lr() == pytest.approx(ts.get_last_lr())


@pytest.mark.parametrize("dtype", DTYPES)
def test_update_bn_recomputes_statistics(dtype):
    k, t = twins(dtype)
    data = batches(dtype, 3, seed=5)
    # a loader of (input, target) pairs: update_bn takes the first element
    kiln_loader = [(kiln.tensor(x), kiln.zeros(6)) for x in data]
    torch_loader = [(torch.tensor(x), torch.zeros(6)) for x in data]
    k.eval()
    t.eval()
    KS.update_bn(kiln_loader, k)
    TS.update_bn(torch_loader, t)
    same_state(k, t, "update_bn")
    assert not k.training  # the mode is restored
    assert k[1].momentum == t[1].momentum == 0.1
    # plain tensors as batches, on an AveragedModel
    kavg, tavg = KS.AveragedModel(k), TS.AveragedModel(t)
    KS.update_bn([kiln.tensor(x) for x in data], kavg)
    TS.update_bn([torch.tensor(x) for x in data], tavg)
    same_state(kavg, tavg, "update_bn on an AveragedModel")
    # no batch norm: nothing to do, nothing raised
    KS.update_bn(kiln_loader, kiln.nn.Linear(3, 2))


def error_cases(L, S):
    model = L.nn.Linear(2, 2)
    opt = L.optim.SGD(model.parameters(), lr=0.1)
    return {
        "ema decay above 1": lambda: S.get_ema_avg_fn(1.5),
        "ema multi decay below 0": lambda: S.get_ema_multi_avg_fn(-0.1),
        "both avg_fn and multi_avg_fn": lambda: S.AveragedModel(
            model, avg_fn=S.get_swa_avg_fn(), multi_avg_fn=S.get_swa_multi_avg_fn()),
        "bad anneal strategy": lambda: S.SWALR(opt, 0.05, anneal_strategy="step"),
        "negative anneal epochs": lambda: S.SWALR(opt, 0.05, anneal_epochs=-1),
        "float anneal epochs": lambda: S.SWALR(opt, 0.05, anneal_epochs=2.5),
        "swa_lr list of wrong length": lambda: S.SWALR(opt, [0.05, 0.01]),
    }


@pytest.mark.parametrize("name", list(error_cases(torch, TS)))
def test_errors_match_torch(name):
    with pytest.raises(Exception) as te:
        error_cases(torch, TS)[name]()
    with pytest.raises(type(te.value)) as ke:
        error_cases(kiln, KS)[name]()
    assert str(ke.value) == str(te.value), f"{name}: kiln {ke.value} vs torch {te.value}"
