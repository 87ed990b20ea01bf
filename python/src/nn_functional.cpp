// kiln._C._nn: the stateless layers, activations and losses of kiln::nn::functional, the
// in-place initialisers of kiln::nn::init and gradient clipping, for kiln.nn.functional,
// kiln.nn.init and kiln.nn.utils (thin Python wrappers turn the torch-style keywords into
// these positional calls). Every call releases the GIL once its arguments are converted.
#include "bind.h"
#include "kiln/nn/clip_grad.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/linalg.h"

namespace kiln::py {

namespace {

namespace F = kiln::nn::functional;
namespace I = kiln::nn::init;
using Opt = std::optional<Tensor>;

Tensor opt(const Opt& t) { return t ? *t : Tensor(); }

F::Reduction reduction_arg(const std::string& r, bool batchmean_ok = false) {
  if (r == "mean") return F::Reduction::Mean;
  if (r == "sum") return F::Reduction::Sum;
  if (r == "none") return F::Reduction::None;
  if (r == "batchmean" && batchmean_ok) return F::Reduction::BatchMean;
  KILN_THROW(ValueError, r, " is not a valid value for reduction");
}

I::FanMode fan_mode_arg(const std::string& m) {
  if (m == "fan_in") return I::FanMode::FanIn;
  if (m == "fan_out") return I::FanMode::FanOut;
  KILN_THROW(ValueError, "Mode ", m, " not supported, please use one of fan_in, fan_out");
}

// nn.init functions take and return the same Python object (a Parameter stays one).
template <typename Fn>
nb::object init_inplace(nb::handle self, Fn&& fn) {
  Tensor& t = *nb::inst_ptr<Tensor>(self);
  nogil([&] { fn(t); });
  return nb::borrow(self);
}

}  // namespace

void bind_nn_functional(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_nn", "kiln::nn::functional, init and clip_grad");
  auto G = nb::call_guard<nb::gil_scoped_release>();

  // Layers.
  m.def("linear", [](const Tensor& x, const Tensor& w, const Opt& b) {
    return F::linear(x, w, opt(b)); }, nb::arg("input"), nb::arg("weight"),
    nb::arg("bias").none() = nb::none(), G);
  m.def("fused_linear", [](const Tensor& x, const Tensor& w, const Opt& b,
                           const std::string& activation, const Opt& residual,
                           std::optional<DType> out_dtype) {
    const LinearActivation act = kiln::parse_linear_activation(activation);
    return nogil([&] {
      return kiln::fused_linear(x, w, opt(b), act, opt(residual), out_dtype);
    });
  }, nb::arg("input"), nb::arg("weight"), nb::arg("bias").none() = nb::none(),
     nb::arg("activation") = "none", nb::arg("residual").none() = nb::none(),
     nb::arg("out_dtype").none() = nb::none());
  m.def("bilinear", [](const Tensor& x1, const Tensor& x2, const Tensor& w, const Opt& b) {
    return F::bilinear(x1, x2, w, opt(b)); }, nb::arg("input1"), nb::arg("input2"),
    nb::arg("weight"), nb::arg("bias").none() = nb::none(), G);
  m.def("embedding", [](const Tensor& idx, const Tensor& w, std::optional<int64_t> pad) {
    return F::embedding(idx, w, pad); }, nb::arg("input"), nb::arg("weight"),
    nb::arg("padding_idx").none() = nb::none(), G);
  m.def("layer_norm", [](const Tensor& x, nb::handle shape, const Opt& w, const Opt& b,
                         double eps) {
    Shape s = shape_from_handle(shape, "normalized_shape");
    return nogil([&] { return F::layer_norm(x, s, opt(w), opt(b), eps); });
  }, nb::arg("input"), nb::arg("normalized_shape"), nb::arg("weight").none(),
     nb::arg("bias").none(), nb::arg("eps"));
  m.def("rms_norm", [](const Tensor& x, nb::handle shape, const Opt& w,
                       std::optional<double> eps) {
    Shape s = shape_from_handle(shape, "normalized_shape");
    return nogil([&] { return F::rms_norm(x, s, opt(w), eps); });
  }, nb::arg("input"), nb::arg("normalized_shape"), nb::arg("weight").none(),
     nb::arg("eps").none());
  m.def("group_norm", [](const Tensor& x, int64_t groups, const Opt& w, const Opt& b,
                         double eps) { return F::group_norm(x, groups, opt(w), opt(b), eps); },
        nb::arg("input"), nb::arg("num_groups"), nb::arg("weight").none(),
        nb::arg("bias").none(), nb::arg("eps"), G);
  m.def("batch_norm", [](const Tensor& x, const Opt& rm, const Opt& rv, const Opt& w,
                         const Opt& b, bool training, double momentum, double eps) {
    return F::batch_norm(x, opt(rm), opt(rv), opt(w), opt(b), training, momentum, eps);
  }, nb::arg("input"), nb::arg("running_mean").none(), nb::arg("running_var").none(),
     nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("training"),
     nb::arg("momentum"), nb::arg("eps"), G);
  m.def("dropout", [](const Tensor& x, double p, bool training, Generator* g) {
    return F::dropout(x, p, training, g); }, nb::arg("input"), nb::arg("p"),
    nb::arg("training"), nb::arg("generator").none() = nb::none(), G);

  // Activations.
  m.def("relu", [](const Tensor& x) { return F::relu(x); }, G);
  m.def("leaky_relu", [](const Tensor& x, double s) { return F::leaky_relu(x, s); }, G);
  m.def("gelu", [](const Tensor& x, const std::string& a) { return F::gelu(x, a); }, G);
  m.def("silu", [](const Tensor& x) { return F::silu(x); }, G);
  m.def("sigmoid", [](const Tensor& x) { return F::sigmoid(x); }, G);
  m.def("tanh", [](const Tensor& x) { return F::tanh(x); }, G);
  m.def("softmax", [](const Tensor& x, int64_t d) { return F::softmax(x, d); }, G);
  m.def("log_softmax", [](const Tensor& x, int64_t d) { return F::log_softmax(x, d); }, G);

  // Losses.
  m.def("nll_loss", [](const Tensor& x, const Tensor& t, const Opt& w, int64_t ignore,
                       const std::string& red) {
    F::NLLLossOptions o{opt(w), ignore, reduction_arg(red)};
    return nogil([&] { return F::nll_loss(x, t, o); });
  }, nb::arg("input"), nb::arg("target"), nb::arg("weight").none(), nb::arg("ignore_index"),
     nb::arg("reduction"));
  m.def("cross_entropy", [](const Tensor& x, const Tensor& t, const Opt& w, int64_t ignore,
                            const std::string& red, double smoothing) {
    F::CrossEntropyOptions o{opt(w), ignore, reduction_arg(red), smoothing};
    return nogil([&] { return F::cross_entropy(x, t, o); });
  }, nb::arg("input"), nb::arg("target"), nb::arg("weight").none(), nb::arg("ignore_index"),
     nb::arg("reduction"), nb::arg("label_smoothing"));
  m.def("mse_loss", [](const Tensor& x, const Tensor& t, const std::string& red) {
    F::Reduction r = reduction_arg(red);
    return nogil([&] { return F::mse_loss(x, t, r); });
  });
  m.def("l1_loss", [](const Tensor& x, const Tensor& t, const std::string& red) {
    F::Reduction r = reduction_arg(red);
    return nogil([&] { return F::l1_loss(x, t, r); });
  });
  m.def("smooth_l1_loss", [](const Tensor& x, const Tensor& t, const std::string& red,
                             double beta) {
    F::Reduction r = reduction_arg(red);
    return nogil([&] { return F::smooth_l1_loss(x, t, r, beta); });
  });
  m.def("huber_loss", [](const Tensor& x, const Tensor& t, const std::string& red,
                         double delta) {
    F::Reduction r = reduction_arg(red);
    return nogil([&] { return F::huber_loss(x, t, r, delta); });
  });
  m.def("binary_cross_entropy", [](const Tensor& x, const Tensor& t, const Opt& w,
                                   const std::string& red) {
    F::Reduction r = reduction_arg(red);
    return nogil([&] { return F::binary_cross_entropy(x, t, opt(w), r); });
  }, nb::arg("input"), nb::arg("target"), nb::arg("weight").none(), nb::arg("reduction"));
  m.def("binary_cross_entropy_with_logits", [](const Tensor& x, const Tensor& t, const Opt& w,
                                               const Opt& pw, const std::string& red) {
    F::BCEWithLogitsOptions o{opt(w), opt(pw), reduction_arg(red)};
    return nogil([&] { return F::binary_cross_entropy_with_logits(x, t, o); });
  }, nb::arg("input"), nb::arg("target"), nb::arg("weight").none(),
     nb::arg("pos_weight").none(), nb::arg("reduction"));
  m.def("kl_div", [](const Tensor& x, const Tensor& t, const std::string& red, bool log_target) {
    F::Reduction r = reduction_arg(red, true);
    return nogil([&] { return F::kl_div(x, t, r, log_target); });
  });

  // nn.init (in place; return the argument itself).
  m.def("calculate_gain", &I::calculate_gain, nb::arg("nonlinearity"), nb::arg("param") = 0.01);
  m.def("calculate_fan_in_and_fan_out", [](const Tensor& t) {
    I::Fans f = I::calculate_fan_in_and_fan_out(t);
    return nb::make_tuple(f.fan_in, f.fan_out);
  });
  m.def("uniform_", [](nb::handle_t<Tensor> t, double a, double b, Generator* g) {
    return init_inplace(t, [&](Tensor& x) { I::uniform_(x, a, b, g); }); },
    nb::arg("tensor"), nb::arg("a"), nb::arg("b"), nb::arg("generator").none());
  m.def("normal_", [](nb::handle_t<Tensor> t, double mean, double std, Generator* g) {
    return init_inplace(t, [&](Tensor& x) { I::normal_(x, mean, std, g); }); },
    nb::arg("tensor"), nb::arg("mean"), nb::arg("std"), nb::arg("generator").none());
  m.def("trunc_normal_", [](nb::handle_t<Tensor> t, double mean, double std, double a, double b,
                            Generator* g) {
    return init_inplace(t, [&](Tensor& x) { I::trunc_normal_(x, mean, std, a, b, g); }); },
    nb::arg("tensor"), nb::arg("mean"), nb::arg("std"), nb::arg("a"), nb::arg("b"),
    nb::arg("generator").none());
  m.def("constant_", [](nb::handle_t<Tensor> t, double v) {
    return init_inplace(t, [&](Tensor& x) { I::constant_(x, v); }); });
  m.def("eye_", [](nb::handle_t<Tensor> t) {
    return init_inplace(t, [&](Tensor& x) { I::eye_(x); }); });
  m.def("xavier_uniform_", [](nb::handle_t<Tensor> t, double gain, Generator* g) {
    return init_inplace(t, [&](Tensor& x) { I::xavier_uniform_(x, gain, g); }); },
    nb::arg("tensor"), nb::arg("gain"), nb::arg("generator").none());
  m.def("xavier_normal_", [](nb::handle_t<Tensor> t, double gain, Generator* g) {
    return init_inplace(t, [&](Tensor& x) { I::xavier_normal_(x, gain, g); }); },
    nb::arg("tensor"), nb::arg("gain"), nb::arg("generator").none());
  m.def("kaiming_uniform_", [](nb::handle_t<Tensor> t, double a, const std::string& mode,
                               const std::string& nl, Generator* g) {
    I::FanMode fm = fan_mode_arg(mode);
    return init_inplace(t, [&](Tensor& x) { I::kaiming_uniform_(x, a, fm, nl, g); }); },
    nb::arg("tensor"), nb::arg("a"), nb::arg("mode"), nb::arg("nonlinearity"),
    nb::arg("generator").none());
  m.def("kaiming_normal_", [](nb::handle_t<Tensor> t, double a, const std::string& mode,
                              const std::string& nl, Generator* g) {
    I::FanMode fm = fan_mode_arg(mode);
    return init_inplace(t, [&](Tensor& x) { I::kaiming_normal_(x, a, fm, nl, g); }); },
    nb::arg("tensor"), nb::arg("a"), nb::arg("mode"), nb::arg("nonlinearity"),
    nb::arg("generator").none());
  m.def("orthogonal_", [](nb::handle_t<Tensor> t, double gain, Generator* g) {
    return init_inplace(t, [&](Tensor& x) { I::orthogonal_(x, gain, g); }); },
    nb::arg("tensor"), nb::arg("gain"), nb::arg("generator").none());

  // nn.utils gradient clipping.
  m.def("clip_grad_norm_", [](const std::vector<Tensor>& ps, double max_norm, double norm_type,
                              bool error_if_nonfinite) {
    return kiln::nn::utils::clip_grad_norm_(ps, max_norm, norm_type, error_if_nonfinite);
  }, G);
  m.def("clip_grad_value_", [](const std::vector<Tensor>& ps, double v) {
    kiln::nn::utils::clip_grad_value_(ps, v);
  }, G);

  bind_nn_conv(m);  // convolution, pooling, attention (nn_conv.cpp)
  bind_nn_activation(m);  // activations and small layers (nn_activation.cpp)
  bind_nn_recurrent(m);   // RNN / LSTM / GRU and their cells (nn_recurrent.cpp)
}

}  // namespace kiln::py
