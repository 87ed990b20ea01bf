// kiln._C._nn (continued): rnn and rnn_cell of kiln/nn/functional_recurrent.h, for the
// kiln.nn.RNN / LSTM / GRU modules and their cells (python/kiln/nn/modules/rnn.py).
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "kiln/nn/functional_recurrent.h"

namespace kiln::py {

namespace {
namespace F = kiln::nn::functional;
using Opt = std::optional<Tensor>;
Tensor opt(const Opt& t) { return t ? *t : Tensor(); }

F::RnnMode mode_arg(const std::string& m) {
  if (m == "LSTM") return F::RnnMode::Lstm;
  if (m == "GRU") return F::RnnMode::Gru;
  if (m == "RNN_TANH") return F::RnnMode::RnnTanh;
  if (m == "RNN_RELU") return F::RnnMode::RnnRelu;
  KILN_THROW(ValueError, "Unknown recurrent mode '", m,
             "' (expected LSTM, GRU, RNN_TANH or RNN_RELU)");
}

// A tuple of None (missing state) or a tensor per output, in Python.
nb::object results(const std::vector<Tensor>& r) {
  nb::list out;
  for (const Tensor& t : r) out.append(t.defined() ? nb::cast(t) : nb::none());
  return nb::tuple(out);
}
}  // namespace

void bind_nn_recurrent(nb::module_& m) {
  // weights: one [w_ih, w_hh, b_ih, b_hh] list per layer and direction (biases may be None).
  m.def("rnn", [](const std::string& mode, const Tensor& input, const Opt& h0, const Opt& c0,
                  const std::vector<std::vector<Opt>>& weights, int64_t num_layers,
                  bool bidirectional, bool batch_first, double dropout, bool training,
                  Generator* gen) {
    std::vector<F::RnnWeights> ws;
    for (const std::vector<Opt>& w : weights) {
      KILN_CHECK(w.size() == 4, ValueError, "rnn: expected [w_ih, w_hh, b_ih, b_hh] per layer");
      ws.push_back({opt(w[0]), opt(w[1]), opt(w[2]), opt(w[3])});
    }
    const F::RnnOptions o{mode_arg(mode), num_layers, bidirectional, batch_first, dropout,
                          training, gen};
    std::vector<Tensor> r;
    {
      nb::gil_scoped_release release;
      r = F::rnn(input, opt(h0), opt(c0), ws, o);
    }
    return results(r);
  }, nb::arg("mode"), nb::arg("input"), nb::arg("h0").none(), nb::arg("c0").none(),
     nb::arg("weights"), nb::arg("num_layers"), nb::arg("bidirectional"),
     nb::arg("batch_first"), nb::arg("dropout"), nb::arg("training"),
     nb::arg("generator").none() = nb::none());
  m.def("rnn_cell", [](const std::string& mode, const Tensor& x, const Opt& h, const Opt& c,
                       const Tensor& w_ih, const Tensor& w_hh, const Opt& b_ih,
                       const Opt& b_hh) {
    std::vector<Tensor> r;
    {
      nb::gil_scoped_release release;
      r = F::rnn_cell(mode_arg(mode), x, opt(h), opt(c), {w_ih, w_hh, opt(b_ih), opt(b_hh)});
    }
    return results(r);
  }, nb::arg("mode"), nb::arg("input"), nb::arg("hx").none(), nb::arg("cx").none(),
     nb::arg("w_ih"), nb::arg("w_hh"), nb::arg("b_ih").none(), nb::arg("b_hh").none());
}

}  // namespace kiln::py
