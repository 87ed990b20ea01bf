// CPU kernels of the pooling ops. The pooled dims are the trailing 1-3 dims; every leading
// index is an independent plane (planes run in parallel). 1-D and 2-D pooling are 3-D
// pooling whose leading pooled dims have size 1. Sums accumulate in double and each output
// is rounded once. Inputs arrive contiguous.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "isa/reduce_vec.h"
#include "isa/vec_math.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

struct PoolGeometry {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  int64_t planes = 0;
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

// Geometry from the input and output shapes; window lists may be empty (adaptive pools).
PoolGeometry geometry(const Shape& in, const Shape& out, size_t nd,
                      const std::vector<int64_t>& k = {}, const std::vector<int64_t>& s = {},
                      const std::vector<int64_t>& p = {}, const std::vector<int64_t>& d = {}) {
  PoolGeometry g;
  const size_t lead = 3 - nd, first = in.size() - nd;
  g.planes = 1;
  for (size_t i = 0; i < first; ++i) g.planes *= in[i];
  for (size_t i = 0; i < nd; ++i) {
    g.in[lead + i] = in[first + i];
    g.out[lead + i] = out[first + i];
    if (!k.empty()) g.k[lead + i] = k[i];
    if (!s.empty()) g.s[lead + i] = s[i];
    if (!p.empty()) g.p[lead + i] = p[i];
    if (!d.empty()) g.d[lead + i] = d[i];
  }
  return g;
}

// Calls f(output offset within plane, window bounds [lo, hi) per dim) for every output.
// Window bounds here are of the *unpadded, undilated* span; callers clip as their op needs.
template <typename F>
void for_each_output(const PoolGeometry& g, F&& f) {
  int64_t o = 0;
  for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
    for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
      for (int64_t o2 = 0; o2 < g.out[2]; ++o2, ++o) f(o, o0, o1, o2);
}

// Planes spread over the threads once there are 2^14 outputs, or as many window taps
// (reads) over all outputs as that many windows of `taps_per_output` taps.
template <typename F>
void parallel_planes(const PoolGeometry& g, F&& f, int64_t taps_per_output = 1) {
  const int64_t reads = g.planes * g.out_size() * std::max<int64_t>(taps_per_output, 1);
  const bool parallel = g.planes > 1 && reads >= (int64_t(1) << 14);
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t b = 0; b < g.planes; ++b) f(b);
  });
}

// --- max pooling ---------------------------------------------------------------------
// The taps j in [lo, hi) of a window starting at st whose positions st + j * d are inside
// [0, in).
inline void tap_range(int64_t st, int64_t d, int64_t k, int64_t in, int64_t& lo, int64_t& hi) {
  lo = st >= 0 ? 0 : (-st + d - 1) / d;
  hi = in - st <= 0 ? 0 : std::min<int64_t>(k, (in - st + d - 1) / d);
  if (hi < lo) hi = lo;
}

