// CPU kernels of Cholesky, LU, the solvers and the determinants (src/kiln/ops/
// linalg_factor_ops.cpp) over OpenBLAS's LAPACK (lapack.h). Operands arrive contiguous with
// equal batches. Where the row-major buffer read column-major (the transpose) serves, the
// kernels hand it to LAPACK as it is: det(A^T) = det(A); A's lower triangle is the upper
// one of A^T; X A = B is A^T X^T = B^T.
#include <cmath>
#include <complex>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/dispatch/registry.h"
#include "lapack.h"
#include "linalg_kernel_util.h"

namespace kiln::cpu {

namespace {

int64_t matrices(const Tensor& t) {
  const int64_t per = t.size(-1) * t.size(-2);
  return per == 0 ? numel_of(Shape(t.shape().begin(), t.shape().end() - 2)) : t.numel() / per;
}

template <typename T>
void cholesky_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const bool upper = call.bool_attr(0);
  const int64_t n = A.size(-1);
  const T* a = static_cast<const T*>(A.raw_data());
  T* out = static_cast<T*>(call.outs[0].raw_data());
  int32_t* info = static_cast<int32_t*>(call.outs[1].raw_data());
  for_each_matrix(matrices(A), [&](int64_t b) {
    // The buffer read column-major is A^T. Lower: its upper triangle (A's lower one) factored
    // as U'^T U' leaves L = U'^T in the buffer's lower triangle, read row-major. Upper: its
    // lower triangle (A's upper one) factored as L' L'^T leaves U = L'^T in the upper one.
    std::vector<T> buf(a + b * n * n, a + (b + 1) * n * n);
    int code = 0;
    if (n > 0) lapack::potrf(upper ? 'L' : 'U', int(n), buf.data(), lapack_ld(n), &code);
    info[b] = code;
    T* out_b = out + b * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        out_b[i * n + j] = (upper ? j >= i : i >= j) ? buf[size_t(i * n + j)] : T(0);
  });
}

template <typename T>
void lu_factor_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const T* a = static_cast<const T*>(A.raw_data());
  T* lu = static_cast<T*>(call.outs[0].raw_data());
  int32_t* piv = static_cast<int32_t*>(call.outs[1].raw_data());
  int32_t* info = static_cast<int32_t*>(call.outs[2].raw_data());
  for_each_matrix(matrices(A), [&](int64_t b) {
    std::vector<T> buf(size_t(m * n));
    to_col_major(a + b * m * n, buf.data(), m, n);
    std::vector<int> ipiv(size_t(std::max<int64_t>(k, 1)));
    int code = 0;
    if (k > 0) lapack::getrf(int(m), int(n), buf.data(), lapack_ld(m), ipiv.data(), &code);
    info[b] = code;
    from_col_major(buf.data(), m, lu + b * m * n, m, n);
    for (int64_t i = 0; i < k; ++i) piv[b * k + i] = ipiv[size_t(i)];
  });
}

// X = op(A)^-1 B from getrf's factors; B [n, nrhs] row-major.
template <typename T>
void lu_solve_kernel(OpCall& call) {
  const Tensor &LU = call.inputs[0], &P = call.inputs[1], &B = call.inputs[2];
  const char trans = call.bool_attr(0) ? 'T' : 'N';
  const int64_t n = LU.size(-1), r = B.size(-1);
  const T* lu = static_cast<const T*>(LU.raw_data());
  const int32_t* piv = static_cast<const int32_t*>(P.raw_data());
  const T* bsrc = static_cast<const T*>(B.raw_data());
  T* x = static_cast<T*>(call.outs[0].raw_data());
  for_each_matrix(matrices(LU), [&](int64_t b) {
    std::vector<T> f(size_t(n * n)), rhs(size_t(n * r));
    to_col_major(lu + b * n * n, f.data(), n, n);
    to_col_major(bsrc + b * n * r, rhs.data(), n, r);
    std::vector<int> ipiv(piv + b * n, piv + (b + 1) * n);
    int code = 0;
    if (n > 0 && r > 0)
      lapack::getrs(trans, int(n), int(r), f.data(), lapack_ld(n), ipiv.data(), rhs.data(),
                    lapack_ld(n), &code);
    from_col_major(rhs.data(), n, x + b * n * r, n, r);
  });
}

