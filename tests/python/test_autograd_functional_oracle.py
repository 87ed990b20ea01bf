"""kiln.autograd.functional against torch.autograd.functional on identical inputs: vjp, jvp,
jacobian, hessian, hvp, vhp. Compared: values and the structure of the results (tensor vs
tuple, nesting), create_graph (results differentiable, second derivatives through them),
strict mode and the errors for bad input (same exception class, a message naming what was
expected and what was given)."""
import numpy as np
import pytest
import torch

import kiln
import oracle

KF = kiln.autograd.functional
TF = torch.autograd.functional
DTYPES = ["float32", "float64"]


def inputs(L, dtype, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(L.tensor(rng.uniform(0.2, 1.5, s).astype(dtype)) for s in shapes)


def same(k, t, where):
    oracle.assert_same(k, t, 4.0, where=where)


def two_in_two_out(L):
    return lambda x, y: (x.exp() * y.sum(), (x[:2] * y).sin())


def scalar_of_two(L):
    return lambda x, y: (x.pow(3) * y[:3].exp()).sum() + (x * x).sum() * y.sum()


def one_in_one_out(L):
    return lambda x: x.tanh() * x.sum()


@pytest.mark.parametrize("dtype", DTYPES)
def test_vjp_and_jvp_values_and_structure(dtype):
    kx, ky = inputs(kiln, dtype, (3,), (2,))
    tx, ty = inputs(torch, dtype, (3,), (2,))
    kv = inputs(kiln, dtype, (3,), (2,), seed=1)
    tv = inputs(torch, dtype, (3,), (2,), seed=1)
    # tuple in, tuple out
    same(KF.vjp(two_in_two_out(kiln), (kx, ky), kv), TF.vjp(two_in_two_out(torch), (tx, ty),
                                                              tv), "vjp tuples")
    same(KF.jvp(two_in_two_out(kiln), (kx, ky), (kx, ky)),
         TF.jvp(two_in_two_out(torch), (tx, ty), (tx, ty)), "jvp tuples")
    # single tensor in and out: tensors, not 1-tuples
    kr, tr = KF.vjp(one_in_one_out(kiln), kx, kv[0]), TF.vjp(one_in_one_out(torch), tx, tv[0])
    assert isinstance(kr[1], kiln.Tensor)
    same(kr, tr, "vjp single")
    same(KF.jvp(one_in_one_out(kiln), kx, kv[0]), TF.jvp(one_in_one_out(torch), tx, tv[0]),
         "jvp single")
    # v omitted: allowed for one-element outputs (vjp) / inputs (jvp)
    same(KF.vjp(lambda x: x.sum(), kx), TF.vjp(lambda x: x.sum(), tx), "vjp v=None")
    same(KF.jvp(lambda x: x.exp() * 2, kx[:1]), TF.jvp(lambda x: x.exp() * 2, tx[:1]),
         "jvp v=None")
    # an input the outputs do not use: zeros (not strict)
    same(KF.vjp(lambda x, y: x * 2, (kx, ky), kv[0]), TF.vjp(lambda x, y: x * 2, (tx, ty),
                                                             tv[0]), "vjp unused input")


@pytest.mark.parametrize("dtype", DTYPES)
def test_jacobian_structure_and_values(dtype):
    kx, ky = inputs(kiln, dtype, (3,), (2,))
    tx, ty = inputs(torch, dtype, (3,), (2,))
    kr = KF.jacobian(two_in_two_out(kiln), (kx, ky))
    tr = TF.jacobian(two_in_two_out(torch), (tx, ty))
    assert len(kr) == 2 and len(kr[0]) == 2
    same(kr, tr, "jacobian tuple/tuple")
    same(KF.jacobian(one_in_one_out(kiln), kx), TF.jacobian(one_in_one_out(torch), tx),
         "jacobian tensor/tensor")
    # tensor in, tuple out -> tuple of tensors; tuple in, tensor out -> tuple of tensors
    same(KF.jacobian(lambda x: (x * 2, x.sum()), kx),
         TF.jacobian(lambda x: (x * 2, x.sum()), tx), "jacobian tensor in, tuple out")
    same(KF.jacobian(lambda x, y: x * y.sum(), (kx, ky)),
         TF.jacobian(lambda x, y: x * y.sum(), (tx, ty)), "jacobian tuple in, tensor out")
    # matrix input and output: shape out.shape + in.shape
    (km,), (tm,) = inputs(kiln, dtype, (2, 3)), inputs(torch, dtype, (2, 3))
    same(KF.jacobian(lambda a: a @ a.t(), km), TF.jacobian(lambda a: a @ a.t(), tm),
         "jacobian matrices")
    same(KF.jacobian(lambda a: a.exp(), km, vectorize=True),
         TF.jacobian(lambda a: a.exp(), tm, vectorize=True), "jacobian vectorize")


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessian_hvp_vhp(dtype):
    kx, ky = inputs(kiln, dtype, (3,), (4,))
    tx, ty = inputs(torch, dtype, (3,), (4,))
    kv = inputs(kiln, dtype, (3,), (4,), seed=2)
    tv = inputs(torch, dtype, (3,), (4,), seed=2)
    kh = KF.hessian(scalar_of_two(kiln), (kx, ky))
    th = TF.hessian(scalar_of_two(torch), (tx, ty))
    assert len(kh) == 2 and all(len(row) == 2 for row in kh)
    same(kh, th, "hessian tuple")
    f = lambda x: (x.sin() * x.pow(2)).sum()  # noqa: E731
    same(KF.hessian(f, kx), TF.hessian(f, tx), "hessian tensor")
    same(KF.hvp(scalar_of_two(kiln), (kx, ky), kv), TF.hvp(scalar_of_two(torch), (tx, ty), tv),
         "hvp tuple")
    same(KF.vhp(scalar_of_two(kiln), (kx, ky), kv), TF.vhp(scalar_of_two(torch), (tx, ty), tv),
         "vhp tuple")
    same(KF.hvp(f, kx, kv[0]), TF.hvp(f, tx, tv[0]), "hvp tensor")
    same(KF.vhp(f, kx, kv[0]), TF.vhp(f, tx, tv[0]), "vhp tensor")
    # a function linear in y: the y rows of the Hessian are zeros
    lin = lambda x, y: (x * x).sum() + y.sum()  # noqa: E731
    same(KF.hessian(lin, (kx, ky)), TF.hessian(lin, (tx, ty)), "hessian zero blocks")


@pytest.mark.parametrize("dtype", DTYPES)
def test_create_graph_keeps_results_differentiable(dtype):
    results = {}
    for L, F in ((kiln, KF), (torch, TF)):
        x, = inputs(L, dtype, (3,))
        x.requires_grad_(True)
        v, = inputs(L, dtype, (3,), seed=3)
        plain = F.vjp(lambda a: a.exp() * a, x, v)
        assert not plain[0].requires_grad and not plain[1].requires_grad
        out, vjp = F.vjp(lambda a: a.exp() * a, x, v, create_graph=True)
        _, jvp = F.jvp(lambda a: a.exp() * a, x, v, create_graph=True)
        _, hvp = F.hvp(lambda a: (a.exp() * a).sum(), x, v, create_graph=True)
        jac = F.jacobian(lambda a: a.sin() * a, x, create_graph=True)
        hes = F.hessian(lambda a: a.pow(4).sum(), x, create_graph=True)
        assert vjp.requires_grad and jvp.requires_grad and hvp.requires_grad
        assert jac.requires_grad and hes.requires_grad
        total = out.sum() + vjp.sum() + jvp.sum() + hvp.sum() + jac.sum() + hes.sum()
        results[L] = L.autograd.grad(total, x)[0]
    same(results[kiln], results[torch], "second derivative through create_graph results")


def test_strict_mode():
    def cases(L, F):
        x, y = inputs(L, "float64", (3,), (3,))
        return [
            lambda: F.vjp(lambda a, b: a * 2, (x, y), x, strict=True),
            lambda: F.jacobian(lambda a, b: a * 2, (x, y), strict=True),
            lambda: F.vjp(lambda a: a.detach(), x, x, strict=True),
            lambda: F.hessian(lambda a: a.sum(), x, strict=True),
            lambda: F.jvp(lambda a, b: a * 2, (x, y), (x, y), strict=True),
        ]
    for i, (kc, tc) in enumerate(zip(cases(kiln, KF), cases(torch, TF))):
        with pytest.raises(Exception) as te:
            tc()
        with pytest.raises(type(te.value)) as ke:
            kc()
        assert str(ke.value) == str(te.value), f"strict case {i}"
    # strict with everything connected: same values as non-strict
    kx, = inputs(kiln, "float64", (3,))
    tx, = inputs(torch, "float64", (3,))
    same(KF.jacobian(lambda a: a.exp(), kx, strict=True),
         TF.jacobian(lambda a: a.exp(), tx, strict=True), "strict jacobian")


def error_cases(L, F):
    x, y = inputs(L, "float32", (3,), (2,))
    return {
        "input not a tensor": lambda: F.vjp(lambda a: a, 3.0, x),
        "tuple entry not a tensor": lambda: F.jacobian(lambda a, b: a, (x, [1.0])),
        "output not a tensor": lambda: F.vjp(lambda a: 1.0, x, x),
        "v wrong size": lambda: F.vjp(lambda a: a * 2, x, y),
        "v tuple wrong length": lambda: F.vjp(lambda a, b: (a, b), (x, y), (x,)),
        "v entry wrong size": lambda: F.jvp(lambda a, b: a, (x, y), (x, x)),
        "v missing, many elements": lambda: F.vjp(lambda a: a * 2, x),
        "jvp v missing": lambda: F.jvp(lambda a: a * 2, x),
        "hessian tuple output": lambda: F.hessian(lambda a: (a.sum(), a.sum()), x),
        "hessian many elements": lambda: F.hessian(lambda a: a * 2, x),
        "hvp many elements": lambda: F.hvp(lambda a: a * 2, x, x),
        "vhp tuple output": lambda: F.vhp(lambda a: (a.sum(),), x, x),
        "bad strategy": lambda: F.jacobian(lambda a: a, x, strategy="sideways"),
        "forward-mode with create_graph": lambda: F.jacobian(lambda a: a, x, create_graph=True,
                                                             strategy="forward-mode"),
        "vectorize with strict": lambda: F.jacobian(lambda a: a * 2, x, vectorize=True,
                                                    strict=True),
    }


@pytest.mark.parametrize("name", list(error_cases(torch, TF)))
def test_errors_match_torch(name):
    with pytest.raises(Exception) as te:
        error_cases(torch, TF)[name]()
    with pytest.raises(type(te.value)) as ke:
        error_cases(kiln, KF)[name]()
    message = str(ke.value)
    assert message, name
    # the same wording up to the library's name and its Size spelling
    normalised = message.replace("kiln.Size", "torch.Size").replace("kiln.", "torch.")
    expected = str(te.value)
    assert normalised == expected or name.startswith(("bad strategy", "forward-mode")), \
        f"{name}: kiln {message!r} vs torch {expected!r}"


def test_forward_mode_strategy_says_why():
    x, = inputs(kiln, "float32", (3,))
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        KF.jacobian(lambda a: a * 2, x, strategy="forward-mode")
