"""Advanced indexing large enough for the threaded loop (32768 elements and up): reads split
over the threads by runs along the result's last dim, index_put checking every index on the
threads first and writing on one. Against numpy's fancy indexing (an independent reference):
one and two index tensors (broadcast, separated by a slice, after a slice), int32 and int64
indices with negatives, element sizes 1 to 16 bytes; an out-of-range index raises IndexError
naming the first bad one in order and leaves index_put's target untouched; repeated indices
keep the last value (plain) or add up in order (accumulate)."""
import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(61)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


DTYPES = [np.float32, np.float64, np.int8, np.int16, np.complex64, np.complex128, np.bool_]


def values_of(dtype, shape):
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if np.issubdtype(dtype, np.complexfloating):
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-100, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def indices(n, shape, dtype=np.int64):
    """Random indices into a dim of n, a quarter of them negative (counting from the end)."""
    v = RNG.integers(0, n, shape)
    neg = RNG.random(shape) < 0.25
    return np.where(neg, v - n, v).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_one_index_tensor_reads_as_numpy(dtype):
    x = values_of(dtype, (300, 7))
    i = indices(300, (40000,))
    np.testing.assert_array_equal(k(x)[k(i)].numpy(), x[i])


@pytest.mark.parametrize("form", ["broadcast_pair", "separated", "after_slice", "int32",
                                  "2d_index"])
def test_index_forms_read_as_numpy(form):
    x = values_of(np.float32, (60, 50, 40))
    if form == "broadcast_pair":  # result [200, 300, 40]: runs along the sliced last dim
        r, c = indices(60, (200, 1)), indices(50, (1, 300))
        got, want = k(x)[k(r), k(c)], x[r, c]
    elif form == "separated":  # index dims apart: the broadcast dims lead the result
        r, c = indices(60, (700,)), indices(40, (700,))
        got, want = k(x)[k(r), :, k(c)], x[r, :, c]
    elif form == "after_slice":  # the index on the last dim: runs step through the index
        c = indices(40, (900,))
        got, want = k(x)[:, 5:, k(c)], x[:, 5:, c]
    elif form == "int32":
        r = indices(60, (30000,), np.int32)
        got, want = k(x)[k(r)], x[r]
    else:  # a 2-D index tensor with a transposed (strided) layout
        r = indices(60, (300, 120)).T
        got, want = k(x)[kiln.from_numpy(np.ascontiguousarray(r.T)).t()], x[r]
    np.testing.assert_array_equal(got.numpy(), want)


def test_out_of_range_raises_the_first_in_order():
    x = k(values_of(np.float32, (1000,)))
    i = indices(1000, (100000,))
    i[70000] = -5000  # the later bad index, in the other thread's share
    i[1000] = 1234
    with pytest.raises(IndexError, match="1234"):
        x[k(i)]
    i[1000] = 0
    with pytest.raises(IndexError, match="-5000"):
        x[k(i)]


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_checks_every_index_before_writing(accumulate):
    base = values_of(np.float32, (1000,))
    x = k(base)
    i = indices(1000, (50000,))
    i[49999] = 1000
    with pytest.raises(IndexError, match="1000"):
        x.index_put_((k(i),), k(values_of(np.float32, (50000,))), accumulate=accumulate)
    np.testing.assert_array_equal(x.numpy(), base)


def test_index_put_repeated_indices_last_value_wins():
    base = values_of(np.float32, (500, 3))
    i = indices(500, (60000,))
    v = values_of(np.float32, (60000, 3))
    want = base.copy()
    want[i] = v  # numpy assigns repeated indices in order: the last value stays
    x = k(base)
    x.index_put_((k(i),), k(v))
    np.testing.assert_array_equal(x.numpy(), want)


@pytest.mark.parametrize("dtype", [np.float64, np.int16, np.complex128])
def test_index_put_accumulate_adds_in_order(dtype):
    base = values_of(dtype, (400,))
    i = indices(400, (70000,))
    v = values_of(dtype, (70000,))
    want = base.copy()
    np.add.at(want, i, v)  # unbuffered: every repeated index adds, in order
    x = k(base)
    x.index_put_((k(i),), k(v), accumulate=True)
    np.testing.assert_array_equal(x.numpy(), want)


@pytest.mark.parametrize("bad_dim", [0, 1])
def test_two_index_tensors_out_of_range(bad_dim):
    x = k(values_of(np.float32, (300, 200)))
    r, c = indices(300, (50000,)), indices(200, (50000,))
    (r, c)[bad_dim][40000] = (300, -201)[bad_dim]
    with pytest.raises(IndexError, match=str((300, -201)[bad_dim])):
        x[k(r), k(c)]
