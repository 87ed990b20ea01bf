"""Recurrent layers: RNN, LSTM, GRU over whole sequences and their cells, with torch.nn's
constructor arguments, parameter names and initialisation (uniform in +-1/sqrt(hidden)),
over kiln::nn::functional::rnn / rnn_cell (the time loop runs in C++).

RNN / LSTM / GRU take a padded tensor or a PackedSequence (kiln.nn.utils.rnn), as torch's:
packed input gives a PackedSequence output and final states taken at each sequence's own
last step (its first for the reverse direction), in the caller's batch order; see "packed
sequences" below for how."""
import math

from ... import _C
from ..._C import _nn
from .. import init
from ..parameter import Parameter
from .linear import _factory
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if proj_size != 0:
            raise NotImplementedError("LSTM with proj_size is not supported by kiln")
        if not (0 <= dropout <= 1) or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be greater than 0")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        kw = _factory(device, dtype)
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                layer_in = input_size if layer == 0 else hidden_size * directions
                shapes = [("weight_ih", (gate_size, layer_in)),
                          ("weight_hh", (gate_size, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(_C.empty(shape, **kw)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _weights(self):
        per = 4 if self.bias else 2
        ws = [getattr(self, n) for n in self._flat_weights_names]
        groups = [ws[i:i + per] for i in range(0, len(ws), per)]
        return [g if self.bias else g + [None, None] for g in groups]

    def forward(self, input, hx=None):
        from ..utils.rnn import PackedSequence  # here: nn.utils imports nn.modules
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        h0 = c0 = None
        if hx is not None:
            if self.mode == "LSTM":
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise ValueError("LSTM expects hx as a tuple (h_0, c_0)")
                h0, c0 = hx
            else:
                h0 = hx
        out, hn, cn = _nn.rnn(self.mode, input, h0, c0, self._weights(), self.num_layers,
                              self.bidirectional, self.batch_first, self.dropout,
                              self.training)
        return out, ((hn, cn) if self.mode == "LSTM" else hn)

    def _forward_packed(self, packed, hx):
        """forward over a PackedSequence, with torch's checks in torch's order: hx (in the
        caller's batch order) is permuted into the packed order first, and the final states
        are permuted back."""
        from ..utils.rnn import PackedSequence
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        sizes = [int(b) for b in batch_sizes.tolist()]
        directions = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * directions, sizes[0], self.hidden_size)
        h0 = c0 = None
        if hx is not None:
            if self.mode == "LSTM":
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise ValueError("LSTM expects hx as a tuple (h_0, c_0)")
                h0, c0 = (_permute_batch(s, sorted_indices) for s in hx)
            else:
                h0 = _permute_batch(hx, sorted_indices)
        self._check_packed_input(data)
        if h0 is None:
            h0 = _C.zeros(state_shape, dtype=data.dtype, device=data.device)
        if self.mode == "LSTM" and c0 is None:
            c0 = _C.zeros(state_shape, dtype=data.dtype, device=data.device)
        if self.mode == "LSTM":
            _check_state(h0, state_shape, "Expected hidden[0] size {}, got {}")
            _check_state(c0, state_shape, "Expected hidden[1] size {}, got {}")
        else:
            _check_state(h0, state_shape, "Expected hidden size {}, got {}")
        dropout = self.dropout if self.training else 0.0
        out, h_n, c_n = _packed_layers(self.mode, data, sizes, h0, c0, self._weights(),
                                       self.num_layers, directions, dropout)
        output = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        h_n = _permute_batch(h_n, unsorted_indices)
        if self.mode == "LSTM":
            return output, (h_n, _permute_batch(c_n, unsorted_indices))
        return output, h_n

    def _check_packed_input(self, data):
        weight_dtype = getattr(self, self._flat_weights_names[0]).dtype
        if data.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({data.dtype}) does not match weight dtype "
                             f"({weight_dtype}). Convert input: input.to({weight_dtype}), or "
                             f"convert model: model.to({data.dtype})")
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if data.size(-1) != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.size(-1)}")

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


def _permute_batch(state, permutation):
    """A [layers, N, H] state with its batch reordered (unchanged for None)."""
    return state if permutation is None else state.index_select(1, permutation)


def _check_state(state, shape, message):
    if tuple(state.shape) != shape:
        raise RuntimeError(message.format(shape, list(state.shape)))


# --- packed sequences ----------------------------------------------------------------------
# A PackedSequence's batch_sizes split time into runs of steps with the same batch (see
# nn/utils/rnn.py): each run is a dense [steps, b, *] block of the packed data, and the b
# sequences of a run are the first b (longest) of the previous run. So one layer and
# direction is exact as one call of the C++ time loop (_nn.rnn, one layer) per run, the state
# handed from run to run: the forward direction drops the rows of the sequences that ended
# (their h_n / c_n), the reverse direction walks the runs backwards and adds, from their
# initial states, the rows of the sequences whose last step is in the run. Autograd
# records through _nn.rnn, narrow, cat and flip as for padded input.
#
# Python work is per run (at most one per distinct length), not per step. The alternatives,
# timed by benchmarks/packed_rnn.py (LSTM, 2 layers, bidirectional, input 64, hidden 128,
# batch 32, lengths uniform in [5, 100]: 29 distinct, float32, 2 threads, medians of three
# runs made while a compiler used about one of the two cores, hence the ranges):
#                           forward + backward   no-grad forward
#   runs (this code)          414 - 572 ms          53 - 55 ms
#   a cell op per step        486 - 1203 ms         72 - 73 ms
#   groups of equal length    3990 - 5190 ms       189 - 197 ms
#   torch 2.13, packed        422 - 753 ms          73 - 78 ms
# Per-step cells pay a Python call per step, and miss the fused LSTM cell of the C++ loop;
# groups of equal length run the whole loop once per group on a batch of one or two.


def _packed_layers(mode, data, batch_sizes, h0, c0, weights, num_layers, directions, dropout):
    """The stacked layers over packed data [sum(lengths), in] (sorted batch order): the packed
    output [sum(lengths), directions H] and h_n (c_n for LSTM, else None), each [num_layers
    directions, B, H]. dropout: the probability on every layer's output but the last (0
    outside training)."""
    from ..utils.rnn import _runs
    runs = _runs(batch_sizes)
    x, h_n, c_n = data, [], []
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            walk = _reverse_direction if d else _forward_direction
            out, h, c = walk(mode, x, runs, weights[k], h0[k],
                             None if c0 is None else c0[k])
            outputs.append(out)
            h_n.append(h)
            c_n.append(c)
        x = outputs[0] if directions == 1 else _C.cat(outputs, 1)
        if dropout > 0 and layer + 1 < num_layers:
            x = _nn.dropout(x, float(dropout), True)
    return x, _C.stack(h_n, 0), (None if c0 is None else _C.stack(c_n, 0))


def _one_layer(mode, block, h, c, w):
    """The C++ time loop over a dense block [steps, b, in] from states h, c [b, H]:
    (output [steps b, H], h', c')."""
    out, h_n, c_n = _nn.rnn(mode, block, h.unsqueeze(0), None if c is None else c.unsqueeze(0),
                            [w], 1, False, False, 0.0, False)
    return (out.reshape(-1, out.size(-1)), h_n.squeeze(0),
            None if c_n is None else c_n.squeeze(0))


def _narrow(state, start, length):
    return None if state is None else state.narrow(0, start, length)


def _cat(pieces):
    return None if pieces[0] is None else pieces[0] if len(pieces) == 1 else _C.cat(pieces, 0)


def _forward_direction(mode, x, runs, w, h, c):
    """One layer, forward in time, over the runs of packed x: (output, h_n, c_n). A sequence's
    final state is its row of the state after the run holding its last step."""
    from ..utils.rnn import _run_block
    outputs, done_h, done_c = [], [], []
    for i, run in enumerate(runs):
        b = run[2]
        out, h, c = _one_layer(mode, _run_block(x, run), h.narrow(0, 0, b), _narrow(c, 0, b), w)
        outputs.append(out)
        still_running = runs[i + 1][2] if i + 1 < len(runs) else 0
        done_h.append(h.narrow(0, still_running, b - still_running))
        done_c.append(_narrow(c, still_running, b - still_running))
    # Later runs finish the lower rows: the finished pieces, last first, are in batch order.
    return _cat(outputs), _cat(done_h[::-1]), _cat(done_c[::-1])


def _reverse_direction(mode, x, runs, w, h0, c0):
    """One layer, backward in time: the runs last to first, each block flipped in time. A
    run's state is the previous (later) run's, extended by the initial states of the
    sequences whose last step is in this run. The first run leaves every sequence's state
    after its first element: h_n, c_n."""
    from ..utils.rnn import _run_block
    outputs, h, c = [], None, None
    for run in reversed(runs):
        b = run[2]
        h = _extend(h, h0, b)
        c = _extend(c, c0, b)
        out, h, c = _one_layer(mode, _C.flip(_run_block(x, run), [0]), h, c, w)
        # out's rows are step-major: flip its steps back to time order.
        outputs.append(_C.flip(out.reshape(run[1], b, -1), [0]).reshape(run[1] * b, -1))
    return _cat(outputs[::-1]), h, c


def _extend(state, initial, b):
    """state [n, H] followed by rows n..b of initial (initial's first b rows for None)."""
    if initial is None:
        return None
    if state is None:
        return initial.narrow(0, 0, b)
    n = state.size(0)
    return state if n == b else _C.cat([state, initial.narrow(0, n, b - n)], 0)


class RNN(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias, device=None, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.bias = bias
        kw = _factory(device, dtype)
        gate_size = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(_C.empty((gate_size, input_size), **kw))
        self.weight_hh = Parameter(_C.empty((gate_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(_C.empty(gate_size, **kw))
            self.bias_hh = Parameter(_C.empty(gate_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _step(self, input, h, c):
        return _nn.rnn_cell(self.mode, input, h, c, self.weight_ih, self.weight_hh,
                            self.bias_ih, self.bias_hh)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._step(input, hx, None)[0]


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        h, c = (None, None) if hx is None else hx
        h2, c2 = self._step(input, h, c)
        return h2, c2
