// kiln._C._nn (continued): the activations and small layers of
// kiln/nn/functional_activation.h, for kiln.nn.functional. Positional arguments; the Python
// wrappers hold torch's keywords and defaults.
#include "bind.h"
#include "kiln/nn/functional_activation.h"

namespace kiln::py {

namespace {
namespace F = kiln::nn::functional;
using Opt = std::optional<Tensor>;
Tensor opt(const Opt& t) { return t ? *t : Tensor(); }
}  // namespace

void bind_nn_activation(nb::module_& m) {
  auto G = nb::call_guard<nb::gil_scoped_release>();
  using T = const Tensor&;
  m.def("hardtanh", [](T x, double lo, double hi) { return F::hardtanh(x, lo, hi); }, G);
  m.def("relu6", [](T x) { return F::relu6(x); }, G);
  m.def("hardsigmoid", [](T x) { return F::hardsigmoid(x); }, G);
  m.def("hardswish", [](T x) { return F::hardswish(x); }, G);
  m.def("elu", [](T x, double alpha) { return F::elu(x, alpha); }, G);
  m.def("selu", [](T x) { return F::selu(x); }, G);
  m.def("celu", [](T x, double alpha) { return F::celu(x, alpha); }, G);
  m.def("mish", [](T x) { return F::mish(x); }, G);
  m.def("logsigmoid", [](T x) { return F::logsigmoid(x); }, G);
  m.def("softsign", [](T x) { return F::softsign(x); }, G);
  m.def("tanhshrink", [](T x) { return F::tanhshrink(x); }, G);
  m.def("softshrink", [](T x, double l) { return F::softshrink(x, l); }, G);
  m.def("hardshrink", [](T x, double l) { return F::hardshrink(x, l); }, G);
  m.def("threshold", [](T x, double t, double v) { return F::threshold(x, t, v); }, G);
  m.def("glu", [](T x, int64_t dim) { return F::glu(x, dim); }, G);
  m.def("prelu", [](T x, T w) { return F::prelu(x, w); }, G);
  m.def("rrelu", [](T x, double lo, double hi, bool training, Generator* g) {
    return F::rrelu(x, lo, hi, training, g);
  }, nb::arg("input"), nb::arg("lower"), nb::arg("upper"), nb::arg("training"),
     nb::arg("generator").none() = nb::none(), G);
  m.def("softmin", [](T x, int64_t dim) { return F::softmin(x, dim); }, G);
  m.def("normalize", [](T x, double p, int64_t dim, double eps) {
    return F::normalize(x, p, dim, eps); }, G);
  m.def("cosine_similarity", [](T a, T b, int64_t dim, double eps) {
    return F::cosine_similarity(a, b, dim, eps); }, G);
  m.def("pairwise_distance", [](T a, T b, double p, double eps, bool keepdim) {
    return F::pairwise_distance(a, b, p, eps, keepdim); }, G);
  m.def("pixel_shuffle", [](T x, int64_t r) { return F::pixel_shuffle(x, r); }, G);
  m.def("pixel_unshuffle", [](T x, int64_t r) { return F::pixel_unshuffle(x, r); }, G);
  m.def("instance_norm", [](T x, const Opt& rm, const Opt& rv, const Opt& w, const Opt& b,
                            bool use_input_stats, double momentum, double eps) {
    return F::instance_norm(x, opt(rm), opt(rv), opt(w), opt(b), use_input_stats, momentum,
                            eps);
  }, nb::arg("input"), nb::arg("running_mean").none(), nb::arg("running_var").none(),
     nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("use_input_stats"),
     nb::arg("momentum"), nb::arg("eps"), G);
  m.def("feature_dropout", [](T x, double p, bool training, int64_t dims,
                              const std::string& name, Generator* g) {
    return F::feature_dropout(x, p, training, dims, name.c_str(), g);
  }, nb::arg("input"), nb::arg("p"), nb::arg("training"), nb::arg("feature_dims"),
     nb::arg("name"), nb::arg("generator").none() = nb::none(), G);
}

}  // namespace kiln::py
