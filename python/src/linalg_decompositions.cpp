// kiln._C._linalg: the factorisations of kiln/ops/linalg_decompositions.h, for kiln.linalg
// (python/kiln/linalg_decompositions.py wraps the tuples into torch's named return types).
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "bind.h"
#include "kiln/ops/linalg_decompositions.h"

namespace kiln::py {

void bind_linalg_decompositions(nb::module_& m) {
  nb::module_ l = m.def_submodule("_linalg", "factorisations behind kiln.linalg");
  l.def("cholesky_ex", [](const Tensor& A, bool upper) {
    return nogil([&] { return linalg_cholesky_ex(A, upper); });
  }, nb::arg("A"), nb::arg("upper") = false);
  l.def("cholesky", [](const Tensor& A, bool upper) {
    return nogil([&] { return linalg_cholesky(A, upper); });
  }, nb::arg("A"), nb::arg("upper") = false);
  l.def("lu_factor_ex", [](const Tensor& A) {
    return nogil([&] { return linalg_lu_factor_ex(A); });
  }, nb::arg("A"));
  l.def("lu_factor", [](const Tensor& A) { return nogil([&] { return linalg_lu_factor(A); }); },
        nb::arg("A"));
  l.def("lu_solve", [](const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left,
                       bool adjoint) {
    return nogil([&] { return linalg_lu_solve(LU, pivots, B, left, adjoint); });
  }, nb::arg("LU"), nb::arg("pivots"), nb::arg("B"), nb::arg("left") = true,
     nb::arg("adjoint") = false);
  l.def("solve_ex", [](const Tensor& A, const Tensor& B, bool left) {
    return nogil([&] { return linalg_solve_ex(A, B, left); });
  }, nb::arg("A"), nb::arg("B"), nb::arg("left") = true);
  l.def("solve", [](const Tensor& A, const Tensor& B, bool left) {
    return nogil([&] { return linalg_solve(A, B, left); });
  }, nb::arg("A"), nb::arg("B"), nb::arg("left") = true);
  l.def("solve_triangular", [](const Tensor& A, const Tensor& B, bool upper, bool left,
                               bool unitriangular) {
    return nogil([&] { return linalg_solve_triangular(A, B, upper, left, unitriangular); });
  }, nb::arg("A"), nb::arg("B"), nb::arg("upper"), nb::arg("left") = true,
     nb::arg("unitriangular") = false);
  l.def("inv_ex", [](const Tensor& A) { return nogil([&] { return linalg_inv_ex(A); }); },
        nb::arg("A"));
  l.def("inv", [](const Tensor& A) { return nogil([&] { return linalg_inv(A); }); },
        nb::arg("A"));
  l.def("det", [](const Tensor& A) { return nogil([&] { return linalg_det(A); }); },
        nb::arg("A"));
  l.def("slogdet", [](const Tensor& A) { return nogil([&] { return linalg_slogdet(A); }); },
        nb::arg("A"));
  l.def("qr", [](const Tensor& A, const std::string& mode) {
    return nogil([&] { return linalg_qr(A, mode); });
  }, nb::arg("A"), nb::arg("mode") = "reduced");
  l.def("eigh", [](const Tensor& A, const std::string& uplo) {
    return nogil([&] { return linalg_eigh(A, uplo); });
  }, nb::arg("A"), nb::arg("UPLO") = "L");
  l.def("eigvalsh", [](const Tensor& A, const std::string& uplo) {
    return nogil([&] { return linalg_eigvalsh(A, uplo); });
  }, nb::arg("A"), nb::arg("UPLO") = "L");
  l.def("eig", [](const Tensor& A) { return nogil([&] { return linalg_eig(A); }); },
        nb::arg("A"));
  l.def("eigvals", [](const Tensor& A) { return nogil([&] { return linalg_eigvals(A); }); },
        nb::arg("A"));
  l.def("svd", [](const Tensor& A, bool full_matrices) {
    return nogil([&] { return linalg_svd(A, full_matrices); });
  }, nb::arg("A"), nb::arg("full_matrices") = true);
  l.def("svdvals", [](const Tensor& A) { return nogil([&] { return linalg_svdvals(A); }); },
        nb::arg("A"));
}

}  // namespace kiln::py
