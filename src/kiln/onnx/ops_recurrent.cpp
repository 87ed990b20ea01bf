// RNN, GRU and LSTM: one loop over time per direction. The input projection of every step
// is one matrix product up front; each step adds the recurrent product and applies the
// gates. sequence_lens masks steps past a sequence's end (its state stops changing, its
// outputs are zero), which serves both directions. layout 1 (batch first) is transposed in
// and out.
#include <algorithm>
#include <cctype>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/lstm_cell.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

Tensor activate(const Activation& a, const Tensor& x) {
  const std::string& n = a.name;
  if (n == "sigmoid") return sigmoid(x);
  if (n == "tanh") return tanh(x);
  if (n == "relu") return relu(x);
  if (n == "affine") return add(mul(x, a.alpha), a.beta);
  if (n == "leakyrelu") return where(ge(x, scalar_like(x, 0)), x, mul(x, a.alpha));
  if (n == "thresholdedrelu") return where(gt(x, scalar_like(x, a.alpha)), x, zeros_like(x));
  if (n == "scaledtanh") return mul(tanh(mul(x, a.beta)), a.alpha);
  if (n == "hardsigmoid") return clamp(add(mul(x, a.alpha), a.beta), Scalar(0.0), Scalar(1.0));
  if (n == "elu") return where(ge(x, scalar_like(x, 0)), x, mul(sub(exp(x), 1.0), a.alpha));
  if (n == "softsign") return div(x, add(abs(x), 1.0));
  if (n == "softplus") return softplus(x);
  KILN_THROW(NotImplementedError, "activation '", n, "' is not supported");
}

// The activations of every direction: the attribute's names (else the cell's defaults),
// taking alpha and beta in order from the attribute lists for the functions that use them.
std::vector<Activation> activations(const OpContext& ctx, Cell cell, int64_t dirs) {
  std::vector<std::string> defaults = cell == Cell::Rnn   ? std::vector<std::string>{"tanh"}
                                      : cell == Cell::Gru ? std::vector<std::string>{"sigmoid", "tanh"}
                                                          : std::vector<std::string>{"sigmoid", "tanh", "tanh"};
  std::vector<std::string> names;
  if (const auto* a = ctx.find_attr("activations")) {
    for (const auto& s : a->strings()) names.push_back(s);
  }
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  KILN_CHECK(names.size() == defaults.size() * size_t(dirs), ValueError, "activations has ", names.size(),
             " entries; expected ", defaults.size(), " per direction");
  const std::vector<float> alphas = ctx.attr_floats("activation_alpha", std::vector<float>{});
  const std::vector<float> betas = ctx.attr_floats("activation_beta", std::vector<float>{});
  size_t ai = 0, bi = 0;
  std::vector<Activation> acts;
  for (auto n : names) {
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    Activation a{n};
    const bool uses_alpha = n == "affine" || n == "leakyrelu" || n == "thresholdedrelu" || n == "scaledtanh" ||
                            n == "hardsigmoid" || n == "elu";
    const bool uses_beta = n == "affine" || n == "scaledtanh" || n == "hardsigmoid";
    const double default_alpha = n == "leakyrelu" ? 0.01 : n == "hardsigmoid" ? 0.2 : 1.0;
    const double default_beta = n == "hardsigmoid" ? 0.5 : n == "affine" ? 0.0 : 1.0;
    a.alpha = uses_alpha && ai < alphas.size() ? alphas[ai++] : default_alpha;
    a.beta = uses_beta && bi < betas.size() ? betas[bi++] : default_beta;
    acts.push_back(a);
  }
  return acts;
}

struct Direction {
  Tensor w, r, wb, rb;  // [G*H, I], [G*H, H], [G*H] each (biases undefined when absent)
  Tensor p;             // LSTM peepholes [3*H] (i, o, f) or undefined
  Tensor h, c;          // initial states [batch, H]
  const Activation* act;
  bool reverse;
};

// stack, but one tensor becomes a view with the new dim (one step, one direction: streaming
// models run the cell a step at a time, and a copy per output was a third of its calls).
Tensor stack_views(const std::vector<Tensor>& ts, int64_t dim) {
  return ts.size() == 1 ? unsqueeze(ts[0], dim) : stack(ts, dim);
}

struct Outputs {
  Tensor y;       // [seq, batch, H]
  Tensor h, c;    // final states [batch, H]
};