// 2-D max pooling of a channels-last input into channels-last outputs: for each output
// position the window's taps are whole rows of C contiguous channels, so the comparisons run
// across channels (vectorisable) instead of one scalar window per plane. Same ties and NaN
// rule as the planar kernel below; indices are flat within each (h, w) plane.
template <typename T>
void max_pool_channels_last(OpCall& call) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Tensor& x = call.inputs[0];
  const int64_t N = x.size(0), Ch = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = call.outs[0].size(2), OW = call.outs[0].size(3);
  const auto& k = call.ints_attr(0);
  const auto& s = call.ints_attr(1);
  const auto& p = call.ints_attr(2);
  const auto& d = call.ints_attr(3);
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  int64_t* idx = static_cast<int64_t*>(call.outs[1].raw_data());
  // Reads (outputs times window taps), as parallel_planes.
  const bool parallel = N * OH > 1 && N * OH * OW * Ch * k[0] * k[1] >= (int64_t(1) << 14);
  // The ISA's vector form for float32 / bfloat16 (this file is baseline code: the loops below
  // ran at SSE2 width, [1, 64, 56, 56] 3x3 stride 2 in 94 us on one thread, PyTorch 64); it
  // keeps tap positions as floats, exact up to 2^24.
  const VecMathF32& vm = vec_math_f32();
  using VecMaxTaps = int64_t (*)(const T*, const int32_t*, int64_t, int64_t, T*, float*);
  VecMaxTaps max_taps = nullptr;
  if (H * W <= (int64_t(1) << 24) && vm.to_i64) {
    if constexpr (std::is_same_v<T, float>) max_taps = vm.max_taps;
    if constexpr (std::is_same_v<T, BFloat16>)
      max_taps = reinterpret_cast<VecMaxTaps>(vm.max_taps_bf16);  // BFloat16 is its bits
  }
  parallel_region(parallel, [&] {
    std::vector<C> best(static_cast<size_t>(Ch));
    std::vector<int32_t> best_at(static_cast<size_t>(Ch));
    std::vector<int32_t> flats(static_cast<size_t>(k[0] * k[1]));
    std::vector<float> at(max_taps ? static_cast<size_t>(Ch) : 0);
#pragma omp for schedule(static)
    for (int64_t row = 0; row < N * OH; ++row) {
      const int64_t n = row / OH, oh = row % OH;
      const T* image = src + n * H * W * Ch;
      const int64_t sh = oh * s[0] - p[0];
      int64_t hlo, hhi;
      tap_range(sh, d[0], k[0], H, hlo, hhi);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t sw = ow * s[1] - p[1];
        int64_t wlo, whi;
        tap_range(sw, d[1], k[1], W, wlo, whi);
        T* out = dst + ((n * OH + oh) * OW + ow) * Ch;
        int64_t* out_i = idx + ((n * OH + oh) * OW + ow) * Ch;
        if (hlo >= hhi || wlo >= whi) {  // a dilated window entirely in the padding
          int64_t fh = sh, fw = sw;
          while (fh < 0) fh += d[0];
          while (fw < 0) fw += d[1];
          for (int64_t c = 0; c < Ch; ++c) {
            out[c] = T(-std::numeric_limits<float>::infinity());
            out_i[c] = fh * W + fw;
          }
          continue;
        }
        int64_t taps = 0;
        for (int64_t jh = hlo; jh < hhi; ++jh)
          for (int64_t jw = wlo; jw < whi; ++jw)
            flats[size_t(taps++)] = int32_t((sh + jh * d[0]) * W + sw + jw * d[1]);
        int64_t c0 = 0;
        if (max_taps) {
          c0 = max_taps(image, flats.data(), taps, Ch, out, at.data());
          vm.to_i64(at.data(), out_i, c0);
        }
        // The rest of the channels: the running maxima and their (32-bit) tap positions stay in
        // per-thread rows, so the loop over channels is branch-free; outputs are written once.
        C* b = best.data();
        int32_t* bi = best_at.data();
        for (int64_t t = 0; t < taps; ++t) {
          const int32_t flat = flats[size_t(t)];
          const T* tap = image + int64_t(flat) * Ch;
          if (t == 0) {
            for (int64_t c = c0; c < Ch; ++c) {
              b[c] = C(tap[c]);
              bi[c] = flat;
            }
            continue;
          }
          for (int64_t c = c0; c < Ch; ++c) {
            const C v = C(tap[c]);
            const bool take = v > b[c] || v != v;
            b[c] = take ? v : b[c];
            bi[c] = take ? flat : bi[c];
          }
        }
        for (int64_t c = c0; c < Ch; ++c) out_i[c] = bi[c];
        for (int64_t c = c0; c < Ch; ++c) out[c] = convert_value<T>(best[size_t(c)]);
      }
    }
  });
}

template <typename T>
void max_pool_kernel(OpCall& call) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Tensor& x = call.inputs[0];
  if (!x.is_contiguous()) {  // channels-last (the op passes no other layout)
    max_pool_channels_last<T>(call);
    return;
  }
  const size_t nd = call.ints_attr(0).size();
  const PoolGeometry g = geometry(x.shape(), call.outs[0].shape(), nd, call.ints_attr(0),
                                  call.ints_attr(1), call.ints_attr(2), call.ints_attr(3));
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  int64_t* idx = static_cast<int64_t*>(call.outs[1].raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  if (g.in[0] == 1 && g.out[0] == 1 && g.k[0] == 1 && g.d[1] == 1 && g.d[2] == 1) {
    // 2-D without dilation (every CNN's pooling): the clipped window of each output follows
    // from two min/max per dim, with no per-tap range arithmetic. Same tie and NaN rule.
    const int64_t H = g.in[1], W = g.in[2];
    parallel_planes(g, [&](int64_t b) {
      const T* plane = src + b * I;
      T* out = dst + b * O;
      int64_t* out_i = idx + b * O;
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t hs = oh * g.s[1] - g.p[1];
        const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min<int64_t>(hs + g.k[1], H);
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const int64_t ws = ow * g.s[2] - g.p[2];
          const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min<int64_t>(ws + g.k[2], W);
          const int64_t o = oh * g.out[2] + ow;
          if (h0 >= h1 || w0 >= w1) {  // only possible with ceil_mode past the edge
            out[o] = T(-std::numeric_limits<float>::infinity());
            out_i[o] = std::max<int64_t>(hs, 0) * W + std::max<int64_t>(ws, 0);
            continue;
          }
          int64_t bi = h0 * W + w0;
          C best = C(plane[bi]);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              const C v = C(plane[h * W + w]);
              if (v > best || v != v) {
                best = v;
                bi = h * W + w;
              }
            }
          out[o] = plane[bi];
          out_i[o] = bi;
        }
      }
    });
    return;
  }
  parallel_planes(g, [&](int64_t b) {
    const T* plane = src + b * I;
    for_each_output(g, [&](int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      const int64_t st[3] = {o0 * g.s[0] - g.p[0], o1 * g.s[1] - g.p[1], o2 * g.s[2] - g.p[2]};
      int64_t lo[3], hi[3];
      for (int i = 0; i < 3; ++i) tap_range(st[i], g.d[i], g.k[i], g.in[i], lo[i], hi[i]);
      // As PyTorch: the first in-range element when all are -inf; NaN always wins (the last).
      C best = 0;
      int64_t best_i = -1;
      for (int64_t j0 = lo[0]; j0 < hi[0]; ++j0)
        for (int64_t j1 = lo[1]; j1 < hi[1]; ++j1) {
          const int64_t row = ((st[0] + j0 * g.d[0]) * g.in[1] + st[1] + j1 * g.d[1]) * g.in[2];
          for (int64_t j2 = lo[2]; j2 < hi[2]; ++j2) {
            const int64_t flat = row + st[2] + j2 * g.d[2];
            const C v = C(plane[flat]);
            if (best_i < 0 || v > best || v != v) {
              best = v;
              best_i = flat;
            }
          }
        }
      if (best_i < 0) {
        // A dilated window entirely in the padding: -inf, and (as PyTorch) the index of the
        // window's first tap stepped past the padding by whole dilations.
        int64_t first[3];
        for (int i = 0; i < 3; ++i) {
          first[i] = st[i];
          while (first[i] < 0) first[i] += g.d[i];
        }
        dst[b * O + o] = T(-std::numeric_limits<float>::infinity());
        idx[b * O + o] = (first[0] * g.in[1] + first[1]) * g.in[2] + first[2];
        return;
      }
      dst[b * O + o] = plane[best_i];
      idx[b * O + o] = best_i;
    });
  });
}

