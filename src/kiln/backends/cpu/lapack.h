#pragma once
// The LAPACK and BLAS routines the factorisation kernels call (OpenBLAS's Fortran symbols,
// decision 0076), as one overload set per precision so kernels are templates. Matrices are
// column-major. Character arguments carry gfortran's hidden length arguments (always 1):
// leaving them out is undefined behaviour that newer gfortran builds do trip over.
#include <complex>
#include <cstddef>

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info, size_t);
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const float* alpha, const float* a, const int* lda,
            float* b, const int* ldb, size_t, size_t, size_t, size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const double* alpha, const double* a, const int* lda,
            double* b, const int* ldb, size_t, size_t, size_t, size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda,
             const float* tau, float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda,
             const double* tau, double* work, const int* lwork, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda,
             float* w, float* work, const int* lwork, int* iwork, const int* liwork, int* info,
             size_t, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
             double* w, double* work, const int* lwork, int* iwork, const int* liwork, int* info,
             size_t, size_t);
// Fortran COMPLEX / COMPLEX*16 have std::complex's layout.
void cgetrf_(const int* m, const int* n, std::complex<float>* a, const int* lda, int* ipiv,
             int* info);
void zgetrf_(const int* m, const int* n, std::complex<double>* a, const int* lda, int* ipiv,
             int* info);
void cgetrs_(const char* trans, const int* n, const int* nrhs, const std::complex<float>* a,
             const int* lda, const int* ipiv, std::complex<float>* b, const int* ldb, int* info,
             size_t);
void zgetrs_(const char* trans, const int* n, const int* nrhs, const std::complex<double>* a,
             const int* lda, const int* ipiv, std::complex<double>* b, const int* ldb, int* info,
             size_t);
void cpotrf_(const char* uplo, const int* n, std::complex<float>* a, const int* lda, int* info,
             size_t);
void zpotrf_(const char* uplo, const int* n, std::complex<double>* a, const int* lda, int* info,
             size_t);
void cheevd_(const char* jobz, const char* uplo, const int* n, std::complex<float>* a,
             const int* lda, float* w, std::complex<float>* work, const int* lwork, float* rwork,
             const int* lrwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void zheevd_(const char* jobz, const char* uplo, const int* n, std::complex<double>* a,
             const int* lda, double* w, std::complex<double>* work, const int* lwork,
             double* rwork, const int* lrwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void ctrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const std::complex<float>* alpha,
            const std::complex<float>* a, const int* lda, std::complex<float>* b, const int* ldb,
            size_t, size_t, size_t, size_t);
void ztrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const std::complex<double>* alpha,
            const std::complex<double>* a, const int* lda, std::complex<double>* b,
            const int* ldb, size_t, size_t, size_t, size_t);
void cgeqrf_(const int* m, const int* n, std::complex<float>* a, const int* lda,
             std::complex<float>* tau, std::complex<float>* work, const int* lwork, int* info);
void zgeqrf_(const int* m, const int* n, std::complex<double>* a, const int* lda,
             std::complex<double>* tau, std::complex<double>* work, const int* lwork, int* info);
void cungqr_(const int* m, const int* n, const int* k, std::complex<float>* a, const int* lda,
             const std::complex<float>* tau, std::complex<float>* work, const int* lwork,
             int* info);
void zungqr_(const int* m, const int* n, const int* k, std::complex<double>* a, const int* lda,
             const std::complex<double>* tau, std::complex<double>* work, const int* lwork,
             int* info);
void cgesdd_(const char* jobz, const int* m, const int* n, std::complex<float>* a,
             const int* lda, float* s, std::complex<float>* u, const int* ldu,
             std::complex<float>* vt, const int* ldvt, std::complex<float>* work,
             const int* lwork, float* rwork, int* iwork, int* info, size_t);
void zgesdd_(const char* jobz, const int* m, const int* n, std::complex<double>* a,
             const int* lda, double* s, std::complex<double>* u, const int* ldu,
             std::complex<double>* vt, const int* ldvt, std::complex<double>* work,
             const int* lwork, double* rwork, int* iwork, int* info, size_t);
void sgeev_(const char* jobvl, const char* jobvr, const int* n, float* a, const int* lda,
            float* wr, float* wi, float* vl, const int* ldvl, float* vr, const int* ldvr,
            float* work, const int* lwork, int* info, size_t, size_t);
void dgeev_(const char* jobvl, const char* jobvr, const int* n, double* a, const int* lda,
            double* wr, double* wi, double* vl, const int* ldvl, double* vr, const int* ldvr,
            double* work, const int* lwork, int* info, size_t, size_t);
