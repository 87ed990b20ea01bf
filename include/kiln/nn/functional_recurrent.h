#pragma once
// nn::functional: recurrent layers (LSTM, GRU, Elman RNN with tanh or relu) over whole
// sequences, and their single steps (the cells), with PyTorch's shapes, gate orders and
// formulas. Compositions of kiln ops, so autograd differentiates them; with no gradient to
// record (inference), float32 LSTMs on the CPU run each step's gate arithmetic as the one
// lstm_cell op (ops/lstm_cell.h).
#include <vector>

#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor.h"

namespace kiln::nn::functional {

// Gates per step: LSTM 4 (input, forget, cell, output), GRU 3 (reset, update, new), RNN 1.
enum class RnnMode { Lstm, Gru, RnnTanh, RnnRelu };

// One layer and direction: w_ih [G H, in], w_hh [G H, H], biases [G H] or both undefined.
struct RnnWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;
};

struct RnnOptions {
  RnnMode mode = RnnMode::Lstm;
  int64_t num_layers = 1;
  bool bidirectional = false;
  bool batch_first = false;  // input and output [N, L, *] instead of [L, N, *]
  double dropout = 0.0;      // on every layer's output but the last, in training
  bool training = false;
  Generator* gen = nullptr;
};

// input [L, N, in] ([N, L, in] batch_first; [L, in] unbatched). h0, c0 (LSTM only): [D
// layers, N, H] ([D layers, H] unbatched) or undefined for zeros, D = 2 when bidirectional.
// weights: num_layers * D entries, layer by layer, the forward direction first. Returns
// {output [L, N, D H] (batch_first / unbatched as the input), h_n, c_n (LSTM; else
// undefined)}.
std::vector<Tensor> rnn(const Tensor& input, const Tensor& h0, const Tensor& c0,
                        const std::vector<RnnWeights>& weights, const RnnOptions& options);

// One step of a cell: x [N, in] or [in], h (and c for LSTM) [N, H] / [H] or undefined for
// zeros. Returns {h'} or {h', c'} (LSTM).
std::vector<Tensor> rnn_cell(RnnMode mode, const Tensor& x, const Tensor& h, const Tensor& c,
                             const RnnWeights& weights);

}  // namespace kiln::nn::functional