// A X = B: A's buffer is column-major A^T, so factor that (getrf) and solve with its
// transpose (getrs 'T'), without transposing A; info > 0 marks a zero pivot (singular A).
template <typename T>
void solve_kernel(OpCall& call) {
  const Tensor &A = call.inputs[0], &B = call.inputs[1];
  const int64_t n = A.size(-1), r = B.size(-1);
  const T* a = static_cast<const T*>(A.raw_data());
  const T* bsrc = static_cast<const T*>(B.raw_data());
  T* x = static_cast<T*>(call.outs[0].raw_data());
  int32_t* info = static_cast<int32_t*>(call.outs[1].raw_data());
  for_each_matrix(matrices(A), [&](int64_t b) {
    std::vector<T> f(a + b * n * n, a + (b + 1) * n * n), rhs(size_t(n * r));
    to_col_major(bsrc + b * n * r, rhs.data(), n, r);
    std::vector<int> ipiv(size_t(std::max<int64_t>(n, 1)));
    int code = 0;
    if (n > 0) lapack::getrf(int(n), int(n), f.data(), lapack_ld(n), ipiv.data(), &code);
    if (code == 0 && n > 0 && r > 0)
      lapack::getrs('T', int(n), int(r), f.data(), lapack_ld(n), ipiv.data(), rhs.data(),
                    lapack_ld(n), &code);
    info[b] = code;
    from_col_major(rhs.data(), n, x + b * n * r, n, r);
  });
}

// Row-major X [rows, cols] is column-major X^T, and A's buffer is column-major A^T (whose
// upper triangle is A's lower one). Left: A X = B is X^T A^T = B^T, a right-side solve;
// right: X A = B is A^T X^T = B^T, a left-side one. No copy but B into X.
template <typename T>
void solve_triangular_kernel(OpCall& call) {
  const Tensor &A = call.inputs[0], &B = call.inputs[1];
  const bool upper = call.bool_attr(0), left = call.bool_attr(1), unit = call.bool_attr(2);
  const int64_t n = A.size(-1), rows = B.size(-2), cols = B.size(-1);
  const T* a = static_cast<const T*>(A.raw_data());
  const T* bsrc = static_cast<const T*>(B.raw_data());
  T* x = static_cast<T*>(call.outs[0].raw_data());
  const char uplo_of_transpose = upper ? 'L' : 'U';
  const char diag = unit ? 'U' : 'N';
  for_each_matrix(matrices(A), [&](int64_t b) {
    T* xb = x + b * rows * cols;
    std::copy(bsrc + b * rows * cols, bsrc + (b + 1) * rows * cols, xb);
    if (rows == 0 || cols == 0) return;
    // X^T is column-major cols x rows with leading dimension cols.
    lapack::trsm(left ? 'R' : 'L', uplo_of_transpose, 'N', diag, int(cols), int(rows), T(1),
                 a + b * n * n, lapack_ld(n), xb, lapack_ld(cols));
  });
}

