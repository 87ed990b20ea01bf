"""Autocast's float32 policy for the losses (decision 0125), against torch 2.13's CPU autocast:
every loss torch lists as a float32 op returns float32 from bfloat16 inputs, with torch's
values and bfloat16 gradients for the bfloat16 inputs; cross_entropy takes log_softmax of the
widened logits in float32 (not of bfloat16 logits rounded to bfloat16 log-probabilities); a
Linear under autocast casts its weight before transposing it, so a weight tied to an embedding
gets one row-major float32 gradient."""
import numpy as np
import pytest
import torch

import kiln

F, KF = torch.nn.functional, kiln.nn.functional


def _k(t):
    return kiln.from_numpy(t.detach().numpy().copy())


def _ones(lib, n):
    return torch.ones(n) if lib is torch else kiln.ones([n])


# (lib, F, a, b, t): a, b bfloat16 [8, 5] products that require grad; t class indices.
LOSSES = {
    "cross_entropy": lambda L, F, a, b, t: F.cross_entropy(a, t),
    "cross_entropy probs": lambda L, F, a, b, t: F.cross_entropy(a, b.softmax(-1)),
    "mse_loss": lambda L, F, a, b, t: F.mse_loss(a, b),
    "l1_loss": lambda L, F, a, b, t: F.l1_loss(a, b),
    "smooth_l1_loss": lambda L, F, a, b, t: F.smooth_l1_loss(a, b),
    "huber_loss": lambda L, F, a, b, t: F.huber_loss(a, b),
    "kl_div": lambda L, F, a, b, t: F.kl_div(a.log_softmax(-1), b.softmax(-1),
                                             reduction="batchmean"),
    "binary_cross_entropy": lambda L, F, a, b, t: F.binary_cross_entropy(a.sigmoid(),
                                                                         b.sigmoid()),
    "bce_with_logits": lambda L, F, a, b, t: F.binary_cross_entropy_with_logits(a, b.sigmoid()),
    "nll_loss": lambda L, F, a, b, t: F.nll_loss(a.log_softmax(-1), t),
    "cosine_embedding_loss": lambda L, F, a, b, t: F.cosine_embedding_loss(a, b, _ones(L, 8)),
    "margin_ranking_loss": lambda L, F, a, b, t: F.margin_ranking_loss(a[:, 0], b[:, 0],
                                                                       _ones(L, 8)),
    "soft_margin_loss": lambda L, F, a, b, t: F.soft_margin_loss(a, b.sign().detach()),
    "poisson_nll_loss": lambda L, F, a, b, t: F.poisson_nll_loss(a, b.abs()),
    "hinge_embedding_loss": lambda L, F, a, b, t: F.hinge_embedding_loss(a, b.sign().detach()),
    "multi_margin_loss": lambda L, F, a, b, t: F.multi_margin_loss(a, t),
    "multilabel_margin_loss": lambda L, F, a, b, t: F.multilabel_margin_loss(
        a, t[:, None].expand(8, 5).contiguous()),
    "triplet_margin_loss": lambda L, F, a, b, t: F.triplet_margin_loss(a, b, a * 2),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_runs_in_float32_under_autocast_as_torch(name):
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)
    t = torch.randint(0, 5, (8,), generator=g)
    torch.manual_seed(0)  # the Linear's initial weights
    lin = torch.nn.Linear(5, 5)
    klin = kiln.nn.Linear(5, 5)
    klin.load_state_dict({k: _k(v) for k, v in lin.state_dict().items()})
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = lin(x), lin(y)
        a.retain_grad()
        want = LOSSES[name](torch, F, a, b, t)
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        ka, kb = klin(_k(x)), klin(_k(y))
        ka.retain_grad()
        got = LOSSES[name](kiln, KF, ka, kb, _k(t))
    assert str(want.dtype) == "torch.float32"
    assert got.dtype == kiln.float32, got.dtype
    # Inputs that pass through a bfloat16 log_softmax (not a float32 op under autocast, in
    # torch or kiln) may differ by its rounding; the rest agree to float32 precision.
    # (log-probabilities of about 2 in size, bfloat16's relative step 2^-8).
    rounded = name in ("kl_div", "nll_loss")
    np.testing.assert_allclose(got.item(), want.item(), rtol=0 if rounded else 1e-5,
                               atol=1e-2 if rounded else 1e-6)
    want.backward()
    got.backward()
    assert ka.grad.dtype == kiln.bfloat16
    np.testing.assert_allclose(ka.grad.float().numpy(), a.grad.float().numpy(), rtol=2e-2,
                               atol=1e-3)


def test_cross_entropy_takes_log_softmax_of_the_widened_logits():
    g = torch.Generator().manual_seed(4)
    logits = (torch.randn(64, 1000, generator=g) * 4).bfloat16()
    t = torch.randint(0, 1000, (64,), generator=g)
    exact = F.cross_entropy(logits.double(), t).item()
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        got = KF.cross_entropy(_k(logits.float()).to(kiln.bfloat16), _k(t))
    assert got.dtype == kiln.float32
    # float32 log-probabilities: about 1e-7 relative; bfloat16 ones were off by about 1e-3.
    assert abs(got.item() - exact) < 1e-5 * abs(exact)


def test_linear_weight_tied_to_an_embedding_gets_one_row_major_gradient():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(50, 16, generator=g, requires_grad=True)
    idx = torch.randint(0, 50, (2, 7), generator=g)
    kw = _k(w).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = F.linear(F.embedding(idx, w), w)
        loss = F.cross_entropy(out.reshape(14, 50), idx.reshape(-1))
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        kout = KF.linear(KF.embedding(_k(idx), kw), kw)
        kloss = KF.cross_entropy(kout.reshape(14, 50), _k(idx).reshape(-1))
    loss.backward()
    kloss.backward()
    assert kw.grad.dtype == kiln.float32 and kw.grad.is_contiguous()
    np.testing.assert_allclose(kw.grad.numpy(), w.grad.numpy(), rtol=2e-2, atol=2e-3)


def test_linear_casts_its_weight_once_per_region_before_the_transpose():
    # The cast is of the weight itself (a leaf: cached while the region lasts), not of its
    # transpose (a new view each call, cast again, and its gradient returned transposed).
    w = kiln.randn([50, 16]).requires_grad_()
    x = kiln.randn([14, 16])
    with kiln.profiler.profile(record_shapes=True) as prof:
        with kiln.autocast("cpu", dtype=kiln.bfloat16):
            y = KF.linear(x, w) + KF.linear(x * 2, w)
    assert y.dtype == kiln.bfloat16
    casts = [e.input_shapes[0] for e in prof.events() if e.name == "_to_copy"]
    assert casts.count([50, 16]) == 1, casts
    assert [16, 50] not in casts, casts
