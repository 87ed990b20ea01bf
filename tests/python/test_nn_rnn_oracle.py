"""kiln.nn.RNN / LSTM / GRU and their cells against torch.nn 2.13: outputs, final states,
input and parameter gradients (float32 and float64, through test_nn_oracle's module
harness), the inference path that runs each LSTM step as the lstm_cell op, and the errors
torch raises."""
import numpy as np
import pytest
import torch

import kiln
import oracle
from test_nn_oracle import ModCase, run_module_case


def _lib(nn):
    return torch if nn is torch.nn else kiln


def _seq(nn, inner, with_state=False):
    """The recurrent module inside a wrapper whose one output holds the sequence output and
    every final state, flattened and concatenated (the harness compares one tensor)."""
    L = _lib(nn)

    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = inner

        def forward(self, x, *state):
            if with_state:
                hx = (state[0], state[1]) if isinstance(self.rnn, nn.LSTM) else state[0]
                out, h = self.rnn(x, hx)
            else:
                out, h = self.rnn(x)
            parts = [out] + (list(h) if isinstance(h, tuple) else [h])
            return L.cat([p.reshape(-1) for p in parts])

    return Seq()


def _cell(nn, inner, with_state=False):
    L = _lib(nn)

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = inner

        def forward(self, x, *state):
            if with_state:
                hx = (state[0], state[1]) if isinstance(self.cell, nn.LSTMCell) else state[0]
                r = self.cell(x, hx)
            else:
                r = self.cell(x)
            parts = list(r) if isinstance(r, tuple) else [r]
            return L.cat([p.reshape(-1) for p in parts])

    return Step()


