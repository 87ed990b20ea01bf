"""bfloat16 products whose left operand is the transpose of a row-major matrix (a weight's
gradient g.t() @ x, attention's q.t()-like batched views) against float64 products of the same
bfloat16 values: 2-D mm, addmm with a bias, batched bmm / matmul, sizes on both sides of the
threshold from which the operand is copied row-major first (decision 0125), and odd sizes."""
import numpy as np
import pytest
import torch

import kiln


def _bf16(shape, seed):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).bfloat16()
    return kiln.from_numpy(t.float().numpy()).to(kiln.bfloat16), t.double()


def _check(got, want, k):
    # float32 sums of k bfloat16 products, rounded to bfloat16 once.
    np.testing.assert_allclose(got.float().numpy(), want.numpy(),
                               rtol=1e-2, atol=2e-3 * np.sqrt(k))


@pytest.mark.parametrize("m,k,n", [(3, 5, 7), (64, 96, 80), (257, 31, 129), (768, 256, 300)])
def test_mm_and_addmm_of_a_transposed_left_operand(m, k, n):
    ka, ta = _bf16((k, m), 1)  # stored [k, m]; used as its transpose [m, k]
    kb, tb = _bf16((k, n), 2)
    kc, tc = _bf16((n,), 3)
    _check(kiln.mm(ka.t(), kb), ta.t() @ tb, k)
    _check(kiln.addmm(kc, ka.t(), kb), tc + ta.t() @ tb, k)
    # A transposed right operand too (x.t() @ w.t()).
    kw, tw = _bf16((n, k), 4)
    _check(kiln.mm(ka.t(), kw.t()), ta.t() @ tw.t(), k)


@pytest.mark.parametrize("b,m,k,n", [(2, 5, 9, 4), (48, 64, 256, 256), (6, 130, 70, 33)])
def test_batched_products_of_transposed_left_operands(b, m, k, n):
    ka, ta = _bf16((b, k, m), 5)
    kb, tb = _bf16((b, k, n), 6)
    _check(kiln.bmm(ka.transpose(1, 2), kb), ta.transpose(1, 2) @ tb, k)
    _check(kiln.matmul(ka.transpose(-1, -2), kb), ta.transpose(-1, -2) @ tb, k)


def test_weight_gradient_of_a_bfloat16_linear_matches_float64():
    kx, tx = _bf16((300, 96), 7)
    kw, tw = _bf16((200, 96), 8)
    kg, tg = _bf16((300, 200), 9)
    kw.requires_grad_()
    kiln.nn.functional.linear(kx, kw).backward(kg)
    _check(kw.grad, tg.t() @ tx, 300)
