// Object-detection operators, computed on the host (both are data-dependent loops over a
// few boxes): NonMaxSuppression and RoiAlign.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"

namespace kiln::onnx {

namespace {

struct Box {
  float y0, x0, y1, x1;  // corners, ordered
};

Box corners(const float* b, bool center_format) {
  if (center_format) {  // [x_center, y_center, width, height]
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  }
  // [y1, x1, y2, x2], either corner first
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

float iou(const Box& a, const Box& b) {
  const float ih = std::max(0.f, std::min(a.y1, b.y1) - std::max(a.y0, b.y0));
  const float iw = std::max(0.f, std::min(a.x1, b.x1) - std::max(a.x0, b.x0));
  const float inter = ih * iw;
  const float uni = (a.y1 - a.y0) * (a.x1 - a.x0) + (b.y1 - b.y0) * (b.x1 - b.x0) - inter;
  return uni > 0 ? inter / uni : 0.f;
}

// Per batch and class: boxes by descending score (ties by index), each kept unless it
// overlaps a kept one by more than iou_threshold, at most max_output_boxes_per_class.
std::vector<Tensor> op_non_max_suppression(OpContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  KILN_CHECK(boxes.dim() == 3 && boxes.size(2) == 4, ShapeError, "boxes must be [batch, boxes, 4], got ",
             shape_str(boxes.shape()));
  KILN_CHECK(scores.dim() == 3 && scores.size(0) == boxes.size(0) && scores.size(2) == boxes.size(1), ShapeError,
             "scores must be [batch, classes, ", boxes.size(1), "], got ", shape_str(scores.shape()));
  const int64_t max_out = ctx.has_input(2) ? int64_t(ctx.input_scalar(2)) : 0;
  const float iou_threshold = ctx.has_input(3) ? float(ctx.input_scalar(3)) : 0.f;
  const bool has_score_threshold = ctx.has_input(4);
  const float score_threshold = has_score_threshold ? float(ctx.input_scalar(4)) : 0.f;
  const bool center = ctx.attr_int("center_point_box", 0) != 0;
  const int64_t batches = boxes.size(0), classes = scores.size(1), n = boxes.size(1);
  const std::vector<float> bv = cast(boxes, DType::F32).to_vector<float>();
  const std::vector<float> sv = cast(scores, DType::F32).to_vector<float>();
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    std::vector<Box> bb;
    for (int64_t i = 0; i < n; ++i) bb.push_back(corners(&bv[size_t((b * n + i) * 4)], center));
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = &sv[size_t((b * classes + c) * n)];
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) cand.push_back(i);
      }
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept) keep = keep && !(iou(bb[size_t(i)], bb[size_t(k)]) > iou_threshold);
        if (keep) kept.push_back(i);
      }
      for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
    }
  }
  const int64_t rows = int64_t(selected.size() / 3);
  return one(ctx.on_device(tensor_from(selected, Shape{rows, 3})));
}

// The bilinear sample of one plane at (y, x); outside [-1, size] it is zero.
double bilinear(const double* plane, int64_t h, int64_t w, double y, double x) {
  if (y < -1.0 || y > double(h) || x < -1.0 || x > double(w)) return 0.0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = int64_t(y), x0 = int64_t(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) y0 = y1 = h - 1, y = double(y0);
  if (x0 >= w - 1) x0 = x1 = w - 1, x = double(x0);
  const double ly = y - double(y0), lx = x - double(x0);
  return (1 - ly) * ((1 - lx) * plane[y0 * w + x0] + lx * plane[y0 * w + x1]) +
         ly * ((1 - lx) * plane[y1 * w + x0] + lx * plane[y1 * w + x1]);
}

// Per region and output cell: the average (or the maximum) of a grid of bilinear samples.
// Opset 16's default half_pixel mode shifts coordinates by half a pixel and allows regions
// under one pixel; output_half_pixel (opset 10's behaviour) does neither.
std::vector<Tensor> op_roi_align(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch_index = ctx.input(2);
  KILN_CHECK(x.dim() == 4, ShapeError, "X must be [N, C, H, W], got ", shape_str(x.shape()));
  KILN_CHECK(rois.dim() == 2 && rois.size(1) == 4 && batch_index.numel() == rois.size(0), ShapeError,
             "rois must be [num_rois, 4] with one batch index each, got ", shape_str(rois.shape()), " and ",
             shape_str(batch_index.shape()));
  const std::string mode = ctx.attr_string("mode", "avg");
  KILN_CHECK(mode == "avg" || mode == "max", ValueError, "mode must be avg or max, got '", printable(mode, 50), "'");
  const bool half_pixel =
      ctx.opset() >= 16 && ctx.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const int64_t oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
  const int64_t ratio = ctx.attr_int("sampling_ratio", 0);
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), r = rois.size(0);
  const std::vector<double> xv = cast(x, DType::F64).to_vector<double>();
  const std::vector<double> rv = cast(rois, DType::F64).to_vector<double>();
  const std::vector<int64_t> bi = cast(batch_index, DType::I64).to_vector<int64_t>();
  std::vector<double> out(size_t(r * c * oh * ow));
  const double offset = half_pixel ? 0.5 : 0.0;
  for (int64_t k = 0; k < r; ++k) {
    KILN_CHECK(bi[size_t(k)] >= 0 && bi[size_t(k)] < n, IndexError, "batch index ", bi[size_t(k)], " of region ", k,
               " is out of range for ", n, " images");
    const double* roi = &rv[size_t(k * 4)];
    const double sx = roi[0] * scale - offset, sy = roi[1] * scale - offset;
    double rw = roi[2] * scale - offset - sx, rh = roi[3] * scale - offset - sy;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / double(oh), bw = rw / double(ow);
    const int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(oh)));
    const int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(ow)));
    const double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* plane = &xv[size_t((bi[size_t(k)] * c + ch) * h * w)];
      for (int64_t py = 0; py < oh; ++py) {
        for (int64_t px = 0; px < ow; ++px) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            const double y = sy + double(py) * bh + (double(iy) + 0.5) * bh / double(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              const double xx = sx + double(px) * bw + (double(ix) + 0.5) * bw / double(gw);
              const double v = bilinear(plane, h, w, y, xx);
              if (mode == "avg") acc += v;
              else acc = first ? v : std::max(acc, v);
              first = false;
            }
          }
          out[size_t(((k * c + ch) * oh + py) * ow + px)] = mode == "avg" ? acc / count : acc;
        }
      }
    }
  }
  return one(ctx.on_device(cast(tensor_from(out, Shape{r, c, oh, ow}), x.dtype())));
}

}  // namespace

void register_detection_ops(OpTable& t) {
  t.add("NonMaxSuppression", op_non_max_suppression);
  t.add("RoiAlign", op_roi_align);
}

}  // namespace kiln::onnx
