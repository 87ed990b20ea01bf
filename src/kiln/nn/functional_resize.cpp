#include "kiln/nn/functional_resize.h"

#include <algorithm>
#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/error.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/pooling.h"

namespace kiln::nn::functional {
namespace {

bool is_interpolating(const std::string& mode) {
  return mode == "linear" || mode == "bilinear" || mode == "bicubic" || mode == "trilinear";
}

// One source position and its weight per tap, for every output index along one dim.
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
};

// PyTorch's coordinate scale (area_pixel_compute_scale): (in - 1) / (out - 1) with
// align_corners, else 1 / scale_factor when one is used, else in / out.
double coordinate_scale(int64_t in, int64_t out, bool align_corners, double scale) {
  if (align_corners) return out > 1 ? double(in - 1) / double(out - 1) : 0.0;
  return scale > 0 ? 1.0 / scale : double(in) / double(out);
}

// The cubic convolution kernel of PyTorch's bicubic mode (A = -0.75).
double cubic(double t) {
  constexpr double A = -0.75;
  t = std::fabs(t);
  if (t <= 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

Taps taps_for(const std::string& mode, int64_t in, int64_t out, bool align_corners,
              double scale) {
  const double s = coordinate_scale(in, out, align_corners, scale);
  Taps t;
  if (mode == "nearest" || mode == "nearest-exact") {
    // float arithmetic, as PyTorch's nearest_idx (the index can differ from a double
    // computation where o * scale is within a rounding of an integer).
    const float fs = float(scale > 0 ? 1.0 / scale : double(in) / double(out));
    t.index.assign(1, std::vector<int64_t>(static_cast<size_t>(out)));
    t.weight.assign(1, std::vector<double>(static_cast<size_t>(out), 1.0));
    for (int64_t o = 0; o < out; ++o) {
      const float pos = mode == "nearest" ? float(o) * fs : (float(o) + 0.5f) * fs;
      t.index[0][size_t(o)] = std::min<int64_t>(int64_t(std::floor(pos)), in - 1);
    }
    return t;
  }
  const int taps = mode == "bicubic" ? 4 : 2;
  t.index.assign(size_t(taps), std::vector<int64_t>(static_cast<size_t>(out)));
  t.weight.assign(size_t(taps), std::vector<double>(static_cast<size_t>(out)));
  for (int64_t o = 0; o < out; ++o) {
    double src = align_corners ? double(o) * s : (double(o) + 0.5) * s - 0.5;
    if (taps == 2) {
      if (src < 0) src = 0;  // linear modes clamp the coordinate (not bicubic)
      const int64_t i0 = std::min<int64_t>(int64_t(std::floor(src)), in - 1);
      const double l = std::min(1.0, src - double(i0));
      t.index[0][size_t(o)] = i0;
      t.index[1][size_t(o)] = std::min<int64_t>(i0 + 1, in - 1);
      t.weight[0][size_t(o)] = 1 - l;
      t.weight[1][size_t(o)] = l;
    } else {
      const double f = std::floor(src), r = src - f;
      for (int k = 0; k < 4; ++k) {
        t.index[size_t(k)][size_t(o)] = std::clamp<int64_t>(int64_t(f) - 1 + k, 0, in - 1);
        t.weight[size_t(k)][size_t(o)] = cubic(r + 1 - k);
      }
    }
  }
  return t;
}

// x resized along dim to `out` positions.
Tensor resize_dim(const Tensor& x, int64_t dim, int64_t out, const std::string& mode,
                  bool align_corners, double scale) {
  const Taps t = taps_for(mode, x.size(dim), out, align_corners, scale);
  Shape wshape(size_t(x.dim()), 1);
  wshape[size_t(dim)] = out;
  // The taps are computed on the host and moved to x's device (one small copy each).
  auto indices = [&](size_t k) { return tensor_from(t.index[k], {out}).to(x.device()); };
  auto pick = [&](size_t k) { return index_select(x, dim, indices(k)); };
  if (t.index.size() == 1) return pick(0);
  if (t.index.size() == 2) {
    // Linear: lerp(a, b, l) with the weights 1 - l and l, both taps picked and blended in one
    // pass (index_lerp, decision 0034): two index_selects and a lerp took three passes and
    // two temporaries (bilinear x2 on [4, 64, 56, 56] float32: 3.8 ms, PyTorch 2.4 ms).
    return index_lerp(x, dim, indices(0), indices(1),
                      tensor_from(t.weight[1], {out}).to(x.device(), x.dtype()));
  }
  // Cubic: the first product, then y + picked * w per further tap in one addcmul (the same
  // rounding as a product and a sum).
  auto weight = [&](size_t k) { return tensor_from(t.weight[k], wshape).to(x.device(), x.dtype()); };
  Tensor y = pick(0) * weight(0);
  for (size_t k = 1; k < t.index.size(); ++k) y = addcmul(y, pick(k), weight(k));
  return y;
}

// Nearest resizing of all nd spatial dims (dims first .. first + nd - 1 of a contiguous x) in
// one pick: the spatial dims flattened into one and each output position's flat source index
// computed here, so one index_select moves every value once. Resizing one dim after another
// wrote and re-read a temporary per dim: nearest x2 of a [8, 32, 28, 28] channels-last float32
// tensor took 173 us against PyTorch's 112.
// The flat index holds one int64 per output position: picking at once is for planes whose
// index stays small next to the values moved.
constexpr int64_t kNearestAtOnceMaxPlane = 16384;         // channels-first (128 KiB of index)
constexpr int64_t kNearestAtOnceMaxPlaneRows = 1 << 18;  // channels-last (2 MiB of index)

Tensor resize_nearest_at_once(const Tensor& x, int64_t first, int64_t nd,
                              const std::vector<int64_t>& out, const std::string& mode,
                              const std::vector<double>& scale) {
  std::vector<int64_t> flat{0};  // source offsets of the output positions so far, row-major
  int64_t in_total = 1;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t in = x.size(first + d);
    const Taps t = taps_for(mode, in, out[size_t(d)], false, scale[size_t(d)]);
    std::vector<int64_t> next;
    next.reserve(flat.size() * size_t(out[size_t(d)]));
    for (int64_t f : flat)
      for (int64_t i : t.index[0]) next.push_back(f * in + i);
    flat.swap(next);
    in_total *= in;
  }
  Shape flat_shape, out_shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < first || d >= first + nd) {
      flat_shape.push_back(x.size(d));
      out_shape.push_back(x.size(d));
    } else {
      if (d == first) flat_shape.push_back(in_total);
      out_shape.push_back(out[size_t(d - first)]);
    }
  }
  const Tensor index = tensor_from(flat, {int64_t(flat.size())}).to(x.device());
  return index_select(x.reshape(flat_shape), first, index).reshape(out_shape);
}

}  // namespace

