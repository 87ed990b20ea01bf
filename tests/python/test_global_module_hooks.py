"""Global module hooks (torch.nn.modules.module.register_module_*), against torch 2.13: they
run for every module, before the module's own hooks, can replace args / outputs / gradients,
and are removed by their handles."""
import numpy as np
import pytest
import torch

import kiln


def _trace(lib):
    """The hook calls of a two-layer model's forward and backward under lib's global hooks."""
    nn = lib.nn
    mm = lib.nn.modules.module
    calls = []
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    own = model[0].register_forward_pre_hook(lambda m, a: calls.append(("own pre", type(m).__name__)))
    handles = [
        mm.register_module_forward_pre_hook(lambda m, a: calls.append(("pre", type(m).__name__))),
        mm.register_module_forward_hook(lambda m, a, o: calls.append(("post", type(m).__name__))),
        mm.register_module_full_backward_pre_hook(
            lambda m, go: calls.append(("bw pre", type(m).__name__))),
        mm.register_module_full_backward_hook(
            lambda m, gi, go: calls.append(("bw", type(m).__name__))),
    ]
    try:
        x = lib.ones(4, 3, requires_grad=True)
        model(x).sum().backward()
    finally:
        for h in handles:
            h.remove()
        own.remove()
    calls_after = len(calls)
    model(lib.ones(4, 3)).sum()
    assert len(calls) == calls_after  # removed
    return calls


def test_order_and_kinds_match_torch():
    assert _trace(kiln) == _trace(torch)


@pytest.mark.parametrize("lib", [kiln, torch])
def test_hooks_can_replace_args_and_outputs(lib):
    mm = lib.nn.modules.module
    lin = lib.nn.Linear(2, 2, bias=False)
    with lib.no_grad():
        lin.weight.copy_(lib.eye(2))
    h1 = mm.register_module_forward_pre_hook(lambda m, a: (a[0] * 2,))
    h2 = mm.register_module_forward_hook(lambda m, a, o: o + 1)
    try:
        y = lin(lib.tensor([[1.0, 2.0]]))
    finally:
        h1.remove()
        h2.remove()
    np.testing.assert_allclose(np.asarray(y.detach().tolist()), [[3.0, 5.0]])


@pytest.mark.parametrize("lib", [kiln, torch])
def test_always_call_forward_hook_runs_when_forward_raises(lib):
    mm = lib.nn.modules.module
    seen = []

    class Boom(lib.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    h = mm.register_module_forward_hook(lambda m, a, o: seen.append(o), always_call=True)
    try:
        with pytest.raises(ValueError, match="boom"):
            Boom()(lib.ones(1))
    finally:
        h.remove()
    assert seen == [None]


@pytest.mark.parametrize("lib", [kiln, torch])
def test_with_kwargs_forward_hook(lib):
    mm = lib.nn.modules.module
    got = []

    class Scale(lib.nn.Module):
        def forward(self, x, *, k=1.0):
            return x * k

    h = mm.register_module_forward_hook(lambda m, a, kw, o: got.append(dict(kw)), with_kwargs=True)
    try:
        Scale()(lib.ones(1), k=3.0)
    finally:
        h.remove()
    assert got == [{"k": 3.0}]


@pytest.mark.parametrize("lib", [kiln, torch])
def test_global_backward_hook_can_replace_grad_input(lib):
    mm = lib.nn.modules.module
    lin = lib.nn.Linear(2, 1)
    h = mm.register_module_full_backward_hook(lambda m, gi, go: tuple(g * 0 for g in gi))
    try:
        x = lib.ones(1, 2, requires_grad=True)
        lin(x).sum().backward()
    finally:
        h.remove()
    assert x.grad.tolist() == [[0.0, 0.0]]
