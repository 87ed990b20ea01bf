#pragma once
// One LSTM step's gate arithmetic as one op (the ONNX importer's LSTM, decision 0070): the
// step written as ops was a dozen kernel calls on vectors of a few hundred values (Silero
// VAD's LSTM step 21 us against ONNX Runtime's 12).
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

// gates: [batch, 4 * H] pre-activations in ONNX's order (input, output, forget, cell);
// c: [batch, H] the cell state, float32 on the CPU. Returns {h', c'} with
//   i, o, f = sigmoid(gates' blocks), g = tanh(cell block),
//   c' = f * c + i * g, h' = o * tanh(c'),
// each operation rounded as the op it stands for (sigmoid, tanh, mul, add; no fused
// multiply-add). An inference op: no derivative.
std::vector<Tensor> lstm_cell(const Tensor& gates, const Tensor& c);

}  // namespace kiln