// --- average pooling -----------------------------------------------------------------
// The divisor_override attribute at index `attr`, or 0 when absent (0 itself is refused).
int64_t divisor_override_of(const OpCall& call, size_t attr) {
  return call.has_attr(attr) ? call.int_attr(attr) : 0;
}

// Average-pooling windows are separable: each dim's bounds and counts depend on that dim's
// output index only, so they are tabulated once per op (computing a window per output cost
// as much as its sum). The divisor is PyTorch's: the product over the dims of the positions
// inside [-p, in + p) (`padded`), or inside [0, in) (`inside`) when count_include_pad is false;
// divisor_override (non-zero when given, read from the call once per op: the attribute
// lookup per window cost as much as summing a 2 x 2 window) replaces it.
struct DimWindow {
  int64_t lo, hi;
  double padded, inside;  // positions inside [-p, in + p), and inside [0, in)
};

std::vector<DimWindow> dim_windows(const PoolGeometry& g, int d) {
  std::vector<DimWindow> along;
  for (int64_t o = 0; o < g.out[d]; ++o) {
    int64_t lo = o * g.s[d] - g.p[d];
    int64_t hi = std::min(lo + g.k[d], g.in[d] + g.p[d]);
    const double padded = double(hi - lo);
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, g.in[d]);
    along.push_back({lo, hi, padded, double(std::max<int64_t>(hi - lo, 0))});
  }
  return along;
}

// 2-D average pooling of a channels-last input into a channels-last output: each tap of a
// window is a row of C contiguous channels, summed for all channels at once by the ISA's
// window_mean (isa/reduce_vec.h). The sums are double and take the taps in the planar
// kernel's order, so the results are identical to it. The planar route (a contiguous copy,
// the planar kernel, a copy back) ran [8, 32, 28, 28] in 149 us against torch's 21; a scalar
// double loop over the channels (this file is built for baseline x86-64) in 42 against 20.
template <typename T>
void avg_pool_channels_last(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const PoolGeometry g = geometry(x.shape(), call.outs[0].shape(), 2, call.ints_attr(0),
                                  call.ints_attr(1), call.ints_attr(2));
  const bool include_pad = call.bool_attr(4);
  const int64_t divisor_override = divisor_override_of(call, 5);
  const int64_t N = x.size(0), Ch = x.size(1), H = g.in[1], W = g.in[2];
  const int64_t OH = g.out[1], OW = g.out[2];
  const std::vector<DimWindow> rows = dim_windows(g, 1), cols = dim_windows(g, 2);
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  const VecReduce& vr = reduce_vec();
  const VecNarrowBf16 narrow = vec_math_f32().narrow_bf16;
  // Reads (outputs times window taps), as parallel_planes.
  const bool parallel = N * OH > 1 && N * OH * OW * Ch * g.k[1] * g.k[2] >= (int64_t(1) << 14);
  parallel_region(parallel, [&] {
    std::vector<int64_t> offs;
    // bfloat16: a whole output row of means, narrowed in one call.
    std::vector<float> means(std::is_same_v<T, float> ? 0 : size_t(OW * Ch));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < N * OH; ++r) {
      const int64_t n = r / OH;
      const DimWindow& wh = rows[size_t(r % OH)];
      const T* image = src + n * H * W * Ch;
      T* const out_row = dst + r * OW * Ch;
      T* out = out_row;
      for (int64_t ow = 0; ow < OW; ++ow, out += Ch) {
        const DimWindow& ww = cols[size_t(ow)];
        offs.clear();
        for (int64_t ih = wh.lo; ih < wh.hi; ++ih)
          for (int64_t iw = ww.lo; iw < ww.hi; ++iw) offs.push_back((ih * W + iw) * Ch);
        const double divisor = divisor_override != 0 ? double(divisor_override)
                               : include_pad ? wh.padded * ww.padded
                                             : wh.inside * ww.inside;
        const int64_t taps = int64_t(offs.size());
        if constexpr (std::is_same_v<T, float>) {
          vr.window_mean_f32(image, offs.data(), taps, Ch, divisor, out);
        } else if constexpr (std::is_same_v<T, BFloat16>) {
          vr.window_mean_bf16(reinterpret_cast<const uint16_t*>(image), offs.data(), taps, Ch,
                              divisor, means.data() + ow * Ch);
        } else {  // float16 / float64: the double loop itself
          for (int64_t c = 0; c < Ch; ++c) {
            double s = 0;
            for (int64_t off : offs) s += convert_value<double>(image[off + c]);
            out[c] = convert_value<T>(s / divisor);
          }
        }
      }
      if constexpr (std::is_same_v<T, BFloat16>) {
        if (narrow)  // the same rounding as BFloat16(float), in vectors
          narrow(means.data(), reinterpret_cast<uint16_t*>(out_row), OW * Ch);
        else
          for (int64_t c = 0; c < OW * Ch; ++c) out_row[c] = T(means[size_t(c)]);
      }
    }
  });
}

