// CPU kernels of native_layer_norm_backward / native_rms_norm_backward over contiguous rows
// (the op layer makes the inputs contiguous): per row, with xh = (x - mean) * rstd and
// gw = grad_y * weight, dx = rstd * (gw - mean(gw) - xh * mean(gw * xh)) (rms_norm: no mean
// term), and dweight = the sum over rows of grad_y * xh, dbias = the sum of grad_y. float32 /
// bfloat16 rows take the ISA's vector rows (norm_grad_rows.h: float32 row sums, as PyTorch);
// other dtypes and the baseline level a scalar loop in double. Rows run in parallel, each
// thread summing dweight / dbias for its own rows (float32 over blocks of kFlushRows rows, then
// double), the threads' sums added in thread order.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "aligned_scratch.h"
#include "isa/norm_grad_rows.h"
#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kFlushRows = 32;

double stat_at(const Tensor& t, int64_t r) {
  return t.dtype() == DType::F64 ? static_cast<const double*>(t.raw_data())[r]
                                 : double(static_cast<const float*>(t.raw_data())[r]);
}

struct NormGradCall {
  const Tensor *g, *x, *mean, *rstd, *w;  // mean null: rms_norm
  int64_t rows, len;
};

// Thread tid's rows into its double accumulators dw / db (len each), dx written.
template <typename T>
void scalar_rows(const NormGradCall& c, int64_t r0, int64_t r1, double* dw, double* db,
                 const Tensor& dx) {
  using C = opmath_t<T>;
  const T* gp = static_cast<const T*>(c.g->raw_data());
  const T* xp = static_cast<const T*>(c.x->raw_data());
  const T* wp = c.w ? static_cast<const T*>(c.w->raw_data()) : nullptr;
  T* dp = static_cast<T*>(dx.raw_data());
  const int64_t n = c.len;
  for (int64_t r = r0; r < r1; ++r) {
    const T* g = gp + r * n;
    const T* x = xp + r * n;
    const double m = c.mean ? stat_at(*c.mean, r) : 0.0, rs = stat_at(*c.rstd, r);
    double a = 0, b = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double gv = double(C(g[i])), xh = (double(C(x[i])) - m) * rs;
      const double gw = wp ? gv * double(C(wp[i])) : gv;
      a += gw;
      b += gw * xh;
      dw[i] += gv * xh;
      db[i] += gv;
    }
    const double ca = c.mean ? a / double(n) : 0.0, cb = b / double(n);
    for (int64_t i = 0; i < n; ++i) {
      const double gv = double(C(g[i])), xh = (double(C(x[i])) - m) * rs;
      const double gw = wp ? gv * double(C(wp[i])) : gv;
      dp[r * n + i] = convert_value<T>(rs * ((gw - ca) - xh * cb));
    }
  }
}

// The same with the ISA's vector rows (float32 / bfloat16 element type E).
template <typename E>
void vector_rows(const NormGradCall& c, NormGradRowFn<E> row, const float* w, int64_t r0,
                 int64_t r1, double* dw, double* db, const Tensor& dx) {
  const E* gp = static_cast<const E*>(c.g->raw_data());
  const E* xp = static_cast<const E*>(c.x->raw_data());
  E* dp = static_cast<E*>(dx.raw_data());
  const int64_t n = c.len;
  AlignedVector<float> fw(size_t(n), 0.0f), fb(size_t(n), 0.0f);
  for (int64_t r = r0; r < r1; ++r) {
    const float m = c.mean ? float(stat_at(*c.mean, r)) : 0.0f;
    row(gp + r * n, xp + r * n, w, m, float(stat_at(*c.rstd, r)), c.mean != nullptr, dp + r * n,
        fw.data(), fb.data(), n);
    if ((r - r0) % kFlushRows == kFlushRows - 1 || r + 1 == r1) {
      for (int64_t i = 0; i < n; ++i) {
        dw[i] += double(fw[size_t(i)]);
        db[i] += double(fb[size_t(i)]);
      }
      std::fill(fw.begin(), fw.end(), 0.0f);
      std::fill(fb.begin(), fb.end(), 0.0f);
    }
  }
}

