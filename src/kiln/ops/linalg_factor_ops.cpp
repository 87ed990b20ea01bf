// Cholesky, LU, the solvers, inverse and determinants (include/kiln/ops/linalg_decompositions.h).
// The primitives (registered ops, kernels in backends/cpu/linalg_factor_kernels.cpp) take
// contiguous operands whose batch dims were broadcast here, so their derivatives
// (autograd/derivatives_linalg.cpp) see equal batches and expand() sums the gradients back.
#include <algorithm>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/linalg_decompositions.h"
#include "kiln/ops/views.h"
#include "linalg_checks.h"
#include "op_helpers.h"

namespace kiln {

namespace {

using ops::batch_of;
using ops::with_matrix;

std::vector<TensorMeta> cholesky_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_square("linalg.cholesky", A);
  return {{A.shape(), A.dtype()}, {batch_of(A), DType::I32}};
}

std::vector<TensorMeta> lu_factor_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_linalg_input("linalg.lu_factor", A);
  Shape piv = batch_of(A);
  piv.push_back(std::min(A.size(-2), A.size(-1)));
  return {{A.shape(), A.dtype()}, {piv, DType::I32}, {batch_of(A), DType::I32}};
}

// inputs: LU [..., n, n], pivots [..., n] int32, B [..., n, k] (equal batches); attr adjoint.
std::vector<TensorMeta> lu_solve_meta(const OpCall& c) {
  const Tensor &LU = c.inputs[0], &piv = c.inputs[1], &B = c.inputs[2];
  ops::check_square("linalg.lu_solve", LU);
  KILN_CHECK(piv.dtype() == DType::I32 && piv.dim() == LU.dim() - 1 &&
                 piv.size(-1) == LU.size(-1),
             Error, "linalg.lu_solve: expected int32 pivots of shape [..., ", LU.size(-1),
             "] as linalg.lu_factor returns, got ", dtype_name(piv.dtype()), " ",
             shape_str(piv.shape()));
  KILN_CHECK(B.dtype() == LU.dtype(), Error,
             "linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type ",
             dtype_name(LU.dtype()), " and B of type ", dtype_name(B.dtype()), " instead");
  KILN_CHECK(B.dim() == LU.dim() && B.size(-2) == LU.size(-1), Error,
             "linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B (",
             LU.size(-2), "x", LU.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  return {{B.shape(), B.dtype()}};
}

// inputs: A [..., n, n], B [..., n, k] with equal batches.
std::vector<TensorMeta> solve_meta(const OpCall& c) {
  const Tensor &A = c.inputs[0], &B = c.inputs[1];
  return {{B.shape(), B.dtype()}, {batch_of(A), DType::I32}};
}

// inputs: A [..., n, n], B [..., n, k] (left) or [..., k, n]; attrs upper, left, unitriangular.
std::vector<TensorMeta> solve_triangular_meta(const OpCall& c) {
  const Tensor& B = c.inputs[1];
  return {{B.shape(), B.dtype()}};
}

std::vector<TensorMeta> det_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_square("linalg.det", A);
  return {{batch_of(A), A.dtype()}};
}

std::vector<TensorMeta> slogdet_meta(const OpCall& c) {
  const Tensor& A = c.inputs[0];
  ops::check_square("linalg.slogdet", A);
  return {{batch_of(A), A.dtype()}, {batch_of(A), A.dtype()}};
}

