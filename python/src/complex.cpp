// Complex tensors from Python: the part views (Tensor.real / .imag properties,
// view_as_real / view_as_complex), torch.complex, and the private FFT ops that kiln.fft
// (python/kiln/fft.py) builds torch.fft's functions from.
#include "bind.h"

namespace kiln::py {

#define GIL nb::call_guard<nb::gil_scoped_release>()

void bind_complex(nb::module_& m, nb::class_<Tensor>& cls) {
  m.def("view_as_real", [](const Tensor& t) { return kiln::view_as_real(t); }, nb::arg("input"), GIL);
  m.def("view_as_complex", [](const Tensor& t) { return kiln::view_as_complex(t); },
        nb::arg("input"), GIL);
  m.def("complex", [](const Tensor& re, const Tensor& im) { return kiln::complex(re, im); },
        nb::arg("real"), nb::arg("imag"), GIL);
  m.def("_real", [](const Tensor& t) { return kiln::real(t); }, GIL);
  m.def("_imag", [](const Tensor& t) { return kiln::imag(t); }, GIL);
  m.def("_conj_physical", [](const Tensor& t) { return kiln::conj_physical(t); }, GIL);
  m.def("_angle", [](const Tensor& t) { return kiln::angle(t); }, GIL);
  m.def("_sgn", [](const Tensor& t) { return kiln::sgn(t); }, GIL);
  m.def("_fft_c2c", [](const Tensor& t, std::vector<int64_t> dim, int64_t norm, bool forward) {
    return kiln::fft_c2c(t, dim, norm, forward);
  }, nb::arg("input"), nb::arg("dim"), nb::arg("normalization"), nb::arg("forward"), GIL);
  m.def("_fft_r2c", [](const Tensor& t, std::vector<int64_t> dim, int64_t norm, bool onesided) {
    return kiln::fft_r2c(t, dim, norm, onesided);
  }, nb::arg("input"), nb::arg("dim"), nb::arg("normalization"), nb::arg("onesided"), GIL);
  m.def("_fft_c2r", [](const Tensor& t, std::vector<int64_t> dim, int64_t norm, int64_t n) {
    return kiln::fft_c2r(t, dim, norm, n);
  }, nb::arg("input"), nb::arg("dim"), nb::arg("normalization"), nb::arg("last_dim_size"), GIL);
  // torch's Tensor.real / .imag are properties: views of the parts (real of a real tensor is
  // the tensor; imag of one raises).
  cls.def_prop_ro("real", [](const Tensor& t) { return nogil([&] { return kiln::real(t); }); });
  cls.def_prop_ro("imag", [](const Tensor& t) { return nogil([&] { return kiln::imag(t); }); });
}

}  // namespace kiln::py
