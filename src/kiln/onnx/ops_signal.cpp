// Signal processing: the window functions, DFT, STFT and MelWeightMatrix (opset 17). A DFT
// is two matrix products with cosine and sine tables built on the host for the transform
// length (real and imaginary parts kept in a trailing dim of size 2, as ONNX does).
#include <cmath>
#include <numbers>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/onnx/tensor_convert.h"
#include "kiln/onnx/tensor_proto.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

DType output_datatype(const OpContext& ctx, int64_t dflt) {
  const int64_t code = ctx.attr_int("output_datatype", dflt);
  auto d = dtype_from_onnx(int32_t(code));
  KILN_CHECK(d.has_value(), NotImplementedError, "output_datatype ", onnx_type_name(int32_t(code)),
             " is not a type kiln has");
  return *d;
}

// w[n] = sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 (symmetric).
std::vector<Tensor> cosine_window(OpContext& ctx, const std::vector<double>& a) {
  const int64_t size = int64_t(ctx.input_scalar(0));
  KILN_CHECK(size >= 0, ValueError, "the window size must not be negative, got ", size);
  const double denom = ctx.attr_int("periodic", 1) ? double(size) : double(size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t n = 0; n < size; ++n) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      v += (k % 2 ? -1.0 : 1.0) * a[k] * std::cos(2 * std::numbers::pi * double(k) * double(n) / denom);
    }
    w[size_t(n)] = v;
  }
  return one(ctx.on_device(cast(tensor_from(w, Shape{size}), output_datatype(ctx, 1))));
}

std::vector<Tensor> op_hann(OpContext& ctx) { return cosine_window(ctx, {0.5, 0.5}); }
std::vector<Tensor> op_hamming(OpContext& ctx) { return cosine_window(ctx, {25.0 / 46.0, 21.0 / 46.0}); }
std::vector<Tensor> op_blackman(OpContext& ctx) { return cosine_window(ctx, {0.42, 0.5, 0.08}); }

// The DFT of complex signals (re, im) along their last dim (length n after zero padding or
// truncation), bins 0..bins-1. inverse: e^{+i...} and divided by n.
std::pair<Tensor, Tensor> dft_last(Tensor re, Tensor im, int64_t n, int64_t bins, bool inverse) {
  const int64_t len = re.size(-1);
  if (len != n) {
    auto fit = [&](const Tensor& t) {
      if (len > n) return narrow(t, -1 + t.dim(), 0, n);
      std::vector<int64_t> p{0, n - len};
      return pad(t, p);
    };
    re = fit(re);
    if (im.defined()) im = fit(im);
  }
  std::vector<double> c(size_t(n * bins)), s(size_t(n * bins));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < bins; ++k) {
      // (t * k) mod n keeps the angle small, so large transforms stay accurate.
      const double angle = 2 * std::numbers::pi * double((t * k) % n) / double(n);
      c[size_t(t * bins + k)] = std::cos(angle);
      s[size_t(t * bins + k)] = std::sin(angle);
    }
  }
  Tensor cm = to_device(cast(tensor_from(c, Shape{n, bins}), re.dtype()), re.device());
  Tensor sm = to_device(cast(tensor_from(s, Shape{n, bins}), re.dtype()), re.device());
  Tensor yr = matmul(re, cm), yi = neg(matmul(re, sm));  // e^{-i theta} = cos - i sin
  if (im.defined()) {
    yr = add(yr, matmul(im, sm));
    yi = add(yi, matmul(im, cm));
  }
  if (inverse) {
    yi = neg(yi);
    if (im.defined()) {  // conj(DFT(conj(x))) = the inverse transform (times n)
      yr = add(matmul(re, cm), neg(matmul(im, sm)));
      yi = add(matmul(re, sm), matmul(im, cm));
    }
    yr = div(yr, double(n));
    yi = div(yi, double(n));
  }
  return {yr, yi};
}

