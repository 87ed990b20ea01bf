"""Printing against torch 2.13's repr: summarised and wrapped layouts, every number format
(fixed, whole, scientific), and torch.set_printoptions' profiles and options."""
import re

import numpy as np
import pytest
import torch

import kiln


def _joined_suffixes(text):
    """A suffix moved to its own line joined back: "kiln.float64" is one character shorter
    than "torch.float64", so the two wrap a suffix at different line lengths (the rule itself
    is checked in tests/tensor/print_test.cpp)."""
    return re.sub(r",\n +(dtype|device|size|grad_fn|requires_grad)=", r", \1=", text)


def same_repr(t):
    k = kiln.tensor(t.numpy()) if t.dtype != torch.bfloat16 else kiln.tensor(t.float().numpy()).to(kiln.bfloat16)
    got, want = _joined_suffixes(repr(k)), _joined_suffixes(repr(t).replace("torch.", "kiln."))
    assert got == want, f"\n{got}\n{want}"


SHAPES = [(), (1,), (7,), (30,), (2, 20), (3, 1, 5), (1001,), (2000,), (40, 40), (3, 400),
          (2, 3, 4, 60), (0,), (0, 3), (5, 0, 2)]
VALUES = {
    "normal": lambda s, g: torch.randn(s, generator=g),
    "whole": lambda s, g: torch.randint(-300, 300, s, generator=g).float(),
    "wide": lambda s, g: torch.randn(s, generator=g) * torch.logspace(-6, 9, max(int(np.prod(s)), 1))[:int(np.prod(s))].reshape(s),
    "tiny": lambda s, g: torch.rand(s, generator=g) * 1e-5,
    "special": lambda s, g: torch.where(torch.rand(s, generator=g) > 0.7, torch.tensor(float("nan")), torch.where(torch.rand(s, generator=g) > 0.8, torch.tensor(-float("inf")), torch.randn(s, generator=g))),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("values", list(VALUES))
def test_float_repr_matches_torch(shape, values):
    g = torch.Generator().manual_seed(len(shape) * 7 + len(values))
    t = VALUES[values](shape, g)
    same_repr(t)
    same_repr(t.double())
    same_repr(t.to(torch.bfloat16))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_integer_and_bool_repr_matches_torch(shape):
    g = torch.Generator().manual_seed(3)
    t = torch.randint(-10**6, 10**6, shape, generator=g)
    same_repr(t)
    same_repr(t.to(torch.int32))
    same_repr(t > 0)


OPTIONS = [dict(precision=2), dict(precision=8), dict(threshold=5, edgeitems=1),
           dict(threshold=10, edgeitems=2, linewidth=40), dict(sci_mode=True),
           dict(sci_mode=False), dict(profile="short"), dict(profile="full"),
           dict(linewidth=20, precision=1), dict(threshold=float("inf"))]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_print_options_match_torch(options):
    try:
        torch.set_printoptions(**options)
        kiln.set_printoptions(**options)
        g = torch.Generator().manual_seed(5)
        for shape in [(7,), (30,), (3, 12), (2, 3, 9), (1200,)]:
            same_repr(torch.randn(shape, generator=g))
            same_repr(torch.randint(-99, 99, shape, generator=g))
            same_repr(torch.rand(shape, generator=g) * 1e-5)
    finally:
        torch.set_printoptions(profile="default")
        kiln.set_printoptions(profile="default")


def test_print_reads_only_the_shown_part_of_a_large_tensor():
    x = kiln.zeros(4096, 4096).expand(64, 4096, 4096)  # 1 Gi elements: 8 GiB as doubles if read whole
    text = repr(x)
    assert text.startswith("tensor([[[0., 0., 0.,  ..., 0., 0., 0.],") and "..." in text


def test_set_printoptions_rejects_bad_values():
    with pytest.raises(ValueError):
        kiln.set_printoptions(profile="huge")
    with pytest.raises(ValueError):
        kiln.set_printoptions(precision=-1)
    kiln.set_printoptions(profile="default")