// The checks of A X = B / X A = B shared by solve and solve_triangular; B as a matrix.
// Returns A and B broadcast to one batch and contiguous, B's vector-ness in *vector_rhs.
std::pair<Tensor, Tensor> solve_operands(const char* fn, const Tensor& A, const Tensor& B,
                                         bool left, bool allow_vector, bool* vector_rhs) {
  ops::check_square(fn, A);
  KILN_CHECK(B.dtype() == A.dtype(), Error, fn,
             ": Expected A and B to have the same dtype, but found A of type ",
             dtype_name(A.dtype()), " and B of type ", dtype_name(B.dtype()), " instead");
  // torch's rule: B is a vector when it is 1-d or has exactly A's batch shape.
  const bool vec = allow_vector && (B.dim() == 1 || (B.dim() == A.dim() - 1 &&
                                                      B.shape() == batch_of(A, 1)));
  *vector_rhs = vec;
  Tensor Bm = vec ? unsqueeze(B, left ? -1 : -2) : B;
  KILN_CHECK(Bm.dim() >= 2, Error, fn,
             ": The input tensor B must have at least 2 dimensions.");
  const int64_t n = A.size(-1);
  const int64_t shared = left ? Bm.size(-2) : Bm.size(-1);
  KILN_CHECK(shared == n, Error, fn, ": Incompatible shapes of A and B for the equation ",
             left ? "AX = B (" : "XA = B (", n, "x", n, " and ", Bm.size(-2), "x", Bm.size(-1),
             ")");
  const Shape batch = ops::broadcast_batch(fn, batch_of(A), batch_of(Bm));
  Tensor Ab = expand(A, with_matrix(batch, n, n)).contiguous();
  Tensor Bb = expand(Bm, with_matrix(batch, Bm.size(-2), Bm.size(-1))).contiguous();
  return {Ab, Bb};
}

Tensor mT(const Tensor& t) { return transpose(t, -2, -1); }

}  // namespace

std::tuple<Tensor, Tensor> linalg_cholesky_ex(const Tensor& A, bool upper) {
  auto outs = call_op_multi(KILN_OP("linalg_cholesky_ex"), {A.contiguous()}, {upper});
  return {outs[0], outs[1]};
}

Tensor linalg_cholesky(const Tensor& A, bool upper) {
  auto [L, info] = linalg_cholesky_ex(A, upper);
  ops::raise_for_info("linalg.cholesky", info, [](int32_t code) {
    return detail::str_cat("The factorization could not be completed because the input is not "
                           "positive-definite (the leading minor of order ", code,
                           " is not positive-definite).");
  });
  return L;
}

std::tuple<Tensor, Tensor, Tensor> linalg_lu_factor_ex(const Tensor& A) {
  auto outs = call_op_multi(KILN_OP("linalg_lu_factor_ex"), {A.contiguous()}, {});
  return {outs[0], outs[1], outs[2]};
}

std::tuple<Tensor, Tensor> linalg_lu_factor(const Tensor& A) {
  auto [LU, piv, info] = linalg_lu_factor_ex(A);
  ops::raise_for_info("torch.linalg.lu_factor", info, [](int32_t code) {
    return detail::str_cat("U[", code, ",", code, "] is zero and using it on lu_solve would "
                           "result in a division by zero. If you still want to perform the "
                           "factorization, consider calling linalg.lu(A, pivot) or "
                           "linalg.lu_factor_ex(A, pivot)");
  });
  return {LU, piv};
}

Tensor linalg_lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left,
                       bool adjoint) {
  ops::check_square("linalg.lu_solve", LU);
  // X A = B is A^T X^T = B^T.
  Tensor Bm = left ? B : mT(B);
  KILN_CHECK(Bm.dim() >= 2, Error, "linalg.lu_solve: The input tensor B must have at least 2 "
             "dimensions.");
  const int64_t n = LU.size(-1);
  const Shape batch = ops::broadcast_batch("linalg.lu_solve", batch_of(LU),
                                           ops::broadcast_batch("linalg.lu_solve",
                                                                batch_of(pivots, 1),
                                                                batch_of(Bm)));
  Tensor LUb = expand(LU, with_matrix(batch, n, n)).contiguous();
  Shape piv_shape = batch;
  piv_shape.push_back(pivots.dim() > 0 ? pivots.size(-1) : 0);
  Tensor pb = expand(pivots, piv_shape).contiguous();
  Tensor Bb = expand(Bm, with_matrix(batch, Bm.size(-2), Bm.size(-1))).contiguous();
  Tensor X = call_op(KILN_OP("linalg_lu_solve"), {LUb, pb, Bb}, {left ? adjoint : !adjoint});
  return left ? X : mT(X);
}

