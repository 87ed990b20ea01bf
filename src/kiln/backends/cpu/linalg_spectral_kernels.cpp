// CPU kernels of QR, the symmetric and general eigendecompositions and the SVD (src/kiln/ops/
// linalg_spectral_ops.cpp) over OpenBLAS's LAPACK (lapack.h): geqrf + orgqr, syevd, geev, gesdd
// (the drivers PyTorch's CPU build uses). Operands arrive contiguous.
#include <algorithm>
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
  Shape batch(t.shape().begin(), t.shape().end() - 2);
  return numel_of(batch);
}

template <typename T>
bool all_finite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// T's real type: T itself, or the part type of a complex T.
template <typename T> struct RealOf { using type = T; };
template <typename T> struct RealOf<std::complex<T>> { using type = T; };
template <typename T> using real_of_t = typename RealOf<T>::type;

// A workspace query's answer as a length (complex routines answer in the real part).
template <typename T>
size_t work_size(T query) {
  if constexpr (is_complex_v<T>) return size_t(std::max<double>(query.real(), 1));
  else return size_t(std::max<double>(query, 1));
}

template <typename T>
bool all_finite_values(const T* p, int64_t n) {
  if constexpr (is_complex_v<T>) {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) return false;
    return true;
  } else {
    return all_finite(p, n);
  }
}

// Info code for an input holding NaN or infinity, which LAPACK's iterations may not survive
// (ops/linalg_spectral_ops.cpp turns it into torch's message).
constexpr int32_t kNonFiniteInput = -1;

template <typename T>
void qr_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const int64_t mode = call.int_attr(0);  // 0 reduced, 1 complete, 2 r
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t q_cols = mode == 1 ? m : k, r_rows = mode == 1 ? m : k;
  const T* a = static_cast<const T*>(A.raw_data());
  T* q_out = static_cast<T*>(call.outs[0].raw_data());
  T* r_out = static_cast<T*>(call.outs[1].raw_data());
  for_each_matrix(matrices(A), [&](int64_t b) {
    // Column-major m x max(n, q_cols): the complete Q of a tall A needs m columns.
    const int64_t width = std::max(n, q_cols);
    std::vector<T> buf(size_t(std::max<int64_t>(m * width, 1)));
    to_col_major(a + b * m * n, buf.data(), m, n);
    std::vector<T> tau(size_t(std::max<int64_t>(k, 1)));
    int info = 0;
    if (k > 0) {
      T query = 0;
      lapack::geqrf(int(m), int(n), buf.data(), lapack_ld(m), tau.data(), &query, -1, &info);
      std::vector<T> work(work_size(query));
      lapack::geqrf(int(m), int(n), buf.data(), lapack_ld(m), tau.data(), work.data(),
                    int(work.size()), &info);
    }
    T* R = r_out + b * r_rows * n;
    for (int64_t i = 0; i < r_rows; ++i)
      for (int64_t j = 0; j < n; ++j) R[i * n + j] = i <= j ? buf[size_t(j * m + i)] : T(0);
    if (mode == 2 || m == 0) return;
    T* Q = q_out + b * m * q_cols;
    if (k == 0) {  // no reflectors: Q is the identity's first columns
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < q_cols; ++j) Q[i * q_cols + j] = i == j ? T(1) : T(0);
      return;
    }
    T query = 0;
    lapack::orgqr(int(m), int(q_cols), int(k), buf.data(), lapack_ld(m), tau.data(), &query, -1,
                  &info);
    std::vector<T> work(work_size(query));
    lapack::orgqr(int(m), int(q_cols), int(k), buf.data(), lapack_ld(m), tau.data(),
                  work.data(), int(work.size()), &info);
    from_col_major(buf.data(), m, Q, m, q_cols);
  });
}

