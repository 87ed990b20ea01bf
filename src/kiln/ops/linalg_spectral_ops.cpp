// QR, symmetric eigendecomposition and SVD (include/kiln/ops/linalg_decompositions.h); the
// kernels are backends/cpu/linalg_spectral_kernels.cpp, the derivatives
// autograd/derivatives_linalg.cpp.
#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/linalg_decompositions.h"
#include "linalg_checks.h"
#include "op_helpers.h"

namespace kiln {

namespace {

using ops::batch_of;
using ops::with_matrix;

// attr 0: mode (0 reduced, 1 complete, 2 r). Q is [..., 0] in mode r, as torch's empty Q.
std::vector<TensorMeta> qr_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_linalg_input("linalg.qr", A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t mode = c.int_attr(0);
  const Shape batch = batch_of(A);
  const Shape q = mode == 2 ? Shape{0} : with_matrix(batch, m, mode == 1 ? m : k);
  return {{q, A.dtype()}, {with_matrix(batch, mode == 1 ? m : k, n), A.dtype()}};
}

// attrs: upper, compute_v. Without vectors, Q is [0]. The last output is LAPACK's info
// (-1: the input held NaN or infinity, which LAPACK is not given).
std::vector<TensorMeta> eigh_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_square("linalg.eigh", A);
  Shape values = batch_of(A);
  values.push_back(A.size(-1));
  // A Hermitian complex A has real eigenvalues.
  const DType wt = is_complex(A.dtype()) ? real_part_dtype(A.dtype()) : A.dtype();
  return {{values, wt},
          {c.bool_attr(1) ? A.shape() : Shape{0}, A.dtype()},
          {batch_of(A), DType::I32}};
}

// attr: compute_v. Complex eigenvalues [..., n] and eigenvectors [..., n, n] ([0] without
// vectors) of a real or complex square A; info as eigh's.
std::vector<TensorMeta> eig_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_square("linalg.eig", A);
  const DType ct = is_complex(A.dtype()) ? A.dtype() : complex_dtype_for(A.dtype());
  Shape values = batch_of(A);
  values.push_back(A.size(-1));
  return {{values, ct}, {c.bool_attr(0) ? A.shape() : Shape{0}, ct}, {batch_of(A), DType::I32}};
}

// attrs: full_matrices, compute_uv. Without vectors, U and Vh are [0]. info as eigh's.
std::vector<TensorMeta> svd_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_linalg_input("linalg.svd", A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const bool full = c.bool_attr(0), uv = c.bool_attr(1);
  const Shape batch = batch_of(A);
  Shape s = batch;
  s.push_back(k);
  const DType st = is_complex(A.dtype()) ? real_part_dtype(A.dtype()) : A.dtype();  // S real
  return {{uv ? with_matrix(batch, m, full ? m : k) : Shape{0}, A.dtype()},
          {s, st},
          {uv ? with_matrix(batch, full ? n : k, n) : Shape{0}, A.dtype()},
          {batch, DType::I32}};
}

}  // namespace

