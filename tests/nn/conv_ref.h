#pragma once
// Independent float64 references for convolution and pooling, written as the textbook sums
// (direct loops over every output and kernel tap; the transposed convolution as a scatter),
// for the conv and pooling tests. 1-D problems use H = 1.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kiln::nn::test {

struct Conv2dCase {
  int64_t N, C, H, W, O, KH, KW;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t oph = 0, opw = 0;  // transposed only
};

inline int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// x [N, C, H, W], w [O, C/g, KH, KW], b [O] or empty -> [N, O, OH, OW]
inline std::vector<double> ref_conv2d(const Conv2dCase& c, const std::vector<double>& x,
                                      const std::vector<double>& w, const std::vector<double>& b) {
  const int64_t OH = conv_out(c.H, c.KH, c.sh, c.ph, c.dh), OW = conv_out(c.W, c.KW, c.sw, c.pw, c.dw);
  const int64_t cg = c.C / c.groups, og = c.O / c.groups;
  std::vector<double> y(size_t(c.N * c.O * OH * OW), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b.empty() ? 0.0 : b[size_t(o)];
          const int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                const int64_t ih = oh * c.sh - c.ph + kh * c.dh, iw = ow * c.sw - c.pw + kw * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                s += x[size_t(((n * c.C + g * cg + ci) * c.H + ih) * c.W + iw)] *
                     w[size_t(((o * cg + ci) * c.KH + kh) * c.KW + kw)];
              }
          y[size_t(((n * c.O + o) * OH + oh) * OW + ow)] = s;
        }
  return y;
}

inline int64_t conv_t_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op) {
  return (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
}

// The weight gradient of ref_conv2d: dW[o, ci, kh, kw] = the sum over samples and output
// pixels of gy[n, o, oh, ow] * x[n, g * C/g + ci, ih, iw] (taps in the padding add nothing);
// abs, when given, receives the same sums of absolute products (the scale of the rounding).
inline std::vector<double> ref_conv2d_weight_grad(const Conv2dCase& c,
                                                  const std::vector<double>& x,
                                                  const std::vector<double>& gy,
                                                  std::vector<double>* abs = nullptr) {
  const int64_t OH = conv_out(c.H, c.KH, c.sh, c.ph, c.dh);
  const int64_t OW = conv_out(c.W, c.KW, c.sw, c.pw, c.dw);
  const int64_t cg = c.C / c.groups, og = c.O / c.groups;
  std::vector<double> dw(size_t(c.O * cg * c.KH * c.KW), 0.0);
  if (abs) abs->assign(dw.size(), 0.0);
  for (int64_t o = 0; o < c.O; ++o)
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t kh = 0; kh < c.KH; ++kh)
        for (int64_t kw = 0; kw < c.KW; ++kw) {
          double s = 0, a = 0;
          const int64_t g = o / og;
          for (int64_t n = 0; n < c.N; ++n)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t ih = oh * c.sh - c.ph + kh * c.dh;
                const int64_t iw = ow * c.sw - c.pw + kw * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const double p = gy[size_t(((n * c.O + o) * OH + oh) * OW + ow)] *
                                 x[size_t(((n * c.C + g * cg + ci) * c.H + ih) * c.W + iw)];
                s += p;
                a += std::abs(p);
              }
          const size_t at = size_t(((o * cg + ci) * c.KH + kh) * c.KW + kw);
          dw[at] = s;
          if (abs) (*abs)[at] = a;
        }
  return dw;
}

// Transposed: x [N, C, H, W], w [C, O/g, KH, KW] -> [N, O, OH, OW], as a scatter of every
// input element through the kernel.
inline std::vector<double> ref_conv_transpose2d(const Conv2dCase& c, const std::vector<double>& x,
                                                const std::vector<double>& w,
                                                const std::vector<double>& b) {
  const int64_t OH = conv_t_out(c.H, c.KH, c.sh, c.ph, c.dh, c.oph);
  const int64_t OW = conv_t_out(c.W, c.KW, c.sw, c.pw, c.dw, c.opw);
  const int64_t cg = c.C / c.groups, og = c.O / c.groups;
  std::vector<double> y(size_t(c.N * c.O * OH * OW), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t i = 0; i < OH * OW; ++i)
        y[size_t((n * c.O + o) * OH * OW + i)] = b.empty() ? 0.0 : b[size_t(o)];
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ci = 0; ci < c.C; ++ci) {
      const int64_t g = ci / cg;
      for (int64_t ih = 0; ih < c.H; ++ih)
        for (int64_t iw = 0; iw < c.W; ++iw) {
          const double v = x[size_t(((n * c.C + ci) * c.H + ih) * c.W + iw)];
          for (int64_t oo = 0; oo < og; ++oo)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                const int64_t yh = ih * c.sh - c.ph + kh * c.dh, yw = iw * c.sw - c.pw + kw * c.dw;
                if (yh < 0 || yh >= OH || yw < 0 || yw >= OW) continue;
                const int64_t o = g * og + oo;
                y[size_t(((n * c.O + o) * OH + yh) * OW + yw)] +=
                    v * w[size_t(((ci * og + oo) * c.KH + kh) * c.KW + kw)];
              }
        }
    }
  return y;
}