void cgeev_(const char* jobvl, const char* jobvr, const int* n, std::complex<float>* a,
            const int* lda, std::complex<float>* w, std::complex<float>* vl, const int* ldvl,
            std::complex<float>* vr, const int* ldvr, std::complex<float>* work,
            const int* lwork, float* rwork, int* info, size_t, size_t);
void zgeev_(const char* jobvl, const char* jobvr, const int* n, std::complex<double>* a,
            const int* lda, std::complex<double>* w, std::complex<double>* vl, const int* ldvl,
            std::complex<double>* vr, const int* ldvr, std::complex<double>* work,
            const int* lwork, double* rwork, int* info, size_t, size_t);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work,
             const int* lwork, int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work,
             const int* lwork, int* iwork, int* info, size_t);
}

namespace kiln::cpu::lapack {

inline void potrf(char uplo, int n, float* a, int lda, int* info) {
  spotrf_(&uplo, &n, a, &lda, info, 1);
}
inline void potrf(char uplo, int n, double* a, int lda, int* info) {
  dpotrf_(&uplo, &n, a, &lda, info, 1);
}
inline void getrf(int m, int n, float* a, int lda, int* ipiv, int* info) {
  sgetrf_(&m, &n, a, &lda, ipiv, info);
}
inline void getrf(int m, int n, double* a, int lda, int* ipiv, int* info) {
  dgetrf_(&m, &n, a, &lda, ipiv, info);
}
inline void getrs(char trans, int n, int nrhs, const float* a, int lda, const int* ipiv,
                  float* b, int ldb, int* info) {
  sgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
inline void getrs(char trans, int n, int nrhs, const double* a, int lda, const int* ipiv,
                  double* b, int ldb, int* info) {
  dgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
inline void trsm(char side, char uplo, char transa, char diag, int m, int n, float alpha,
                 const float* a, int lda, float* b, int ldb) {
  strsm_(&side, &uplo, &transa, &diag, &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha,
                 const double* a, int lda, double* b, int ldb) {
  dtrsm_(&side, &uplo, &transa, &diag, &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void geqrf(int m, int n, float* a, int lda, float* tau, float* work, int lwork,
                  int* info) {
  sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
inline void geqrf(int m, int n, double* a, int lda, double* tau, double* work, int lwork,
                  int* info) {
  dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
inline void orgqr(int m, int n, int k, float* a, int lda, const float* tau, float* work,
                  int lwork, int* info) {
  sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void orgqr(int m, int n, int k, double* a, int lda, const double* tau, double* work,
                  int lwork, int* info) {
  dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void syevd(char jobz, char uplo, int n, float* a, int lda, float* w, float* work,
                  int lwork, int* iwork, int liwork, int* info) {
  ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
inline void syevd(char jobz, char uplo, int n, double* a, int lda, double* w, double* work,
                  int lwork, int* iwork, int liwork, int* info) {
  dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
inline void gesdd(char jobz, int m, int n, float* a, int lda, float* s, float* u, int ldu,
                  float* vt, int ldvt, float* work, int lwork, int* iwork, int* info) {
  sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}
inline void gesdd(char jobz, int m, int n, double* a, int lda, double* s, double* u, int ldu,
                  double* vt, int ldvt, double* work, int lwork, int* iwork, int* info) {
  dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}

inline void getrf(int m, int n, std::complex<float>* a, int lda, int* ipiv, int* info) {
  cgetrf_(&m, &n, a, &lda, ipiv, info);
}
inline void getrf(int m, int n, std::complex<double>* a, int lda, int* ipiv, int* info) {
  zgetrf_(&m, &n, a, &lda, ipiv, info);
}
// trans 'T' is the plain transpose (the row-major trick), 'C' the conjugate one.
inline void getrs(char trans, int n, int nrhs, const std::complex<float>* a, int lda,
                  const int* ipiv, std::complex<float>* b, int ldb, int* info) {
  cgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}
inline void getrs(char trans, int n, int nrhs, const std::complex<double>* a, int lda,
                  const int* ipiv, std::complex<double>* b, int ldb, int* info) {
  zgetrs_(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);
}

// Right eigenvectors only (jobvl 'N'); vr may be null when jobvr is 'N'.
inline void geev(char jobvr, int n, float* a, int lda, float* wr, float* wi, float* vr, int ldvr,
                 float* work, int lwork, int* info) {
  const char jobvl = 'N';
  const int one = 1;
  sgeev_(&jobvl, &jobvr, &n, a, &lda, wr, wi, nullptr, &one, vr, &ldvr, work, &lwork, info, 1, 1);
}
inline void geev(char jobvr, int n, double* a, int lda, double* wr, double* wi, double* vr,
                 int ldvr, double* work, int lwork, int* info) {
  const char jobvl = 'N';
  const int one = 1;
  dgeev_(&jobvl, &jobvr, &n, a, &lda, wr, wi, nullptr, &one, vr, &ldvr, work, &lwork, info, 1, 1);
}

inline void potrf(char uplo, int n, std::complex<float>* a, int lda, int* info) {
  cpotrf_(&uplo, &n, a, &lda, info, 1);
}
inline void potrf(char uplo, int n, std::complex<double>* a, int lda, int* info) {
  zpotrf_(&uplo, &n, a, &lda, info, 1);
}
inline void trsm(char side, char uplo, char transa, char diag, int m, int n,
                 std::complex<float> alpha, const std::complex<float>* a, int lda,
                 std::complex<float>* b, int ldb) {
  ctrsm_(&side, &uplo, &transa, &diag, &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void trsm(char side, char uplo, char transa, char diag, int m, int n,
                 std::complex<double> alpha, const std::complex<double>* a, int lda,
                 std::complex<double>* b, int ldb) {
  ztrsm_(&side, &uplo, &transa, &diag, &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}
inline void geqrf(int m, int n, std::complex<float>* a, int lda, std::complex<float>* tau,
                  std::complex<float>* work, int lwork, int* info) {
  cgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
inline void geqrf(int m, int n, std::complex<double>* a, int lda, std::complex<double>* tau,
                  std::complex<double>* work, int lwork, int* info) {
  zgeqrf_(&m, &n, a, &lda, tau, work, &lwork, info);
}
// The unitary Q of geqrf's reflectors (LAPACK's ungqr, orgqr's complex form).
inline void orgqr(int m, int n, int k, std::complex<float>* a, int lda,
                  const std::complex<float>* tau, std::complex<float>* work, int lwork,
                  int* info) {
  cungqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void orgqr(int m, int n, int k, std::complex<double>* a, int lda,
                  const std::complex<double>* tau, std::complex<double>* work, int lwork,
                  int* info) {
  zungqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
inline void gesdd(char jobz, int m, int n, std::complex<float>* a, int lda, float* s,
                  std::complex<float>* u, int ldu, std::complex<float>* vt, int ldvt,
                  std::complex<float>* work, int lwork, float* rwork, int* iwork, int* info) {
  cgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, info, 1);
}
inline void gesdd(char jobz, int m, int n, std::complex<double>* a, int lda, double* s,
                  std::complex<double>* u, int ldu, std::complex<double>* vt, int ldvt,
                  std::complex<double>* work, int lwork, double* rwork, int* iwork, int* info) {
  zgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, info, 1);
}
// The Hermitian eigendecomposition (real eigenvalues); lwork / lrwork / liwork -1 queries.
inline void heevd(char jobz, char uplo, int n, std::complex<float>* a, int lda, float* w,
                  std::complex<float>* work, int lwork, float* rwork, int lrwork, int* iwork,
                  int liwork, int* info) {
  cheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
}
inline void heevd(char jobz, char uplo, int n, std::complex<double>* a, int lda, double* w,
                  std::complex<double>* work, int lwork, double* rwork, int lrwork, int* iwork,
                  int liwork, int* info) {
  zheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, info, 1, 1);
}

// Complex A: eigenvalues w directly complex; rwork holds 2n reals.
inline void geev(char jobvr, int n, std::complex<float>* a, int lda, std::complex<float>* w,
                 std::complex<float>* vr, int ldvr, std::complex<float>* work, int lwork,
                 float* rwork, int* info) {
  const char jobvl = 'N';
  const int one = 1;
  cgeev_(&jobvl, &jobvr, &n, a, &lda, w, nullptr, &one, vr, &ldvr, work, &lwork, rwork, info, 1, 1);
}
inline void geev(char jobvr, int n, std::complex<double>* a, int lda, std::complex<double>* w,
                 std::complex<double>* vr, int ldvr, std::complex<double>* work, int lwork,
                 double* rwork, int* info) {
  const char jobvl = 'N';
  const int one = 1;
  zgeev_(&jobvl, &jobvr, &n, a, &lda, w, nullptr, &one, vr, &ldvr, work, &lwork, rwork, info, 1, 1);
}

}  // namespace kiln::cpu::lapack
