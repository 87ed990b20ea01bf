"""Products with one to three rows (a vector times a matrix: attention weights times V in a
decode step, the row-streaming float32 kernel's single-row path in 64-column register blocks)
against float64: column counts around the 64-column blocks and the 256-column chunks, strided
and transposed operands, batched over a sliced KV cache."""
import numpy as np
import pytest

import kiln


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def check(got, a, b):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    # float32 accumulation over K terms: within K ulps of the terms' magnitude
    scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.shape == want.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= 4e-7 * scale * max(1, a.shape[-1]) ** 0.5 + 1e-30)


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 17, 63, 64, 65, 128, 200, 256, 257, 300])
@pytest.mark.parametrize("k", [1, 7, 140])
def test_few_rows(m, n, k):
    a, b = rand((m, k), n + k), rand((k, n), m * 7 + n)
    check(kiln.from_numpy(a).matmul(kiln.from_numpy(b)).numpy(), a, b)


@pytest.mark.parametrize("n", [64, 100, 320])
def test_strided_and_transposed_operands(n):
    a_big, b_big = rand((6, 150), 1), rand((300, 2 * n), 2)
    a = kiln.from_numpy(a_big)[2:3, ::2]  # [1, 75], column stride 2
    b = kiln.from_numpy(b_big)[:75, ::2]  # [75, n], column stride 2 (copied row-major first)
    check(a.matmul(b).numpy(), a_big[2:3, ::2], b_big[:75, ::2])
    bt = kiln.from_numpy(rand((n, 75), 3))
    check(a.matmul(bt.t()).numpy(), a_big[2:3, ::2], bt.numpy().T)


@pytest.mark.parametrize("seq", [1, 63, 64, 140, 1000])
def test_attention_weights_times_sliced_cache(seq):
    cache = rand((1, 12, 1024, 64), seq)
    att = rand((1, 12, 1, seq), seq + 1)
    v = kiln.from_numpy(cache)[:, :, :seq]
    got = kiln.matmul(kiln.from_numpy(att), v).numpy()
    check(got, att, cache[:, :, :seq])
