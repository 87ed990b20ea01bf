"""The margin, embedding, Poisson and Gaussian losses (kiln/nn/_functional_loss_more.py) as
modules against torch.nn 2.13 through test_nn_oracle's module harness: values, gradients of
the first input, float32 and float64, every reduction; +-1 targets are the signs of a random
input, variances its magnitude plus 0.1."""
import pytest
import torch

import kiln
import oracle
from test_nn_oracle import ModCase, run_module_case


def _lib(nn):
    return torch if nn is torch.nn else kiln


def _signed(nn, loss, n_inputs):
    """loss(*inputs, sign(last input)): targets of +-1 from a random real input."""
    L = _lib(nn)

    class Signed(nn.Module):
        def __init__(self):
            super().__init__()
            self.loss = loss

        def forward(self, *xs):
            return self.loss(*xs[:n_inputs], L.sign(xs[n_inputs]))

    return Signed()


def _gaussian(nn, loss):
    class Gaussian(nn.Module):
        def __init__(self):
            super().__init__()
            self.loss = loss

        def forward(self, x, t, raw):
            return self.loss(x, t, raw.abs() + 0.1)

    return Gaussian()


R = ("mean", "sum", "none")
CASES = []
for r in R:
    CASES += [
        ModCase(f"MarginRankingLoss_{r}",
                lambda nn, r=r: _signed(nn, nn.MarginRankingLoss(0.3, reduction=r), 2),
                [(6,), (6,), (6,)]),
        ModCase(f"HingeEmbeddingLoss_{r}",
                lambda nn, r=r: _signed(nn, nn.HingeEmbeddingLoss(0.7, reduction=r), 1),
                [(4, 5), (4, 5)]),
        ModCase(f"SoftMarginLoss_{r}",
                lambda nn, r=r: _signed(nn, nn.SoftMarginLoss(reduction=r), 1), [(4, 5), (4, 5)]),
        ModCase(f"CosineEmbeddingLoss_{r}",
                lambda nn, r=r: _signed(nn, nn.CosineEmbeddingLoss(0.2, reduction=r), 2),
                [(4, 5), (4, 5), (4,)]),
        ModCase(f"TripletMarginLoss_{r}", lambda nn, r=r: nn.TripletMarginLoss(reduction=r),
                [(4, 5), (4, 5), (4, 5)]),
        ModCase(f"MultiMarginLoss_{r}", lambda nn, r=r: nn.MultiMarginLoss(reduction=r),
                [(6, 5), ("long", (6,), 5)]),
        ModCase(f"PoissonNLLLoss_{r}", lambda nn, r=r: nn.PoissonNLLLoss(reduction=r),
                [(4, 5), ("prob", (4, 5))]),
        ModCase(f"GaussianNLLLoss_{r}",
                lambda nn, r=r: _gaussian(nn, nn.GaussianNLLLoss(reduction=r)),
                [(4, 5), (4, 5), (4, 5)]),
    ]
CASES += [
    ModCase("MultiLabelSoftMarginLoss", lambda nn: nn.MultiLabelSoftMarginLoss(),
            [(4, 5), ("prob", (4, 5))]),
    ModCase("MultiLabelSoftMarginLoss_weight_none",
            lambda nn: nn.MultiLabelSoftMarginLoss(
                weight=_lib(nn).tensor([0.5, 1.0, 2.0, 1.5, 0.25]), reduction="none"),
            [(4, 5), ("prob", (4, 5))]),
    ModCase("CosineEmbeddingLoss_1d",
            lambda nn: _signed(nn, nn.CosineEmbeddingLoss(), 2), [(5,), (5,), ()]),
    ModCase("TripletMarginLoss_p1_swap", lambda nn: nn.TripletMarginLoss(0.5, p=1.0, swap=True),
            [(4, 5), (4, 5), (4, 5)]),
    ModCase("TripletMarginWithDistanceLoss",
            lambda nn: nn.TripletMarginWithDistanceLoss(margin=0.7, swap=True),
            [(4, 5), (4, 5), (4, 5)]),
    ModCase("MultiMarginLoss_p2_weight",
            lambda nn: nn.MultiMarginLoss(p=2, margin=0.5,
                                          weight=_lib(nn).tensor([1.0, 2.0, 0.5, 1.0, 3.0])),
            [(6, 5), ("long", (6,), 5)]),
    ModCase("MultiMarginLoss_unbatched", lambda nn: nn.MultiMarginLoss(),
            [(5,), ("long", (), 5)]),
    ModCase("PoissonNLLLoss_full_nolog",
            lambda nn: nn.PoissonNLLLoss(log_input=False, full=True),
            [(4, 5), ("prob", (4, 5))], domain="prob"),
    ModCase("GaussianNLLLoss_full_heteroscedastic",
            lambda nn: _gaussian(nn, nn.GaussianNLLLoss(full=True)), [(4, 5), (4, 5), (4, 1)]),
    ModCase("GaussianNLLLoss_var_one_less_dim",
            lambda nn: _gaussian(nn, nn.GaussianNLLLoss()), [(4, 5), (4, 5), (4,)]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_loss_vs_torch(case, dtype):
    run_module_case(case, dtype)


ERRORS = {
    "gaussian_negative_var": lambda L: L.nn.GaussianNLLLoss()(L.ones(3), L.ones(3),
                                                              -L.ones(3)),
    "gaussian_var_size": lambda L: L.nn.GaussianNLLLoss()(L.ones(3, 4), L.ones(3, 4),
                                                          L.ones(2)),
    "multi_margin_p": lambda L: L.nn.MultiMarginLoss(p=3),
    "triplet_margin": lambda L: L.nn.TripletMarginLoss(margin=-1.0),
    "margin_ranking_dims": lambda L: L.nn.MarginRankingLoss()(L.ones(3), L.ones(3, 1),
                                                             L.ones(3)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_torch(name):
    oracle.check_same_error_class(ERRORS[name], "nn.error_" + name)
