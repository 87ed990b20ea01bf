// Derivatives of the factorisations (ops/linalg_factor_ops.cpp, linalg_spectral_ops.cpp),
// written with ops so that double backward works. Notation: X^T = mT(X), E_ij = l_j - l_i.
//   solve        X = A^-1 B:   gB = A^-T gX, gA = -gB X^T
//   triangular   the same (or X = B A^-1), gA restricted to A's triangle
//   cholesky     A = L L^T:    gA = sym(L^-T phi(L^T gL) L^-1), phi = lower with half diagonal
//   det, slogdet               gA = g det A^-T, g_logabsdet A^-T
//   qr (m >= n)  A = Q R:      M = gR R^T - Q^T gQ, gA = (gQ + Q copyu(M)) R^-T
//   eigh         A = Q L Q^T:  gA = Q (diag(gL) + skew(Q^T gQ) / 2E) Q^T
//   svd                        Townsend's formula (see d_svd)
//   lu_factor    A = P L U:    gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T (square;
//                              the tall and wide cases reduce to it, see d_lu_factor)
// Batch dims were broadcast before the ops ran, so gradients have the inputs' shapes.
#include <algorithm>

#include "kiln/autograd/node.h"
#include "kiln/ops/complex.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_decompositions.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

// The adjoint: the transpose of a real matrix, the conjugate transpose of a complex one, which
// is what every formula here needs for complex operands (torch's conjugate-Wirtinger
// gradients: solve's gB = A^-H gX, gA = -gB X^H, and so on).
Tensor mT(const Tensor& t) { return conj_if_complex(transpose(t, -2, -1)); }

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

Tensor row_permutation(const Tensor& pivots, int64_t m, Device device, bool inverse);

// linalg_lu_solve(LU, pivots, B, adjoint): op(A) X = B with A = P L U, op(A) = A or A^T.
// gB = op(A)^-T gX; gA = -gB X^T (or its transpose for A^T); then LU's gradient from A's:
// dA = P (dL U + L dU) gives gL = tril(P^T gA U^T, -1), gU = triu(L^T P^T gA).
Grads d_lu_solve(const GradContext& ctx, const Grads& go) {
  const bool adjoint = ctx.as_call().bool_attr(0);
  const Tensor LU = ctx.input(0);
  Tensor gB = linalg_lu_solve(LU, ctx.input(1), go[0], true, !adjoint);
  Grads r(3);
  if (ctx.needs(0)) {
    Tensor X = ctx.output(0), gBm = gB;
    if (X.dim() == LU.dim() - 1) {  // a vector right-hand side
      X = unsqueeze(X, -1);
      gBm = unsqueeze(gB, -1);
    }
    const Tensor gA = adjoint ? -matmul(X, mT(gBm)) : -matmul(gBm, mT(X));
    const int64_t n = LU.size(-1);
    const Tensor L = tril(LU, -1) + eye(n, std::nullopt, TensorOptions(LU.dtype(), LU.device()));
    const Tensor U = triu(LU);
    const Tensor perm = row_permutation(ctx.input(1), n, LU.device(), /*inverse=*/false);
    const Tensor PtgA = gather(gA, -2, expand(unsqueeze(perm, -1), gA.shape()));
    r[0] = tril(matmul(PtgA, mT(U)), -1) + triu(matmul(mT(L), PtgA));
  }
  if (ctx.needs(2)) r[2] = gB;
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

// For each batch, lu_factor's 1-based pivots applied in order give perm: row j of P^T A is
// row perm[j] of A (gather(A, rows, perm) = P^T A); inverse: where row i of A went in P^T A
// (gather(G, rows, that) = P G).
Tensor row_permutation(const Tensor& pivots, int64_t m, Device device, bool inverse) {
  const Tensor p = pivots.to(DType::I64).cpu().contiguous();
  const int64_t k = p.size(-1);
  int64_t batch = 1;
  for (int64_t d = 0; d + 1 < p.dim(); ++d) batch *= p.size(d);
  const std::vector<int64_t> pv = p.to_vector<int64_t>();
  std::vector<int64_t> where(static_cast<size_t>(batch * m));
  std::vector<int64_t> perm(static_cast<size_t>(m));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < m; ++j) perm[size_t(j)] = j;
    for (int64_t i = 0; i < k; ++i) std::swap(perm[size_t(i)], perm[size_t(pv[size_t(b * k + i)] - 1)]);
    for (int64_t j = 0; j < m; ++j) {
      if (inverse) where[size_t(b * m + perm[size_t(j)])] = j;
      else where[size_t(b * m + j)] = perm[size_t(j)];
    }
  }
  Shape s = p.shape();
  s.back() = m;
  return tensor_from(where, s, TensorOptions(DType::I64, device));
}

