"""The optimizer API beyond the update formulas, against torch 2.13 run side by side: step pre /
post hooks (per optimizer and global; order, replaced arguments, removal, bad return values),
state_dict / load_state_dict pre / post hooks (order with prepend, replaced dicts, the caller's
dict untouched), hooks on a user-defined Optimizer subclass and their absence after deepcopy;
the scheduler's "step before optimizer.step()" warning; Muon driven by OneCycleLR (lr and
momentum sequences) and averaged by swa_utils (EMA and SWA) as torch's."""
import copy
import warnings

import numpy as np
import pytest
import torch
import torch.optim.optimizer as torch_optimizer

import kiln
import kiln.optim.optimizer as kiln_optimizer

LIBS = [(kiln, kiln_optimizer), (torch, torch_optimizer)]


def _params(lib, n=2, seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for _ in range(n):
        a = rng.standard_normal((3, 4)).astype(np.float32)
        p = lib.nn.Parameter(lib.tensor(a))
        p.grad = lib.tensor(np.ones((3, 4), np.float32))
        ps.append(p)
    return ps


def _run_both(fn):
    """fn(lib, module) -> a value for each library; returns (kiln's, torch's)."""
    return tuple(fn(lib, mod) for lib, mod in LIBS)


# --- step hooks --------------------------------------------------------------------------


def test_step_hook_order_and_removal_match_torch():
    def run(lib, mod):
        events = []
        opt = lib.optim.SGD(_params(lib), lr=0.1)
        handles = [
            mod.register_optimizer_step_pre_hook(lambda o, a, k: events.append("global pre")),
            mod.register_optimizer_step_post_hook(lambda o, a, k: events.append("global post")),
            opt.register_step_pre_hook(
                lambda o, a, k: events.append(("pre", o is opt, a == (opt,), k))),
            opt.register_step_post_hook(lambda o, a, k: events.append(("post", len(a), k))),
            opt.register_step_pre_hook(lambda o, a, k: events.append("pre 2")),
        ]
        try:
            opt.step()
            events.append("--")
            handles[2].remove()
            handles[0].remove()
            opt.step()
        finally:
            for h in handles:
                h.remove()
        events.append("--")
        opt.step()  # every hook removed
        return events

    k, t = _run_both(run)
    assert k == t
    assert k[0] == "global pre" and k[1] == ("pre", True, True, {})


def test_step_pre_hook_replaces_arguments_and_post_hook_sees_them():
    def run(lib, mod):
        p = lib.nn.Parameter(lib.tensor([[1.0, 2.0]]))
        opt = lib.optim.SGD([p], lr=0.5)
        seen = []

        def closure():
            seen.append("closure")
            opt.zero_grad()
            loss = (p * p).sum()
            loss.backward()
            return loss

        # the hook supplies the closure: step() is called without one (args starts with the
        # optimizer, as torch's, and the replacement keeps it)
        opt.register_step_pre_hook(lambda o, a, k: ((o,), {"closure": closure}))
        opt.register_step_post_hook(lambda o, a, k: seen.append(sorted(k)))
        loss = opt.step()
        return seen, float(loss.detach()), p.detach().numpy().tolist()

    k, t = _run_both(run)
    assert k == t and k[0] == ["closure", ["closure"]]


def test_step_pre_hook_bad_return_raises_as_torch():
    def run(lib, mod):
        opt = lib.optim.SGD(_params(lib), lr=0.1)
        opt.register_step_pre_hook(lambda o, a, k: "nonsense")
        with pytest.raises(Exception) as info:
            opt.step()
        return type(info.value), "must return None or a tuple of (new_args, new_kwargs)" in str(
            info.value)

    k, t = _run_both(run)
    assert k == t == (RuntimeError, True)


def test_step_hooks_on_user_defined_optimizer_and_other_optimizers():
    def run(lib, mod):
        class HalfStep(lib.optim.Optimizer):  # a custom step: no decorator of ours
            def __init__(self, params):
                super().__init__(params, {"lr": 0.5})

            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.data.add_(p.grad, alpha=-group["lr"])
                return "stepped"

        events = []
        out = []
        for make in (HalfStep, lambda ps: lib.optim.Adam(ps), lambda ps: lib.optim.AdamW(ps),
                     lambda ps: lib.optim.Muon(ps), lambda ps: lib.optim.LBFGS(ps)):
            ps = _params(lib)
            opt = make(ps)
            opt.register_step_pre_hook(lambda o, a, k: events.append(type(o).__name__))
            opt.register_step_post_hook(lambda o, a, k: events.append("post"))
            if isinstance(opt, lib.optim.LBFGS):
                out.append(type(opt.step(lambda: (ps[0] * ps[0]).sum())).__name__)
            else:
                out.append(opt.step())
        return events, out[:1], ps[0].detach().numpy().round(4).tolist()

    k, t = _run_both(run)
    assert k[0] == t[0] and k[1] == t[1] == ["stepped"]
    assert k[0] == ["HalfStep", "post", "Adam", "post", "AdamW", "post", "Muon", "post",
                    "LBFGS", "post"]


def test_hooks_are_not_deep_copied_or_pickled():
    import pickle

    def run(lib, mod):
        events = []
        opt = lib.optim.SGD(_params(lib), lr=0.1)
        opt.register_step_pre_hook(lambda o, a, k: events.append("pre"))
        opt.register_state_dict_pre_hook(lambda o: events.append("sd pre"))
        clone = copy.deepcopy(opt)
        clone.step()
        clone.state_dict()
        restored = pickle.loads(pickle.dumps(lib.optim.SGD(_params(lib), lr=0.1)))
        restored.register_step_post_hook(lambda o, a, k: events.append("restored post"))
        restored.step()
        opt.step()
        return events

    k, t = _run_both(run)
    assert k == t == ["restored post", "pre"]


# --- state_dict hooks --------------------------------------------------------------------


def test_state_dict_hooks_order_and_replacement_match_torch():
    def run(lib, mod):
        events = []
        opt = lib.optim.Adam(_params(lib), lr=0.01)
        opt.step()
        opt.register_state_dict_pre_hook(lambda o: events.append("pre A"))
        opt.register_state_dict_pre_hook(lambda o: events.append("pre B"), prepend=True)

        def post_edit(o, sd):
            events.append("post edit")
            sd["param_groups"][0]["note"] = "edited"

        def post_replace(o, sd):
            events.append(("post replace", sd["param_groups"][0]["note"]))
            return {"state": sd["state"], "param_groups": sd["param_groups"], "extra": 1}

        opt.register_state_dict_post_hook(post_replace)
        opt.register_state_dict_post_hook(post_edit, prepend=True)
        sd = opt.state_dict()
        return events, sorted(sd), sd["param_groups"][0]["note"], sorted(sd["state"])

    k, t = _run_both(run)
    assert k == t
    assert k[0] == ["pre B", "pre A", "post edit", ("post replace", "edited")]


def test_load_state_dict_hooks_match_torch():
    def run(lib, mod):
        events = []
        src = lib.optim.SGD(_params(lib), lr=0.1, momentum=0.9)
        src.step()
        saved = src.state_dict()
        opt = lib.optim.SGD(_params(lib, seed=1), lr=0.3, momentum=0.9)

        def pre_edit(o, sd):
            events.append(("pre edit", "extra" in sd))
            sd["extra"] = True  # a shallow copy: the caller's dict keeps no "extra"

        def pre_replace(o, sd):
            events.append(("pre replace", sd["extra"]))
            groups = [dict(g, lr=0.05) for g in sd["param_groups"]]
            return {"state": sd["state"], "param_groups": groups}

        opt.register_load_state_dict_pre_hook(pre_replace)
        opt.register_load_state_dict_pre_hook(pre_edit, prepend=True)
        opt.register_load_state_dict_post_hook(
            lambda o: events.append(("post", o.param_groups[0]["lr"], len(o.state))))
        opt.register_load_state_dict_post_hook(lambda o: events.append("post first"),
                                               prepend=True)
        opt.load_state_dict(saved)
        return events, "extra" in saved, saved["param_groups"][0]["lr"]

    k, t = _run_both(run)
    assert k == t
    assert k[0][-1] == ("post", 0.05, 2) and k[1:] == (False, 0.1)


def test_load_state_dict_post_hook_sees_the_final_state():
    # Not against torch: kiln keeps NAdam's mu_product float32 after a load into float64
    # parameters (so that a resumed run rounds as the uninterrupted one; torch casts it to
    # float64). The post hooks must run after that fix-up and see what load_state_dict leaves.
    ps = [kiln.nn.Parameter(kiln.ones(2, dtype=kiln.float64))]
    ps[0].grad = kiln.ones(2, dtype=kiln.float64)
    opt = kiln.optim.NAdam(ps)
    opt.step()
    seen = []
    opt.register_load_state_dict_post_hook(
        lambda o: seen.append(o.state[ps[0]]["mu_product"].dtype))
    opt.load_state_dict(opt.state_dict())
    assert seen == [opt.state[ps[0]]["mu_product"].dtype] == [kiln.float32]


# --- LR schedulers -----------------------------------------------------------------------


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message)[:60] for w in caught if issubclass(w.category, UserWarning)]