// 2-D windows (avg_pool2d(x, 3, 1, 1), avg_pool2d(x, 3, 2, 1)), float32 and bfloat16: in each
// output row, the outputs whose windows lie inside the row are window_mean's channels
// (isa/reduce_vec.h), which needs the taps of neighbouring outputs one element apart. At
// column stride 1 they are; at stride S the plane is first copied with each row split into
// its S phases (elements q, q + S, q + 2S, ... for q < S), where tap j of output ow is element
// ow + floor((j - P) / S) of phase (j - P) mod S. Each output still sums its window's taps in
// the general loop's order (rows, then columns) in double and divides once, so the results
// are the same bit for bit; the few outputs at the ends of a row take that loop itself. The
// general loop alone (about 45 cycles per 3 x 3 output) ran [8, 32, 28, 28] 3 x 3 stride 1 in
// 589 us on two threads, [1, 64, 56, 56] stride 2 in 148 (channels-last, vectorised: 85, 23).
template <typename T>
void avg_pool_planar_rows(const PoolGeometry& g, const std::vector<DimWindow>& rows,
                          const std::vector<DimWindow>& cols, bool include_pad,
                          int64_t divisor_override, const T* src, T* dst) {
  const VecReduce& vr = reduce_vec();
  const VecNarrowBf16 narrow = vec_math_f32().narrow_bf16;
  const int64_t H = g.in[1], W = g.in[2], OW = g.out[2];
  const int64_t K = g.k[2], S = g.s[2], P = g.p[2];
  // Outputs [inner_lo, inner_hi) have windows [ow * S - P, ow * S - P + K) inside [0, W).
  const int64_t inner_lo = std::min((P + S - 1) / S, OW);
  const int64_t inner_hi =
      W - K + P < 0 ? inner_lo : std::clamp<int64_t>((W - K + P) / S + 1, inner_lo, OW);
  const int64_t inner = inner_hi - inner_lo;
  // Phase q of a split row starts at phase_of[q] (the lengths of the phases before it).
  std::vector<int64_t> phase_of(size_t(S) + 1, 0);
  for (int64_t q = 0; q < S; ++q)
    phase_of[size_t(q) + 1] = phase_of[size_t(q)] + (W - q + S - 1) / S;
  // Tap j of output inner_lo + c is element at = inner_lo * S - P + j + c * S of its row:
  // element at / S + c of phase at % S.
  std::vector<int64_t> tap_at(static_cast<size_t>(K));
  for (int64_t j = 0; j < K; ++j) {
    const int64_t at = inner_lo * S - P + j;  // >= 0: the window is inside the row
    tap_at[size_t(j)] = phase_of[size_t(at % S)] + at / S;
  }
  const int64_t I = g.in_size(), O = g.out_size();
  parallel_planes(
      g,
      [&](int64_t b) {
        const T* plane = src + b * I;
        T* out_plane = dst + b * O;
        std::vector<T> split(S > 1 && inner > 0 ? size_t(I) : 0);
        if (!split.empty())
          for (int64_t ih = 0; ih < H; ++ih) {
            const T* row = plane + ih * W;
            T* to = split.data() + ih * W;
            for (int64_t q = 0; q < S; ++q)
              for (int64_t i = q; i < W; i += S) *to++ = row[i];
          }
        const T* taps_from = split.empty() ? plane : split.data();
        std::vector<int64_t> offs;
        std::vector<float> means(std::is_same_v<T, float> ? 0 : size_t(inner));
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const DimWindow& wh = rows[size_t(oh)];
          T* out = out_plane + oh * OW;
          auto one = [&](int64_t ow) {  // the general loop's sum for one output
            const DimWindow& ww = cols[size_t(ow)];
            double sum = 0;
            for (int64_t ih = wh.lo; ih < wh.hi; ++ih)
              for (int64_t iw = ww.lo; iw < ww.hi; ++iw)
                sum += convert_value<double>(plane[ih * W + iw]);
            const double divisor = divisor_override != 0 ? double(divisor_override)
                                   : include_pad         ? wh.padded * ww.padded
                                                         : wh.inside * ww.inside;
            out[ow] = convert_value<T>(sum / divisor);
          };
          for (int64_t ow = 0; ow < inner_lo; ++ow) one(ow);
          if (inner > 0) {
            offs.clear();
            for (int64_t ih = wh.lo; ih < wh.hi; ++ih)
              for (int64_t j = 0; j < K; ++j) offs.push_back(ih * W + tap_at[size_t(j)]);
            // An inner window is K wide both counted with padding and without.
            const double divisor = divisor_override != 0 ? double(divisor_override)
                                   : include_pad         ? wh.padded * double(K)
                                                         : wh.inside * double(K);
            const int64_t taps = int64_t(offs.size());
            if constexpr (std::is_same_v<T, float>) {
              vr.window_mean_f32(taps_from, offs.data(), taps, inner, divisor, out + inner_lo);
            } else {
              vr.window_mean_bf16(reinterpret_cast<const uint16_t*>(taps_from), offs.data(), taps,
                                  inner, divisor, means.data());
              if (narrow)  // the same rounding as BFloat16(float), in vectors
                narrow(means.data(), reinterpret_cast<uint16_t*>(out + inner_lo), inner);
              else
                for (int64_t c = 0; c < inner; ++c) out[inner_lo + c] = T(means[size_t(c)]);
            }
          }
          for (int64_t ow = inner_hi; ow < OW; ++ow) one(ow);
        }
      },
      g.k[1] * g.k[2]);
}

