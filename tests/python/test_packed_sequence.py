"""kiln.nn.utils.rnn's packed sequences (PackedSequence, pack_padded_sequence,
pad_packed_sequence, pack_sequence, unpack_sequence, invert_permutation) and kiln.nn.RNN /
LSTM / GRU over packed input, against torch 2.13 on identical weights: packed data, batch
sizes and permutations, padded round trips, outputs, final states and the gradients wrt the
input, the initial states and every weight; and torch's errors."""
import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import kiln
from kiln.nn.utils import rnn as krnn

ATOL = 1e-5


def K(t):
    """A torch tensor as a kiln tensor (a copy through numpy)."""
    return kiln.tensor(t.detach().numpy())


def close(k, t, atol=ATOL):
    np.testing.assert_allclose(np.asarray(k.detach().numpy()), t.detach().numpy(), atol=atol,
                               rtol=1e-5)


def same_packed(k, t):
    close(k.data, t.data)
    assert k.batch_sizes.tolist() == t.batch_sizes.tolist()
    assert k.batch_sizes.dtype == kiln.int64
    for a, b in ((k.sorted_indices, t.sorted_indices), (k.unsorted_indices, t.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist()


# Lengths with ties: torch sorts batches of at most 16 stably, as kiln always does.
LENGTHS = [3, 6, 1, 6, 4]


def padded(lengths, feat=(3,), batch_first=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((max(lengths), len(lengths)) + tuple(feat), generator=g)
    return x.transpose(0, 1).contiguous() if batch_first else x


# --- packing and padding --------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("feat", [(), (3,), (2, 3)])
def test_pack_pad_round_trip(batch_first, enforce_sorted, feat):
    lengths = sorted(LENGTHS, reverse=True) if enforce_sorted else LENGTHS
    x = padded(lengths, feat, batch_first)
    pt = trnn.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
    pk = krnn.pack_padded_sequence(K(x), lengths, batch_first, enforce_sorted)
    assert isinstance(pk, krnn.PackedSequence)
    same_packed(pk, pt)
    for total_length in (None, 9):
        for padding_value in (0.0, -2.5):
            yt, lt = trnn.pad_packed_sequence(pt, batch_first, padding_value, total_length)
            yk, lk = krnn.pad_packed_sequence(pk, batch_first, padding_value, total_length)
            assert tuple(yk.shape) == tuple(yt.shape)
            close(yk, yt)
            assert lk.tolist() == lt.tolist() and lk.dtype == kiln.int64
            assert lk.device.type == "cpu"


def test_lengths_as_tensor_and_int_dtypes():
    x = padded(LENGTHS)
    for lengths in (torch.tensor(LENGTHS), torch.tensor(LENGTHS, dtype=torch.int32)):
        pt = trnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
        pk = krnn.pack_padded_sequence(K(x), K(lengths), enforce_sorted=False)
        same_packed(pk, pt)


def test_pack_sequence_and_unpack_sequence():
    g = torch.Generator().manual_seed(1)
    seqs = [torch.randn(n, 2, generator=g) for n in LENGTHS]
    pt = trnn.pack_sequence(seqs, enforce_sorted=False)
    pk = krnn.pack_sequence([K(s) for s in seqs], enforce_sorted=False)
    same_packed(pk, pt)
    out = krnn.unpack_sequence(pk)
    assert len(out) == len(seqs)
    for k, t in zip(out, seqs):
        close(k, t)
    # sorted input, 1-D sequences
    seqs = [torch.arange(n, dtype=torch.float32) for n in (4, 2, 2, 1)]
    same_packed(krnn.pack_sequence([K(s) for s in seqs]), trnn.pack_sequence(seqs))


def test_pack_and_pad_gradients():
    x = padded(LENGTHS, (3,), batch_first=True)
    w = torch.randn(9, 5, 3)
    xt, xk = x.clone().requires_grad_(), K(x).requires_grad_()
    yt, _ = trnn.pad_packed_sequence(trnn.pack_padded_sequence(xt, LENGTHS, True, False),
                                     True, 1.5, 9)
    yk, _ = krnn.pad_packed_sequence(krnn.pack_padded_sequence(xk, LENGTHS, True, False),
                                     True, 1.5, 9)
    (yt.transpose(0, 1) * w).sum().backward()
    (yk.transpose(0, 1) * K(w)).sum().backward()
    close(xk.grad, xt.grad)


def test_invert_permutation():
    p = torch.tensor([3, 0, 4, 1, 2])
    assert krnn.invert_permutation(K(p)).tolist() == trnn.invert_permutation(p).tolist()
    assert krnn.invert_permutation(None) is None


def test_packed_sequence_tuple_behaviour():
    pk = krnn.pack_sequence([kiln.ones(3, 2), kiln.ones(1, 2)], enforce_sorted=False)
    assert krnn.PackedSequence._fields == ("data", "batch_sizes", "sorted_indices",
                                           "unsorted_indices")
    assert len(pk) == 4 and isinstance(pk, tuple)
    data, batch_sizes, sorted_indices, unsorted_indices = pk
    assert data is pk.data and pk[1] is batch_sizes and pk[-1] is unsorted_indices
    assert batch_sizes.tolist() == [2, 1, 1]
    assert repr(pk).startswith("PackedSequence(data=")
    # unsorted_indices is derived; the (data, batch_sizes) tuple form is accepted
    again = krnn.PackedSequence(data, batch_sizes, kiln.tensor([1, 0]))
    assert again.unsorted_indices.tolist() == [1, 0]
    tup = krnn.PackedSequence((data, batch_sizes))
    assert tup.batch_sizes is batch_sizes and tup.sorted_indices is None
    assert isinstance(pk._replace(data=data), krnn.PackedSequence)


def test_packed_sequence_conversions():
    pk = krnn.pack_sequence([kiln.ones(3, 2), kiln.ones(1, 2)], enforce_sorted=False)
    assert pk.to(kiln.float32) is pk and pk.cpu() is pk and pk.float() is pk
    assert not pk.is_cuda and pk.is_pinned() is False
    for conv, dtype in ((pk.double, kiln.float64), (pk.long, kiln.int64), (pk.int, kiln.int32),
                        (pk.short, kiln.int16), (pk.char, kiln.int8), (pk.byte, kiln.uint8),
                        (pk.half, kiln.float16)):
        q = conv()
        assert q.data.dtype == dtype and q.batch_sizes is pk.batch_sizes
        assert q.sorted_indices.dtype == kiln.int64
    moved = pk.to("testing:0")
    assert moved.data.device.type == "testing"
    assert moved.sorted_indices.device.type == "testing"
    assert moved.unsorted_indices.device.type == "testing"
    assert moved.batch_sizes.device.type == "cpu"
    back = moved.cpu()
    assert back.data.device.type == "cpu" and back.sorted_indices.device.type == "cpu"


# --- errors ---------------------------------------------------------------------------------

def test_pack_errors():
    x = K(padded([5, 3, 2]))
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when "
                                           "`enforce_sorted` is True"):
        krnn.pack_padded_sequence(x, [3, 5, 2])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        krnn.pack_padded_sequence(x, [5, 3, 0])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        krnn.pack_padded_sequence(x, [0, 3, 5], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to "
                                           r"batch_size, but got 4 \(batch_size=3\)"):
        krnn.pack_padded_sequence(x, [5, 3, 2, 1])
    with pytest.raises(RuntimeError, match="Cannot pack empty tensors"):
        krnn.pack_padded_sequence(kiln.zeros(0, 3), [1, 1, 1])
    with pytest.raises(IndexError, match="Dimension out of range"):
        krnn.pack_padded_sequence(kiln.zeros(5), [1])
    with pytest.raises(RuntimeError, match="'lengths' argument should be a 1D CPU int64 "
                                           "tensor, but got 2D cpu Long tensor"):
        krnn.pack_padded_sequence(x, kiln.tensor([[5, 3, 2]]))
    # torch 2.13 does not check this (it returns batch_sizes that count missing rows)
    with pytest.raises(RuntimeError, match="larger than the input's sequence length"):
        krnn.pack_padded_sequence(x, [6, 3, 2])
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        krnn.pack_sequence([])


def test_pad_and_construct_errors():
    pk = krnn.pack_sequence([kiln.ones(3), kiln.ones(2)])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of "
                                         "the longest sequence in input, but got "
                                         "total_length=2 and max sequence length being 3"):
        krnn.pad_packed_sequence(pk, total_length=2)
    with pytest.raises(AssertionError, match="Expected data to be a list or tuple of length 2"):
        krnn.PackedSequence(pk.data)
    with pytest.raises(ValueError, match="batch_sizes should always be on CPU"):
        krnn.PackedSequence(pk.data, pk.batch_sizes.to("testing:0"))


# --- recurrent layers over packed input -------------------------------------------------------

def twins(kind, *args, **kwargs):
    """The torch module and a kiln module with the same weights."""
    t = getattr(torch.nn, kind)(*args, **kwargs)
    k = getattr(kiln.nn, kind)(*args, **kwargs)
    state = t.state_dict()
    with kiln.no_grad():
        for name, p in k.named_parameters():
            p.copy_(K(state[name]))
    return t, k


def states(h):
    return list(h) if isinstance(h, tuple) else [h]


def check_packed_run(kind, kwargs, lengths, batch_first=False, with_hx=False, train=False,
                     seed=0):
    """Runs both modules on the same packed batch; compares the packed output, the final
    states, and (after a backward through all of them) the gradients wrt the input, hx and
    every parameter."""
    input_size, hidden = 3, 5
    t, k = twins(kind, input_size, hidden, batch_first=batch_first, **kwargs)
    t.train(train)
    k.train(train)
    x = padded(lengths, (input_size,), batch_first, seed)
    xt, xk = x.clone().requires_grad_(), K(x).requires_grad_()
    pt = trnn.pack_padded_sequence(xt, lengths, batch_first, enforce_sorted=False)
    pk = krnn.pack_padded_sequence(xk, lengths, batch_first, enforce_sorted=False)
    hx_t = hx_k = None
    if with_hx:
        D = 2 if kwargs.get("bidirectional") else 1
        shape = (kwargs.get("num_layers", 1) * D, len(lengths), hidden)
        g = torch.Generator().manual_seed(seed + 1)
        init = [torch.randn(shape, generator=g) for _ in range(2 if kind == "LSTM" else 1)]
        hx_t = [s.clone().requires_grad_() for s in init]
        hx_k = [K(s).requires_grad_() for s in init]
    call = (lambda m, p, hx: m(p) if hx is None else
            m(p, tuple(hx) if kind == "LSTM" else hx[0]))
    out_t, h_t = call(t, pt, hx_t)
    out_k, h_k = call(k, pk, hx_k)
    assert isinstance(out_k, krnn.PackedSequence)
    same_packed(out_k, out_t)
    assert len(states(h_k)) == len(states(h_t))
    for a, b in zip(states(h_k), states(h_t)):
        assert tuple(a.shape) == tuple(b.shape)
        close(a, b)
    # One backward through the output and every final state, with fixed random weights.
    g = torch.Generator().manual_seed(seed + 2)
    ws = [torch.randn(o.shape, generator=g) for o in [out_t.data] + states(h_t)]
    sum((o * w).sum() for o, w in zip([out_t.data] + states(h_t), ws)).backward()
    sum((o * K(w)).sum() for o, w in zip([out_k.data] + states(h_k), ws)).backward()
    close(xk.grad, xt.grad)
    for a, b in zip(hx_k or [], hx_t or []):
        close(a.grad, b.grad)
    grads_t = dict(t.named_parameters())
    for name, p in k.named_parameters():
        close(p.grad, grads_t[name].grad)


MODES = [("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}),
         ("GRU", {})]


@pytest.mark.parametrize("kind,extra", MODES, ids=["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_modes(kind, extra, num_layers, bidirectional):
    check_packed_run(kind, dict(extra, num_layers=num_layers, bidirectional=bidirectional),
                     LENGTHS)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_packed_batch_first_given_state_no_bias(kind):
    check_packed_run(kind, dict(num_layers=2, bidirectional=True, bias=False), LENGTHS,
                     batch_first=True, with_hx=True, seed=3)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_given_state_sorted_and_equal_lengths(kind):
    # enforce_sorted-style input (no permutation) and one run only (all lengths equal)
    check_packed_run(kind, dict(bidirectional=True), [6, 4, 4, 2, 1], with_hx=True, seed=4)
    check_packed_run(kind, dict(num_layers=2), [4, 4, 4], with_hx=True, seed=5)


def test_packed_longer_batch_many_runs():
    lengths = [int(n) for n in np.random.default_rng(7).permutation(np.arange(1, 15))]
    check_packed_run("LSTM", dict(num_layers=2, bidirectional=True), lengths, with_hx=True)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_dropout(kind):
    # dropout=1 zeroes every layer's input but the first's in training: deterministic
    check_packed_run(kind, dict(num_layers=3, bidirectional=True, dropout=1.0), LENGTHS,
                     train=True)
    # eval: no dropout
    check_packed_run(kind, dict(num_layers=2, dropout=0.5), LENGTHS, train=False)
    # training with 0 < p < 1: the final states are still each sequence's own
    _, k = twins(kind, 3, 5, num_layers=2, dropout=0.5)
    k.train()
    pk = krnn.pack_padded_sequence(K(padded(LENGTHS)), LENGTHS, enforce_sorted=False)
    out, h = k(pk)
    assert tuple(out.data.shape) == (sum(LENGTHS), 5)
    assert tuple(states(h)[0].shape) == (2, len(LENGTHS), 5)


def test_packed_float64():
    t, k = twins("GRU", 3, 4, num_layers=2, bidirectional=True)
    t, k = t.double(), k.double()
    x = padded(LENGTHS).double()
    out_t, h_t = t(trnn.pack_padded_sequence(x, LENGTHS, enforce_sorted=False))
    out_k, h_k = k(krnn.pack_padded_sequence(K(x), LENGTHS, enforce_sorted=False))
    assert out_k.data.dtype == kiln.float64
    close(out_k.data, out_t.data, 1e-12)
    close(h_k, h_t, 1e-12)


def test_packed_matches_padded_run_per_sequence():
    # Each sequence alone through the padded path gives its packed rows and final state.
    _, k = twins("LSTM", 3, 5, bidirectional=True)
    x = K(padded(LENGTHS))
    out, (h, c) = k(krnn.pack_padded_sequence(x, LENGTHS, enforce_sorted=False))
    out_padded, _ = krnn.pad_packed_sequence(out)
    for i, n in enumerate(LENGTHS):
        o1, (h1, c1) = k(x[:n, i:i + 1])
        for packed_side, alone in ((out_padded[:n, i:i + 1], o1), (h[:, i:i + 1], h1),
                                   (c[:, i:i + 1], c1)):
            np.testing.assert_allclose(packed_side.detach().numpy(), alone.detach().numpy(),
                                       atol=ATOL)


def test_packed_module_errors():
    t, k = twins("GRU", 3, 5, num_layers=2)
    pk = krnn.pack_padded_sequence(K(padded(LENGTHS)), LENGTHS, enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 5, 5\), got \[2, 5, 4\]"):
        k(pk, kiln.zeros(2, 5, 4))
    bad = krnn.pack_padded_sequence(K(padded(LENGTHS, (4,))), LENGTHS, enforce_sorted=False)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. "
                                           "Expected 3, got 4"):
        k(bad)
    three_d = krnn.pack_padded_sequence(K(padded(LENGTHS, (2, 3))), LENGTHS,
                                        enforce_sorted=False)
    with pytest.raises(RuntimeError, match="input must have 2 dimensions, got 3"):
        k(three_d)
    with pytest.raises(ValueError, match="does not match weight dtype"):
        k(pk.double())
    _, lstm = twins("LSTM", 3, 5)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 5, 5\), got "
                                           r"\[1, 5, 4\]"):
        lstm(pk, (kiln.zeros(1, 5, 5), kiln.zeros(1, 5, 4)))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_inference_no_grad(kind):
    # Without a gradient to record, float32 LSTMs step through the fused lstm_cell op.
    t, k = twins(kind, 3, 5, num_layers=2, bidirectional=True)
    x = padded(LENGTHS)
    with torch.no_grad():
        out_t, h_t = t(trnn.pack_padded_sequence(x, LENGTHS, enforce_sorted=False))
    with kiln.no_grad():
        out_k, h_k = k(krnn.pack_padded_sequence(K(x), LENGTHS, enforce_sorted=False))
    same_packed(out_k, out_t)
    for a, b in zip(states(h_k), states(h_t)):
        close(a, b)