def test_scheduler_step_order_warning_matches_torch():
    def run(lib, mod):
        out = []
        for order in ("scheduler first", "optimizer first", "overridden"):
            opt = lib.optim.SGD(_params(lib), lr=0.1)
            sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2)
            if order == "overridden":
                opt.step = lambda closure=None: None

            def go():
                if order == "scheduler first":
                    sched.step()
                    opt.step()
                else:
                    opt.step()
                    sched.step()
                opt.step()
                sched.step()  # only the first scheduler step is checked

            out.append(_warnings_of(go))
        return out

    k, t = _run_both(run)
    assert k == t
    assert k[0][0].startswith("Detected call of `lr_scheduler.step()`") and k[1] == []
    assert k[2][0].startswith("Seems like `optimizer.step()` has been overridden")


def test_old_scheduler_base_class_name():
    assert issubclass(kiln.optim.lr_scheduler._LRScheduler, kiln.optim.lr_scheduler.LRScheduler)

    def run(lib, mod):
        class Halving(lib.optim.lr_scheduler._LRScheduler):
            def get_lr(self):
                return [base * 0.5 ** self.last_epoch for base in self.base_lrs]

        opt = lib.optim.SGD(_params(lib), lr=0.8)
        sched = Halving(opt)
        lrs = []
        for _ in range(4):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr()[0])
        return lrs

    k, t = _run_both(run)
    assert k == t


