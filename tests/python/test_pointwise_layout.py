"""Pointwise ops lay out their new results as PyTorch 2.13's TensorIterator does: dense, with
the dims in the order the inputs' strides give them (the first input that orders a pair of
dims decides; broadcast dims order nothing), so `x.t().exp()`, `x.t() + 1` or a channels-last
sum keep their input's layout (decision 0129). Strides and values are compared with torch on
the same views."""
import itertools

import numpy as np
import pytest
import torch

import kiln


def _pair(shape, seed, dtype=np.float32):
    base = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return kiln.from_numpy(base.copy()), torch.from_numpy(base.copy())


def _views():
    """(name, base shape, view) building the same view from a kiln and a torch tensor."""
    out = [(f"permute{p}", (2, 3, 4), lambda t, p=p: t.permute(*p))
           for p in itertools.permutations(range(3))]
    out += [
        ("transpose", (5, 7), lambda t: t.t()),
        ("slice_cols", (6, 5), lambda t: t[:, 1:4]),
        ("transposed_slice", (6, 8), lambda t: t.t()[::3]),
        ("permuted_slice", (4, 6, 5), lambda t: t.permute(2, 0, 1)[:, :, ::2]),
        ("expanded_transposed", (1, 4), lambda t: t.expand(3, 4).t()),
        ("size_one_dims", (1, 3, 1, 4), lambda t: t.permute(3, 2, 1, 0)),
        ("channels_last", (2, 3, 4, 5), lambda t: t.permute(0, 2, 3, 1).permute(0, 3, 1, 2)),
        ("permuted_4d", (2, 3, 4, 5), lambda t: t.permute(3, 1, 0, 2)),
        ("strided_4d", (2, 4, 6, 8), lambda t: t[:, ::2, :, ::4].permute(0, 3, 1, 2)),
        ("large_transpose", (300, 257), lambda t: t.t()),  # threaded flat path
    ]
    return out


VIEWS = _views()
IDS = [v[0] for v in VIEWS]

UNARY = {
    "neg": lambda t: -t,
    "exp": lambda t: t.exp(),
    "abs": lambda t: t.abs(),
    "sigmoid": lambda t: t.sigmoid(),
    "relu": lambda t: t.relu(),
    "isnan": lambda t: t.isnan(),
    "clamp": lambda t: t.clamp(min=-0.5),
    "gelu": lambda t: (kiln if isinstance(t, kiln.Tensor) else torch).nn.functional.gelu(t),
    "square": lambda t: t ** 2,
}


