"""lstm_cell: one LSTM step's gate arithmetic (include/kiln/ops/lstm_cell.h). nn.LSTM and
nn.LSTMCell record their matrix products as ordinary ops and one lstm_cell per time step, so
each step becomes the nodes it stands for. (GRU and RNN record only ordinary ops.)"""
from .registry import translates


@translates("lstm_cell")
def lstm_cell(b, n):
    """gates [batch, 4H] in ONNX's gate order (input, output, forget, cell); returns
    h' = o * tanh(c'), c' = f * c + i * g with i, o, f = sigmoid and g = tanh of the blocks."""
    gates_id, c_id = n.inputs[:2]
    dtype = b.dtype(n.results[0])
    gates, c = b.value_as(gates_id, dtype), b.value_as(c_id, dtype)
    i, o, f, g = b.add("Split", [gates], 4, axis=1)  # four equal blocks (opset 17)
    i, o, f = (b.add("Sigmoid", [x]) for x in (i, o, f))
    g = b.add("Tanh", [g])
    c_new = b.add("Add", [b.add("Mul", [f, c]), b.add("Mul", [i, g])],
                  [b.result_name(n, 1)])
    h_new = b.add("Mul", [o, b.add("Tanh", [c_new])], [b.result_name(n, 0)])
    b.bind(n.results[0], h_new)
    b.bind(n.results[1], c_new)