// The square case, P aside: G = L^-T phi U^-T, phi = tril(L^T gL, -1) + triu(gU U^T).
Tensor lu_backward_square(const Tensor& L, const Tensor& U, const Tensor& gL, const Tensor& gU) {
  Tensor phi = tril(matmul(mT(L), gL), -1) + triu(matmul(gU, mT(U)));
  Tensor X = linalg_solve_triangular(mT(L), phi, /*upper=*/true, /*left=*/true);
  return linalg_solve_triangular(mT(U), X, /*upper=*/false, /*left=*/false);
}

// linalg_lu_factor_ex(A) -> (LU packed, pivots, info). With k = min(m, n), L [m, k] (unit
// diagonal) and U [k, n]. Tall (m > n): L = [L1; L2]; A2 = L2 U gives gA2 = gL2 U^-T, and U's
// gradient gains -L2^T gA2 before the square formula on (L1, U). Wide (m < n): U = [U1 U2];
// A2 = L U2 gives gA2 = L^-T gU2, and L's gradient gains -gA2 U2^T before the square formula on
// (L, U1). Then the rows go back through P.
Grads d_lu_factor(const GradContext& ctx, const Grads& go) {
  const Tensor LU = ctx.output(0);
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  const TensorOptions opts(LU.dtype(), LU.device());
  const Tensor L = tril(narrow(LU, -1, 0, k), -1) + eye(m, k, opts);
  const Tensor U = triu(narrow(LU, -2, 0, k));
  const Tensor gL = tril(narrow(go[0], -1, 0, k), -1);
  const Tensor gU = triu(narrow(go[0], -2, 0, k));
  Tensor G;
  if (m == n) {
    G = lu_backward_square(L, U, gL, gU);
  } else if (m > n) {
    const Tensor L1 = narrow(L, -2, 0, n), L2 = narrow(L, -2, n, m - n);
    const Tensor gA2 = linalg_solve_triangular(mT(U), narrow(gL, -2, n, m - n), /*upper=*/false,
                                               /*left=*/false);
    const Tensor gA1 = lu_backward_square(L1, U, narrow(gL, -2, 0, n), gU - matmul(mT(L2), gA2));
    G = cat({gA1, gA2}, -2);
  } else {
    const Tensor U1 = narrow(U, -1, 0, m), U2 = narrow(U, -1, m, n - m);
    const Tensor gA2 = linalg_solve_triangular(mT(L), narrow(gU, -1, m, n - m), /*upper=*/true,
                                               /*left=*/true);
    const Tensor gA1 = lu_backward_square(L, U1, gL - matmul(gA2, mT(U2)), narrow(gU, -1, 0, m));
    G = cat({gA1, gA2}, -1);
  }
  const Tensor rows = row_permutation(ctx.output(1), m, G.device(), /*inverse=*/true);
  Grads r(1);
  r[0] = gather(G, -2, expand(unsqueeze(rows, -1), G.shape()));
  return r;
}

Grads d_det(const GradContext& ctx, const Grads& go) {
  // g * conj(det A^-T) = g conj(det) A^-H (conj: no-op for real A).
  Tensor scale = unsqueeze(unsqueeze(go[0] * conj_if_complex(ctx.output(0)), -1), -1);
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
  register_derivative("linalg_lu_factor_ex", d_lu_factor);
  register_derivative("linalg_solve_triangular", d_solve_triangular);
  register_derivative("linalg_cholesky_ex", d_cholesky);
  register_derivative("linalg_det", d_det);
  register_derivative("linalg_slogdet", d_slogdet);
  register_derivative("linalg_qr", d_qr);
  register_derivative("linalg_eigh", d_eigh);
  register_derivative("linalg_svd", d_svd);
}

}  // namespace kiln::autograd
