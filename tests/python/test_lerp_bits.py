"""lerp gives torch 2.13's bits (one rounding: decision 0100) for number and tensor weights,
float32 / float64 / bfloat16, both sides of the weight's 1/2 switch, strided operands."""
import numpy as np
import pytest
import torch

import kiln


def pair(dtype, n=4099, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * 10
    b = rng.standard_normal(n) * 10
    return [(kiln.from_numpy(x).to(getattr(kiln, dtype)), torch.from_numpy(x).to(
        getattr(torch, dtype))) for x in (a, b)]


def bits(k, t):
    return k.float().numpy() if k.dtype == kiln.bfloat16 else k.numpy(), \
        t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("weight", [0.05, 0.3, 0.5, 0.7, 1.0, -0.25, 1.5])
def test_number_weight(dtype, weight):
    (ka, ta), (kb, tb) = pair(dtype)
    got, want = bits(kiln.lerp(ka, kb, weight), torch.lerp(ta, tb, weight))
    np.testing.assert_array_equal(got, want)
    # strided views take the general kernel
    got, want = bits(kiln.lerp(ka[:-1:3], kb[1::3], weight), torch.lerp(ta[:-1:3], tb[1::3], weight))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensor_weight(dtype):
    (ka, ta), (kb, tb) = pair(dtype)
    w = np.random.default_rng(3).uniform(-0.5, 1.5, ka.shape[0])
    kw, tw = kiln.from_numpy(w).to(ka.dtype), torch.from_numpy(w).to(ta.dtype)
    np.testing.assert_array_equal(kiln.lerp(ka, kb, kw).numpy(), torch.lerp(ta, tb, tw).numpy())


def test_in_place_ema_matches_torch_over_many_steps():
    (ka, ta), (kb, tb) = pair("float32", seed=5)
    for _ in range(50):
        ka.lerp_(kb, 0.01)
        ta.lerp_(tb, 0.01)
    np.testing.assert_array_equal(ka.numpy(), ta.numpy())
