// CPU kernels of native_group_norm and native_group_norm_backward over a contiguous [N, C, *]
// input (the op layer makes it so): float32, bfloat16, float64. With G groups, D = C / G
// channels per group and P = prod(*) values per channel, group g of sample n is one contiguous
// run of M = D * P values, and each (n, g) is one task (in parallel when the input is large).
//
// Forward: the group's mean and biased variance in double (reduce_vec's two passes, as
// layer_norm's rows), then each channel's run written as x * scale + shift.
// Backward: per channel, sg = sum(g) and sgx = sum(g * (x - mean)) (float32 lanes over runs of
// at most kRun values, added in double); with A = sum_c w_c * sg_c and B = sum_c w_c * sgx_c
// over the group, dx = rstd * w_c * g - rstd^3 * B / M * (x - mean) - rstd * A / M, written as
// a_c * g + (b * x + k); dweight_c = sum over samples of sgx * rstd, dbias_c = sum of sg,
// added in sample order after the parallel part (the result does not depend on the threads).
// A group of a ResNet / UNet layer (D * P of at most a few hundred thousand values) stays in
// L2 between the passes. The composite these replace (layer_norm over the groups, then
// addcmul with the weight and bias, and the derivatives of both) made about ten passes over
// the tensor in a backward: 2x PyTorch's time for an affine group_norm of [8, 64, 48, 64].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "isa/norm_grad_rows.h"
#include "isa/reduce_vec.h"
#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/core/half.h"
#include "kiln/dispatch/registry.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kRun = 4096;  // float32 lane sums cover at most this many values

template <typename T>
using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

struct Groups {
  int64_t N, C, G, D, P, M;
  Groups(const Tensor& x, int64_t groups)
      : N(x.size(0)), C(x.size(1)), G(groups), D(C / groups),
        P(N * C > 0 ? x.numel() / (N * C) : 0), M(D * P) {}
};

// Calls f(t) for every (sample, group) task t = n * G + g, in parallel when the input is large.
template <typename F>
void for_groups(const Groups& l, F&& f) {
  const int64_t tasks = l.N * l.G;
  parallel_region(tasks > 1 && tasks * l.M >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) f(t);
  });
}

double param(const Tensor& p, int64_t c, double none) {
  if (!p.defined()) return none;
  switch (p.dtype()) {
    case DType::F64: return static_cast<const double*>(p.raw_data())[c];
    case DType::BF16: return double(static_cast<const BFloat16*>(p.raw_data())[c]);
    default: return double(static_cast<const float*>(p.raw_data())[c]);
  }
}

// Mean and biased variance of n values, in double.
template <typename T>
void moments(const T* x, int64_t n, double& mean, double& var) {
  if constexpr (std::is_same_v<T, double>) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    mean = s / double(n);
    for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
    var = ss / double(n);
  } else if constexpr (std::is_same_v<T, float>) {
    const VecReduce& vr = reduce_vec();
    mean = vr.sum_f32(x, n) / double(n);
    var = vr.sum_sq_dev_f32(x, n, mean) / double(n);
  } else {
    const VecReduce& vr = reduce_vec();
    const uint16_t* b = reinterpret_cast<const uint16_t*>(x);
    mean = vr.sum_bf16(b, n) / double(n);
    var = vr.sum_sq_dev_bf16(b, n, mean) / double(n);
  }
}

// out = x * scale + shift over n values, the product rounded before the sum (vec_math's
// muladd; its functions are null at the baseline level).
template <typename T>
void scale_shift(const T* x, stat_t<T> scale, stat_t<T> shift, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (const VecMulAddF32 f = vec_math_f32().muladd_f32)
      return f(x, &scale, 0, &shift, 0, out, n);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    if (const VecMulAddBf16 f = vec_math_f32().muladd_bf16)
      return f(reinterpret_cast<const uint16_t*>(x), &scale, 0, &shift, 0,
               reinterpret_cast<uint16_t*>(out), n);
  }
  for (int64_t j = 0; j < n; ++j) {
    const stat_t<T> p = stat_t<T>(x[j]) * scale;
    out[j] = convert_value<T>(shift + p);
  }
}

// inputs {x, weight?, bias?}; attrs {num_groups, eps}; outs {y, mean [N, G], rstd [N, G]}.
template <typename T>
void group_norm_forward(OpCall& call) {
  using S = stat_t<T>;
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor& b = call.inputs[2];
  const Groups l(x, call.int_attr(0));
  const double eps = call.double_attr(1);
  const T* xp = static_cast<const T*>(x.raw_data());
  T* yp = static_cast<T*>(call.outs[0].raw_data());
  S* mean_out = static_cast<S*>(call.outs[1].raw_data());
  S* rstd_out = static_cast<S*>(call.outs[2].raw_data());
  for_groups(l, [&](int64_t t) {
    const int64_t g = t % l.G;
    double mean = 0, var = 0;
    if (l.M > 0) moments(xp + t * l.M, l.M, mean, var);
    const double rstd = 1.0 / std::sqrt(var + eps);
    mean_out[t] = S(mean);
    rstd_out[t] = S(rstd);
    for (int64_t d = 0; d < l.D; ++d) {
      const int64_t c = g * l.D + d, at = t * l.M + d * l.P;
      const double scale = rstd * param(w, c, 1.0), shift = param(b, c, 0.0) - mean * scale;
      scale_shift(xp + at, S(scale), S(shift), yp + at, l.P);
    }
  });
}