struct Pool2dCase {
  int64_t P, H, W, KH, KW, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false, include_pad = true;
  int64_t divisor = 0;  // 0: none
};

inline int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double v = double(in + 2 * p - d * (k - 1) - 1) / double(s);
  int64_t out = int64_t(ceil ? std::ceil(v) : std::floor(v)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

// Max pooling over planes [P, H, W]: values and flat indices (first maximum; NaN wins).
inline void ref_max_pool2d(const Pool2dCase& c, const std::vector<double>& x,
                           std::vector<double>& y, std::vector<int64_t>& idx) {
  const int64_t OH = pool_out(c.H, c.KH, c.sh, c.ph, c.dh, c.ceil);
  const int64_t OW = pool_out(c.W, c.KW, c.sw, c.pw, c.dw, c.ceil);
  y.assign(size_t(c.P * OH * OW), 0);
  idx.assign(y.size(), -1);
  for (int64_t p = 0; p < c.P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t bi = -1;
        for (int64_t kh = 0; kh < c.KH; ++kh)
          for (int64_t kw = 0; kw < c.KW; ++kw) {
            const int64_t ih = oh * c.sh - c.ph + kh * c.dh, iw = ow * c.sw - c.pw + kw * c.dw;
            if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
            const double v = x[size_t((p * c.H + ih) * c.W + iw)];
            if (bi < 0 || v > best || std::isnan(v)) {
              best = v;
              bi = ih * c.W + iw;
            }
          }
        y[size_t((p * OH + oh) * OW + ow)] = best;
        idx[size_t((p * OH + oh) * OW + ow)] = bi;
      }
}

inline std::vector<double> ref_avg_pool2d(const Pool2dCase& c, const std::vector<double>& x) {
  const int64_t OH = pool_out(c.H, c.KH, c.sh, c.ph, 1, c.ceil);
  const int64_t OW = pool_out(c.W, c.KW, c.sw, c.pw, 1, c.ceil);
  std::vector<double> y(size_t(c.P * OH * OW));
  for (int64_t p = 0; p < c.P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double s = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t kh = 0; kh < c.KH; ++kh)
          for (int64_t kw = 0; kw < c.KW; ++kw) {
            const int64_t ih = oh * c.sh - c.ph + kh, iw = ow * c.sw - c.pw + kw;
            // positions within the padded input count for count_include_pad
            if (ih < c.H + c.ph && iw < c.W + c.pw) ++padded;
            if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
            s += x[size_t((p * c.H + ih) * c.W + iw)];
            ++inside;
          }
        const double div = c.divisor ? double(c.divisor) : double(c.include_pad ? padded : inside);
        y[size_t((p * OH + oh) * OW + ow)] = s / div;
      }
  return y;
}

inline std::vector<double> ref_adaptive_avg_pool2d(int64_t P, int64_t H, int64_t W, int64_t OH,
                                                   int64_t OW, const std::vector<double>& x) {
  std::vector<double> y(size_t(P * OH * OW));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = int64_t(std::floor(double(oh * H) / double(OH)));
        const int64_t h1 = int64_t(std::ceil(double((oh + 1) * H) / double(OH)));
        const int64_t w0 = int64_t(std::floor(double(ow * W) / double(OW)));
        const int64_t w1 = int64_t(std::ceil(double((ow + 1) * W) / double(OW)));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += x[size_t((p * H + h) * W + w)];
        y[size_t((p * OH + oh) * OW + ow)] = s / double((h1 - h0) * (w1 - w0));
      }
  return y;
}

}  // namespace kiln::nn::test