std::tuple<Tensor, Tensor> linalg_qr(const Tensor& A, const std::string& mode) {
  int64_t code = -1;
  if (mode == "reduced") code = 0;
  if (mode == "complete") code = 1;
  if (mode == "r") code = 2;
  KILN_CHECK(code >= 0, Error, "qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  auto outs = call_op_multi(KILN_OP("linalg_qr"), {A.contiguous()}, {code});
  return {outs[0], outs[1]};
}

namespace {
std::string eigh_failure(int32_t code) {
  if (code < 0)
    return "The algorithm failed to converge because the input matrix contained non-finite "
           "values.";
  return detail::str_cat("The algorithm failed to converge because the input matrix is "
                         "ill-conditioned or has too many repeated eigenvalues (error code: ",
                         code, ").");
}
std::string svd_failure(int32_t code) {
  if (code < 0)
    return "The algorithm failed to converge because the input matrix contained non-finite "
           "values.";
  return detail::str_cat("The algorithm failed to converge because the input matrix is "
                         "ill-conditioned or has too many repeated singular values (error "
                         "code: ", code, ").");
}

bool parse_uplo(const std::string& uplo) {
  KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", Error,
             "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  return uplo == "U" || uplo == "u";
}
}  // namespace

std::tuple<Tensor, Tensor> linalg_eigh(const Tensor& A, const std::string& uplo) {
  auto outs = call_op_multi(KILN_OP("linalg_eigh"), {A.contiguous()}, {parse_uplo(uplo), true});
  ops::raise_for_info("linalg.eigh", outs[2], eigh_failure);
  return {outs[0], outs[1]};
}

Tensor linalg_eigvalsh(const Tensor& A, const std::string& uplo) {
  // The derivative of the values needs the vectors: computed when it will be taken.
  const bool vectors = autograd::requires_grad(A) && autograd::is_grad_enabled();
  auto outs = call_op_multi(KILN_OP("linalg_eigh"), {A.contiguous()}, {parse_uplo(uplo), vectors});
  ops::raise_for_info("linalg.eigvalsh", outs[2], eigh_failure);
  return outs[0];
}

namespace {
std::string eig_failure(int32_t code) {
  if (code < 0) return "input tensor should not contain infs or NaNs.";
  return detail::str_cat("The QR algorithm failed to compute all the eigenvalues (error code: ",
                         code, ").");
}
Tensor eig_input(const char* fn, const Tensor& A) {
  KILN_CHECK(!autograd::requires_grad(A) || !autograd::is_grad_enabled(), NotImplementedError,
             fn, ": the derivative is not implemented (detach A or use linalg.eigh for a "
             "symmetric A)");
  return A.contiguous();
}
}  // namespace

std::tuple<Tensor, Tensor> linalg_eig(const Tensor& A) {
  auto outs = call_op_multi(KILN_OP("linalg_eig"), {eig_input("linalg.eig", A)}, {true});
  ops::raise_for_info("linalg.eig", outs[2], eig_failure);
  return {outs[0], outs[1]};
}

Tensor linalg_eigvals(const Tensor& A) {
  auto outs = call_op_multi(KILN_OP("linalg_eig"), {eig_input("linalg.eigvals", A)}, {false});
  ops::raise_for_info("linalg.eigvals", outs[2], eig_failure);
  return outs[0];
}

std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& A, bool full_matrices) {
  auto outs = call_op_multi(KILN_OP("linalg_svd"), {A.contiguous()}, {full_matrices, true});
  ops::raise_for_info("linalg.svd", outs[3], svd_failure);
  return {outs[0], outs[1], outs[2]};
}

Tensor linalg_svdvals(const Tensor& A) {
  const bool vectors = autograd::requires_grad(A) && autograd::is_grad_enabled();
  auto outs = call_op_multi(KILN_OP("linalg_svd"), {A.contiguous()}, {false, vectors});
  ops::raise_for_info("linalg.svdvals", outs[3], svd_failure);
  return outs[1];
}

namespace ops {
void register_linalg_spectral_ops() {
  register_op("linalg_qr", "linalg_qr(Tensor A, int mode=0) -> (Tensor Q, Tensor R)", qr_meta);
  register_op("linalg_eigh",
              "linalg_eigh(Tensor A, bool upper=False, bool compute_v=True) -> "
              "(Tensor eigenvalues, Tensor eigenvectors, Tensor info)",
              eigh_meta);
  register_op("linalg_eig",
              "linalg_eig(Tensor A, bool compute_v=True) -> "
              "(Tensor eigenvalues, Tensor eigenvectors, Tensor info)",
              eig_meta);
  register_op("linalg_svd",
              "linalg_svd(Tensor A, bool full_matrices=True, bool compute_uv=True) -> "
              "(Tensor U, Tensor S, Tensor Vh, Tensor info)",
              svd_meta);
}
}  // namespace ops

}  // namespace kiln
