// nn::functional: rnn and rnn_cell (functional_recurrent.h). Each layer and direction projects
// the whole input sequence through w_ih in one product, then walks the steps with one
// product by w_hh per step.
#include "kiln/nn/functional_recurrent.h"

#include <string>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/lstm_cell.h"
#include "kiln/ops/random.h"
#include "kiln/ops/views.h"

namespace kiln::nn::functional {
namespace {

int64_t gate_count(RnnMode mode) {
  switch (mode) {
    case RnnMode::Lstm: return 4;
    case RnnMode::Gru: return 3;
    default: return 1;
  }
}

const char* mode_name(RnnMode mode) {
  switch (mode) {
    case RnnMode::Lstm: return "LSTM";
    case RnnMode::Gru: return "GRU";
    case RnnMode::RnnTanh: return "RNN_TANH";
    default: return "RNN_RELU";
  }
}

// a @ w^T + b (b may be undefined).
Tensor affine(const Tensor& a, const Tensor& w, const Tensor& b) {
  Tensor y = matmul(a, t(w));
  return b.defined() ? add(y, b) : y;
}

Tensor block(const Tensor& g, int64_t k, int64_t hidden) {
  return narrow(g, g.dim() - 1, k * hidden, hidden);
}

// One step from the input's projection xw = x w_ih^T + b_ih: {h'} or {h', c'}.
std::vector<Tensor> step(RnnMode mode, const Tensor& xw, const Tensor& h, const Tensor& c,
                         const RnnWeights& w) {
  const int64_t H = h.size(-1);
  const Tensor hw = affine(h, w.w_hh, w.b_hh);
  switch (mode) {
    case RnnMode::Lstm: {
      const Tensor g = add(xw, hw);
      const Tensor i = sigmoid(block(g, 0, H)), f = sigmoid(block(g, 1, H));
      const Tensor cell = kiln::tanh(block(g, 2, H)), o = sigmoid(block(g, 3, H));
      const Tensor c2 = add(mul(f, c), mul(i, cell));
      return {mul(o, kiln::tanh(c2)), c2};
    }
    case RnnMode::Gru: {
      const Tensor r = sigmoid(add(block(xw, 0, H), block(hw, 0, H)));
      const Tensor z = sigmoid(add(block(xw, 1, H), block(hw, 1, H)));
      const Tensor n = kiln::tanh(add(block(xw, 2, H), mul(r, block(hw, 2, H))));
      return {add(mul(rsub(z, Scalar(1.0)), n), mul(z, h))};
    }
    case RnnMode::RnnTanh: return {kiln::tanh(add(xw, hw))};
    default: return {relu(add(xw, hw))};
  }
}

// The LSTM weights with their gate blocks in lstm_cell's order (input, output, forget, cell)
// instead of PyTorch's (input, forget, cell, output).
RnnWeights cell_order(const RnnWeights& w) {
  auto reorder = [](const Tensor& t) {
    if (!t.defined()) return t;
    const int64_t H = t.size(0) / 4;
    return cat({narrow(t, 0, 0, H), narrow(t, 0, 3 * H, H), narrow(t, 0, H, H),
                narrow(t, 0, 2 * H, H)}, 0);
  };
  return {reorder(w.w_ih), reorder(w.w_hh), reorder(w.b_ih), reorder(w.b_hh)};
}

void check_weights(RnnMode mode, const RnnWeights& w, int64_t in, int64_t H, const char* what) {
  const int64_t G = gate_count(mode) * H;
  KILN_CHECK(w.w_ih.defined() && w.w_hh.defined(), ValueError, mode_name(mode), ": ", what,
             " has no weights");
  KILN_CHECK(w.w_ih.dim() == 2 && w.w_ih.size(0) == G && w.w_ih.size(1) == in, ShapeError,
             mode_name(mode), ": ", what, " expects weight_ih of shape [", G, ", ", in,
             "], got ", shape_str(w.w_ih.shape()));
  KILN_CHECK(w.w_hh.dim() == 2 && w.w_hh.size(0) == G && w.w_hh.size(1) == H, ShapeError,
             mode_name(mode), ": ", what, " expects weight_hh of shape [", G, ", ", H,
             "], got ", shape_str(w.w_hh.shape()));
  for (const Tensor* b : {&w.b_ih, &w.b_hh})
    KILN_CHECK(!b->defined() || b->shape() == Shape{G}, ShapeError, mode_name(mode), ": ",
               what, " expects biases of shape [", G, "], got ", shape_str(b->shape()));
}

// The initial state [D layers, N, H]: given (checked) or zeros.
Tensor initial_state(const Tensor& s, const Shape& shape, const Tensor& like, const char* name,
                     RnnMode mode) {
  if (!s.defined()) return zeros(shape, TensorOptions(like.dtype(), like.device()));
  KILN_CHECK(s.shape() == shape, ShapeError, mode_name(mode), ": expected ", name,
             " of shape ", shape_str(shape), ", got ", shape_str(s.shape()));
  return s;
}

bool records_gradient(const Tensor& input, const Tensor& h0, const Tensor& c0,
                      const std::vector<RnnWeights>& weights) {
  if (!autograd::is_grad_enabled()) return false;
  auto req = [](const Tensor& x) { return x.defined() && autograd::requires_grad(x); };
  if (req(input) || req(h0) || req(c0)) return true;
  for (const RnnWeights& w : weights)
    if (req(w.w_ih) || req(w.w_hh) || req(w.b_ih) || req(w.b_hh)) return true;
  return false;
}

}  // namespace

std::vector<Tensor> rnn(const Tensor& input, const Tensor& h0, const Tensor& c0,
                        const std::vector<RnnWeights>& weights, const RnnOptions& o) {
  const char* name = mode_name(o.mode);
  KILN_CHECK(input.defined() && is_floating(input.dtype()), TypeError, name,
             ": expected a floating-point input");
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, ShapeError, name,
             ": expected an input of 2 (unbatched) or 3 dims, got shape ",
             shape_str(input.shape()));
  KILN_CHECK(o.num_layers >= 1, ValueError, name, ": num_layers must be at least 1, got ",
             o.num_layers);
  KILN_CHECK(o.dropout >= 0 && o.dropout <= 1, ValueError, name,
             ": dropout must be in [0, 1], got ", o.dropout);
  const int64_t D = o.bidirectional ? 2 : 1;
  KILN_CHECK(int64_t(weights.size()) == o.num_layers * D, ValueError, name, ": expected ",
             o.num_layers * D, " sets of weights (layers x directions), got ", weights.size());
  KILN_CHECK(o.mode == RnnMode::Lstm || !c0.defined(), ValueError, name,
             ": only LSTM takes a cell state");
  const bool batched = input.dim() == 3;
  // x: [L, N, in]
  Tensor x = !batched ? unsqueeze(input, 1) : o.batch_first ? transpose(input, 0, 1) : input;
  const int64_t L = x.size(0), N = x.size(1), H = weights[0].w_hh.size(-1);
  Shape state = {o.num_layers * D, N, H};
  Shape given_state = batched ? state : Shape{o.num_layers * D, H};
  Tensor h_all = h0.defined() ? initial_state(h0, given_state, x, "h0", o.mode) : Tensor();
  Tensor c_all = c0.defined() ? initial_state(c0, given_state, x, "c0", o.mode) : Tensor();
  if (h_all.defined() && !batched) h_all = unsqueeze(h_all, 1);
  if (c_all.defined() && !batched) c_all = unsqueeze(c_all, 1);
  h_all = initial_state(h_all, state, x, "h0", o.mode);
  if (o.mode == RnnMode::Lstm) c_all = initial_state(c_all, state, x, "c0", o.mode);
  const bool fused_cell = o.mode == RnnMode::Lstm && x.dtype() == DType::F32 &&
                          (x.device().type == DeviceType::CPU || x.device().type == DeviceType::XPU) &&
                          !records_gradient(input, h0, c0, weights);
  std::vector<Tensor> h_n, c_n;
  for (int64_t layer = 0; layer < o.num_layers; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = layer * D + d;
      const std::string what = "layer " + std::to_string(layer) + (d ? " (reverse)" : "");
      check_weights(o.mode, weights[size_t(k)], x.size(2), H, what.c_str());
      const RnnWeights w = fused_cell ? cell_order(weights[size_t(k)]) : weights[size_t(k)];
      const Tensor xw = affine(x, w.w_ih, w.b_ih);  // [L, N, G H], every step at once
      Tensor h = select(h_all, 0, k), c = c_all.defined() ? select(c_all, 0, k) : Tensor();
      std::vector<Tensor> hs(static_cast<size_t>(L));
      for (int64_t s = 0; s < L; ++s) {
        const int64_t step_index = d ? L - 1 - s : s;
        const Tensor xt = select(xw, 0, step_index);
        std::vector<Tensor> r = fused_cell
                                    ? lstm_cell(add(xt, affine(h, w.w_hh, w.b_hh)), c)
                                    : step(o.mode, xt, h, c, w);
        h = r[0];
        if (r.size() > 1) c = r[1];
        hs[size_t(step_index)] = h;
      }
      outputs.push_back(stack(hs, 0));
      h_n.push_back(h);
      if (c.defined()) c_n.push_back(c);
    }
    x = D == 2 ? cat(outputs, 2) : outputs[0];
    if (o.training && o.dropout > 0 && layer + 1 < o.num_layers)
      x = kiln::dropout(x, o.dropout, true, o.gen);
  }
  Tensor out = !batched ? squeeze(x, {1}) : o.batch_first ? transpose(x, 0, 1) : x;
  Tensor hn = stack(h_n, 0), cn = c_n.empty() ? Tensor() : stack(c_n, 0);
  if (!batched) {
    hn = squeeze(hn, {1});
    if (cn.defined()) cn = squeeze(cn, {1});
  }
  return {out, hn, cn};
}

