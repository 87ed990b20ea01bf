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


@pytest.mark.parametrize("m", [1, 3, 7])
@pytest.mark.parametrize("batch", [(2,), (6,), (2, 5)])
def test_batches_of_few_rows_with_self(m, batch):
    # Batches too small to thread one by one run one per thread (run_small_batches_in_parallel);
    # each writes its own output block, self and alpha included, and A broadcast over a batch
    # dim (stride 0) is read by every thread.
    k, n = 64, 140
    a = rand((m, k), m)
    b = rand(batch + (k, n), len(batch) + m)
    s = rand(batch + (m, n), 9)
    ka = kiln.from_numpy(a).expand(*batch, m, k)
    check(kiln.matmul(ka, kiln.from_numpy(b)).numpy(), np.broadcast_to(a, batch + (m, k)), b)
    if len(batch) == 1:
        got = kiln.baddbmm(kiln.from_numpy(s), ka, kiln.from_numpy(b), beta=0.5, alpha=2.0).numpy()
        want = 0.5 * s.astype(np.float64) + 2.0 * np.matmul(a.astype(np.float64), b.astype(np.float64))
        scale = 0.5 * np.abs(s) + 2.0 * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
        assert np.all(np.abs(got - want) <= 4e-7 * scale * k ** 0.5 + 1e-30)


def bf16(x):
    """x rounded to bfloat16 (as float32 values) and the kiln tensor holding them."""
    k = kiln.from_numpy(x).to(kiln.bfloat16)
    return k.float().numpy(), k


def check_bf16(got, a, b):
    """bfloat16 products accumulate in float32 and are rounded once: within half a bfloat16 ulp
    of the float64 product plus the float32 accumulation error."""
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.shape == want.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= np.abs(want) * 2.0 ** -8 + 1e-6 * scale + 1e-30)


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 17, 64, 65, 200])
@pytest.mark.parametrize("k", [1, 140])
def test_few_rows_bfloat16(m, n, k):
    (a, ka), (b, kb) = bf16(rand((m, k), n + k)), bf16(rand((k, n), m * 7 + n))
    check_bf16(ka.matmul(kb).float().numpy(), a, b)
    # scaled (baddbmm's alpha) and batched with a broadcast batch of A
    kba = kiln.baddbmm(kiln.zeros(2, m, n, dtype=kiln.bfloat16), ka.expand(2, m, k),
                       kb.expand(2, k, n), beta=0.0, alpha=0.5)
    check_bf16(kba.float().numpy(), np.broadcast_to(a * 0.5, (2, m, k)), np.broadcast_to(b, (2, k, n)))


@pytest.mark.parametrize("seq", [1, 64, 140, 1000])
def test_attention_weights_times_sliced_cache_bfloat16(seq):
    cache, kcache = bf16(rand((1, 12, 1024, 64), seq))
    att, katt = bf16(rand((1, 12, 1, seq), seq + 1))
    got = kiln.matmul(katt, kcache[:, :, :seq]).float().numpy()
    check_bf16(got, att, cache[:, :, :seq])


@pytest.mark.parametrize("m", [4, 5, 6, 7, 8])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_bfloat16_rows_either_side_of_the_tile_threshold(m, bias):
    """bfloat16 Linear layers of a few rows: the vector dot tiles up to 6 rows, the AMX kernel
    with the weight packed once from 7 (decision 0142; elsewhere the levels' own paths), each
    on the first call and on the later ones that find the packed copy."""
    n, k = 300, 700
    (x, kx), (w, kw) = bf16(rand((m, k), m)), bf16(rand((n, k), m + 1))
    bvals, kb = bf16(rand((n,), m + 2)) if bias else (np.zeros(n, np.float32), None)
    # the bias as one more term of each dot product: x' = [x, 1], w' = [w, b]
    x1, w1 = np.hstack([x, np.ones((m, 1), np.float32)]), np.hstack([w, bvals[:, None]])
    for _ in range(3):
        check_bf16(kiln.nn.functional.linear(kx, kw, kb).float().numpy(), x1, w1.T)


@pytest.mark.parametrize("m", [4, 6, 7, 8, 9, 13, 15])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 67])
def test_few_rows_times_a_transposed_weight(m, n):
    """x @ W.t() of a few rows on the dot tiles: up to 8 rows in one pass (3 weight rows per
    tile from 7 rows), more in passes of 6; column counts around the tiles' groups of 3 and 4."""
    k = 70
    a, w = rand((m, k), m * 31 + n), rand((n, k), m * 37 + n)
    check(kiln.from_numpy(a).matmul(kiln.from_numpy(w).t()).numpy(), a, w.T)
    (ab, ka), (wb, kw) = bf16(a), bf16(w)
    check_bf16(ka.matmul(kw.t()).float().numpy(), ab, wb.T)
