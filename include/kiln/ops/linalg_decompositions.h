#pragma once
// Matrix factorisations and the solvers built on them, as torch.linalg: every function takes
// batches of matrices [..., m, n] (batch dims broadcast where two operands meet), float32 or
// float64, and runs LAPACK from OpenBLAS on the CPU (decision 0076). Factors and solutions are
// differentiable except the packed LU factors; the derivatives are written with these ops, so
// double backward works.
#include <string>
#include <tuple>

#include "kiln/tensor/tensor.h"

namespace kiln {

// A factorisation that does not exist for the given input (a matrix that is singular, not
// positive-definite, or on which the iteration did not converge). Python:
// kiln.linalg.LinAlgError, a RuntimeError, as torch.linalg.LinAlgError.
class LinAlgError : public Error {
 public:
  using Error::Error;
};

// Cholesky factor of symmetric positive-definite A [..., n, n]: lower L with A = L L^T, or
// upper U = L^T when upper; only A's lower (upper) triangle is read. The _ex form returns info
// (int32 [...]: 0, or k when the leading minor of order k is not positive-definite) instead
// of raising LinAlgError.
Tensor linalg_cholesky(const Tensor& A, bool upper = false);
std::tuple<Tensor, Tensor> linalg_cholesky_ex(const Tensor& A, bool upper = false);

// LU with partial pivoting: A = P L U, returned packed (L's unit diagonal implied) with
// 1-based int32 pivots [..., min(m, n)] as LAPACK's getrf; info > 0 marks an exactly zero
// pivot (the factors still exist). Differentiable in LU (derivatives_linalg.cpp).
std::tuple<Tensor, Tensor> linalg_lu_factor(const Tensor& A);
std::tuple<Tensor, Tensor, Tensor> linalg_lu_factor_ex(const Tensor& A);
// Solves A X = B (or X A = B when !left; with A^T when adjoint) from linalg_lu_factor's
// output. Differentiable in LU and B.
Tensor linalg_lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B,
                       bool left = true, bool adjoint = false);

// X with A X = B (left) or X A = B; B may be a vector [..., n] (then X is one too). Raises
// LinAlgError for a singular A; the _ex form returns info (int32 [...], > 0 when singular).
Tensor linalg_solve(const Tensor& A, const Tensor& B, bool left = true);
std::tuple<Tensor, Tensor> linalg_solve_ex(const Tensor& A, const Tensor& B, bool left = true);
// X with A X = B (or X A = B) for triangular A; only A's upper / lower triangle is read, and
// with unitriangular its diagonal is taken as ones.
Tensor linalg_solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true,
                               bool unitriangular = false);

Tensor linalg_inv(const Tensor& A);  // raises LinAlgError for a singular A
std::tuple<Tensor, Tensor> linalg_inv_ex(const Tensor& A);
Tensor linalg_det(const Tensor& A);
// (sign, log |det|): sign 0 and -inf for a singular A.
std::tuple<Tensor, Tensor> linalg_slogdet(const Tensor& A);

// QR by Householder reflections. mode "reduced": Q [..., m, k], R [..., k, n] (k = min(m, n));
// "complete": Q [..., m, m], R [..., m, n]; "r": R only (Q empty).
std::tuple<Tensor, Tensor> linalg_qr(const Tensor& A, const std::string& mode = "reduced");

// Eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric A, reading its
// lower ("L") or upper ("U") triangle.
std::tuple<Tensor, Tensor> linalg_eigh(const Tensor& A, const std::string& uplo = "L");
Tensor linalg_eigvalsh(const Tensor& A, const std::string& uplo = "L");

// Eigenvalues and eigenvectors (columns, unit norm) of a general square A, complex (complex64
// for float32 / complex64 A, complex128 for float64 / complex128), in LAPACK geev's order. No
// derivative yet.
std::tuple<Tensor, Tensor> linalg_eig(const Tensor& A);
Tensor linalg_eigvals(const Tensor& A);

// A = U diag(S) Vh with S descending; full_matrices gives square U and Vh.
std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& A, bool full_matrices = true);
Tensor linalg_svdvals(const Tensor& A);

}  // namespace kiln
