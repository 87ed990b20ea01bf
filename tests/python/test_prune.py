"""kiln.nn.utils.prune against torch.nn.utils.prune on identical weights: which entries and
channels each deterministic method prunes (L1Unstructured, LnStructured for every norm,
CustomFromMask, global_unstructured, importance scores), the reparametrization it leaves
(<name>_orig parameter, <name>_mask buffer, state_dict, the forward pre-hook, gradients to
<name>_orig), iterative pruning through PruningContainer, remove / is_pruned, and the
errors (same exception class and message). The random methods are checked by what they
must do (how many entries / channels go, that earlier pruning stays, rough uniformity),
not against torch's random numbers. Weights have distinct magnitudes so that no choice
depends on how topk orders ties (kiln's prefers lower indices, torch's does not promise)."""
import re

import numpy as np
import pytest
import torch

import kiln
import kiln.nn.utils.prune as kprune
import oracle
import torch.nn.utils.prune as tprune

DTYPES = ["float32", "float64"]


# --- helpers ------------------------------------------------------------------------------

def distinct(shape, dtype, seed=0):
    """Values with pairwise distinct absolute values, random signs, in random order; the
    seed shifts the magnitudes too, so tensors made with different seeds share none."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    mags = (rng.permutation(n) + 1) * 0.1 + seed * 0.001
    return (mags * rng.choice([-1.0, 1.0], size=n)).reshape(shape).astype(dtype)


def make(L, kind, dtype, seed=0):
    """A module of the given kind whose weight (and bias) are the same in both libraries."""
    ctor = {"linear": lambda: L.nn.Linear(6, 4),
            "conv1d": lambda: L.nn.Conv1d(3, 4, 3),
            "conv2d": lambda: L.nn.Conv2d(2, 5, 2)}[kind]
    m = ctor().to(getattr(L, dtype))
    with L.no_grad():
        m.weight.copy_(L.tensor(distinct(tuple(m.weight.shape), dtype, seed)))
        m.bias.copy_(L.tensor(distinct(tuple(m.bias.shape), dtype, seed + 1)))
    return m


def pair(kind, dtype, seed=0):
    return make(kiln, kind, dtype, seed), make(torch, kind, dtype, seed)


def same(k, t, where=""):
    oracle.assert_same(k, t, where=where)


def same_module(km, tm, where=""):
    """Same parameter and buffer names (in order), values, dtypes, and the same pruned
    attributes recomputed by the hook."""
    kd, td = km.state_dict(), tm.state_dict()
    assert list(kd) == list(td), where
    for name in td:
        same(kd[name], td[name], f"{where}: state_dict[{name}]")
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in km.named_buffers()] == [n for n, _ in tm.named_buffers()]
    for name in ("weight", "bias"):
        same(getattr(km, name), getattr(tm, name), f"{where}: {name}")


def same_error(fn_kiln, fn_torch):
    """Both raise; same exception class and, after naming the library the same way, the
    same message."""
    with pytest.raises(Exception) as te:
        fn_torch()
    with pytest.raises(type(te.value)) as ke:
        fn_kiln()
    assert type(ke.value) is type(te.value)
    def norm(msg):  # the library's name and object addresses may differ
        return re.sub(r" at 0x[0-9a-f]+", "", re.sub(r"\bkiln\b", "torch", msg))
    assert norm(str(ke.value)) == norm(str(te.value))
    oracle.record("prune errors")


def both(fn):
    """fn(L, P) for (kiln, kiln's prune) and (torch, torch's prune)."""
    return fn(kiln, kprune), fn(torch, tprune)


# --- the namespace ------------------------------------------------------------------------

def test_exports_match_torch():
    names = [n for n in dir(tprune) if not n.startswith("_") and callable(getattr(tprune, n))
             and getattr(getattr(tprune, n), "__module__", "") == tprune.__name__]
    assert sorted(names) == sorted(kprune.__all__)
    for n in names:
        assert hasattr(kprune, n), n


# --- deterministic methods against torch --------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,name,amount", [
    ("linear", "weight", 0.3), ("linear", "weight", 7), ("linear", "bias", 0.5),
    ("conv2d", "weight", 0.55), ("conv1d", "weight", 0), ("linear", "weight", 1.0),
    ("conv1d", "bias", 4), ("linear", "bias", 0.4), ("conv2d", "bias", 0.5)])
def test_l1_unstructured(kind, name, amount, dtype):
    km, tm = pair(kind, dtype)
    assert kprune.l1_unstructured(km, name, amount=amount) is km
    tprune.l1_unstructured(tm, name, amount=amount)
    same_module(km, tm, f"l1 {kind}.{name} amount={amount}")
    mask = getattr(km, name + "_mask")
    assert mask.dtype == getattr(kiln, dtype)
    n = mask.numel()
    expected = amount if isinstance(amount, int) else round(amount * n)
    assert int((mask == 0).sum().item()) == expected
    oracle.record("l1_unstructured")


@pytest.mark.parametrize("dtype", DTYPES)
def test_l1_importance_scores(dtype):
    km, tm = pair("linear", dtype)
    scores = distinct((4, 6), dtype, seed=5)
    kprune.l1_unstructured(km, "weight", 9, importance_scores=kiln.tensor(scores))
    tprune.l1_unstructured(tm, "weight", 9, importance_scores=torch.tensor(scores))
    same_module(km, tm, "l1 importance scores")
    # the mask follows the scores, not the weights
    w = km.weight_orig.detach()
    by_weight = kprune.L1Unstructured(9).compute_mask(w, kiln.ones_like(w))
    assert not np.array_equal(km.weight_mask.numpy(), by_weight.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,amount,n,dim", [
    ("linear", 2, 2, 0), ("linear", 0.5, 1, 1), ("linear", 3, float("inf"), -1),
    ("linear", 1, float("-inf"), 0), ("linear", 0.34, "fro", 0), ("linear", 2, 3, 1),
    ("conv1d", 1, "nuc", 0), ("conv1d", 2, "fro", -1), ("conv2d", 2, 2, 0),
    ("conv2d", 0.5, 1, 1), ("conv2d", 0, 2, 0), ("conv2d", 1, 0, 2)])
def test_ln_structured(kind, amount, n, dim, dtype):
    km, tm = pair(kind, dtype)
    kprune.ln_structured(km, "weight", amount=amount, n=n, dim=dim)
    tprune.ln_structured(tm, "weight", amount=amount, n=n, dim=dim)
    same_module(km, tm, f"ln {kind} amount={amount} n={n} dim={dim}")
    oracle.record("ln_structured")


@pytest.mark.parametrize("dtype", DTYPES)
def test_ln_structured_importance_scores(dtype):
    km, tm = pair("conv2d", dtype)
    scores = distinct((5, 2, 2, 2), dtype, seed=9)
    kprune.ln_structured(km, "weight", 2, 1, 0, importance_scores=kiln.tensor(scores))
    tprune.ln_structured(tm, "weight", 2, 1, 0, importance_scores=torch.tensor(scores))
    same_module(km, tm, "ln importance scores")


@pytest.mark.parametrize("mask_dtype", ["int64", "bool", "float32"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_custom_from_mask_and_identity(mask_dtype, dtype):
    mask = (np.arange(4) % 3 != 1).astype(mask_dtype)
    km, tm = pair("linear", dtype)
    kprune.custom_from_mask(km, "bias", kiln.tensor(mask))
    tprune.custom_from_mask(tm, "bias", torch.tensor(mask))
    kprune.identity(km, "weight")
    tprune.identity(tm, "weight")
    same_module(km, tm, "custom_from_mask + identity")
    assert km.weight_mask.dtype == getattr(kiln, dtype)
    assert km.bias_mask.tolist() == [1.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("amount", [10, 0.4])
def test_global_unstructured(amount, dtype):
    k1, t1 = pair("linear", dtype, seed=0)
    k2, t2 = pair("conv1d", dtype, seed=3)
    # one tensor was pruned before: its zeros stay and are not counted again
    kprune.l1_unstructured(k2, "bias", 1)
    tprune.l1_unstructured(t2, "bias", 1)
    kprune.global_unstructured([(k1, "weight"), (k2, "weight"), (k2, "bias")],
                               pruning_method=kprune.L1Unstructured, amount=amount)
    tprune.global_unstructured([(t1, "weight"), (t2, "weight"), (t2, "bias")],
                               pruning_method=tprune.L1Unstructured, amount=amount)
    same_module(k1, t1, "global: first module")
    same_module(k2, t2, "global: second module")
    assert isinstance(k2._forward_pre_hooks[max(k2._forward_pre_hooks)],
                      kprune.PruningContainer)
    oracle.record("global_unstructured")


@pytest.mark.parametrize("dtype", DTYPES)
def test_global_unstructured_importance_scores(dtype):
    k1, t1 = pair("linear", dtype, seed=0)
    s = distinct((4, 6), dtype, seed=11)
    kprune.global_unstructured(((k1, "weight"), (k1, "bias")), kprune.L1Unstructured,
                               importance_scores={(k1, "weight"): kiln.tensor(s)}, amount=12)
    tprune.global_unstructured(((t1, "weight"), (t1, "bias")), tprune.L1Unstructured,
                               importance_scores={(t1, "weight"): torch.tensor(s)}, amount=12)
    same_module(k1, t1, "global with importance scores")


@pytest.mark.parametrize("dtype", DTYPES)
def test_prune_method_on_tensor(dtype):
    w = distinct((3, 5), dtype, seed=2)
    dm = (np.arange(15).reshape(3, 5) % 4 != 0).astype(dtype)
    for make_method in (lambda L, P: P.L1Unstructured(amount=4),
                        lambda L, P: P.LnStructured(amount=2, n=2, dim=1),
                        lambda L, P: P.CustomFromMask(mask=L.tensor(dm > 0)),
                        lambda L, P: P.Identity()):
        k = make_method(kiln, kprune).prune(kiln.tensor(w))
        t = make_method(torch, tprune).prune(torch.tensor(w))
        same(k, t, "prune()")
    k = kprune.L1Unstructured(3).compute_mask(kiln.tensor(w), default_mask=kiln.tensor(dm))
    t = tprune.L1Unstructured(3).compute_mask(torch.tensor(w), default_mask=torch.tensor(dm))
    same(k, t, "compute_mask with a default mask")
    k = kprune.L1Unstructured(3).prune(kiln.tensor(w), importance_scores=kiln.tensor(-w[::-1]
                                                                                    .copy()))
    t = tprune.L1Unstructured(3).prune(torch.tensor(w), importance_scores=torch.tensor(
        -w[::-1].copy()))
    same(k, t, "prune() with importance scores")


# --- the reparametrization ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_reaches_orig_and_hook_recomputes(dtype):
    km, tm = pair("linear", dtype)
    korig = km.weight
    kprune.l1_unstructured(km, "weight", 0.5)
    tprune.l1_unstructured(tm, "weight", 0.5)
    assert km.weight_orig is korig  # the Parameter object moved, it was not copied
    assert "weight" not in dict(km.named_parameters())
    assert not isinstance(km.weight, kiln.nn.Parameter)
    x = distinct((3, 6), dtype, seed=4)
    g = distinct((3, 4), dtype, seed=7)
    km(kiln.tensor(x)).backward(kiln.tensor(g))
    tm(torch.tensor(x)).backward(torch.tensor(g))
    same(km.weight_orig.grad, tm.weight_orig.grad, "grad of weight_orig")
    same(km.bias.grad, tm.bias.grad, "grad of bias")
    assert (km.weight_orig.grad.numpy()[km.weight_mask.numpy() == 0] == 0).all()
    # an in-place update of weight_orig shows in weight at the next forward (pre-hook)
    with kiln.no_grad():
        km.weight_orig.mul_(2.0)
    with torch.no_grad():
        tm.weight_orig.mul_(2.0)
    same(km(kiln.tensor(x)), tm(torch.tensor(x)), "forward after updating weight_orig")
    same(km.weight, tm.weight, "weight recomputed by the hook")


@pytest.mark.parametrize("dtype", DTYPES)
def test_iterative_pruning_container(dtype):
    km, tm = pair("conv2d", dtype)
    steps = [lambda P, m: P.l1_unstructured(m, "weight", 0.25),
             lambda P, m: P.ln_structured(m, "weight", 0.4, 2, 0),
             lambda P, m: P.l1_unstructured(m, "weight", 3),
             lambda P, m: P.ln_structured(m, "weight", 1, 1, 1),
             lambda P, m: P.custom_from_mask(m, "weight", m.weight_mask.abs() * 0 + 1),
             lambda P, m: P.identity(m, "weight")]
    for i, step in enumerate(steps):
        step(kprune, km)
        step(tprune, tm)
        same_module(km, tm, f"after step {i}")
    hooks = list(km._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], kprune.PruningContainer)
    assert [type(h).__name__ for h in hooks[0]] == [
        "L1Unstructured", "LnStructured", "L1Unstructured", "LnStructured", "CustomFromMask",
        "Identity"]
    assert len(hooks[0]) == 6 and hooks[0][1].dim == 0
    oracle.record("PruningContainer")


@pytest.mark.parametrize("dtype", DTYPES)
def test_remove_and_is_pruned(dtype):
    kseq = kiln.nn.Sequential(make(kiln, "linear", dtype), kiln.nn.ReLU())
    tseq = torch.nn.Sequential(make(torch, "linear", dtype), torch.nn.ReLU())
    assert not kprune.is_pruned(kseq)
    kprune.l1_unstructured(kseq[0], "weight", 5)
    tprune.l1_unstructured(tseq[0], "weight", 5)
    kprune.random_unstructured(kseq[0], "bias", 1)
    assert kprune.is_pruned(kseq) and kprune.is_pruned(kseq[0])
    assert not kprune.is_pruned(kseq[1])
    kprune.remove(kseq[0], "bias")
    kprune.remove(kseq[0], "weight")
    tprune.remove(tseq[0], "weight")
    assert not kprune.is_pruned(kseq)
    assert list(kseq.state_dict()) == list(tseq.state_dict())
    w = kseq[0].weight
    assert isinstance(w, kiln.nn.Parameter) and w.requires_grad
    same(w, tseq[0].weight, "weight after remove")
    assert int((kseq[0].bias == 0).sum().item()) == 1
    assert not kseq[0]._forward_pre_hooks


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_state_dict_of_pruned_module(dtype):
    km, tm = pair("linear", dtype)
    tprune.l1_unstructured(tm, "weight", 6)
    km2 = make(kiln, "linear", dtype, seed=8)
    kprune.identity(km2, "weight")
    km2.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = distinct((2, 6), dtype, seed=1)
    same(km2(kiln.tensor(x)), tm(torch.tensor(x)), "forward after load_state_dict")


# --- errors -------------------------------------------------------------------------------

def test_nan_amount_passes_init_and_fails_at_pruning():
    k, t = kprune.L1Unstructured(float("nan")), tprune.L1Unstructured(float("nan"))
    same_error(lambda: k.compute_mask(kiln.ones(3), kiln.ones(3)),
               lambda: t.compute_mask(torch.ones(3), torch.ones(3)))


@pytest.mark.parametrize("amount", [-1, 1.5, -0.1, "0.3", None, 2 + 0j])
def test_amount_validation_at_init(amount):
    for cls in ("L1Unstructured", "RandomUnstructured"):
        same_error(lambda: getattr(kprune, cls)(amount), lambda: getattr(tprune, cls)(amount))
    for cls in ("RandomStructured",):
        same_error(lambda: getattr(kprune, cls)(amount), lambda: getattr(tprune, cls)(amount))
    same_error(lambda: kprune.LnStructured(amount, 2), lambda: tprune.LnStructured(amount, 2))


@pytest.mark.parametrize("case", [
    lambda L, P: P.l1_unstructured(make(L, "linear", "float32"), "weight", 25),
    lambda L, P: P.random_unstructured(make(L, "linear", "float32"), "bias", 5),
    lambda L, P: P.ln_structured(make(L, "linear", "float32"), "weight", 5, 2, 0),
    lambda L, P: P.ln_structured(make(L, "linear", "float32"), "bias", 1, 2, 0),
    lambda L, P: P.random_structured(make(L, "linear", "float32"), "bias", 1, 0),
    lambda L, P: P.ln_structured(make(L, "linear", "float32"), "weight", 1, 2, 2),
    lambda L, P: P.random_structured(make(L, "conv2d", "float32"), "weight", 1, 4),
    lambda L, P: P.ln_structured(make(L, "conv2d", "float32"), "weight", 1, "fro", 0),
    lambda L, P: P.ln_structured(make(L, "linear", "float32"), "weight", 1, "nuc", 0),
    lambda L, P: P.ln_structured(make(L, "linear", "float32"), "weight", 1, "xyz", 0),
    lambda L, P: P.l1_unstructured(make(L, "linear", "float32"), "weight", 2,
                                   importance_scores=L.ones(3, 3)),
    lambda L, P: P.L1Unstructured(2).prune(L.ones(3), importance_scores=L.ones(4)),
    lambda L, P: P.custom_from_mask(make(L, "linear", "float32"), "bias", L.ones(3)),
    lambda L, P: P.remove(make(L, "linear", "float32"), "weight"),
    lambda L, P: P.global_unstructured(5, P.L1Unstructured, amount=1),
    lambda L, P: P.global_unstructured([], P.L1Unstructured, importance_scores=[], amount=1),
    lambda L, P: P.global_unstructured([(make(L, "linear", "float32"), "weight")],
                                       P.RandomStructured, amount=1),
], ids=["l1_too_many", "random_too_many", "ln_too_many_channels", "ln_on_1d",
        "random_structured_on_1d", "ln_dim_out_of_range", "random_structured_dim",
        "fro_over_three_dims", "nuc_over_one_dim", "unknown_norm", "scores_shape",
        "prune_scores_shape", "custom_mask_shape", "remove_unpruned", "global_not_iterable",
        "global_scores_not_dict", "global_structured_method"])
def test_errors(case):
    same_error(lambda: case(kiln, kprune), lambda: case(torch, tprune))


def test_failed_pruning_leaves_module_unchanged():
    km, tm = pair("linear", "float64")
    for m, P in ((km, kprune), (tm, tprune)):
        with pytest.raises(ValueError):
            P.l1_unstructured(m, "weight", 100)
        assert not list(m.named_buffers()) and not P.is_pruned(m)
        assert not hasattr(m, "weight_orig")
    same_module(km, tm, "after a failed first pruning")  # weight is re-registered last
    # a failing second pruning keeps the first one
    km, tm = pair("linear", "float32")
    for m, P in ((km, kprune), (tm, tprune)):
        P.l1_unstructured(m, "weight", 3)
        with pytest.raises(ValueError):
            P.l1_unstructured(m, "weight", 22)
    same_module(km, tm, "after a failed second pruning")


def test_container_errors():
    def named(P, cls, name, *args):
        m = getattr(P, cls)(*args)
        m._tensor_name = name
        return m
    same_error(lambda: kprune.PruningContainer(named(kprune, "Identity", "w"))
               .add_pruning_method(5),
               lambda: tprune.PruningContainer(named(tprune, "Identity", "w"))
               .add_pruning_method(5))
    same_error(lambda: kprune.PruningContainer(named(kprune, "Identity", "w"))
               .add_pruning_method(named(kprune, "L1Unstructured", "b", 1)),
               lambda: tprune.PruningContainer(named(tprune, "Identity", "w"))
               .add_pruning_method(named(tprune, "L1Unstructured", "b", 1)))
    with pytest.raises(TypeError):
        kprune.BasePruningMethod()  # abstract: compute_mask is missing
    c = kprune.PruningContainer(named(kprune, "Identity", "w"))
    c.add_pruning_method(None)
    assert len(c) == 2 and c[1] is None


# --- random methods: structure and statistics ---------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_random_unstructured_counts(dtype):
    kiln.manual_seed(0)
    m = make(kiln, "conv2d", dtype)
    kprune.random_unstructured(m, "weight", 0.3)
    first = m.weight_mask.numpy().copy()
    n = first.size
    assert (first == 0).sum() == round(0.3 * n)
    kprune.random_unstructured(m, "weight", 0.5)  # half of what is left
    second = m.weight_mask.numpy()
    left = n - round(0.3 * n)
    assert (second == 0).sum() == round(0.3 * n) + round(0.5 * left)
    assert (second[first == 0] == 0).all()  # pruned entries stay pruned
    np.testing.assert_array_equal(m.weight.detach().numpy(),
                                  second * m.weight_orig.detach().numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_structured_counts(dtype):
    kiln.manual_seed(1)
    m = make(kiln, "conv2d", dtype)  # weight (5, 2, 2, 2)
    kprune.random_structured(m, "weight", 2, dim=0)
    mask = m.weight_mask.numpy()
    per_channel = mask.reshape(5, -1)
    assert ((per_channel == 0).all(1)).sum() == 2 and ((per_channel == 1).all(1)).sum() == 3
    kprune.random_structured(m, "weight", 0.5, dim=-1)  # one of the two last-dim channels
    mask2 = m.weight_mask.numpy()
    last = np.moveaxis(mask2, -1, 0).reshape(2, -1)
    assert (last == 0).all(1).sum() == 1
    assert (mask2[mask == 0] == 0).all()
    kprune.random_structured(m, "weight", 1, dim=0)  # one more of the 3 live channels
    per_channel = m.weight_mask.numpy().reshape(5, -1)
    assert (per_channel == 0).all(1).sum() == 3


def test_random_unstructured_is_uniform():
    """Each of 8 entries is pruned with probability 3/8; 400 draws keep the frequencies
    within a few standard deviations (sd ~ 0.024) and the count exact every time."""
    kiln.manual_seed(2)
    counts = np.zeros(8)
    method = kprune.RandomUnstructured(3)
    ones = kiln.ones(8)
    for _ in range(400):
        mask = method.compute_mask(ones, ones).numpy()
        assert (mask == 0).sum() == 3
        counts += mask == 0
    freq = counts / 400
    assert np.abs(freq - 3 / 8).max() < 0.12, freq


def test_random_structured_is_uniform():
    kiln.manual_seed(3)
    counts = np.zeros(6)
    method = kprune.RandomStructured(2, dim=1)
    t = kiln.ones(2, 6)
    for _ in range(300):
        mask = method.compute_mask(t, t).numpy()
        dead = (mask == 0).all(0)
        assert dead.sum() == 2 and ((mask == 1).all(0) | dead).all()
        counts += dead
    assert np.abs(counts / 300 - 1 / 3).max() < 0.12, counts / 300


def test_ties_prune_exactly_amount():
    """With equal magnitudes which entries go is up to topk (kiln and torch differ), but how
    many go is not."""
    for L, P in ((kiln, kprune), (torch, tprune)):
        m = L.nn.Linear(3, 3)
        with L.no_grad():
            m.weight.fill_(0.5)
        P.l1_unstructured(m, "weight", 4)
        assert int((m.weight_mask == 0).sum().item()) == 4