def _check(kr, tr, rtol=1e-5, atol=1e-6):
    assert tuple(kr.shape) == tuple(tr.shape)
    assert kr.stride() == tr.stride(), (kr.stride(), tr.stride())
    kv = kr.float().numpy() if kr.dtype == kiln.bfloat16 else kr.numpy()
    tv = tr.float().numpy() if tr.dtype == torch.bfloat16 else tr.numpy()
    np.testing.assert_allclose(kv, tv, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("name,shape,view", VIEWS, ids=IDS)
def test_unary_result_layout_matches_torch(name, shape, view, op):
    k, t = _pair(shape, len(name))
    _check(UNARY[op](view(k)), UNARY[op](view(t)))


@pytest.mark.parametrize("op", ["exp", "neg", "relu", "square", "gelu"])
@pytest.mark.parametrize("name", ["transpose", "permute(2, 0, 1)", "large_transpose"])
def test_bfloat16_unary_on_permuted_input(name, op):
    _, shape, view = VIEWS[IDS.index(name)]
    k, t = _pair(shape, 7)
    kr = UNARY[op](view(k.to(kiln.bfloat16)))
    tr = UNARY[op](view(t.to(torch.bfloat16)))
    assert kr.dtype == kiln.bfloat16
    _check(kr, tr, rtol=1e-2, atol=1e-2)


BINARY = {
    "add": lambda a, b: a + b,
    "sub_alpha": lambda a, b: a.sub(b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: (kiln if isinstance(a, kiln.Tensor) else torch).maximum(a, b),
    "eq": lambda a, b: a == b,
    "pow": lambda a, b: a.abs() ** b,
}


def _operands():
    """(name, shape_a, view_a, shape_b, view_b): two operands broadcasting to one shape."""
    t2 = lambda t: t.t()  # noqa: E731
    ident = lambda t: t  # noqa: E731
    cl = lambda t: t.permute(0, 2, 3, 1).permute(0, 3, 1, 2)  # noqa: E731
    return [
        ("t_t", (5, 7), t2, (5, 7), t2),
        ("t_contig", (5, 7), t2, (7, 5), ident),
        ("contig_t", (7, 5), ident, (5, 7), t2),
        ("t_row", (5, 7), t2, (5,), ident),
        ("row_t", (5,), ident, (5, 7), t2),
        ("t_col", (5, 7), t2, (7, 1), ident),
        ("t_0d", (5, 7), t2, (), ident),
        ("0d_t", (), ident, (5, 7), t2),
        ("permuted_3d_contig", (2, 3, 4), lambda t: t.permute(2, 0, 1), (4, 2, 3), ident),
        ("permuted_3d_last_dim", (2, 3, 4), lambda t: t.permute(1, 2, 0), (2,), ident),
        ("cl_cl", (2, 3, 4, 5), cl, (2, 3, 4, 5), cl),
        ("cl_bias", (2, 3, 4, 5), cl, (1, 3, 1, 1), ident),
        ("bias_cl", (1, 3, 1, 1), ident, (2, 3, 4, 5), cl),
        ("cl_contig", (2, 3, 4, 5), cl, (2, 3, 4, 5), ident),
        ("contig_cl", (2, 3, 4, 5), ident, (2, 3, 4, 5), cl),
        ("slice_t", (6, 8), lambda t: t.t()[::2], (4, 6), ident),
        ("expanded_both", (3, 1), lambda t: t.expand(3, 4), (1, 4), lambda t: t.expand(3, 4)),
        ("large_t_t", (300, 257), t2, (300, 257), t2),
        ("large_t_contig", (300, 257), t2, (257, 300), ident),
    ]


OPERANDS = _operands()
OPERAND_IDS = [o[0] for o in OPERANDS]


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("name,sa,va,sb,vb", OPERANDS, ids=OPERAND_IDS)
def test_binary_result_layout_matches_torch(name, sa, va, sb, vb, op):
    ka, ta = _pair(sa, 1)
    kb, tb = _pair(sb, 2)
    _check(BINARY[op](va(ka), vb(kb)), BINARY[op](va(ta), vb(tb)))


@pytest.mark.parametrize("name,sa,va,sb,vb", OPERANDS, ids=OPERAND_IDS)
def test_bfloat16_binary_on_permuted_operands(name, sa, va, sb, vb):
    ka, ta = _pair(sa, 3)
    kb, tb = _pair(sb, 4)
    ka, kb, ta, tb = ka.to(kiln.bfloat16), kb.to(kiln.bfloat16), ta.to(torch.bfloat16), tb.to(torch.bfloat16)
    for f in (lambda a, b: a + b, lambda a, b: a * b):
        _check(f(va(ka), vb(kb)), f(va(ta), vb(tb)), rtol=1e-2, atol=1e-2)


def test_where_lerp_addcmul_follow_the_first_operand():
    kx, tx = _pair((6, 9), 5)
    ky, ty = _pair((9, 6), 6)
    kc, tc = kx.t() > 0, tx.t() > 0
    _check(kiln.where(kc, ky, kx.t()), torch.where(tc, ty, tx.t()))
    _check(kiln.where(kc.contiguous(), kx.t(), ky), torch.where(tc.contiguous(), tx.t(), ty))
    _check(kiln.lerp(kx.t(), ky, 0.25), torch.lerp(tx.t(), ty, 0.25))
    _check(kiln.addcmul(kx.t(), ky, kx.t(), value=0.5), torch.addcmul(tx.t(), ty, tx.t(), value=0.5))


def test_in_place_and_out_keep_their_own_layout():
    kx, tx = _pair((5, 7), 8)
    ko, to = kiln.empty(7, 5), torch.empty(7, 5)
    kiln.add(kx.t(), 1.0, out=ko)
    torch.add(tx.t(), 1.0, out=to)
    _check(ko, to)
    ky, ty = kx.clone(), tx.clone()
    ky.t().mul_(3.0)
    ty.t().mul_(3.0)
    _check(ky, ty)


def test_gradient_through_a_transposed_product():
    """Backward formulas built from pointwise ops on transposed operands still give
    the leaf's gradient in its own shape and values."""
    kx, tx = _pair((4, 6), 9)
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    ((kx.t() * 2.0).exp() * kx.t()).sum().backward()
    ((tx.t() * 2.0).exp() * tx.t()).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert kx.grad.stride() == tx.grad.stride()


def test_view_of_a_permuted_result_fails_as_in_torch_and_reshape_copies():
    kx, tx = _pair((4, 6), 10)
    kr, tr = kx.t() + 1, tx.t() + 1
    with pytest.raises(RuntimeError):
        tr.view(-1)
    with pytest.raises(Exception):
        kr.view(-1)
    np.testing.assert_array_equal(kr.reshape(-1).numpy(), tr.reshape(-1).numpy())
