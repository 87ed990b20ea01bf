// Derivatives of the factorisations (ops/linalg_factor_ops.cpp, linalg_spectral_ops.cpp),
// written with ops so that double backward works. Notation: X^T = mT(X), E_ij = l_j - l_i.
//   solve        X = A^-1 B:   gB = A^-T gX, gA = -gB X^T
//   triangular   the same (or X = B A^-1), gA restricted to A's triangle
//   cholesky     A = L L^T:    gA = sym(L^-T phi(L^T gL) L^-1), phi = lower with half diagonal
//   det, slogdet               gA = g det A^-T, g_logabsdet A^-T
//   qr (m >= n)  A = Q R:      M = gR R^T - Q^T gQ, gA = (gQ + Q copyu(M)) R^-T
//   eigh         A = Q L Q^T:  gA = Q (diag(gL) + skew(Q^T gQ) / 2E) Q^T
//   svd                        Townsend's formula (see d_svd)
// Batch dims were broadcast before the ops ran, so gradients have the inputs' shapes.
#include <algorithm>

#include "kiln/autograd/node.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_decompositions.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

Tensor mT(const Tensor& t) { return transpose(t, -2, -1); }

// diag(v) for a batch of vectors v [..., n].
Tensor diag_embed(const Tensor& v) {
  Tensor I = eye(v.size(-1), std::nullopt, TensorOptions(v.dtype(), v.device()));
  return unsqueeze(v, -1) * I;
}
Tensor matrix_diagonal(const Tensor& t) { return diagonal(t, 0, -2, -1); }
// A^-1 of a batch (solve with the identity, no singularity check: a singular A gives inf /
// NaN gradients, as its derivative does not exist there in this form).
Tensor inverse_unchecked(const Tensor& A) { return std::get<0>(linalg_inv_ex(A)); }

Grads d_solve(const GradContext& ctx, const Grads& go) {
  Tensor A = ctx.input(0), X = ctx.output(0);
  Tensor gB = std::get<0>(linalg_solve_ex(mT(A), go[0]));
  Grads r(2);
  if (ctx.needs(0)) r[0] = -matmul(gB, mT(X));
  if (ctx.needs(1)) r[1] = gB;
  return r;
}

Grads d_lu_solve(const GradContext& ctx, const Grads& go) {
  KILN_CHECK(!ctx.needs(0), NotImplementedError,
             "the derivative of linalg.lu_solve with respect to LU is not implemented "
             "(differentiate linalg.solve instead)");
  const bool adjoint = ctx.as_call().bool_attr(0);
  Grads r(3);
  if (ctx.needs(2))
    r[2] = linalg_lu_solve(ctx.input(0), ctx.input(1), go[0], true, !adjoint);
  return r;
}

Grads d_solve_triangular(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const bool upper = c.bool_attr(0), left = c.bool_attr(1), unit = c.bool_attr(2);
  Tensor A = ctx.input(0), X = ctx.output(0);
  Tensor gB = linalg_solve_triangular(mT(A), go[0], !upper, left, unit);
  Grads r(2);
  if (ctx.needs(0)) {
    Tensor gA = left ? -matmul(gB, mT(X)) : -matmul(mT(X), gB);
    r[0] = upper ? triu(gA, unit ? 1 : 0) : tril(gA, unit ? -1 : 0);
  }
  if (ctx.needs(1)) r[1] = gB;
  return r;
}

Grads d_cholesky(const GradContext& ctx, const Grads& go) {
  const bool upper = ctx.as_call().bool_attr(0);
  Tensor L = upper ? mT(ctx.output(0)) : ctx.output(0);
  Tensor gL = upper ? mT(go[0]) : go[0];
  Tensor P = matmul(mT(L), gL);
  P = tril(P) - diag_embed(matrix_diagonal(P)) * 0.5;
  Tensor S = linalg_solve_triangular(mT(L), P, /*upper=*/true, /*left=*/true);
  S = linalg_solve_triangular(L, S, /*upper=*/false, /*left=*/false);
  return {(S + mT(S)) * 0.5};
}

Grads d_det(const GradContext& ctx, const Grads& go) {
  Tensor scale = unsqueeze(unsqueeze(go[0] * ctx.output(0), -1), -1);
  return {scale * mT(inverse_unchecked(ctx.input(0)))};
}

Grads d_slogdet(const GradContext& ctx, const Grads& go) {
  Tensor scale = unsqueeze(unsqueeze(go[1], -1), -1);
  return {scale * mT(inverse_unchecked(ctx.input(0)))};
}

// The square / tall case of QR's derivative (m >= n, Q [m, n], R [n, n]).
Tensor qr_backward_tall(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  Tensor M = matmul(gR, mT(R)) - matmul(mT(Q), gQ);
  Tensor N = triu(M) + mT(triu(M, 1));
  return linalg_solve_triangular(mT(R), gQ + matmul(Q, N), /*upper=*/false, /*left=*/false);
}