// inputs {grad_y, x, mean, rstd, weight?} (layer_norm) or {grad_y, x, rstd, weight?}
// (rms_norm); attrs {normalized_ndim}; outs {dx, dweight, dbias} or {dx, dweight}.
template <bool kLayer>
void norm_backward_kernel(OpCall& call) {
  const Tensor& x = call.inputs[1];
  const Tensor& w = call.inputs[kLayer ? 4 : 3];
  const int64_t k = call.int_attr(0);
  int64_t len = 1;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) len *= x.size(i);
  NormGradCall c{&call.inputs[0], &x, kLayer ? &call.inputs[2] : nullptr,
                 &call.inputs[kLayer ? 3 : 2], w.defined() ? &w : nullptr, 0, len};
  c.rows = len > 0 ? x.numel() / len : 0;
  const Tensor& dx = call.outs[0];
  const NormGradRows& vr = norm_grad_rows();
  const bool vec = (x.dtype() == DType::F32 && vr.f32) || (x.dtype() == DType::BF16 && vr.bf16);
  std::vector<float> w_f32;  // the weight widened, for the bfloat16 rows
  if (vec && c.w && x.dtype() == DType::BF16) {
    w_f32.resize(size_t(len));
    const uint16_t* wb = static_cast<const uint16_t*>(w.raw_data());
    for (int64_t i = 0; i < len; ++i) w_f32[size_t(i)] = float(BFloat16::from_bits(wb[i]));
  }
  const float* wf = !c.w ? nullptr
                    : x.dtype() == DType::BF16 ? w_f32.data()
                                               : static_cast<const float*>(w.raw_data());
  const bool parallel = c.rows > 1 && x.numel() >= (int64_t(1) << 15);
  const int max_threads = parallel ? omp_get_max_threads() : 1;
  std::vector<double> dw_all(size_t(max_threads * len), 0.0), db_all(dw_all.size(), 0.0);
#pragma omp parallel num_threads(max_threads) if (parallel)
  {
    const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t r0 = c.rows * tid / nt, r1 = c.rows * (tid + 1) / nt;
    double* dw = dw_all.data() + tid * len;
    double* db = db_all.data() + tid * len;
    if (r1 > r0) {
      if (vec && x.dtype() == DType::F32) vector_rows<float>(c, vr.f32, wf, r0, r1, dw, db, dx);
      else if (vec) vector_rows<uint16_t>(c, vr.bf16, wf, r0, r1, dw, db, dx);
      else
        KILN_DISPATCH_FLOAT(x.dtype(), kLayer ? "layer_norm_backward" : "rms_norm_backward",
                            [&]<typename T>() { scalar_rows<T>(c, r0, r1, dw, db, dx); });
    }
  }
  KILN_DISPATCH_FLOAT(x.dtype(), kLayer ? "layer_norm_backward" : "rms_norm_backward",
                      [&]<typename T>() {
    T* dwp = static_cast<T*>(call.outs[1].raw_data());
    T* dbp = kLayer ? static_cast<T*>(call.outs[2].raw_data()) : nullptr;
    for (int64_t i = 0; i < len; ++i) {
      double sw = 0, sb = 0;
      for (int t = 0; t < max_threads; ++t) {
        sw += dw_all[size_t(t * len + i)];
        sb += db_all[size_t(t * len + i)];
      }
      dwp[i] = convert_value<T>(sw);
      if (dbp) dbp[i] = convert_value<T>(sb);
    }
  });
}

}  // namespace

void register_norm_backward_kernels() {
  register_kernel("native_layer_norm_backward", DeviceType::CPU, norm_backward_kernel<true>,
                  kFloatDTypes);
  register_kernel("native_rms_norm_backward", DeviceType::CPU, norm_backward_kernel<false>,
                  kFloatDTypes);
}

}  // namespace kiln::cpu
