// GridSample (opset 16): each output pixel samples the input at a normalised grid location
// ([-1, 1] across the image; align_corners decides whether the ends are pixel centres or
// pixel edges), by nearest (ties to even), bilinear or bicubic (A = -0.75) interpolation.
// Locations outside the image read zeros, the border pixels, or the image reflected at its
// ends. Computed on the host: a per-pixel gather with data-dependent taps.
#include <algorithm>
#include <cmath>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"

namespace kiln::onnx {

namespace {

enum class Padding { Zeros, Border, Reflection };

// v reflected into [lo, hi] as many times as needed.
double reflect(double v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (v >= lo && v <= hi) return v;
  const double past = v < lo ? lo - v : v - hi;
  const int64_t folds = int64_t(past / range);
  const double rest = past - double(folds) * range;
  const bool from_low = (v < lo) == (folds % 2 == 0);
  return from_low ? lo + rest : hi - rest;
}

struct Plane {
  const double* data;
  int64_t h, w;
  Padding padding;
  double lo_x, hi_x, lo_y, hi_y;  // the reflection bounds

  double at(int64_t r, int64_t c) const {
    switch (padding) {
      case Padding::Zeros:
        return r >= 0 && r < h && c >= 0 && c < w ? data[r * w + c] : 0.0;
      case Padding::Border:
        return data[std::clamp<int64_t>(r, 0, h - 1) * w + std::clamp<int64_t>(c, 0, w - 1)];
      case Padding::Reflection:
        r = std::clamp<int64_t>(int64_t(reflect(double(r), lo_y, hi_y)), 0, h - 1);
        c = std::clamp<int64_t>(int64_t(reflect(double(c), lo_x, hi_x)), 0, w - 1);
        return data[r * w + c];
    }
    return 0.0;
  }
};

void cubic_weights(double t, double out[4]) {
  const double a = -0.75;
  auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };           // |d| <= 1
  auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };      // 1 < |d| < 2
  out[0] = far(t + 1);
  out[1] = near(t);
  out[2] = near(1 - t);
  out[3] = far(2 - t);
}

std::vector<Tensor> op_grid_sample(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  KILN_CHECK(x.dim() == 4, NotImplementedError, "only 4-d inputs [N, C, H, W] are supported, got ",
             shape_str(x.shape()));
  KILN_CHECK(grid.dim() == 4 && grid.size(0) == x.size(0) && grid.size(3) == 2, ShapeError,
             "grid must be [", x.size(0), ", H_out, W_out, 2], got ", shape_str(grid.shape()));
  const std::string mode = ctx.attr_string("mode", "bilinear");
  const std::string pad_name = ctx.attr_string("padding_mode", "zeros");
  KILN_CHECK(mode == "bilinear" || mode == "nearest" || mode == "bicubic", ValueError,
             "mode must be bilinear, nearest or bicubic, got '", printable(mode, 50), "'");
  KILN_CHECK(pad_name == "zeros" || pad_name == "border" || pad_name == "reflection", ValueError,
             "padding_mode must be zeros, border or reflection, got '", printable(pad_name, 50), "'");
  const Padding padding = pad_name == "zeros" ? Padding::Zeros : pad_name == "border" ? Padding::Border
                                                                                      : Padding::Reflection;
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = grid.size(1), ow = grid.size(2);
  const std::vector<double> xv = cast(x, DType::F64).to_vector<double>();
  const std::vector<double> gv = cast(grid, DType::F64).to_vector<double>();
  std::vector<double> out(size_t(n * c * oh * ow));
  // Pixel coordinates of the normalised ends, and the range valid locations lie in.
  auto unnormalise = [&](double v, int64_t size) {
    return align ? (v + 1) / 2 * double(size - 1) : ((v + 1) * double(size) - 1) / 2;
  };
  const double lo_x = align ? 0.0 : -0.5, hi_x = align ? double(w - 1) : double(w) - 0.5;
  const double lo_y = align ? 0.0 : -0.5, hi_y = align ? double(h - 1) : double(h) - 0.5;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t p = 0; p < oh * ow; ++p) {
      double gx = unnormalise(gv[size_t((b * oh * ow + p) * 2)], w);
      double gy = unnormalise(gv[size_t((b * oh * ow + p) * 2 + 1)], h);
      if (mode == "nearest") gx = std::nearbyint(gx), gy = std::nearbyint(gy);
      if (gx < lo_x || gx > hi_x || gy < lo_y || gy > hi_y) {
        if (padding == Padding::Border) {
          gx = std::clamp(gx, 0.0, double(w - 1));
          gy = std::clamp(gy, 0.0, double(h - 1));
        } else if (padding == Padding::Reflection) {
          gx = reflect(gx, lo_x, hi_x);
          gy = reflect(gy, lo_y, hi_y);
        }
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        const Plane plane{&xv[size_t((b * c + ch) * h * w)], h, w, padding, lo_x, hi_x, lo_y, hi_y};
        double v = 0;
        if (mode == "nearest") {
          v = plane.at(int64_t(gy), int64_t(gx));
        } else if (mode == "bilinear") {
          const int64_t x0 = int64_t(std::floor(gx)), y0 = int64_t(std::floor(gy));
          const double fx = gx - double(x0), fy = gy - double(y0);
          v = (1 - fy) * ((1 - fx) * plane.at(y0, x0) + fx * plane.at(y0, x0 + 1)) +
              fy * ((1 - fx) * plane.at(y0 + 1, x0) + fx * plane.at(y0 + 1, x0 + 1));
        } else {
          const int64_t x0 = int64_t(std::floor(gx)) - 1, y0 = int64_t(std::floor(gy)) - 1;
          double wx[4], wy[4];
          cubic_weights(gx - double(x0 + 1), wx);
          cubic_weights(gy - double(y0 + 1), wy);
          for (int64_t i = 0; i < 4; ++i) {
            double row = 0;
            for (int64_t j = 0; j < 4; ++j) row += wx[j] * plane.at(y0 + i, x0 + j);
            v += wy[i] * row;
          }
        }
        out[size_t((b * c + ch) * oh * ow + p)] = v;
      }
    }
  }
  return one(ctx.on_device(cast(tensor_from(out, Shape{n, c, oh, ow}), x.dtype())));
}

}  // namespace

void register_grid_sample_ops(OpTable& t) { t.add("GridSample", op_grid_sample); }

}  // namespace kiln::onnx