Outputs run_direction(Cell cell, const Direction& d, const Tensor& x, const Tensor& lens, int64_t hidden,
                      double clip, bool linear_before_reset, bool input_forget) {
  const int64_t steps = x.size(0), batch = x.size(1);
  auto clipped = [&](const Tensor& t) { return clip > 0 ? clamp(t, Scalar(-clip), Scalar(clip)) : t; };
  // Input projections of every step, with the biases that do not depend on the state.
  Tensor xw = matmul(x, transpose(d.w, 0, 1));  // [seq, batch, G*H]
  Tensor rb_h;  // GRU with linear_before_reset: the h gate's recurrent bias stays inside r *
  if (d.wb.defined()) xw = add(xw, d.wb);
  if (d.rb.defined()) {
    if (cell == Cell::Gru && linear_before_reset) {
      xw = add(xw, cat({narrow(d.rb, 0, 0, 2 * hidden), zeros({hidden}, TensorOptions(d.rb.dtype(), d.rb.device()))}, 0));
      rb_h = narrow(d.rb, 0, 2 * hidden, hidden);
    } else {
      xw = add(xw, d.rb);
    }
  }
  Tensor rt = transpose(d.r, 0, 1);  // [H, G*H]
  Tensor h = d.h, c = d.c;
  // The default LSTM (sigmoid, tanh, tanh; no peepholes, clip or coupled forget gate) on the
  // CPU: each step's gate arithmetic as one lstm_cell op (decision 0070).
  const bool fused_lstm = cell == Cell::Lstm && x.device().type == DeviceType::CPU &&
                          x.dtype() == DType::F32 && !d.p.defined() && clip <= 0 &&
                          !input_forget && d.act[0].name == "sigmoid" &&
                          d.act[1].name == "tanh" && d.act[2].name == "tanh";
  std::vector<Tensor> ys(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = d.reverse ? steps - 1 - i : i;
    Tensor xt = select(xw, 0, t);
    Tensor h_new, c_new;
    if (cell == Cell::Rnn) {
      h_new = activate(d.act[0], clipped(add(xt, matmul(h, rt))));
    } else if (cell == Cell::Gru) {
      Tensor zr = add(narrow(xt, 1, 0, 2 * hidden), matmul(h, narrow(rt, 1, 0, 2 * hidden)));
      Tensor z = activate(d.act[0], clipped(narrow(zr, 1, 0, hidden)));
      Tensor r = activate(d.act[0], clipped(narrow(zr, 1, hidden, hidden)));
      Tensor rh = narrow(rt, 1, 2 * hidden, hidden);
      Tensor pre = narrow(xt, 1, 2 * hidden, hidden);
      if (linear_before_reset) {
        Tensor hr = matmul(h, rh);
        if (rb_h.defined()) hr = add(hr, rb_h);
        pre = add(pre, mul(r, hr));
      } else {
        pre = add(pre, matmul(mul(r, h), rh));
      }
      Tensor cand = activate(d.act[1], clipped(pre));
      h_new = add(mul(rsub(z, 1.0), cand), mul(z, h));
    } else if (fused_lstm) {
      std::vector<Tensor> hc = lstm_cell(add(xt, matmul(h, rt)), c);
      h_new = hc[0];
      c_new = hc[1];
    } else {
      Tensor g = add(xt, matmul(h, rt));  // gates i, o, f, c
      Tensor gi = narrow(g, 1, 0, hidden), go = narrow(g, 1, hidden, hidden);
      Tensor gf = narrow(g, 1, 2 * hidden, hidden), gc = narrow(g, 1, 3 * hidden, hidden);
      if (d.p.defined()) {
        gi = add(gi, mul(narrow(d.p, 0, 0, hidden), c));
        gf = add(gf, mul(narrow(d.p, 0, 2 * hidden, hidden), c));
      }
      Tensor ig = activate(d.act[0], clipped(gi));
      Tensor fg = input_forget ? rsub(ig, 1.0) : activate(d.act[0], clipped(gf));
      c_new = add(mul(fg, c), mul(ig, activate(d.act[1], clipped(gc))));
      if (d.p.defined()) go = add(go, mul(narrow(d.p, 0, hidden, hidden), c_new));
      h_new = mul(activate(d.act[0], clipped(go)), activate(d.act[2], c_new));
    }
    if (lens.defined()) {
      Tensor live = reshape(gt(lens, scalar_like(lens, double(t))), Shape{batch, 1});
      ys[size_t(t)] = where(live, h_new, zeros_like(h_new));
      h = where(live, h_new, h);
      if (c_new.defined()) c = where(live, c_new, c);
    } else {
      ys[size_t(t)] = h_new;
      h = h_new;
      if (c_new.defined()) c = c_new;
    }
  }
  Tensor y = steps > 0 ? stack_views(ys, 0) : zeros({0, batch, hidden}, TensorOptions(x.dtype(), x.device()));
  return {y, h, c};
}