template <typename T>
void avg_pool_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  if (!x.is_contiguous()) {  // channels-last (the op passes no other layout)
    avg_pool_channels_last<T>(call);
    return;
  }
  const size_t nd = call.ints_attr(0).size();
  const PoolGeometry g = geometry(x.shape(), call.outs[0].shape(), nd, call.ints_attr(0),
                                  call.ints_attr(1), call.ints_attr(2));
  const bool include_pad = call.bool_attr(4);
  const int64_t divisor_override = divisor_override_of(call, 5);
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  // 2 x 2 windows at stride 2, none partial (avg_pool2d(x, 2)): the same sums, in the same
  // order, without the general loop's per-window bounds and short loops, which took about 30
  // cycles per output (float32, two threads: [1, 32, 14, 14] 9.9 -> 3.3 us, PyTorch 6.7-9.6;
  // [8, 32, 28, 28] 114 -> 28 us, PyTorch 156-171).
  if (g.in[0] == 1 && g.k[0] == 1 && g.k[1] == 2 && g.k[2] == 2 && g.s[1] == 2 &&
      g.s[2] == 2 && g.p[1] == 0 && g.p[2] == 0 && 2 * g.out[1] <= g.in[1] &&
      2 * g.out[2] <= g.in[2]) {
    const double divisor = divisor_override != 0 ? double(divisor_override) : 4.0;
    const int64_t W = g.in[2];
    parallel_planes(g, [&](int64_t b) {
      const T* plane = src + b * I;
      T* out = dst + b * O;
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const T* r0 = plane + 2 * oh * W;
        const T* r1 = r0 + W;
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          double sum = convert_value<double>(r0[2 * ow]);
          sum += convert_value<double>(r0[2 * ow + 1]);
          sum += convert_value<double>(r1[2 * ow]);
          sum += convert_value<double>(r1[2 * ow + 1]);
          *out++ = convert_value<T>(sum / divisor);
        }
      }
    });
    return;
  }
  const std::vector<DimWindow> along[3] = {dim_windows(g, 0), dim_windows(g, 1),
                                           dim_windows(g, 2)};
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    if (g.in[0] == 1 && g.k[0] == 1) {
      avg_pool_planar_rows(g, along[1], along[2], include_pad, divisor_override, src, dst);
      return;
    }
  }
  parallel_planes(g, [&](int64_t b) {
    const T* plane = src + b * I;
    T* out = dst + b * O;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      const DimWindow& w0 = along[0][size_t(o0)];
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        const DimWindow& w1 = along[1][size_t(o1)];
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
          const DimWindow& w2 = along[2][size_t(o2)];
          double sum = 0;
          for (int64_t i0 = w0.lo; i0 < w0.hi; ++i0)
            for (int64_t i1 = w1.lo; i1 < w1.hi; ++i1) {
              const T* row = plane + (i0 * g.in[1] + i1) * g.in[2];
              for (int64_t i2 = w2.lo; i2 < w2.hi; ++i2) sum += convert_value<double>(row[i2]);
            }
          // The divisor rule of DimWindow.
          const double divisor = divisor_override != 0 ? double(divisor_override)
                                 : include_pad ? w0.padded * w1.padded * w2.padded
                                               : w0.inside * w1.inside * w2.inside;
          *out++ = convert_value<T>(sum / divisor);
        }
      }
    }
  }, g.k[0] * g.k[1] * g.k[2]);
}

