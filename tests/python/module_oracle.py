"""Runs a kiln.nn module and its torch.nn twin on identical weights (torch's state_dict copied
into kiln) and identical inputs; compares state_dict keys, parameter names, repr, outputs
(tuples too), input gradients and parameter gradients. Shared by the conv and attention
oracle tests; every case is counted as nn.<name> in the suite's summary line."""
import dataclasses

import numpy as np
import torch

import kiln
import oracle


@dataclasses.dataclass
class Case:
    name: str
    make: object                 # make(nn) -> module
    inputs: list                 # specs: shape (float), ("bool", shape, p_true), ("causal", n)
    call: object = None          # call(module, inputs, L) -> output; default module(*inputs)
    train: bool = True
    tol: float = 10.0
    grad_inputs: tuple = (0,)    # indices of float inputs that require grad
    dtypes: tuple = ("float32", "float64")

    def __repr__(self):
        return self.name


def _array(rng, spec, dtype):
    if isinstance(spec, tuple) and spec and spec[0] == "bool":
        _, shape, p = spec
        a = rng.random(shape) < p
        if a.ndim >= 1:  # never a fully masked row (torch's paths disagree there)
            a[..., 0] = spec[2] < 0.5
        return a
    if isinstance(spec, tuple) and spec and spec[0] == "causal":
        n = spec[1]
        return np.triu(np.full((n, n), -np.inf), 1).astype(dtype)
    if isinstance(spec, tuple) and spec and spec[0] == "float_mask":
        return rng.uniform(-1.0, 1.0, size=spec[1]).astype(dtype)
    return rng.uniform(-2.0, 2.0, size=spec).astype(dtype)


def _flat(res):
    if isinstance(res, (tuple, list)):
        out = []
        for r in res:
            out.extend(_flat(r))
        return out
    return [res]


def run(case, dtype):
    torch.manual_seed(oracle._seed("nn", case.name))
    rng = np.random.default_rng(oracle._seed("nn-input", case.name, dtype))
    tmod, kmod = case.make(torch.nn), case.make(kiln.nn)
    tmod.to(getattr(torch, dtype))
    kmod.to(getattr(kiln, dtype))
    where = f"nn.{case.name}[{dtype}]"
    assert list(kmod.state_dict().keys()) == list(tmod.state_dict().keys()), where
    assert [n for n, _ in kmod.named_parameters()] == [n for n, _ in tmod.named_parameters()]
    for (n, kp), (_, tp) in zip(kmod.named_parameters(), tmod.named_parameters()):
        assert tuple(kp.shape) == tuple(tp.shape), f"{where}: shape of {n}"
    assert repr(kmod) == repr(tmod), f"{where}: repr\n{kmod!r}\nvs\n{tmod!r}"
    sd = {k: kiln.tensor(v.detach().float().numpy() if v.dtype == torch.bfloat16
                         else v.detach().numpy()) for k, v in tmod.state_dict().items()}
    kmod.load_state_dict(sd)
    tmod.train(case.train)
    kmod.train(case.train)
    ins_t, ins_k = [], []
    np_dtype = np.float32 if dtype == "bfloat16" else np.dtype(dtype)
    for i, spec in enumerate(case.inputs):
        a = _array(rng, spec, np_dtype)
        t, k = torch.tensor(a), kiln.tensor(a)
        if dtype == "bfloat16" and t.is_floating_point():
            t, k = t.to(torch.bfloat16), k.to(kiln.bfloat16)
        if i in case.grad_inputs and t.is_floating_point() and dtype != "bfloat16":
            t.requires_grad_(True)
            k.requires_grad_(True)
        ins_t.append(t)
        ins_k.append(k)
    call = case.call or (lambda m, xs, L: m(*xs))
    tr = call(tmod, ins_t, torch)
    kr = call(kmod, ins_k, kiln)
    oracle.assert_same(kr, tr, case.tol, where=where + " output")
    n = 1
    touts = [r for r in _flat(tr) if isinstance(r, torch.Tensor) and r.requires_grad]
    kouts = [r for r, t in zip(_flat(kr), _flat(tr)) if isinstance(t, torch.Tensor)
             and t.requires_grad]
    if touts:
        tl = tk = 0
        for t, k in zip(touts, kouts):
            g = rng.uniform(-1, 1, size=tuple(t.shape)).astype(np_dtype)
            tl = tl + (t * torch.tensor(g)).sum()
            tk = tk + (k * kiln.tensor(g)).sum()
        tl.backward()
        tk.backward()
        for i, (t, k) in enumerate(zip(ins_t, ins_k)):
            if t.requires_grad:
                oracle.assert_same(k.grad, t.grad, case.tol * 4,
                                   where=f"{where} grad of input {i}")
        for (name, tp), (_, kp) in zip(tmod.named_parameters(), kmod.named_parameters()):
            if tp.grad is None:
                assert kp.grad is None or not oracle.to_numpy(kp.grad).any(), f"{where} {name}"
                continue
            assert kp.grad is not None, f"{where}: no grad for parameter {name}"
            oracle.assert_same(kp.grad, tp.grad, case.tol * 4, where=f"{where} grad of {name}")
        n += 1
    oracle.record("nn." + case.name, n)


def errors_agree(name, fn):
    """fn(nn, L, F) must raise in torch; kiln must raise an exception of the same type."""
    te = ke = None
    try:
        fn(torch.nn, torch, torch.nn.functional)
    except Exception as e:  # noqa: BLE001
        te = e
    try:
        fn(kiln.nn, kiln, kiln.nn.functional)
    except Exception as e:  # noqa: BLE001
        ke = e
    assert te is not None, f"{name}: torch did not raise"
    assert ke is not None, f"{name}: torch raised {type(te).__name__}: {te}; kiln did not"
    assert isinstance(ke, type(te)), \
        f"{name}: kiln raised {type(ke).__name__}: {ke}, torch {type(te).__name__}: {te}"