// Inputs: X, W, R, B, sequence_lens, initial_h (and for LSTM initial_c, P).
std::vector<Tensor> recurrent(OpContext& ctx, Cell cell) {
  const int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const int64_t layout = ctx.opset() >= 14 ? ctx.attr_int("layout", 0) : 0;
  Tensor x = ctx.input(0);
  KILN_CHECK(x.dim() == 3, ShapeError, "X must be 3-d, got ", shape_str(x.shape()));
  if (layout == 1) x = transpose(x, 0, 1);  // -> [seq, batch, input]
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  KILN_CHECK(w.dim() == 3 && r.dim() == 3, ShapeError, "W and R must be 3-d, got ", shape_str(w.shape()),
             " and ", shape_str(r.shape()));
  const int64_t hidden = ctx.attr_int("hidden_size", r.size(2));
  const std::string direction = ctx.attr_string("direction", "forward");
  KILN_CHECK(direction == "forward" || direction == "reverse" || direction == "bidirectional", ValueError,
             "direction must be forward, reverse or bidirectional, got '", printable(direction, 50), "'");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  KILN_CHECK(w.size(0) == dirs && w.size(1) == gates * hidden && w.size(2) == x.size(2), ShapeError,
             "W must be [", dirs, ", ", gates * hidden, ", ", x.size(2), "], got ", shape_str(w.shape()));
  KILN_CHECK(r.size(0) == dirs && r.size(1) == gates * hidden && r.size(2) == hidden, ShapeError,
             "R must be [", dirs, ", ", gates * hidden, ", ", hidden, "], got ", shape_str(r.shape()));
  const int64_t batch = x.size(1);
  const double clip = ctx.has_attr("clip") ? ctx.attr_float("clip") : 0.0;
  const bool lbr = cell == Cell::Gru && ctx.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = cell == Cell::Lstm && ctx.attr_int("input_forget", 0) != 0;
  const std::vector<Activation> acts = activations(ctx, cell, dirs);
  const size_t per_dir = acts.size() / size_t(dirs);

  Tensor lens;
  if (ctx.has_input(4)) {
    lens = ctx.input(4);
    KILN_CHECK(lens.numel() == batch, ShapeError, "sequence_lens must have ", batch, " entries, got ",
               shape_str(lens.shape()));
  }
  auto state = [&](size_t index) -> Tensor {  // [dirs, batch, H] or undefined
    if (!ctx.has_input(index)) return Tensor();
    Tensor s = ctx.input(index);
    if (layout == 1) s = transpose(s, 0, 1);
    KILN_CHECK(s.dim() == 3 && s.size(0) == dirs && s.size(1) == batch && s.size(2) == hidden, ShapeError,
               "input ", index, " (initial state) must be [", dirs, ", ", batch, ", ", hidden, "], got ",
               shape_str(s.shape()));
    return s;
  };
  const Tensor h0 = state(5), c0 = cell == Cell::Lstm ? state(6) : Tensor();
  // Zeros for an initial state not given (made only then: a streaming model gives both).
  const Tensor zero_state = h0.defined() && (c0.defined() || cell != Cell::Lstm)
                                ? Tensor()
                                : zeros({batch, hidden}, TensorOptions(x.dtype(), x.device()));

  std::vector<Tensor> ys, hs, cs;
  for (int64_t di = 0; di < dirs; ++di) {
    Direction d;
    d.w = select(w, 0, di);
    d.r = select(r, 0, di);
    if (ctx.has_input(3)) {
      Tensor b = select(ctx.input(3), 0, di);
      d.wb = narrow(b, 0, 0, gates * hidden);
      d.rb = narrow(b, 0, gates * hidden, gates * hidden);
    }
    if (cell == Cell::Lstm && ctx.has_input(7)) d.p = select(ctx.input(7), 0, di);
    d.h = h0.defined() ? select(h0, 0, di) : zero_state;
    d.c = c0.defined() ? select(c0, 0, di) : zero_state;
    d.act = &acts[size_t(di) * per_dir];
    d.reverse = direction == "reverse" || di == 1;
    Outputs o = run_direction(cell, d, x, lens, hidden, clip, lbr, input_forget);
    ys.push_back(o.y);
    hs.push_back(o.h);
    cs.push_back(o.c);
  }
  Tensor y = stack_views(ys, 1);  // [seq, dirs, batch, H]
  Tensor yh = stack_views(hs, 0), yc = cell == Cell::Lstm ? stack_views(cs, 0) : Tensor();
  if (layout == 1) {
    y = permute(y, {2, 0, 1, 3});
    yh = transpose(yh, 0, 1);
    if (yc.defined()) yc = transpose(yc, 0, 1);
  }
  if (cell == Cell::Lstm) return {y, yh, yc};
  return {y, yh};
}

std::vector<Tensor> op_rnn(OpContext& ctx) { return recurrent(ctx, Cell::Rnn); }
std::vector<Tensor> op_gru(OpContext& ctx) { return recurrent(ctx, Cell::Gru); }
std::vector<Tensor> op_lstm(OpContext& ctx) { return recurrent(ctx, Cell::Lstm); }

}  // namespace

void register_recurrent_ops(OpTable& t) {
  t.add("RNN", op_rnn);
  t.add("GRU", op_gru);
  t.add("LSTM", op_lstm);
}

}  // namespace kiln::onnx