// sign and log |det| (log_abs), or det itself, from the LU factors of A^T.
template <typename T, bool kLog>
void det_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const int64_t n = A.size(-1);
  const T* a = static_cast<const T*>(A.raw_data());
  T* out0 = static_cast<T*>(call.outs[0].raw_data());
  T* out1 = kLog ? static_cast<T*>(call.outs[1].raw_data()) : nullptr;
  for_each_matrix(matrices(A), [&](int64_t b) {
    std::vector<T> f(a + b * n * n, a + (b + 1) * n * n);
    std::vector<int> ipiv(size_t(std::max<int64_t>(n, 1)));
    int code = 0;
    if (n > 0) lapack::getrf(int(n), int(n), f.data(), lapack_ld(n), ipiv.data(), &code);
    // det = parity * prod(u_ii); slogdet from the same factors, the signs and logs taken one
    // diagonal entry at a time so neither overflows.
    if constexpr (is_complex_v<T>) {  // det only (slogdet is registered for real dtypes)
      std::complex<double> product = 1;
      for (int64_t i = 0; i < n; ++i) {
        const T u = f[size_t(i * n + i)];
        product *= std::complex<double>(u.real(), u.imag());
        if (ipiv[size_t(i)] != i + 1) product = -product;
      }
      out0[b] = T(typename T::value_type(product.real()), typename T::value_type(product.imag()));
      return;
    } else {
    double parity = 1, product = 1, sign = 1, log_abs = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double u = double(f[size_t(i * n + i)]);
      if (ipiv[size_t(i)] != i + 1) parity = -parity;
      product *= u;
      sign *= u > 0 ? 1.0 : (u < 0 ? -1.0 : (u == 0 ? 0.0 : NAN));
      log_abs += std::log(std::fabs(u));
    }
    if (kLog) {
      out0[b] = T(parity * sign);
      out1[b] = T(sign == 0 ? -INFINITY : log_abs);
    } else {
      out0[b] = T(parity * product);
    }
    }
  });
}

}  // namespace

void register_linalg_factor_kernels() {
  const auto floats = dtype_bit(DType::F32) | dtype_bit(DType::F64);
  register_kernel("linalg_cholesky_ex", DeviceType::CPU,
                  by_dtype<cholesky_kernel<float>, cholesky_kernel<double>>, floats);
  register_kernel("linalg_lu_factor_ex", DeviceType::CPU,
                  by_dtype<lu_factor_kernel<float>, lu_factor_kernel<double>>, floats);
  register_kernel("linalg_lu_solve", DeviceType::CPU,
                  by_dtype<lu_solve_kernel<float>, lu_solve_kernel<double>>, floats);
  register_kernel("linalg_solve_ex", DeviceType::CPU,
                  by_dtype<solve_kernel<float>, solve_kernel<double>>, floats);
  register_kernel("linalg_solve_triangular", DeviceType::CPU,
                  by_dtype<solve_triangular_kernel<float>, solve_triangular_kernel<double>>,
                  floats);
  register_kernel("linalg_det", DeviceType::CPU,
                  by_dtype<det_kernel<float, false>, det_kernel<double, false>>, floats);
  // Complex Cholesky, LU, solve, triangular solve and det (LAPACK's c / z routines).
  using C64 = std::complex<float>;
  using C128 = std::complex<double>;
  // Cholesky: the buffer read column-major is A^T = conj(A) for a Hermitian A, and the real
  // kernel's reading of its factor gives L with L L^H = A unchanged (conj(U'^H U') = U'^T conj U').
  register_kernel("linalg_cholesky_ex", DeviceType::CPU,
                  by_complex_dtype<cholesky_kernel<C64>, cholesky_kernel<C128>>, kComplexDTypes);
  register_kernel("linalg_lu_factor_ex", DeviceType::CPU,
                  by_complex_dtype<lu_factor_kernel<C64>, lu_factor_kernel<C128>>, kComplexDTypes);
  register_kernel("linalg_lu_solve", DeviceType::CPU,
                  by_complex_dtype<lu_solve_kernel<C64>, lu_solve_kernel<C128>>, kComplexDTypes);
  register_kernel("linalg_solve_ex", DeviceType::CPU,
                  by_complex_dtype<solve_kernel<C64>, solve_kernel<C128>>, kComplexDTypes);
  register_kernel("linalg_det", DeviceType::CPU,
                  by_complex_dtype<det_kernel<C64, false>, det_kernel<C128, false>>,
                  kComplexDTypes);
  // Triangular solves: the transposes of the real kernel's trick are plain ones either way.
  register_kernel("linalg_solve_triangular", DeviceType::CPU,
                  by_complex_dtype<solve_triangular_kernel<C64>, solve_triangular_kernel<C128>>,
                  kComplexDTypes);
  register_kernel("linalg_slogdet", DeviceType::CPU,
                  by_dtype<det_kernel<float, true>, det_kernel<double, true>>, floats);
}

}  // namespace kiln::cpu