def test_muon_with_one_cycle_lr_cycles_lr_and_momentum_as_torch():
    def run(lib, mod):
        ps = _params(lib)
        opt = lib.optim.Muon(ps, lr=0.01)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=12)
        seq = []
        for _ in range(11):
            opt.step()
            sched.step()
            g = opt.param_groups[0]
            seq.append((g["lr"], g["momentum"]))
        return seq, ps[0].detach().numpy()

    (kseq, kp), (tseq, tp) = _run_both(run)
    np.testing.assert_allclose(np.array(kseq), np.array(tseq), rtol=1e-12)
    # the same learning rates drive the same trajectory (bfloat16 tolerance, see test_muon)
    np.testing.assert_allclose(kp, tp, atol=0.05 * 2 ** -5)


@pytest.mark.parametrize("cls, kw", [
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 1e-4}),
    ("CyclicLR", {"base_lr": 0.001, "max_lr": 0.02, "step_size_up": 3, "mode": "triangular2"}),
    ("PolynomialLR", {"total_iters": 6, "power": 2.0}),
])
def test_schedulers_on_muon_match_torch(cls, kw):
    # CyclicLR cycles Muon's "momentum" group key too (Muon has no betas)
    def run(lib, mod):
        opt = lib.optim.Muon(_params(lib), lr=0.02)
        sched = getattr(lib.optim.lr_scheduler, cls)(opt, **kw)
        seq = []
        for _ in range(10):
            opt.step()
            sched.step()
            seq.append((opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]))
        return seq

    k, t = _run_both(run)
    np.testing.assert_allclose(np.array(k), np.array(t), rtol=1e-12)


# --- swa_utils ---------------------------------------------------------------------------


@pytest.mark.parametrize("avg", ["ema multi", "ema", "swa"])
def test_averaged_model_over_muon_training_matches_torch(avg):
    def run(lib, mod):
        su = lib.optim.swa_utils
        model = lib.nn.Linear(4, 3, bias=False)
        with lib.no_grad():
            model.weight.copy_(lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32)
                                          .reshape(3, 4)))
        kwargs = {"ema multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.9)},
                  "ema": {"avg_fn": su.get_ema_avg_fn(0.8)}, "swa": {}}[avg]
        averaged = su.AveragedModel(model, **kwargs)
        opt = lib.optim.Muon(model.parameters(), lr=0.05)
        swa_sched = su.SWALR(opt, swa_lr=0.01, anneal_epochs=3)
        x = lib.tensor(np.arange(8, dtype=np.float32).reshape(2, 4) / 8)
        lrs = []
        for _ in range(5):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
            swa_sched.step()
            averaged.update_parameters(model)
            lrs.append(opt.param_groups[0]["lr"])
        return lrs, int(averaged.n_averaged), averaged.module.weight.detach().numpy()

    (kl, kn, kw), (tl, tn, tw) = _run_both(run)
    np.testing.assert_allclose(kl, tl, rtol=1e-12)
    assert kn == tn == 5
    np.testing.assert_allclose(kw, tw, atol=0.05 * 2 ** -5)