Tensor interpolate(const Tensor& input, const InterpolateOptions& o) {
  const std::string& mode = o.mode;
  KILN_CHECK(mode == "nearest" || mode == "nearest-exact" || mode == "area" ||
                 is_interpolating(mode),
             ValueError, "interpolate: mode must be one of nearest, nearest-exact, linear, "
             "bilinear, bicubic, trilinear, area; got '", mode, "'");
  KILN_CHECK(!o.align_corners || is_interpolating(mode), ValueError,
             "interpolate: align_corners option can only be set with the interpolating modes: "
             "linear | bilinear | bicubic | trilinear");
  KILN_CHECK(input.dim() >= 3 && input.dim() <= 5, ShapeError,
             "interpolate: expected a 3-d, 4-d or 5-d input [N, C, spatial...], got ",
             input.dim(), "-d");
  const int64_t nd = input.dim() - 2;
  const int64_t needed = mode == "linear" ? 1 : mode == "bilinear" || mode == "bicubic" ? 2
                         : mode == "trilinear" ? 3 : nd;
  KILN_CHECK(needed == nd, ShapeError, "interpolate: got ", input.dim(), "-d input, but ", mode,
             " mode needs ", needed + 2, "-d input");
  KILN_CHECK(o.size.empty() != o.scale_factor.empty(), ValueError,
             o.size.empty() ? "interpolate: either size or scale_factor should be defined"
                            : "interpolate: only one of size or scale_factor should be defined");
  const size_t given = o.size.empty() ? o.scale_factor.size() : o.size.size();
  KILN_CHECK(int64_t(given) == nd, ValueError, "interpolate: ",
             o.size.empty() ? "scale_factor" : "size", " must have ", nd,
             " entries for a ", input.dim(), "-d input, got ", given);
  std::vector<int64_t> out(static_cast<size_t>(nd));
  std::vector<double> scale(static_cast<size_t>(nd), 0.0);  // 0: use in / out
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t in = input.size(2 + d);
    if (!o.size.empty()) {
      out[size_t(d)] = o.size[size_t(d)];
    } else {
      const double f = o.scale_factor[size_t(d)];
      KILN_CHECK(std::isfinite(f) && f > 0, ValueError,
                 "interpolate: scale_factor must be positive and finite, got ", f);
      out[size_t(d)] = int64_t(std::floor(double(in) * f));
      if (!o.recompute_scale_factor.value_or(false)) scale[size_t(d)] = f;
    }
    KILN_CHECK(in > 0 && out[size_t(d)] > 0, ValueError,
               "interpolate: input and output sizes should be greater than 0, got input "
               "size ", in, " and output size ", out[size_t(d)], " for spatial dim ", d);
  }
  if (mode == "area") return adaptive_avg_pool(input, out);
  // Bilinear on the CPU where nothing records the call (no gradient, no graph capture): both
  // dims in one index_lerp2, the same values as the two index_lerp calls below without their
  // intermediate tensor, the widening of 16-bit inputs and the rounding back (channels-last
  // [1, 32, 14, 14] float32 x2: 13.8 us, PyTorch 8.8).
  if (mode == "bilinear" && input.device().is_cpu() &&
      !(autograd::is_grad_enabled() && autograd::requires_grad(input)) &&
      get_interceptor(InterceptorSlot::Tracer) == nullptr) {
    const bool channels_last = input.is_channels_last();
    const Tensor v = channels_last ? input.permute({0, 2, 3, 1}) : input;
    if (v.is_contiguous()) {
      const bool align = o.align_corners.value_or(false);
      const Taps th = taps_for(mode, input.size(2), out[0], align, scale[0]);
      const Taps tw = taps_for(mode, input.size(3), out[1], align, scale[1]);
      auto index = [](const Taps& t, size_t k) { return tensor_from(t.index[k]); };
      // The computation dtype's weights, made as such (a conversion is one more op call).
      auto weight = [&](const Taps& t) {
        if (input.dtype() == DType::F64) return tensor_from(t.weight[1]);
        return tensor_from(std::vector<float>(t.weight[1].begin(), t.weight[1].end()));
      };
      const Tensor y = index_lerp2(v, channels_last ? 1 : 2, index(th, 0), index(th, 1),
                                   weight(th), index(tw, 0), index(tw, 1), weight(tw));
      return channels_last ? y.permute({0, 3, 1, 2}) : y;
    }
  }
  // 16-bit floats blend in float32 and are rounded once at the end (as PyTorch). Nearest only
  // moves values, exactly in any dtype (widening bfloat16 for it took 2.2x PyTorch's time),
  // unless a gradient will flow back: its sums over the picked positions stay in float32.
  const bool low_precision = (input.dtype() == DType::BF16 || input.dtype() == DType::F16) &&
                             (is_interpolating(mode) || autograd::requires_grad(input));
  Tensor y = low_precision ? input.to(DType::F32) : input;
  // A channels-last input is resized as its NHWC view (contiguous): each pick moves whole
  // rows of channels, and the result is channels-last as PyTorch's. Picking along H and W of
  // the NCHW-shaped tensor gathered single elements: nearest x2 on [8, 32, 28, 28] took
  // 2.06 ms against torch's 74 us.
  const bool channels_last = input.is_channels_last();
  if (channels_last) y = y.permute({0, 2, 3, 1});
  const int64_t first_spatial = channels_last ? 1 : 2;
  int64_t out_positions = 1;
  for (int64_t o : out) out_positions *= o;
  // Channels-last picks whole rows of channels per position; channels-first picks single
  // values through the flat index once per plane, which is quick only while the index stays
  // in the L1 / L2 (nearest x2 of [1, 3, 224, 224]: 182 us one dim at a time, 658 at once).
  if ((mode == "nearest" || mode == "nearest-exact") && nd > 1 && y.is_contiguous() &&
      out_positions <= (channels_last ? kNearestAtOnceMaxPlaneRows : kNearestAtOnceMaxPlane)) {
    y = resize_nearest_at_once(y, first_spatial, nd, out, mode, scale);
    if (channels_last) y = y.permute({0, 3, 1, 2});
    return low_precision ? y.to(input.dtype()) : y;
  }
  for (int64_t d = 0; d < nd; ++d)
    y = resize_dim(y, first_spatial + d, out[size_t(d)], mode, o.align_corners.value_or(false),
                   scale[size_t(d)]);
  if (channels_last) y = y.permute({0, 3, 1, 2});
  return low_precision ? y.to(input.dtype()) : y;
}

}  // namespace kiln::nn::functional