std::vector<Tensor> rnn_cell(RnnMode mode, const Tensor& x, const Tensor& h, const Tensor& c,
                             const RnnWeights& w) {
  const char* name = mode_name(mode);
  KILN_CHECK(x.defined() && is_floating(x.dtype()), TypeError, name,
             "Cell: expected a floating-point input");
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, ShapeError, name,
             "Cell: expected an input of 1 (unbatched) or 2 dims, got shape ",
             shape_str(x.shape()));
  KILN_CHECK(mode == RnnMode::Lstm || !c.defined(), ValueError, name,
             "Cell: only LSTMCell takes a cell state");
  const bool batched = x.dim() == 2;
  const Tensor xb = batched ? x : unsqueeze(x, 0);
  const int64_t H = w.w_hh.defined() ? w.w_hh.size(-1) : 0;
  check_weights(mode, w, xb.size(1), H, "the cell");
  const Shape state = {xb.size(0), H};
  auto state_of = [&](const Tensor& s, const char* what) {
    if (!s.defined()) return zeros(state, TensorOptions(x.dtype(), x.device()));
    const Tensor sb = batched ? s : unsqueeze(s, 0);
    KILN_CHECK(sb.shape() == state, ShapeError, name, "Cell: expected ", what, " of shape ",
               shape_str(batched ? state : Shape{H}), ", got ", shape_str(s.shape()));
    return sb;
  };
  const Tensor hb = state_of(h, "hx"), cb = mode == RnnMode::Lstm ? state_of(c, "cx") : Tensor();
  std::vector<Tensor> r = step(mode, affine(xb, w.w_ih, w.b_ih), hb, cb, w);
  if (!batched)
    for (Tensor& t : r) t = squeeze(t, {0});
  return r;
}

}  // namespace kiln::nn::functional