// A's buffer read column-major is A^T, whose upper triangle is A's lower one: uplo flips.
// The eigenvectors come back as columns of a column-major matrix and are transposed out. For
// a Hermitian complex A the buffer is A^T = conj(A): the same eigenvalues (real), conjugated
// eigenvectors, which are conjugated back on the way out. T real or complex.
template <typename T>
void eigh_kernel(OpCall& call) {
  using R = real_of_t<T>;
  const Tensor& A = call.inputs[0];
  const bool upper = call.bool_attr(0), vectors = call.bool_attr(1);
  const int64_t n = A.size(-1);
  const T* a = static_cast<const T*>(A.raw_data());
  R* w_out = static_cast<R*>(call.outs[0].raw_data());
  T* q_out = vectors ? static_cast<T*>(call.outs[1].raw_data()) : nullptr;
  int32_t* info = static_cast<int32_t*>(call.outs[2].raw_data());
  const char jobz = vectors ? 'V' : 'N', uplo = upper ? 'L' : 'U';
  for_each_matrix(matrices(A), [&](int64_t b) {
    std::vector<T> buf(a + b * n * n, a + (b + 1) * n * n);
    R* w = w_out + b * n;
    info[b] = 0;
    if (n == 0) return;
    if (!all_finite_values(buf.data(), n * n)) {
      info[b] = kNonFiniteInput;
      std::fill(w, w + n, R(NAN));
      if (vectors) std::fill(q_out + b * n * n, q_out + (b + 1) * n * n, T(R(NAN)));
      return;
    }
    T query = 0;
    int iquery = 0, code = 0;
    if constexpr (is_complex_v<T>) {
      R rquery = 0;
      lapack::heevd(jobz, uplo, int(n), buf.data(), lapack_ld(n), w, &query, -1, &rquery, -1,
                    &iquery, -1, &code);
      std::vector<T> work(work_size(query));
      std::vector<R> rwork(work_size(rquery));
      std::vector<int> iwork(size_t(std::max(iquery, 1)));
      lapack::heevd(jobz, uplo, int(n), buf.data(), lapack_ld(n), w, work.data(),
                    int(work.size()), rwork.data(), int(rwork.size()), iwork.data(),
                    int(iwork.size()), &code);
    } else {
      lapack::syevd(jobz, uplo, int(n), buf.data(), lapack_ld(n), w, &query, -1, &iquery, -1,
                    &code);
      std::vector<T> work(work_size(query));
      std::vector<int> iwork(size_t(std::max(iquery, 1)));
      lapack::syevd(jobz, uplo, int(n), buf.data(), lapack_ld(n), w, work.data(),
                    int(work.size()), iwork.data(), int(iwork.size()), &code);
    }
    info[b] = code;
    if (!vectors) return;
    T* Q = q_out + b * n * n;
    from_col_major(buf.data(), n, Q, n, n);
    if constexpr (is_complex_v<T>)
      for (int64_t i = 0; i < n * n; ++i) Q[i] = std::conj(Q[i]);
  });
}