// inputs {grad_output}; attrs {input_size, kernel, stride, padding, ceil, include_pad, div?}.
// Each output's gradient over its divisor is added (in double) to every input of its window,
// in output order, and each input rounded once. The adds run one output row against one
// input row at a time, tap column j from the last to the first and outputs in order inside
// it: an input still receives its outputs' shares in output order (a larger j is an earlier
// output), the same sums as one output at a time, while the loop over outputs is a plain
// vector loop (with a window's bounds and three short loops per output it ran [8, 32, 28,
// 28] 3 x 3 stride 1 in about 1.2 ms on two threads, PyTorch's whole forward and backward
// 1.66).
// The same sums for a channels-last grad_output into a channels-last grad_input (the op
// passes them through; a planar copy each way ran [8, 64, 56, 56] 2 x 2 in 2.6 ms for the
// forward and backward, PyTorch 0.53): each output position's shares, one per channel, go to
// its window's positions in output order, the channels in vectors. Images and blocks of
// channels spread over the threads. (One input row at a time, with the shares of the output
// rows covering it kept in a ring, took 25-30% longer for 3 x 3 windows.)
template <typename T>
void avg_pool_backward_channels_last(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& gx = call.outs[0];
  const PoolGeometry g = geometry(gx.shape(), gy.shape(), 2, call.ints_attr(1),
                                  call.ints_attr(2), call.ints_attr(3));
  const bool include_pad = call.bool_attr(5);
  const int64_t divisor_override = divisor_override_of(call, 6);
  const std::vector<DimWindow> rows = dim_windows(g, 1), cols = dim_windows(g, 2);
  const int64_t N = gx.size(0), Ch = gx.size(1), H = g.in[1], W = g.in[2];
  const int64_t OH = g.out[1], OW = g.out[2];
  const T* src = static_cast<const T*>(gy.raw_data());
  T* dst = static_cast<T*>(gx.raw_data());
  // Fewer images than threads: blocks of channels (multiples of 16) make up the tasks.
  const int64_t threads = omp_get_max_threads();
  const int64_t want_blocks = N >= threads ? 1 : (threads + N - 1) / N;
  const int64_t block = std::max<int64_t>(16, (Ch / want_blocks + 15) / 16 * 16);
  const int64_t blocks = (Ch + block - 1) / block;
  const bool parallel =
      N * blocks > 1 && N * H * W * Ch * g.k[1] * g.k[2] >= (int64_t(1) << 14);
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t task = 0; task < N * blocks; ++task) {
      const int64_t n = task / blocks, c0 = task % blocks * block;
      const int64_t cb = std::min(block, Ch - c0);
      std::vector<double> acc(static_cast<size_t>(H * W * cb), 0.0);
      std::vector<double> share(static_cast<size_t>(cb));
      const T* gy_image = src + n * OH * OW * Ch + c0;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const DimWindow& wh = rows[size_t(oh)];
        for (int64_t ow = 0; ow < OW; ++ow) {
          const DimWindow& ww = cols[size_t(ow)];
          const double divisor = divisor_override != 0 ? double(divisor_override)
                                 : include_pad ? wh.padded * ww.padded
                                               : wh.inside * ww.inside;
          const T* from = gy_image + (oh * OW + ow) * Ch;
          for (int64_t c = 0; c < cb; ++c)
            share[size_t(c)] = convert_value<double>(from[c]) / divisor;
          for (int64_t ih = wh.lo; ih < wh.hi; ++ih)
            for (int64_t iw = ww.lo; iw < ww.hi; ++iw) {
              double* __restrict a = acc.data() + (ih * W + iw) * cb;
              const double* __restrict v = share.data();
              for (int64_t c = 0; c < cb; ++c) a[c] += v[c];
            }
        }
      }
      T* gx_image = dst + n * H * W * Ch + c0;
      for (int64_t i = 0; i < H * W; ++i)
        for (int64_t c = 0; c < cb; ++c)
          gx_image[i * Ch + c] = convert_value<T>(acc[size_t(i * cb + c)]);
    }
  });
}

