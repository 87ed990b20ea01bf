"""Pickling tensors and parameters (pickle, copy, multiprocessing): values, dtype, shape,
requires_grad as torch 2.13 (a non-leaf comes back as a leaf that requires grad)."""
import copy
import pickle

import numpy as np
import pytest
import torch

import kiln


@pytest.mark.parametrize("make", [
    lambda: kiln.arange(12.0).reshape(3, 4).t(),          # non-contiguous view
    lambda: kiln.full([2, 3], 1.25, dtype=kiln.bfloat16),
    lambda: kiln.full([3], -2.5, dtype=kiln.float16),
    lambda: kiln.tensor([1 + 2j, -3j]),
    lambda: kiln.tensor([1 + 2j], dtype=kiln.complex128),
    lambda: kiln.tensor([True, False]),
    lambda: kiln.tensor(7),                               # 0-d
    lambda: kiln.empty(0, 4, dtype=kiln.int8),
    lambda: kiln.arange(5, dtype=kiln.uint8),
])
def test_round_trip(make):
    t = make()
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        r = pickle.loads(pickle.dumps(t, protocol=proto))
        assert r.dtype == t.dtype and tuple(r.shape) == tuple(t.shape)
        assert r.is_contiguous()
        a = t.float() if t.dtype in (kiln.bfloat16, kiln.float16) else t
        b = r.float() if r.dtype in (kiln.bfloat16, kiln.float16) else r
        np.testing.assert_array_equal(np.asarray(b.numpy()), np.asarray(a.numpy()))
    c = copy.copy(t)
    assert c.dtype == t.dtype and tuple(c.shape) == tuple(t.shape)


def test_pickle_is_a_copy():
    t = kiln.zeros(3)
    r = pickle.loads(pickle.dumps(t))
    t.add_(1)
    assert r.tolist() == [0.0, 0.0, 0.0]


def test_requires_grad_as_torch():
    for lib in (kiln, torch):
        a = lib.ones(2, requires_grad=True)
        b = a * 2
        ra, rb = pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b))
        assert ra.requires_grad and rb.requires_grad and rb.grad_fn is None
        assert pickle.loads(pickle.dumps(b.detach())).requires_grad is False


def test_parameters_and_modules():
    p = kiln.nn.Parameter(kiln.full([2], 3.0, dtype=kiln.bfloat16))
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, kiln.nn.Parameter) and r.requires_grad and r.dtype == kiln.bfloat16
    assert r.float().tolist() == [3.0, 3.0]
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.ReLU(), kiln.nn.Linear(4, 2))
    m2 = pickle.loads(pickle.dumps(m))
    x = kiln.randn(5, 3)
    np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())
    assert all(isinstance(q, kiln.nn.Parameter) for q in m2.parameters())