// sums[0] += sum(g), sums[1] += sum(g * (x - mean)) over one channel's run of n values.
template <typename T>
void channel_sums(const T* g, const T* x, double mean, int64_t n, double* sums) {
  const NormGradRows& vr = norm_grad_rows();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    using E = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;
    ChannelGradSumsFn<E> f;
    if constexpr (std::is_same_v<T, float>) f = vr.channel_sums_f32;
    else f = vr.channel_sums_bf16;
    if (f) {
      const E* ge = reinterpret_cast<const E*>(g);
      const E* xe = reinterpret_cast<const E*>(x);
      for (int64_t i = 0; i < n; i += kRun) {
        float s[2];
        f(ge + i, xe + i, float(mean), std::min(kRun, n - i), s);
        sums[0] += double(s[0]);
        sums[1] += double(s[1]);
      }
      return;
    }
  }
  double s0 = 0, s1 = 0, t0 = 0, t1 = 0;  // two chains each: the adds overlap
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const double g0 = double(g[i]), g1 = double(g[i + 1]);
    s0 += g0;
    s1 += g1;
    t0 += g0 * (double(x[i]) - mean);
    t1 += g1 * (double(x[i + 1]) - mean);
  }
  for (; i < n; ++i) {
    s0 += double(g[i]);
    t0 += double(g[i]) * (double(x[i]) - mean);
  }
  sums[0] += s0 + s1;
  sums[1] += t0 + t1;
}

// dx = a * g + (b * x + k) over n values.
template <typename T>
void affine_grad(const T* g, const T* x, double a, double b, double k, T* dx, int64_t n) {
  const NormGradRows& vr = norm_grad_rows();
  if constexpr (std::is_same_v<T, float>) {
    if (vr.affine_grad_f32) return vr.affine_grad_f32(g, x, float(a), float(b), float(k), dx, n);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    if (vr.affine_grad_bf16)
      return vr.affine_grad_bf16(reinterpret_cast<const uint16_t*>(g),
                                 reinterpret_cast<const uint16_t*>(x), float(a), float(b),
                                 float(k), reinterpret_cast<uint16_t*>(dx), n);
  }
  using S = stat_t<T>;
  const S af = S(a), bf = S(b), kf = S(k);
  for (int64_t j = 0; j < n; ++j)
    dx[j] = convert_value<T>(std::fma(af, S(g[j]), std::fma(bf, S(x[j]), kf)));
}

// inputs {grad_y, x, mean [N, G], rstd [N, G], weight?}; attrs {num_groups};
// outs {dx, dweight [C], dbias [C]}.
template <typename T>
void group_norm_backward(OpCall& call) {
  using S = stat_t<T>;
  const Tensor& gy = call.inputs[0];
  const Tensor& x = call.inputs[1];
  const Tensor& w = call.inputs[4];
  const Groups l(x, call.int_attr(0));
  const T* gp = static_cast<const T*>(gy.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  const S* mean_in = static_cast<const S*>(call.inputs[2].raw_data());
  const S* rstd_in = static_cast<const S*>(call.inputs[3].raw_data());
  T* dxp = static_cast<T*>(call.outs[0].raw_data());
  // Per (sample, channel): sum(g) and sum(g * (x - mean)).
  std::vector<double> sg(size_t(l.N * l.C)), sgx(size_t(l.N * l.C));
  const double count = double(l.M);
  for_groups(l, [&](int64_t t) {
    const int64_t n = t / l.G, g = t % l.G;
    const double mean = double(mean_in[t]), rstd = double(rstd_in[t]);
    double a_sum = 0, b_sum = 0;
    for (int64_t d = 0; d < l.D; ++d) {
      const int64_t c = g * l.D + d, at = t * l.M + d * l.P;
      double sums[2] = {0, 0};
      channel_sums(gp + at, xp + at, mean, l.P, sums);
      sg[size_t(n * l.C + c)] = sums[0];
      sgx[size_t(n * l.C + c)] = sums[1];
      const double wc = param(w, c, 1.0);
      a_sum += wc * sums[0];
      b_sum += wc * sums[1];
    }
    const double b = -rstd * rstd * rstd * b_sum / count;
    const double k = -rstd * a_sum / count - b * mean;
    for (int64_t d = 0; d < l.D; ++d) {
      const int64_t c = g * l.D + d, at = t * l.M + d * l.P;
      affine_grad(gp + at, xp + at, rstd * param(w, c, 1.0), b, k, dxp + at, l.P);
    }
  });
  T* dwp = static_cast<T*>(call.outs[1].raw_data());
  T* dbp = static_cast<T*>(call.outs[2].raw_data());
  for (int64_t c = 0; c < l.C; ++c) {
    double dw = 0, db = 0;
    for (int64_t n = 0; n < l.N; ++n) {
      dw += sgx[size_t(n * l.C + c)] * double(rstd_in[n * l.G + c / l.D]);
      db += sg[size_t(n * l.C + c)];
    }
    dwp[c] = convert_value<T>(S(dw));
    dbp[c] = convert_value<T>(S(db));
  }
}

void forward_dispatch(OpCall& call) {
  switch (call.inputs[0].dtype()) {
    case DType::BF16: return group_norm_forward<BFloat16>(call);
    case DType::F64: return group_norm_forward<double>(call);
    default: return group_norm_forward<float>(call);
  }
}
void backward_dispatch(OpCall& call) {
  switch (call.inputs[1].dtype()) {
    case DType::BF16: return group_norm_backward<BFloat16>(call);
    case DType::F64: return group_norm_backward<double>(call);
    default: return group_norm_backward<float>(call);
  }
}

}  // namespace

void register_group_norm_kernels() {
  const auto dtypes = dtype_bit(DType::F32) | dtype_bit(DType::BF16) | dtype_bit(DType::F64);
  register_kernel("native_group_norm", DeviceType::CPU, forward_dispatch, dtypes);
  register_kernel("native_group_norm_backward", DeviceType::CPU, backward_dispatch, dtypes);
}

}  // namespace kiln::cpu
