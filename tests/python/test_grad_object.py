"""`.grad` keeps its Python object, as torch's: the same object on every read while the gradient
is the same tensor, the assigned object after `t.grad = g`, attributes set on it kept, and a new
object once backward or an assignment replaces the gradient. Each scenario runs on torch 2.13
and on kiln and the observations must agree."""
import gc
import pickle
import weakref

import numpy as np
import pytest
import torch

import kiln


def observe(lib):
    """What a program sees of .grad identity, as a dict of plain values."""
    seen = {}
    x = lib.ones(3, requires_grad=True)
    seen["none_before"] = x.grad is None
    (x * 2).sum().backward()
    g1 = x.grad
    seen["same_object"] = x.grad is x.grad and x.grad is g1
    x.grad.tag = "mine"
    seen["attribute_kept"] = getattr(x.grad, "tag", None)
    (x * 3).sum().backward()  # accumulates in place: the same tensor
    seen["after_accumulate_same"] = x.grad is g1
    seen["accumulated"] = x.grad.tolist()
    g = lib.full((3,), 7.0)
    x.grad = g
    seen["assigned_is_read"] = x.grad is g
    x.grad = None
    seen["none_after_reset"] = x.grad is None
    (x * 4).sum().backward()
    seen["fresh_after_reset"] = x.grad is not g and x.grad is not g1
    seen["fresh_values"] = x.grad.tolist()
    return seen


def test_grad_identity_matches_torch():
    assert observe(kiln) == observe(torch)


def test_grad_object_on_parameters_across_steps():
    # Optimizers read p.grad each step; identity holds between backward passes and SGD
    # updates the parameter through it.
    lin = kiln.nn.Linear(4, 2)
    opt = kiln.optim.SGD(lin.parameters(), lr=0.1)
    x = kiln.randn(5, 4)
    lin(x).sum().backward()
    grads = {name: p.grad for name, p in lin.named_parameters()}
    for name, p in lin.named_parameters():
        assert p.grad is grads[name], name
    before = lin.weight.detach().clone()
    opt.step()
    np.testing.assert_allclose(lin.weight.detach().numpy(),
                               (before - 0.1 * grads["weight"]).numpy(), rtol=1e-6)
    opt.zero_grad()  # set_to_none: the objects go
    assert lin.weight.grad is None


def test_grad_setter_errors_match_torch():
    for lib in (kiln, torch):
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but got grad of type int"):
            x.grad = 3
    x = kiln.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        x.grad = kiln.ones(3)  # wrong size: refused, and nothing is kept
    assert x.grad is None


def test_grad_object_released_with_its_owner():
    x = kiln.ones(3, requires_grad=True)
    x.sum().backward()
    g_ref = weakref.ref(x.grad)
    assert g_ref() is not None  # kept while x lives
    del x
    gc.collect()
    assert g_ref() is None


def test_cached_grad_does_not_travel_with_pickle_or_deepcopy():
    import copy
    x = kiln.ones(3, requires_grad=True)
    x.sum().backward()
    x.grad.tag = 1
    assert vars(x) == {}
    y = copy.deepcopy(x)
    assert vars(y) == {}
    z = pickle.loads(pickle.dumps(x))
    assert vars(z) == {}


def test_subclass_and_detached_grads():
    class Tagged(kiln.Tensor):
        pass

    x = kiln.ones(2, requires_grad=True)
    g = kiln.zeros(2).as_subclass(Tagged)
    x.grad = g
    assert x.grad is g and type(x.grad) is Tagged
    # x.grad.data is a new view object each read, as torch's
    assert x.grad.data is not x.grad.data