std::tuple<Tensor, Tensor> linalg_solve_ex(const Tensor& A, const Tensor& B, bool left) {
  bool vec = false;
  auto [Ab, Bb] = solve_operands("linalg.solve", A, B, left, true, &vec);
  // X A = B is A^T X^T = B^T.
  if (!left) {
    Ab = mT(Ab).contiguous();
    Bb = mT(Bb).contiguous();
  }
  auto outs = call_op_multi(KILN_OP("linalg_solve_ex"), {Ab, Bb}, {});
  Tensor X = left ? outs[0] : mT(outs[0]);
  if (vec) X = squeeze(X, {left ? -1 : -2});
  return {X, outs[1]};
}

Tensor linalg_solve(const Tensor& A, const Tensor& B, bool left) {
  auto [X, info] = linalg_solve_ex(A, B, left);
  ops::raise_for_info("torch.linalg.solve", info, [](int32_t) {
    return std::string("The solver failed because the input matrix is singular.");
  });
  return X;
}

Tensor linalg_solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left,
                               bool unitriangular) {
  bool vec = false;
  auto [Ab, Bb] = solve_operands("linalg.solve_triangular", A, B, left, false, &vec);
  return call_op(KILN_OP("linalg_solve_triangular"), {Ab, Bb}, {upper, left, unitriangular});
}

std::tuple<Tensor, Tensor> linalg_inv_ex(const Tensor& A) {
  ops::check_square("linalg.inv", A);
  const int64_t n = A.size(-1);
  Tensor I = eye(n, std::nullopt, TensorOptions(A.dtype(), A.device()));
  return linalg_solve_ex(A, expand(I, A.shape()), true);
}

Tensor linalg_inv(const Tensor& A) {
  auto [X, info] = linalg_inv_ex(A);
  ops::raise_for_info("linalg.inv", info, [](int32_t code) {
    return detail::str_cat("The diagonal element ", code, " is zero, the inversion could not be "
                           "completed because the input matrix is singular.");
  });
  return X;
}

Tensor linalg_det(const Tensor& A) { return call_op(KILN_OP("linalg_det"), {A.contiguous()}); }

std::tuple<Tensor, Tensor> linalg_slogdet(const Tensor& A) {
  auto outs = call_op_multi(KILN_OP("linalg_slogdet"), {A.contiguous()}, {});
  return {outs[0], outs[1]};
}

namespace ops {
void register_linalg_factor_ops() {
  register_op("linalg_cholesky_ex",
              "linalg_cholesky_ex(Tensor A, bool upper=False) -> (Tensor L, Tensor info)",
              cholesky_meta);
  register_op("linalg_lu_factor_ex",
              "linalg_lu_factor_ex(Tensor A) -> (Tensor LU, Tensor pivots, Tensor info)",
              lu_factor_meta);
  register_op("linalg_lu_solve",
              "linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, bool adjoint=False) -> Tensor",
              lu_solve_meta);
  register_op("linalg_solve_ex", "linalg_solve_ex(Tensor A, Tensor B) -> (Tensor X, Tensor info)",
              solve_meta);
  register_op("linalg_solve_triangular",
              "linalg_solve_triangular(Tensor A, Tensor B, bool upper, bool left=True, "
              "bool unitriangular=False) -> Tensor",
              solve_triangular_meta);
  register_op("linalg_det", "linalg_det(Tensor A) -> Tensor", det_meta);
  register_op("linalg_slogdet", "linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)",
              slogdet_meta);
}
}  // namespace ops

}  // namespace kiln