Grads d_qr(const GradContext& ctx, const Grads& go) {
  const int64_t mode = ctx.as_call().int_attr(0);
  const Shape& shape = ctx.input_shapes[0];
  const int64_t m = shape[shape.size() - 2], n = shape.back();
  KILN_CHECK(mode != 2, Error,
             "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
             "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
             "through linalg.qr.");
  KILN_CHECK(mode != 1 || m <= n, Error,
             "The QR decomposition is not differentiable when mode='complete' and nrows > "
             "ncols.");
  Tensor Q = ctx.output(0), R = ctx.output(1), gQ = go[0], gR = go[1];
  if (m >= n) return {qr_backward_tall(gQ, gR, Q, R)};
  // Wide A = [X | Y] = Q [U | V]: X = Q U is a square QR and V = Q^T Y.
  Tensor Y = narrow(ctx.input(0), -1, m, n - m);
  Tensor U = narrow(R, -1, 0, m), gU = narrow(gR, -1, 0, m), gV = narrow(gR, -1, m, n - m);
  Tensor gX = qr_backward_tall(gQ + matmul(Y, mT(gV)), gU, Q, U);
  return {cat({gX, matmul(Q, gV)}, -1)};
}

// 1 / (l_j - l_i) off the diagonal, 0 on it, for eigenvalues (or squared singular values) l.
Tensor inverse_gaps(const Tensor& l) {
  Tensor E = unsqueeze(l, -2) - unsqueeze(l, -1);
  Tensor I = eye(l.size(-1), std::nullopt, TensorOptions(l.dtype(), l.device()));
  return (1.0 - I) / (E + I);
}

Grads d_eigh(const GradContext& ctx, const Grads& go) {
  Tensor Q = ctx.output(1);
  KILN_CHECK(Q.dim() >= 2, Error, "linalg.eigh: the eigenvectors were not computed, so the "
             "derivative cannot be taken");
  // Only the skew part of Q^T gQ moves Q along its orthogonal tangent (as torch's form).
  Tensor K = matmul(mT(Q), go[1]);
  Tensor inner = (K - mT(K)) * 0.5 * inverse_gaps(ctx.output(0)) + diag_embed(go[0]);
  return {matmul(matmul(Q, inner), mT(Q))};
}

// A = U diag(S) Vh, k = min(m, n), with E_ij = s_j^2 - s_i^2 (Townsend, "Differentiating the
// singular value decomposition"):
//   gA = U [skew(U^T gU) / E * S + S * skew(V^T gV) / E + diag(gS)] Vh
//      + (gU - U U^T gU) / S Vh        (m > k)
//      + U (gVh - (V^T gV)^T Vh) / S   (n > k)
Grads d_svd(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const Shape& shape = ctx.input_shapes[0];
  const int64_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
  Tensor U = ctx.output(0), S = ctx.output(1), Vh = ctx.output(2);
  KILN_CHECK(c.bool_attr(1) && U.dim() >= 2, Error,
             "linalg.svd: the singular vectors were not computed, so the derivative cannot be "
             "taken");
  Tensor gU = go[0], gS = go[1], gVh = go[2];
  if (c.bool_attr(0)) {  // full matrices: only the first k vectors enter A
    U = narrow(U, -1, 0, k);
    gU = narrow(gU, -1, 0, k);
    Vh = narrow(Vh, -2, 0, k);
    gVh = narrow(gVh, -2, 0, k);
  }
  Tensor J = matmul(mT(U), gU);
  Tensor K = matmul(Vh, mT(gVh));  // V^T gV
  Tensor F = inverse_gaps(S * S);
  Tensor row_s = unsqueeze(S, -2), col_s = unsqueeze(S, -1);
  Tensor inner = (J - mT(J)) * F * row_s + col_s * ((K - mT(K)) * F) + diag_embed(gS);
  Tensor gA = matmul(matmul(U, inner), Vh);
  if (m > k) gA = gA + matmul((gU - matmul(U, J)) / row_s, Vh);
  if (n > k) gA = gA + matmul(U, (gVh - matmul(mT(K), Vh)) / col_s);
  return {gA};
}

}  // namespace

void register_linalg_derivatives() {
  register_derivative("linalg_solve_ex", d_solve);
  register_derivative("linalg_lu_solve", d_lu_solve);
  register_derivative("linalg_solve_triangular", d_solve_triangular);
  register_derivative("linalg_cholesky_ex", d_cholesky);
  register_derivative("linalg_det", d_det);
  register_derivative("linalg_slogdet", d_slogdet);
  register_derivative("linalg_qr", d_qr);
  register_derivative("linalg_eigh", d_eigh);
  register_derivative("linalg_svd", d_svd);
}

}  // namespace kiln::autograd