CASES = [
    ModCase("LSTM", lambda nn: _seq(nn, nn.LSTM(5, 7)), [(6, 3, 5)]),
    ModCase("GRU", lambda nn: _seq(nn, nn.GRU(5, 7)), [(6, 3, 5)]),
    ModCase("RNN_tanh", lambda nn: _seq(nn, nn.RNN(5, 7)), [(6, 3, 5)]),
    ModCase("RNN_relu", lambda nn: _seq(nn, nn.RNN(5, 7, nonlinearity="relu")), [(6, 3, 5)]),
    ModCase("LSTM_2layer_bidir_batch_first",
            lambda nn: _seq(nn, nn.LSTM(5, 4, num_layers=2, bidirectional=True,
                                        batch_first=True)), [(3, 6, 5)]),
    ModCase("GRU_3layer_nobias", lambda nn: _seq(nn, nn.GRU(4, 3, 3, bias=False)),
            [(5, 2, 4)]),
    ModCase("RNN_bidir", lambda nn: _seq(nn, nn.RNN(4, 3, bidirectional=True)), [(5, 2, 4)]),
    ModCase("LSTM_unbatched", lambda nn: _seq(nn, nn.LSTM(5, 7, num_layers=2)), [(6, 5)]),
    ModCase("GRU_unbatched_bidir", lambda nn: _seq(nn, nn.GRU(5, 3, bidirectional=True)),
            [(4, 5)]),
    ModCase("LSTM_given_state",
            lambda nn: _seq(nn, nn.LSTM(5, 7, num_layers=2), with_state=True),
            [(6, 3, 5), (2, 3, 7), (2, 3, 7)]),
    ModCase("GRU_given_state_bidir",
            lambda nn: _seq(nn, nn.GRU(5, 7, bidirectional=True), with_state=True),
            [(6, 3, 5), (2, 3, 7)]),
    ModCase("RNN_dropout_eval", lambda nn: _seq(nn, nn.RNN(5, 7, 2, dropout=0.5)),
            [(6, 3, 5)], train=False),
    ModCase("LSTM_one_step", lambda nn: _seq(nn, nn.LSTM(3, 2)), [(1, 1, 3)]),
    ModCase("LSTMCell", lambda nn: _cell(nn, nn.LSTMCell(5, 7)), [(3, 5)]),
    ModCase("LSTMCell_state", lambda nn: _cell(nn, nn.LSTMCell(5, 7), with_state=True),
            [(3, 5), (3, 7), (3, 7)]),
    ModCase("LSTMCell_unbatched", lambda nn: _cell(nn, nn.LSTMCell(5, 7)), [(5,)]),
    ModCase("GRUCell", lambda nn: _cell(nn, nn.GRUCell(5, 7), with_state=True),
            [(3, 5), (3, 7)]),
    ModCase("GRUCell_nobias", lambda nn: _cell(nn, nn.GRUCell(5, 7, bias=False)), [(3, 5)]),
    ModCase("RNNCell_relu", lambda nn: _cell(nn, nn.RNNCell(5, 7, nonlinearity="relu"),
                                             with_state=True), [(3, 5), (3, 7)]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_module_vs_torch(case, dtype):
    run_module_case(case, dtype)


def _twins(make):
    torch.manual_seed(5)
    tm, km = make(torch.nn), make(kiln.nn)
    km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, km


@pytest.mark.parametrize("layers,bidir", [(1, False), (2, True)])
def test_lstm_inference_runs_the_fused_step(layers, bidir):
    """No gradient to record: float32 LSTM steps run as the one lstm_cell op (the weights'
    gate blocks reordered once per call); with gradients, as the step's ops."""
    tm, km = _twins(lambda nn: nn.LSTM(6, 8, num_layers=layers, bidirectional=bidir))
    x = np.random.default_rng(0).standard_normal((7, 2, 6)).astype(np.float32)
    with torch.no_grad():
        to, (th, tc) = tm(torch.tensor(x))
    with kiln.no_grad(), kiln.profiler.profile() as prof:
        ko, (kh, kc) = km(kiln.tensor(x))
    calls = {e.key: e.count for e in prof.key_averages()}
    assert calls.get("lstm_cell") == 7 * layers * (2 if bidir else 1), calls
    for k, t in ((ko, to), (kh, th), (kc, tc)):
        np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=2e-5, atol=2e-6)
    with kiln.profiler.profile() as prof:
        km(kiln.tensor(x))  # parameters require grad: the differentiable ops
    assert "lstm_cell" not in {e.key for e in prof.key_averages()}
    oracle.record("nn.LSTM_fused_inference", 2)


def test_lstm_dropout_between_layers_in_training():
    kiln.manual_seed(0)
    m = kiln.nn.LSTM(4, 64, num_layers=2, dropout=0.9)
    x = kiln.randn(3, 2, 4)
    a, _ = m(x)
    b, _ = m(x)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # different masks
    m.eval()
    c, _ = m(x)
    d, _ = m(x)
    np.testing.assert_array_equal(c.detach().numpy(), d.detach().numpy())
    oracle.record("nn.LSTM_dropout_train")


ERRORS = {
    "LSTM_input_size": lambda L: L.nn.LSTM(5, 7)(L.ones(4, 2, 6)),
    "LSTM_rank": lambda L: L.nn.LSTM(5, 7)(L.ones(4, 2, 3, 5)),
    "LSTM_h0_shape": lambda L: L.nn.LSTM(5, 7)(L.ones(4, 2, 5), (L.ones(1, 3, 7),
                                                                 L.ones(1, 3, 7))),
    "GRU_h0_shape": lambda L: L.nn.GRU(5, 7, num_layers=2)(L.ones(4, 2, 5), L.ones(1, 2, 7)),
    "RNN_nonlinearity": lambda L: L.nn.RNN(5, 7, nonlinearity="gelu"),
    "RNN_dropout": lambda L: L.nn.RNN(5, 7, dropout=1.5),
    "LSTMCell_input_size": lambda L: L.nn.LSTMCell(5, 7)(L.ones(3, 4)),
    "GRUCell_hx_shape": lambda L: L.nn.GRUCell(5, 7)(L.ones(3, 5), L.ones(2, 7)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_like_torch(name):
    oracle.check_rejected_with_message(ERRORS[name], "nn.error_" + name)


def test_proj_size_is_refused():
    with pytest.raises(NotImplementedError, match="proj_size"):
        kiln.nn.LSTM(5, 7, proj_size=3)


PAD = [
    oracle.Op("pad_sequence", lambda L, a, b, c, **kw: L.nn.utils.rnn.pad_sequence([a, b, c], **kw),
              [((4, 3), (2, 3), (5, 3))],
              kwargs=[{}, {"batch_first": True, "padding_value": -1.0},
                      {"padding_side": "left"}], dtypes=["float32", "float64"]),
    oracle.Op("unpad_sequence", lambda L, a, b: L.nn.utils.rnn.unpad_sequence(
        L.nn.utils.rnn.pad_sequence([a, b], batch_first=True), L.tensor([4, 2]),
        batch_first=True), [((4, 3), (2, 3))], dtypes=["float32"], grad_of=lambda r: r[1]),
]


@pytest.mark.parametrize("op,dtype", oracle.params(PAD))
def test_pad_sequence_vs_torch(op, dtype):
    oracle.run_op(op, dtype)