std::vector<Tensor> op_dft(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_CHECK(x.dim() >= 3 && (x.size(-1) == 1 || x.size(-1) == 2), ShapeError,
             "input must be [batch, ..., signal, 1 or 2], got ", shape_str(x.shape()));
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 1), x.dim() - 1);
  KILN_CHECK(axis >= 1, ValueError, "axis must not be the batch axis");
  const bool inverse = ctx.attr_int("inverse", 0) != 0, onesided = ctx.attr_int("onesided", 0) != 0;
  const int64_t n = ctx.has_input(1) ? int64_t(ctx.input_scalar(1)) : x.size(axis);
  KILN_CHECK(n > 0, ValueError, "dft_length must be positive, got ", n);
  Tensor re = movedim(select(x, -1, 0), axis, -1);
  Tensor im = x.size(-1) == 2 ? movedim(select(x, -1, 1), axis, -1) : Tensor();
  auto [yr, yi] = dft_last(re, im, n, onesided ? n / 2 + 1 : n, inverse);
  return one(stack({movedim(yr, -1, axis), movedim(yi, -1, axis)}, -1));
}

// Frames of frame_length every frame_step samples, times the window, each transformed.
std::vector<Tensor> op_stft(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_CHECK(x.dim() == 3 && (x.size(2) == 1 || x.size(2) == 2), ShapeError,
             "signal must be [batch, length, 1 or 2], got ", shape_str(x.shape()));
  const int64_t step = int64_t(ctx.input_scalar(1));
  Tensor window = ctx.has_input(2) ? ctx.input(2) : Tensor();
  const int64_t length = ctx.has_input(3) ? int64_t(ctx.input_scalar(3)) : window.defined() ? window.numel() : 0;
  KILN_CHECK(step > 0 && length > 0 && length <= x.size(1), ValueError, "frame_step ", step, " and frame_length ",
             length, " must be positive, the length at most the signal's ", x.size(1));
  KILN_CHECK(!window.defined() || window.numel() == length, ShapeError, "window has ", window.numel(),
             " entries but frame_length is ", length);
  auto frames = [&](const Tensor& s) {  // [batch, frames, length]
    Tensor f = unfold(s, 1, length, step);
    return window.defined() ? mul(f, cast(window, f.dtype())) : f;
  };
  Tensor re = frames(select(x, 2, 0));
  Tensor im = x.size(2) == 2 ? frames(select(x, 2, 1)) : Tensor();
  const bool onesided = ctx.attr_int("onesided", 1) != 0;
  auto [yr, yi] = dft_last(re, im, length, onesided ? length / 2 + 1 : length, false);
  return one(stack({yr, yi}, -1));
}

// Triangular filters between mel-spaced edges, rounded to DFT bins as the ONNX reference does.
std::vector<Tensor> op_mel_weight_matrix(OpContext& ctx) {
  const int64_t mels = int64_t(ctx.input_scalar(0)), dft_length = int64_t(ctx.input_scalar(1));
  const int64_t rate = int64_t(ctx.input_scalar(2));
  const double lower = ctx.input_scalar(3), upper = ctx.input_scalar(4);
  KILN_CHECK(mels > 0 && dft_length > 0 && rate > 0, ValueError,
             "num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t bins = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double lo = to_mel(lower), step = (to_mel(upper) - lo) / double(mels + 2);
  std::vector<int64_t> edge(size_t(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (double(i) * step + lo) / 2595.0) - 1.0);
    edge[size_t(i)] = int64_t(std::floor(double(dft_length + 1) * hz / double(rate)));
  }
  std::vector<double> w(size_t(bins * mels), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    KILN_CHECK(j >= 0 && j < bins, ValueError, "a mel filter edge (bin ", j, ") lies outside the ", bins, " DFT bins");
    return w[size_t(j * mels + i)];
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = edge[size_t(i)], c = edge[size_t(i + 1)], u = edge[size_t(i + 2)];
    if (c == l) at(c, i) = 1;
    else for (int64_t j = l; j <= c; ++j) at(j, i) = double(j - l) / double(c - l);
    for (int64_t j = c; j < u; ++j) at(j, i) = double(u - j) / double(u - c);
  }
  return one(ctx.on_device(cast(tensor_from(w, Shape{bins, mels}), output_datatype(ctx, 1))));
}

}  // namespace

void register_signal_ops(OpTable& t) {
  t.add("HannWindow", op_hann);
  t.add("HammingWindow", op_hamming);
  t.add("BlackmanWindow", op_blackman);
  t.add("DFT", op_dft);
  t.add("STFT", op_stft);
  t.add("MelWeightMatrix", op_mel_weight_matrix);
}

}  // namespace kiln::onnx
