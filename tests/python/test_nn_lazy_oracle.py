"""Lazy modules against torch's: the same placeholders and state_dict keys before the first
call, the same inferred sizes, class and repr after it, and (with torch's weights loaded) the
same outputs and gradients; loading a full state_dict before the first call materialises the
placeholders, as torch."""
import numpy as np
import pytest
import torch

import kiln
import oracle

CASES = {
    "LazyLinear": ((4,), (3, 5)),
    "LazyConv1d": ((4, 3), (2, 3, 8)),
    "LazyConv2d": ((4, 3), (2, 3, 6, 6)),
    "LazyConv2d_unbatched": ((4, 3), (3, 6, 6)),
    "LazyConv3d": ((2, 2), (1, 3, 4, 4, 4)),
    "LazyConvTranspose1d": ((4, 3), (2, 3, 5)),
    "LazyConvTranspose2d": ((4, 3), (2, 3, 5, 5)),
    "LazyBatchNorm1d": ((), (4, 3)),
    "LazyBatchNorm2d": ((), (2, 3, 4, 4)),
    "LazyBatchNorm3d": ((), (2, 3, 2, 2, 2)),
    "LazyInstanceNorm1d": ((), (2, 3, 5)),
    "LazyInstanceNorm2d": ((), (2, 3, 4, 4)),
    "LazyInstanceNorm3d": ((), (2, 3, 2, 2, 2)),
}


def K(t):
    return kiln.tensor(t.detach().numpy())


def build(name):
    args, shape = CASES[name]
    cls = name.split("_")[0]
    return getattr(torch.nn, cls)(*args), getattr(kiln.nn, cls)(*args), shape


@pytest.mark.parametrize("name", list(CASES))
def test_lazy_module_becomes_the_ordinary_one(name):
    t, k, shape = build(name)
    assert list(k.state_dict()) == list(t.state_dict())
    assert k.has_uninitialized_params()
    assert all(type(p).__name__ == "UninitializedParameter" for p in k.parameters())
    x = torch.randn(*shape)
    t(x)
    k(K(x))
    assert type(k).__name__ == type(t).__name__ and not hasattr(k, "has_uninitialized_params")
    assert repr(k) == repr(t)
    assert {n: tuple(v.shape) for n, v in k.state_dict().items()} == \
        {n: tuple(v.shape) for n, v in t.state_dict().items()}
    assert all(type(p) is kiln.nn.Parameter for p in k.parameters())
    assert not k._forward_pre_hooks
    # torch's values in, then the same forward and gradients
    k.load_state_dict({n: K(v) for n, v in t.state_dict().items()})
    yt, yk = t(x), k(K(x))
    oracle.assert_same(yk, yt, 2, where=f"{name} forward")
    w = torch.linspace(-1, 1, yt.numel()).reshape(yt.shape)
    (yt * w).sum().backward()
    (yk * K(w)).sum().backward()
    for (pn, tp), (_, kp) in zip(t.named_parameters(), k.named_parameters()):
        oracle.assert_same(kp.grad, tp.grad, 4, where=f"{name} grad of {pn}")
    for (bn, tb), (_, kb) in zip(t.named_buffers(), k.named_buffers()):
        oracle.assert_same(kb, tb, 2, where=f"{name} buffer {bn}")
    oracle.record("nn." + name.split("_")[0])


def test_lazy_initialisation_is_the_ordinary_one():
    k = kiln.nn.LazyLinear(50)
    k(kiln.randn(2, 400))
    bound = 1 / np.sqrt(400)  # kaiming_uniform(a=sqrt(5)) and the bias bound, as Linear
    w, b = k.weight.detach().numpy(), k.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound
    bn = kiln.nn.LazyBatchNorm2d()
    bn(kiln.randn(2, 3, 4, 4))
    assert (bn.weight.detach().numpy() == 1).all() and (bn.bias.detach().numpy() == 0).all()
    assert int(bn.num_batches_tracked.item()) == 1


def test_lazy_load_state_dict_before_the_first_call():
    t = torch.nn.Linear(5, 4)
    k = kiln.nn.LazyLinear(4)
    k.load_state_dict({n: K(v) for n, v in t.state_dict().items()})
    assert not k.has_uninitialized_params()
    assert tuple(k.weight.shape) == (4, 5)
    x = torch.randn(3, 5)
    oracle.assert_same(k(K(x)), t(x), 2, where="loaded before the first call")
    assert type(k) is kiln.nn.Linear


def test_lazy_options_and_errors():
    k = kiln.nn.LazyConv2d(6, 3, groups=2, bias=False, padding=1)
    t = torch.nn.LazyConv2d(6, 3, groups=2, bias=False, padding=1)
    x = torch.randn(1, 4, 5, 5)
    t(x)
    k(K(x))
    assert repr(k) == repr(t) and k.bias is None
    cases = {
        "groups": lambda L: L.nn.LazyConv2d(4, 3, groups=2)(L.randn(1, 3, 5, 5)),
        "conv_rank": lambda L: L.nn.LazyConv2d(4, 3)(L.randn(5, 5)),
        "linear_twice_other_width": lambda L: (lambda m: (m(L.randn(2, 3)),
                                                          m(L.randn(2, 4))))(L.nn.LazyLinear(2)),
    }
    for name, case in cases.items():
        oracle.check_same_error_class(case, "lazy " + name)
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\)"):
        kiln.nn.LazyConv2d(4, 3)(kiln.randn(5, 5))