template <typename T>
void avg_pool_backward_kernel(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& gx = call.outs[0];
  if (!gy.is_contiguous()) {  // channels-last (the op passes no other layout)
    KILN_CHECK(gx.dim() == 4 && gx.is_contiguous(MemoryFormat::ChannelsLast), ValueError,
               "avg_pool_backward: a channels-last grad_output needs a channels-last "
               "grad_input, got strides ", shape_str(gx.strides()));
    avg_pool_backward_channels_last<T>(call);
    return;
  }
  const size_t nd = call.ints_attr(1).size();
  const PoolGeometry g = geometry(gx.shape(), gy.shape(), nd, call.ints_attr(1),
                                  call.ints_attr(2), call.ints_attr(3));
  const bool include_pad = call.bool_attr(5);
  const int64_t divisor_override = divisor_override_of(call, 6);
  const T* src = static_cast<const T*>(gy.raw_data());
  T* dst = static_cast<T*>(gx.raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  const std::vector<DimWindow> along[3] = {dim_windows(g, 0), dim_windows(g, 1),
                                           dim_windows(g, 2)};
  const int64_t W = g.in[2], OW = g.out[2], K = g.k[2], S = g.s[2], P = g.p[2];
  // Tap column j of outputs [first[j], last[j]) lands inside [0, W) (at o * S - P + j).
  std::vector<int64_t> first(static_cast<size_t>(K)), last(static_cast<size_t>(K));
  for (int64_t j = 0; j < K; ++j) {
    first[size_t(j)] = std::min(P - j > 0 ? (P - j + S - 1) / S : 0, OW);
    last[size_t(j)] = W - 1 + P - j < 0 ? first[size_t(j)]
                                        : std::clamp((W - 1 + P - j) / S + 1, first[size_t(j)], OW);
  }
  // DimWindow's divisor rule as (row factor) * (column factor), the product's association.
  std::vector<double> column_factor(static_cast<size_t>(OW));
  for (int64_t o2 = 0; o2 < OW; ++o2) {
    const DimWindow& w2 = along[2][size_t(o2)];
    column_factor[size_t(o2)] = divisor_override != 0 ? 1.0 : include_pad ? w2.padded : w2.inside;
  }
  parallel_planes(
      g,
      [&](int64_t b) {
        std::vector<double> acc(static_cast<size_t>(I), 0.0), share(static_cast<size_t>(OW));
        const T* gy_plane = src + b * O;
        for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
          const DimWindow& w0 = along[0][size_t(o0)];
          for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
            const DimWindow& w1 = along[1][size_t(o1)];
            const T* gy_row = gy_plane + (o0 * g.out[1] + o1) * OW;
            const double row_factor = divisor_override != 0 ? double(divisor_override)
                                      : include_pad ? w0.padded * w1.padded
                                                    : w0.inside * w1.inside;
            for (int64_t o2 = 0; o2 < OW; ++o2)
              share[size_t(o2)] =
                  convert_value<double>(gy_row[o2]) / (row_factor * column_factor[size_t(o2)]);
            for (int64_t i0 = w0.lo; i0 < w0.hi; ++i0)
              for (int64_t i1 = w1.lo; i1 < w1.hi; ++i1) {
                double* row = acc.data() + (i0 * g.in[1] + i1) * W;
                for (int64_t j = K - 1; j >= 0; --j) {
                  double* __restrict at = row + j - P;  // tap j of output o is at[o * S]
                  const double* __restrict v = share.data();
                  if (S == 1)
                    for (int64_t o = first[size_t(j)]; o < last[size_t(j)]; ++o) at[o] += v[o];
                  else
                    for (int64_t o = first[size_t(j)]; o < last[size_t(j)]; ++o)
                      at[o * S] += v[o];
                }
              }
          }
        }
        T* gx_plane = dst + b * I;
        for (int64_t i = 0; i < I; ++i) gx_plane[i] = convert_value<T>(acc[size_t(i)]);
      },
      g.k[0] * g.k[1] * g.k[2]);
}

