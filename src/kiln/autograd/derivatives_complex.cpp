// Derivatives of the complex ops and the FFTs, with torch's convention for complex numbers:
// the gradient of a real loss L with respect to a complex z is the conjugate Wirtinger
// derivative (dL/dRe z + i dL/dIm z), so a holomorphic f passes g * conj(f'(z)) back and a
// real input promoted to complex receives the real part (d_to_copy's conversion).
#include "kiln/autograd/node.h"
#include "kiln/ops/complex.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

Grads d_view_as_real(const GradContext&, const Grads& go) {
  return {view_as_complex(contiguous(go[0]))};
}
Grads d_view_as_complex(const GradContext&, const Grads& go) { return {view_as_real(go[0])}; }

Grads d_complex(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(contiguous(real(go[0])), ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(contiguous(imag(go[0])), ctx.input_shapes[1]);
  return r;
}

Grads d_conj_physical(const GradContext&, const Grads& go) { return {conj_physical(go[0])}; }

// angle(z) = atan2(Im z, Re z): the gradient is g * i z / |z|^2 (0 at z = 0), as torch.
Grads d_angle(const GradContext& ctx, const Grads& go) {
  Tensor z = ctx.input(0);
  Tensor a = abs(z);
  Tensor denom = where(eq(a, 0.0), ones_like(a), a * a);
  Tensor iz = complex(neg(imag(z)), real(z));
  return {where(eq(a, 0.0), zeros_like(z), go[0].to(z.dtype()) * iz / denom.to(z.dtype()))};
}

// y = F x with F the (scaled) DFT over dims: the adjoint is the opposite direction with the
// same scale.
// sgn(z) = z / |z|: for complex z the conjugate-Wirtinger form (g - sgn^2 conj(g)) / (2 |z|),
// 0 where z = 0 (as PyTorch); for real inputs sign's derivative, 0. Written with ops so that
// it differentiates again (double backward through complex abs, whose derivative uses sgn).
Grads d_sgn(const GradContext& ctx, const Grads& go) {
  const Tensor x = ctx.input(0);
  const Tensor& g = go[0];
  if (!is_complex(x.dtype())) return {zeros_like(g)};
  const Tensor s = ctx.output(0), magnitude = abs(x);
  const Tensor zero = eq(magnitude, 0);
  const Tensor safe = where(zero, ones_like(magnitude), magnitude);
  const Tensor grad = (g - s * s * conj_physical(g)) / (safe * 2);
  return {where(zero, zeros_like(grad), grad)};
}

Grads d_fft_c2c(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return {fft_c2c(go[0], c.ints_attr(0), c.int_attr(1), !c.bool_attr(2))};
}

// Real x -> (one-sided) spectrum: the adjoint of keeping n/2 + 1 bins is padding the gradient
// with zeros to n bins; then the inverse-direction transform, whose real part reaches x.
Grads d_fft_r2c(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const std::vector<int64_t> dims = c.ints_attr(0);
  const Shape& in_shape = ctx.input_shapes[0];
  const int64_t last = wrap_dim(dims.back(), int64_t(in_shape.size()));
  Tensor g = go[0];
  const int64_t n = in_shape[size_t(last)], kept = g.size(last);
  if (kept < n) {
    Shape pad = g.shape();
    pad[size_t(last)] = n - kept;
    g = cat({g, zeros(pad, TensorOptions(g.dtype(), g.device()))}, last);
  }
  return {contiguous(real(fft_c2c(g, dims, c.int_attr(1), false)))};
}

// Half spectrum -> real y: torch's rule. The forward real transform of the gradient, with the
// bins that stand for a conjugate pair (all but DC and, for even n, Nyquist) doubled.
Grads d_fft_c2r(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const std::vector<int64_t> dims = c.ints_attr(0);
  Tensor gi = fft_r2c(go[0], dims, c.int_attr(1), true);
  const int64_t last = wrap_dim(dims.back(), go[0].dim());
  const int64_t doubled = go[0].size(last) - gi.size(last);
  if (doubled > 0) {
    Shape w(size_t(gi.dim()), 1);
    w[size_t(last)] = gi.size(last);
    std::vector<double> weights(size_t(gi.size(last)), 1.0);
    for (int64_t k = 1; k <= doubled; ++k) weights[size_t(k)] = 2.0;
    gi = gi * tensor_from(weights, w, TensorOptions(real_part_dtype(gi.dtype()), gi.device()))
                  .to(gi.dtype());
  }
  // The input may have had more bins than n / 2 + 1 (the kernel reads the first ones).
  const int64_t in_bins = ctx.input_shapes[0][size_t(last)];
  if (in_bins > gi.size(last)) {
    Shape pad = gi.shape();
    pad[size_t(last)] = in_bins - gi.size(last);
    gi = cat({gi, zeros(pad, TensorOptions(gi.dtype(), gi.device()))}, last);
  } else if (in_bins < gi.size(last)) {
    gi = narrow(gi, last, 0, in_bins);
  }
  return {gi};
}

}  // namespace

void register_complex_derivatives() {
  register_derivative("view_as_real", d_view_as_real);
  register_derivative("view_as_complex", d_view_as_complex);
  register_derivative("complex", d_complex);
  register_derivative("conj_physical", d_conj_physical);
  register_derivative("angle", d_angle);
  register_derivative("sgn", d_sgn);
  register_derivative("_fft_c2c", d_fft_c2c);
  register_derivative("_fft_r2c", d_fft_r2c);
  register_derivative("_fft_c2r", d_fft_c2r);
}

}  // namespace kiln::autograd
