// Resize (opset 10+) and Upsample (7-9): separable interpolation. For every resized axis the
// source coordinate of each output index is computed on the host (the coordinate
// transformation mode), which gives per tap an index vector and a weight vector; the axis
// is then a weighted sum of index_selects. Nearest uses one tap, linear two, cubic four;
// out-of-range taps read the edge (or are dropped and renormalised with exclude_outside),
// and tf_crop_and_resize writes extrapolation_value outside the crop.
#include <cmath>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

struct ResizeMode {
  std::string mode = "nearest";  // nearest, linear, cubic
  std::string coord = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// out: the resized length as the reference computes it (in * scale, not rounded, when
// scales are given).
double source_coordinate(const ResizeMode& m, double x, double scale, int64_t in, double out,
                         double roi_start, double roi_end) {
  const std::string& c = m.coord;
  if (c == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (c == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (c == "align_corners") return out == 1 ? 0.0 : x * double(in - 1) / (out - 1);
  if (c == "asymmetric") return x / scale;
  if (c == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (c == "tf_crop_and_resize")
    return out > 1 ? roi_start * double(in - 1) + x * (roi_end - roi_start) * double(in - 1) / (out - 1)
                   : 0.5 * (roi_start + roi_end) * double(in - 1);
  KILN_THROW(ValueError, "unknown coordinate_transformation_mode ", quoted(c));
}

int64_t nearest_index(const std::string& mode, double x) {
  if (mode == "floor") return int64_t(std::floor(x));
  if (mode == "ceil") return int64_t(std::ceil(x));
  const double f = std::floor(x);
  if (x - f == 0.5) return int64_t(mode == "round_prefer_ceil" ? f + 1 : f);
  KILN_CHECK(mode == "round_prefer_floor" || mode == "round_prefer_ceil", ValueError,
             "unknown nearest_mode ", quoted(mode));
  return int64_t(std::llround(x));
}

std::vector<double> cubic_weights(double r, double a) {
  auto w = [a](double t) {
    t = std::fabs(t);
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0.0;
  };
  return {w(r + 1), w(r), w(1 - r), w(2 - r)};
}

// x resized along axis to out elements.
Tensor resize_axis(const Tensor& x, int64_t axis, int64_t out, double scale, const ResizeMode& m,
                   double roi_start, double roi_end) {
  const int64_t in = x.size(axis);
  const int64_t taps = m.mode == "nearest" ? 1 : m.mode == "linear" ? 2 : 4;
  std::vector<std::vector<int64_t>> idx(size_t(taps), std::vector<int64_t>(static_cast<size_t>(out)));
  std::vector<std::vector<double>> wts(size_t(taps), std::vector<double>(static_cast<size_t>(out)));
  std::vector<uint8_t> outside(static_cast<size_t>(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    const double src = source_coordinate(m, double(o), scale, in, double(in) * scale, roi_start, roi_end);
    if (m.coord == "tf_crop_and_resize" && (src < 0 || src > double(in - 1))) outside[size_t(o)] = 1;
    std::vector<int64_t> pos;
    std::vector<double> w;
    if (m.mode == "nearest") {
      pos = {nearest_index(m.nearest, src)};
      w = {1.0};
    } else {
      const double f = std::floor(src), r = src - f;
      if (m.mode == "linear") {
        pos = {int64_t(f), int64_t(f) + 1};
        w = {1 - r, r};
      } else {
        pos = {int64_t(f) - 1, int64_t(f), int64_t(f) + 1, int64_t(f) + 2};
        w = cubic_weights(r, m.cubic_a);
      }
    }
    double total = 0;
    for (size_t t = 0; t < pos.size(); ++t) {
      if (m.exclude_outside && (pos[t] < 0 || pos[t] >= in)) w[t] = 0;
      total += w[t];
    }
    for (size_t t = 0; t < pos.size(); ++t) {
      idx[t][size_t(o)] = std::clamp<int64_t>(pos[t], 0, in - 1);
      wts[t][size_t(o)] = m.exclude_outside && total != 0 ? w[t] / total : w[t];
    }
  }
  Shape wshape(size_t(x.dim()), 1);
  wshape[size_t(axis)] = out;
  Tensor y;
  for (int64_t t = 0; t < taps; ++t) {
    Tensor picked = index_select(x, axis, to_device(tensor_from(idx[size_t(t)]), x.device()));
    if (m.mode != "nearest") {
      Tensor w = cast(to_device(tensor_from(wts[size_t(t)], wshape), x.device()), x.dtype());
      picked = mul(picked, w);
    }
    y = t == 0 ? picked : add(y, picked);
  }
  if (m.coord == "tf_crop_and_resize") {
    Tensor mask = to_device(tensor_from(std::vector<bool>(outside.begin(), outside.end()), wshape), x.device());
    y = where(mask, scalar_like(y, m.extrapolation), y);
  }
  return y;
}

Tensor resize(const Tensor& x, const std::vector<int64_t>& sizes, const std::vector<double>& scales,
              const ResizeMode& m, const std::vector<double>& roi) {
  Tensor y = is_floating(x.dtype()) ? x : to_dtype(x, DType::F32);
  // A channels-last image (the convolutions' layout, decision 0062) is resized as the
  // contiguous [N, H, W, C] tensor it is: index_select then gathers whole rows of channels,
  // where on the NCHW view it moved one element at a time.
  const bool nhwc = y.is_channels_last();
  const int64_t nhwc_axis[4] = {0, 3, 1, 2};  // NCHW dim -> its dim in the NHWC view
  if (nhwc) y = permute(y, {0, 2, 3, 1});
  for (int64_t d = 0; d < x.dim(); ++d) {
    const double roi_start = roi.size() == size_t(2 * x.dim()) ? roi[size_t(d)] : 0.0;
    const double roi_end = roi.size() == size_t(2 * x.dim()) ? roi[size_t(d + x.dim())] : 1.0;
    if (sizes[size_t(d)] == x.size(d) && scales[size_t(d)] == 1.0 && m.coord != "tf_crop_and_resize") continue;
    y = resize_axis(y, nhwc ? nhwc_axis[d] : d, sizes[size_t(d)], scales[size_t(d)], m,
                    roi_start, roi_end);
  }
  if (nhwc) y = permute(y, {0, 3, 1, 2});
  return cast(y, x.dtype());
}

std::vector<double> float_values(const Tensor& t) { return t.to_vector<double>(); }

std::vector<Tensor> op_resize(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  ResizeMode m;
  m.mode = ctx.attr_string("mode", "nearest");
  KILN_CHECK(m.mode == "nearest" || m.mode == "linear" || m.mode == "cubic", ValueError,
             "mode must be nearest, linear or cubic, got ", quoted(m.mode));
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (ctx.opset() < 11) {
    m.coord = "asymmetric";
    m.nearest = "floor";
    scales = float_values(ctx.input(1));
  } else {
    m.coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
    m.nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
    m.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
    m.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
    m.extrapolation = ctx.attr_float("extrapolation_value", 0.0f);
    if (ctx.has_input(1)) roi = float_values(ctx.input(1));
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) scales = float_values(ctx.input(2));
    if (ctx.has_input(3) && ctx.input(3).numel() > 0) sizes = ctx.input_ints(3);
  }
  KILN_CHECK(!scales.empty() || !sizes.empty(), ValueError, "one of scales and sizes must be given");
  if (!sizes.empty()) {
    KILN_CHECK(int64_t(sizes.size()) == x.dim(), ShapeError, "sizes has ", sizes.size(), " entries for rank ", x.dim());
    scales.clear();
    for (int64_t d = 0; d < x.dim(); ++d) scales.push_back(double(sizes[size_t(d)]) / double(x.size(d)));
  } else {
    KILN_CHECK(int64_t(scales.size()) == x.dim(), ShapeError, "scales has ", scales.size(), " entries for rank ",
               x.dim());
    for (int64_t d = 0; d < x.dim(); ++d) {
      KILN_CHECK(scales[size_t(d)] > 0, ValueError, "scales must be positive");
      sizes.push_back(int64_t(std::floor(double(x.size(d)) * scales[size_t(d)])));
    }
  }
  return one(resize(x, sizes, scales, m, roi));
}

std::vector<Tensor> op_upsample(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  ResizeMode m;
  m.mode = ctx.attr_string("mode", "nearest");
  KILN_CHECK(m.mode == "nearest" || m.mode == "linear", ValueError, "mode must be nearest or linear, got ",
             quoted(m.mode));
  m.coord = "asymmetric";
  m.nearest = "floor";
  std::vector<double> scales;
  if (ctx.opset() >= 9) {
    scales = float_values(ctx.input(1));
  } else {
    for (float s : ctx.attr_floats("scales")) scales.push_back(s);
  }
  KILN_CHECK(int64_t(scales.size()) == x.dim(), ShapeError, "scales has ", scales.size(), " entries for rank ", x.dim());
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < x.dim(); ++d) sizes.push_back(int64_t(std::floor(double(x.size(d)) * scales[size_t(d)])));
  return one(resize(x, sizes, scales, m, {}));
}

}  // namespace

void register_resize_ops(OpTable& t) {
  t.add("Resize", op_resize);
  t.add("Upsample", op_upsample);
}

}  // namespace kiln::onnx