// inputs {grad_output, indices} (contiguous, one index per output into its input plane);
// attrs {input_size, ...}: each output's gradient added to the element it picked, in output
// order (PyTorch's order; float32 / float64 add in their own type, the 16-bit types in float32
// rounded once). Indices outside the plane are an error, not a stray write.
template <typename T>
void max_pool_backward_kernel(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& gx = call.outs[0];
  const size_t nd = call.ints_attr(1).size();
  const PoolGeometry g = geometry(gx.shape(), gy.shape(), nd, call.ints_attr(1),
                                  call.ints_attr(2), call.ints_attr(3));
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* src = static_cast<const T*>(gy.raw_data());
  const int64_t* idx = static_cast<const int64_t*>(call.inputs[1].raw_data());
  T* dst = static_cast<T*>(gx.raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  std::atomic<int64_t> bad{-1};
  parallel_planes(g, [&](int64_t b) {
    std::vector<Acc> acc(size_t(I), Acc(0));
    for (int64_t o = 0; o < O; ++o) {
      const int64_t i = idx[b * O + o];
      if (i < 0 || i >= I) {
        bad.store(i);
        continue;
      }
      acc[size_t(i)] += convert_value<Acc>(src[b * O + o]);
    }
    for (int64_t i = 0; i < I; ++i) dst[b * I + i] = convert_value<T>(acc[size_t(i)]);
  });
  KILN_CHECK(bad.load() == -1, IndexError, "max_pool_backward: index ", bad.load(),
             " is outside an input plane of ", I, " elements");
}

// --- adaptive pooling ----------------------------------------------------------------
// Window of output o along a dim: [floor(o * in / out), ceil((o + 1) * in / out)).
inline int64_t adaptive_lo(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
inline int64_t adaptive_hi(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename F>
void adaptive_windows(const PoolGeometry& g, int64_t o0, int64_t o1, int64_t o2, F&& f) {
  const int64_t o[3] = {o0, o1, o2};
  int64_t lo[3], hi[3];
  for (int i = 0; i < 3; ++i) {
    lo[i] = adaptive_lo(o[i], g.in[i], g.out[i]);
    hi[i] = adaptive_hi(o[i], g.in[i], g.out[i]);
  }
  f(lo, hi);
}

template <typename T>
void adaptive_avg_pool_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const PoolGeometry g = geometry(x.shape(), call.outs[0].shape(), call.ints_attr(0).size());
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  if (O == 0) return;
  parallel_planes(g, [&](int64_t b) {
    const T* plane = src + b * I;
    for_each_output(g, [&](int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      adaptive_windows(g, o0, o1, o2, [&](const int64_t* lo, const int64_t* hi) {
        double sum = 0;
        for (int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
          for (int64_t i1 = lo[1]; i1 < hi[1]; ++i1)
            for (int64_t i2 = lo[2]; i2 < hi[2]; ++i2)
              sum += (convert_value<double>(plane[(i0 * g.in[1] + i1) * g.in[2] + i2]));
        const double count = double((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        dst[b * O + o] = convert_value<T>(sum / count);
      });
    });
  });
}

template <typename T>
void adaptive_avg_pool_backward_kernel(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& gx = call.outs[0];
  const PoolGeometry g = geometry(gx.shape(), gy.shape(), size_t(call.int_attr(1)));
  const T* src = static_cast<const T*>(gy.raw_data());
  T* dst = static_cast<T*>(gx.raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  parallel_planes(g, [&](int64_t b) {
    std::vector<double> acc(size_t(I), 0.0);
    for_each_output(g, [&](int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      adaptive_windows(g, o0, o1, o2, [&](const int64_t* lo, const int64_t* hi) {
        const double count = double((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        const double v = (convert_value<double>(src[b * O + o])) / count;
        for (int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
          for (int64_t i1 = lo[1]; i1 < hi[1]; ++i1)
            for (int64_t i2 = lo[2]; i2 < hi[2]; ++i2)
              acc[size_t((i0 * g.in[1] + i1) * g.in[2] + i2)] += v;
      });
    });
    for (int64_t i = 0; i < I; ++i) dst[b * I + i] = convert_value<T>(acc[size_t(i)]);
  });
}

template <typename T>
void adaptive_max_pool_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const PoolGeometry g = geometry(x.shape(), call.outs[0].shape(), call.ints_attr(0).size());
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(call.outs[0].raw_data());
  int64_t* idx = static_cast<int64_t*>(call.outs[1].raw_data());
  const int64_t I = g.in_size(), O = g.out_size();
  if (O == 0) return;
  parallel_planes(g, [&](int64_t b) {
    const T* plane = src + b * I;
    for_each_output(g, [&](int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      adaptive_windows(g, o0, o1, o2, [&](const int64_t* lo, const int64_t* hi) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t best_i = -1;
        for (int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
          for (int64_t i1 = lo[1]; i1 < hi[1]; ++i1)
            for (int64_t i2 = lo[2]; i2 < hi[2]; ++i2) {
              const int64_t flat = (i0 * g.in[1] + i1) * g.in[2] + i2;
              const double v = (convert_value<double>(plane[flat]));
              if (best_i < 0 || v > best || std::isnan(v)) {
                best = v;
                best_i = flat;
              }
            }
        dst[b * O + o] = plane[best_i];
        idx[b * O + o] = best_i;
      });
    });
  });
}

#define KILN_POOL_DISPATCH(NAME)                                              \
  void NAME##_dispatch(OpCall& call) {                                       \
    KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), #NAME,                       \
                        [&]<typename T>() { NAME##_kernel<T>(call); });      \
  }
KILN_POOL_DISPATCH(max_pool)
KILN_POOL_DISPATCH(avg_pool)
KILN_POOL_DISPATCH(avg_pool_backward)
KILN_POOL_DISPATCH(max_pool_backward)
KILN_POOL_DISPATCH(adaptive_avg_pool)
KILN_POOL_DISPATCH(adaptive_avg_pool_backward)
KILN_POOL_DISPATCH(adaptive_max_pool)
#undef KILN_POOL_DISPATCH

}  // namespace

void register_pooling_kernels() {
  register_kernel("max_pool", DeviceType::CPU, max_pool_dispatch, kFloatDTypes);
  register_kernel("avg_pool", DeviceType::CPU, avg_pool_dispatch, kFloatDTypes);
  register_kernel("avg_pool_backward", DeviceType::CPU, avg_pool_backward_dispatch, kFloatDTypes);
  register_kernel("max_pool_backward", DeviceType::CPU, max_pool_backward_dispatch, kFloatDTypes);
  register_kernel("adaptive_avg_pool", DeviceType::CPU, adaptive_avg_pool_dispatch, kFloatDTypes);
  register_kernel("adaptive_avg_pool_backward", DeviceType::CPU,
                  adaptive_avg_pool_backward_dispatch, kFloatDTypes);
  register_kernel("adaptive_max_pool", DeviceType::CPU, adaptive_max_pool_dispatch, kFloatDTypes);
}

}  // namespace kiln::cpu