// A's buffer is column-major A^T (n x m). gesdd of A^T = U' S V'^H gives A = conj(V') S U'^T,
// so U = conj(V') and Vh = U'^T; read row-major, gesdd's VT array (column-major V'^H, r x m)
// is exactly U (m x r) and its U array (column-major n x c) exactly Vh (c x n): both are
// written in place, for real and complex A alike (plain transposes only). T real or complex;
// S is real.
template <typename T>
void svd_kernel(OpCall& call) {
  using R = real_of_t<T>;
  const Tensor& A = call.inputs[0];
  const bool full = call.bool_attr(0), uv = call.bool_attr(1);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t u_cols = full ? m : k, vh_rows = full ? n : k;
  const T* a = static_cast<const T*>(A.raw_data());
  T* u_out = uv ? static_cast<T*>(call.outs[0].raw_data()) : nullptr;
  R* s_out = static_cast<R*>(call.outs[1].raw_data());
  T* vh_out = uv ? static_cast<T*>(call.outs[2].raw_data()) : nullptr;
  int32_t* info = static_cast<int32_t*>(call.outs[3].raw_data());
  const char jobz = !uv ? 'N' : (full ? 'A' : 'S');
  for_each_matrix(matrices(A), [&](int64_t b) {
    std::vector<T> buf(a + b * m * n, a + (b + 1) * m * n);
    R* s = s_out + b * k;
    T* U = uv ? u_out + b * m * u_cols : nullptr;
    T* Vh = uv ? vh_out + b * vh_rows * n : nullptr;
    info[b] = 0;
    if (k == 0) {  // an empty matrix: full U and Vh are identities
      for (int64_t i = 0; uv && i < m; ++i)
        for (int64_t j = 0; j < u_cols; ++j) U[i * u_cols + j] = i == j ? T(1) : T(0);
      for (int64_t i = 0; uv && i < vh_rows; ++i)
        for (int64_t j = 0; j < n; ++j) Vh[i * n + j] = i == j ? T(1) : T(0);
      return;
    }
    if (!all_finite_values(buf.data(), m * n)) {
      info[b] = kNonFiniteInput;
      std::fill(s, s + k, R(NAN));
      if (uv) {
        std::fill(U, U + m * u_cols, T(R(NAN)));
        std::fill(Vh, Vh + vh_rows * n, T(R(NAN)));
      }
      return;
    }
    T dummy = 0;
    T* u_arg = uv ? Vh : &dummy;
    T* vt_arg = uv ? U : &dummy;
    const int ldu = lapack_ld(n), ldvt = uv ? lapack_ld(u_cols) : 1;
    std::vector<int> iwork(size_t(8 * k));
    T query = 0;
    int code = 0;
    if constexpr (is_complex_v<T>) {
      // rwork: LAPACK's bound for any jobz.
      const int64_t mx = std::max(m, n);
      std::vector<R> rwork(size_t(std::max(5 * k * k + 7 * k, 2 * mx * k + 2 * k * k + k)));
      lapack::gesdd(jobz, int(n), int(m), buf.data(), lapack_ld(n), s, u_arg, ldu, vt_arg, ldvt,
                    &query, -1, rwork.data(), iwork.data(), &code);
      std::vector<T> work(work_size(query));
      lapack::gesdd(jobz, int(n), int(m), buf.data(), lapack_ld(n), s, u_arg, ldu, vt_arg, ldvt,
                    work.data(), int(work.size()), rwork.data(), iwork.data(), &code);
    } else {
      lapack::gesdd(jobz, int(n), int(m), buf.data(), lapack_ld(n), s, u_arg, ldu, vt_arg, ldvt,
                    &query, -1, iwork.data(), &code);
      std::vector<T> work(work_size(query));
      lapack::gesdd(jobz, int(n), int(m), buf.data(), lapack_ld(n), s, u_arg, ldu, vt_arg, ldvt,
                    work.data(), int(work.size()), iwork.data(), &code);
    }
    info[b] = code;
  });
}

