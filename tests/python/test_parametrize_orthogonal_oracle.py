"""kiln.nn.utils.parametrizations.orthogonal against torch's on identical weights: the
parametrized weight for the three maps (matrix_exp, cayley, householder), square, tall, wide
and batched, with and without use_trivialization; gradients with respect to the stored
original; assigning an orthogonal matrix (right_inverse) and what is stored for it; the
state_dict keys; the errors for bad input (same exception class and message)."""
import numpy as np
import pytest
import torch

import kiln
import oracle
from kiln.nn.utils import parametrizations as KP
from torch.nn.utils import parametrizations as TP

MAPS = ["matrix_exp", "cayley", "householder"]
SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 3)]
DTYPES = ["float32", "float64"]


def holders(shape, dtype, seed=0):
    """A module holding the same weight in kiln and torch."""
    w = np.random.default_rng(seed).normal(size=shape).astype(dtype)
    k, t = kiln.nn.Module(), torch.nn.Module()
    k.weight = kiln.nn.Parameter(kiln.tensor(w))
    t.weight = torch.nn.Parameter(torch.tensor(w))
    return k, t


def same(k, t, where, tol=20.0):
    oracle.assert_same(k, t, tol, where=where)


def orthonormal(q, dtype):
    q = q.detach().numpy().astype(np.float64)
    if q.shape[-2] < q.shape[-1]:
        q = np.swapaxes(q, -1, -2)
    gram = np.swapaxes(q, -1, -2) @ q
    eye = np.eye(q.shape[-1])
    return np.abs(gram - eye).max() < (1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_weight_and_gradient_without_trivialization(orthogonal_map, shape, dtype):
    """No base: the weight is the map of the original itself (deterministic, so gradients
    with respect to it can be compared)."""
    k, t = holders(shape, dtype)
    KP.orthogonal(k, orthogonal_map=orthogonal_map, use_trivialization=False)
    TP.orthogonal(t, orthogonal_map=orthogonal_map, use_trivialization=False)
    korig, torig = k.parametrizations.weight.original, t.parametrizations.weight.original
    same(korig, torig, "stored original")
    same(k.weight, t.weight, "weight")
    assert orthonormal(k.weight, dtype)
    rng = np.random.default_rng(1)
    probe = rng.normal(size=shape).astype(dtype)
    (k.weight * kiln.tensor(probe)).sum().backward()
    (t.weight * torch.tensor(probe)).sum().backward()
    same(korig.grad, torig.grad, "gradient of the original")
    assert list(k.state_dict()) == list(t.state_dict())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_weight_with_trivialization(orthogonal_map, shape, dtype):
    """With a base: the weight starts as the orthogonalised weight (Q of its QR, R's diagonal
    made positive); the stored original is -I, the base a buffer."""
    k, t = holders(shape, dtype)
    KP.orthogonal(k, orthogonal_map=orthogonal_map)
    TP.orthogonal(t, orthogonal_map=orthogonal_map)
    same(k.weight, t.weight, "weight")
    same(k.parametrizations.weight.original, t.parametrizations.weight.original, "original")
    assert list(k.state_dict()) == list(t.state_dict())
    if shape[-1] == shape[-2]:  # the base is random for non-square weights (torch too)
        same(k.parametrizations.weight[0].base, t.parametrizations.weight[0].base, "base")
        rng = np.random.default_rng(2)
        probe = rng.normal(size=shape).astype(dtype)
        (k.weight * kiln.tensor(probe)).sum().backward()
        (t.weight * torch.tensor(probe)).sum().backward()
        same(k.parametrizations.weight.original.grad, t.parametrizations.weight.original.grad,
             "gradient of the original")


@pytest.mark.parametrize("use_trivialization", [True, False])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_assigning_an_orthogonal_matrix(shape, use_trivialization):
    """weight = Q stores what gives Q back (householder: LAPACK geqrf's reflectors)."""
    k, t = holders(shape, "float64", seed=3)
    KP.orthogonal(k, orthogonal_map="householder", use_trivialization=use_trivialization)
    TP.orthogonal(t, orthogonal_map="householder", use_trivialization=use_trivialization)
    _, other = holders(shape, "float64", seed=4)
    TP.orthogonal(other, orthogonal_map="householder")
    q = other.weight.detach().clone()
    with torch.no_grad():
        t.weight = q
    with kiln.no_grad():
        k.weight = kiln.tensor(q.numpy())
    same(k.weight, t.weight, "weight after assignment")
    same(k.weight, q, "assigned matrix read back")
    same(k.parametrizations.weight.original, t.parametrizations.weight.original,
         "original after assignment")


def test_default_map_on_a_linear_layer():
    """Not square: householder by default; the weight's columns are the orthonormalised
    weight's (the random completion of the base only fills columns the weight does not use),
    so the layer's output matches torch's."""
    torch.manual_seed(0)
    t = torch.nn.Linear(3, 5).double()
    k = kiln.nn.Linear(3, 5).double()
    k.load_state_dict({n: kiln.tensor(v.numpy()) for n, v in t.state_dict().items()})
    TP.orthogonal(t)
    KP.orthogonal(k)
    assert k.parametrizations.weight[0].orthogonal_map == "householder"
    x = np.random.default_rng(0).normal(size=(2, 3))
    same(k(kiln.tensor(x)), t(torch.tensor(x)), "output")
    assert orthonormal(k.weight, "float64")


def error_cases(L, P):
    module = L.nn.Linear(3, 3)
    vector = L.nn.Module()
    vector.weight = L.nn.Parameter(L.ones(3))
    exp_map = P.orthogonal(L.nn.Linear(3, 3), use_trivialization=False)
    trivial = P.orthogonal(L.nn.Linear(3, 3))
    return {
        "no such tensor": lambda: P.orthogonal(module, name="nope"),
        "not a matrix": lambda: P.orthogonal(vector),
        "unknown map": lambda: P.orthogonal(module, orthogonal_map="qr"),
        "assign to matrix_exp without base": lambda: setattr(exp_map, "weight", L.eye(3)),
        "assign a wrong shape": lambda: setattr(trivial, "weight", L.eye(4)),
    }


@pytest.mark.parametrize("name", list(error_cases(torch, TP)))
def test_errors_match_torch(name):
    with pytest.raises(Exception) as te:
        error_cases(torch, TP)[name]()
    with pytest.raises(type(te.value)) as ke:
        error_cases(kiln, KP)[name]()
    message = str(ke.value).replace("kiln.Size", "torch.Size")
    assert message == str(te.value) or name == "no such tensor", \
        f"{name}: kiln {ke.value} vs torch {te.value}"
    assert message, name