// The general (non-symmetric) eigendecomposition by geev, of a real or complex A (T). A's
// buffer read column-major would be A^T, so A is copied to column-major first. For a real A,
// LAPACK returns eigenvalues as real and imaginary parts and the eigenvectors of a complex pair
// (wi > 0 at j, < 0 at j + 1) packed as the real and imaginary parts of v_j in columns j and
// j + 1 (v_{j+1} = conj v_j), unpacked here; a complex A's come back complex already.
// Eigenvector j is column j of the output, as torch's.
template <typename T>
void eig_kernel(OpCall& call) {
  using R = real_of_t<T>;
  using C = std::complex<R>;
  const Tensor& A = call.inputs[0];
  const bool vectors = call.bool_attr(0);
  const int64_t n = A.size(-1);
  const T* a = static_cast<const T*>(A.raw_data());
  C* w_out = static_cast<C*>(call.outs[0].raw_data());
  C* v_out = vectors ? static_cast<C*>(call.outs[1].raw_data()) : nullptr;
  int32_t* info = static_cast<int32_t*>(call.outs[2].raw_data());
  for_each_matrix(matrices(A), [&](int64_t b) {
    info[b] = 0;
    if (n == 0) return;
    const T* src = a + b * n * n;
    if (!all_finite_values(src, n * n)) {
      info[b] = kNonFiniteInput;
      return;
    }
    const size_t nn = static_cast<size_t>(n * n);
    std::vector<T> buf(nn), vr(vectors ? nn : size_t(1));
    to_col_major(src, buf.data(), n, n);
    const char jobvr = vectors ? 'V' : 'N';
    const int ldvr = vectors ? lapack_ld(n) : 1;
    T query = 0;
    int code = 0;
    C* w = w_out + b * n;
    if constexpr (is_complex_v<T>) {
      std::vector<R> rwork(size_t(2 * n));
      lapack::geev(jobvr, int(n), buf.data(), lapack_ld(n), w, vr.data(), ldvr, &query, -1,
                   rwork.data(), &code);
      std::vector<T> work(work_size(query));
      lapack::geev(jobvr, int(n), buf.data(), lapack_ld(n), w, vr.data(), ldvr, work.data(),
                   int(work.size()), rwork.data(), &code);
      info[b] = code;
      if (vectors) from_col_major(vr.data(), n, v_out + b * n * n, n, n);
    } else {
      std::vector<T> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n));
      lapack::geev(jobvr, int(n), buf.data(), lapack_ld(n), wr.data(), wi.data(), vr.data(),
                   ldvr, &query, -1, &code);
      std::vector<T> work(work_size(query));
      lapack::geev(jobvr, int(n), buf.data(), lapack_ld(n), wr.data(), wi.data(), vr.data(),
                   ldvr, work.data(), int(work.size()), &code);
      info[b] = code;
      for (int64_t j = 0; j < n; ++j) w[j] = C(wr[size_t(j)], wi[size_t(j)]);
      if (!vectors) return;
      C* V = v_out + b * n * n;  // row-major: V[i * n + j] = component i of eigenvector j
      for (int64_t j = 0; j < n; ++j) {
        const T* col = vr.data() + j * n;
        if (wi[size_t(j)] == T(0)) {
          for (int64_t i = 0; i < n; ++i) V[i * n + j] = C(col[i], 0);
        } else if (wi[size_t(j)] > T(0) && j + 1 < n) {
          const T* next = col + n;
          for (int64_t i = 0; i < n; ++i) {
            V[i * n + j] = C(col[i], next[i]);
            V[i * n + j + 1] = C(col[i], -next[i]);
          }
          ++j;
        }
      }
    }
  });
}

// linalg_eig is keyed by its complex outputs: the input's dtype picks the kernel.
void eig_by_input_dtype(OpCall& call) {
  switch (call.inputs[0].dtype()) {
    case DType::F32: return eig_kernel<float>(call);
    case DType::F64: return eig_kernel<double>(call);
    case DType::C64: return eig_kernel<std::complex<float>>(call);
    default: return eig_kernel<std::complex<double>>(call);
  }
}

}  // namespace

void register_linalg_spectral_kernels() {
  const auto floats = dtype_bit(DType::F32) | dtype_bit(DType::F64);
  register_kernel("linalg_qr", DeviceType::CPU, by_dtype<qr_kernel<float>, qr_kernel<double>>,
                  floats);
  register_kernel("linalg_eigh", DeviceType::CPU,
                  by_dtype<eigh_kernel<float>, eigh_kernel<double>>, floats);
  register_kernel("linalg_svd", DeviceType::CPU, by_dtype<svd_kernel<float>, svd_kernel<double>>,
                  floats);
  // Keyed by the complex outputs' dtype (the dispatcher's rule for calls touching complex).
  register_kernel("linalg_eig", DeviceType::CPU, eig_by_input_dtype, floats | kComplexDTypes);
  using C64 = std::complex<float>;
  using C128 = std::complex<double>;
  register_kernel("linalg_eigh", DeviceType::CPU,
                  by_complex_dtype<eigh_kernel<C64>, eigh_kernel<C128>>,
                  kComplexDTypes);
  register_kernel("linalg_qr", DeviceType::CPU, by_complex_dtype<qr_kernel<C64>, qr_kernel<C128>>,
                  kComplexDTypes);
  register_kernel("linalg_svd", DeviceType::CPU,
                  by_complex_dtype<svd_kernel<C64>, svd_kernel<C128>>,
                  kComplexDTypes);
}

}  // namespace kiln::cpu
