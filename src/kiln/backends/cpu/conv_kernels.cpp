// CPU kernels of convolution and convolution_weight_grad: im2col / col2im plus a matrix
// product per sample and group (dense_gemm: the ISA-selected float32 microkernel). Forward
// float32/bfloat16 convolutions and their weight gradients go to oneDNN first when kiln is built
// with it (onednn_conv.h).
// float16 / bfloat16 are computed in float32 buffers and rounded once at the end; float64
// in double. Inputs arrive contiguous (the op layer makes them so).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "dense_gemm.h"
#include "few_rows_product.h"
#include "isa/depthwise_conv.h"
#include "isa/vec_math.h"
#include "im2col.h"
#include "kiln/tensor/copy_bytes.h"
#include "kiln/tensor/empty.h"
#include "index_loops.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/conv.h"
#include "onednn_conv.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

// attrs from `first`: stride, padding, dilation, transposed, output_padding, groups.
struct ConvCall {
  std::vector<int64_t> stride, padding, dilation;
  bool transposed;
  int64_t groups;
  ConvCall(const OpCall& c, size_t first)
      : stride(c.ints_attr(first)), padding(c.ints_attr(first + 1)),
        dilation(c.ints_attr(first + 2)), transposed(c.bool_attr(first + 3)),
        groups(c.int_attr(first + 5)) {}
};

// image / grid spatial shapes are the trailing dims of the two activation tensors.
ConvGeometry geometry(const ConvCall& a, const Shape& image, const Shape& grid,
                      const Shape& weight) {
  ConvGeometry g;
  const size_t nd = image.size() - 2, lead = 3 - nd;
  for (size_t d = 0; d < nd; ++d) {
    g.image[lead + d] = image[2 + d];
    g.grid[lead + d] = grid[2 + d];
    g.kernel[lead + d] = weight[2 + d];
    g.stride[lead + d] = a.stride[d];
    g.pad[lead + d] = a.padding[d];
    g.dil[lead + d] = a.dilation[d];
  }
  return g;
}

template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The data of a contiguous tensor as compute-type values: the tensor's own memory when the
// types agree, else a converted copy.
template <typename T>
struct Operand {
  using C = compute_t<T>;
  std::vector<C> copy;
  const C* data = nullptr;
  explicit Operand(const Tensor& t) {
    const T* src = static_cast<const T*>(t.raw_data());
    if constexpr (std::is_same_v<T, C>) {
      data = src;
    } else {
      copy.resize(size_t(t.numel()));
      for (size_t i = 0; i < copy.size(); ++i) copy[i] = convert_value<C>(src[i]);
      data = copy.data();
    }
  }
};

// An output written in compute type and, for narrow types, rounded once by finish().
template <typename T>
struct Result {
  using C = compute_t<T>;
  std::vector<C> buffer;
  const Tensor& out;
  C* data;
  explicit Result(const Tensor& t) : out(t) {
    if constexpr (std::is_same_v<T, C>) {
      data = static_cast<C*>(t.raw_data());
    } else {
      buffer.assign(size_t(t.numel()), C(0));
      data = buffer.data();
    }
  }
  void finish() {
    if constexpr (!std::is_same_v<T, C>) {
      T* dst = static_cast<T*>(out.raw_data());
      for (size_t i = 0; i < buffer.size(); ++i) dst[i] = convert_value<T>(buffer[i]);
    }
  }
};

// Samples are processed in chunks whose columns sit side by side in one matrix, so that each
// group needs one large matrix product per chunk instead of one small product per sample.
// The chunk keeps the col matrix near kColBudget floats.
constexpr int64_t kColBudget = int64_t(1) << 22;  // 16 MiB of float

int64_t chunk_samples(int64_t N, int64_t col_rows, int64_t P) {
  return std::clamp<int64_t>(kColBudget / std::max<int64_t>(1, col_rows * P), 1, std::max<int64_t>(N, 1));
}

// dst[c, j * P + p] = src[(n0 + j) * sample_stride + c * P + p]: channels of nb samples side
// by side ([C, nb * P]).
template <typename C>
void gather_samples(const C* src, int64_t sample_stride, int64_t channels, int64_t P, int64_t n0,
                    int64_t nb, C* dst) {
  if (P <= 0) return;  // nothing to move (and an empty tensor's data pointer may be null)
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t c = 0; c < channels; ++c)
      detail::copy_bytes(dst + c * nb * P + j * P, src + (n0 + j) * sample_stride + c * P,
                         size_t(P) * sizeof(C));
}

// The inverse layout change: dst[(n0 + j) * sample_stride + c * P + p] = src[c, j * P + p].
template <typename C>
void scatter_samples(const C* src, int64_t sample_stride, int64_t channels, int64_t P,
                     int64_t n0, int64_t nb, C* dst) {
  if (P <= 0) return;
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t c = 0; c < channels; ++c)
      detail::copy_bytes(dst + (n0 + j) * sample_stride + c * P, src + c * nb * P + j * P,
                         size_t(P) * sizeof(C));
}

// A plain ungrouped float32 1-D layer with at most this many output positions in all
// (samples times positions: a streaming model's frame, Silero VAD's layers give 1-4) runs as
// im2col^T @ W^T through the few-rows dot tiles (few_rows_product.h), which read the weight
// once; oneDNN's plan (two reorders, its fixed cost per call) took 12 us a layer there and
// the blocked kernel pads the few columns to a 16-wide panel. (2-D layers with one-pixel
// outputs were not measured this way and stay with oneDNN.)
constexpr int64_t kFewOutputsMax = 8;

bool few_outputs_layer(const OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& y = call.outs[0];
  if (x.dtype() != DType::F32 || call.bool_attr(3) || call.int_attr(5) != 1 || x.dim() != 3)
    return false;
  const int64_t positions = y.numel() / std::max<int64_t>(y.size(1), 1);
  return positions >= 1 && positions <= kFewOutputsMax && vec_math_f32().dot_tile != nullptr;
}

// rows[(n * P + p) * CK + c * K + k] = x[n, c, p * s - pad + k * dil], 0 in the padding: the
// transposed im2col of a 1-D layer, written directly in the row-per-position form the dot
// tiles read. im2col plus a transpose cost more than the product for Silero VAD's layers
// (per col line two divisions and three fill / copy calls, for lines of 1-4 positions:
// 20% of a [1, 64, 1] x [128, 64, 3] layer's time).
void unfold_positions(const float* x, int64_t N, int64_t c_in, int64_t I, const ConvGeometry& g,
                      int64_t P, float* rows) {
  const int64_t K = g.kernel[2], s = g.stride[2], pad = g.pad[2], dil = g.dil[2];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < P; ++p) {
      float* r = rows + (n * P + p) * c_in * K;
      const int64_t first = p * s - pad;
      for (int64_t c = 0; c < c_in; ++c) {
        const float* xc = x + (n * c_in + c) * I;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t i = first + k * dil;
          r[c * K + k] = i >= 0 && i < I ? xc[i] : 0.0f;
        }
      }
    }
}

// y [N, c_out, P] = W [c_out, CK] @ im2col(x) for every sample: false where the level has no
// dot tile (nothing written). One position in all is a matrix-vector product: four weight
// rows per step against the one unfolded row (the tiles take 2+ rows, and a zero second row
// doubled the work).
bool few_outputs_product(const float* x, int64_t N, int64_t c_in, int64_t I,
                         const ConvGeometry& g, const float* w, int64_t c_out, int64_t CK,
                         int64_t P, float* y) {
  const int64_t ld = N * P;
  const VecMathF32& vm = vec_math_f32();
  std::vector<float> rows_first(size_t(std::max<int64_t>(ld, 2) * CK), 0.0f);
  unfold_positions(x, N, c_in, I, g, P, rows_first.data());
  std::vector<float> sums(size_t(std::max<int64_t>(ld, 2) * c_out));
  if (ld == 1 && vm.dot4 && vm.dot) {
    const float* a = rows_first.data();
    const int64_t quads = c_out / 4;
    parallel_region(c_out * CK >= (int64_t(1) << 16), [&] {
#pragma omp for schedule(static)
      for (int64_t q = 0; q < quads; ++q) vm.dot4(a, w + 4 * q * CK, CK, CK, sums.data() + 4 * q);
    });
    for (int64_t j = 4 * quads; j < c_out; ++j) sums[size_t(j)] = vm.dot(a, w + j * CK, CK);
  } else if (!few_rows_times_weight_f32(std::max<int64_t>(ld, 2), c_out, CK, rows_first.data(),
                                        CK, w, CK, sums.data(), c_out)) {
    return false;
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < c_out; ++o)
      for (int64_t p = 0; p < P; ++p)
        y[(n * c_out + o) * P + p] = sums[size_t((n * P + p) * c_out + o)];
  return true;
}

// inputs {x, w, bias?}; plain: per group, Y_g = W_g @ im2col(X_g) over a chunk of samples;
// transposed: Y_g = col2im(W_g^T @ X_g). Then bias per output channel.
template <typename T>
void convolution_kernel(OpCall& call) {
  using C = compute_t<T>;
  const Tensor& xt = call.inputs[0];
  const Tensor& wt = call.inputs[1];
  const Tensor& bt = call.inputs[2];
  const Tensor& yt = call.outs[0];
  if (yt.numel() == 0) return;
  const ConvCall a(call, 0);
  Operand<T> x(xt), w(wt);
  Result<T> y(yt);
  const int64_t N = xt.size(0), G = a.groups;
  const ConvGeometry g = a.transposed ? geometry(a, yt.shape(), xt.shape(), wt.shape())
                                      : geometry(a, xt.shape(), yt.shape(), wt.shape());
  const int64_t K = g.kernel_size(), P = g.grid_size(), I = g.image_size();
  const int64_t c_out = yt.size(1), c_in = xt.size(1);
  const int64_t cg = c_in / G, og = c_out / G;  // channels per group in / out
  if constexpr (std::is_same_v<T, float>) {
    // Depthwise 2-d (one input and one output channel per group): a direct kernel per plane
    // (isa/depthwise_conv.h) instead of a product per channel.
    if (!a.transposed && xt.dim() == 4 && cg == 1 && og == 1) {
      const DepthwiseGeometry d{N, c_in, xt.size(2), xt.size(3), yt.size(2), yt.size(3),
                                wt.size(2), wt.size(3), a.stride[0], a.stride[1],
                                a.padding[0], a.padding[1], a.dilation[0], a.dilation[1]};
      const float* bias = bt.defined() ? static_cast<const float*>(bt.raw_data()) : nullptr;
      depthwise_conv2d().nchw(x.data, w.data, bias, y.data, d);
      y.finish();
      return;
    }
  }
  GemmScratch scratch;
  std::vector<C> col, act;
  bool done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (!a.transposed && G == 1 && xt.dim() == 3 && N * P <= kFewOutputsMax)
      done = few_outputs_product(x.data, N, c_in, I, g, w.data, c_out, c_in * K, P, y.data);
  }
  if (done) {
  } else if (!a.transposed) {
    const int64_t nb_max = chunk_samples(N, cg * K, P);
    for (int64_t n0 = 0; n0 < N; n0 += nb_max) {
      const int64_t nb = std::min(nb_max, N - n0), ld = nb * P;
      for (int64_t gi = 0; gi < G; ++gi) {
        col.resize(size_t(cg * K * ld));
        for (int64_t j = 0; j < nb; ++j)
          im2col(x.data + ((n0 + j) * c_in + gi * cg) * I, cg, g, col.data() + j * P, ld);
        act.resize(size_t(og * ld));
        dense_gemm(og, ld, cg * K, w.data + gi * og * cg * K, cg * K, 1, col.data(), ld, 1,
                   act.data(), ld, false, scratch);
        scatter_samples(act.data(), c_out * P, og, P, n0, nb, y.data + gi * og * P);
      }
    }
  } else {
    // weight [c_in, og, *k]; the grid is the input, the image the output.
    const int64_t nb_max = chunk_samples(N, og * K, P);
    for (int64_t n0 = 0; n0 < N; n0 += nb_max) {
      const int64_t nb = std::min(nb_max, N - n0), ld = nb * P;
      for (int64_t gi = 0; gi < G; ++gi) {
        act.resize(size_t(cg * ld));
        gather_samples(x.data + gi * cg * P, c_in * P, cg, P, n0, nb, act.data());
        col.resize(size_t(og * K * ld));
        // col [og*K, nb*P] = W_g^T [og*K, cg] @ X_g [cg, nb*P]
        dense_gemm(og * K, ld, cg, w.data + gi * cg * og * K, 1, og * K, act.data(), ld, 1,
                   col.data(), ld, false, scratch);
        for (int64_t j = 0; j < nb; ++j)
          col2im(col.data() + j * P, ld, og, g, y.data + ((n0 + j) * c_out + gi * og) * I);
      }
    }
  }
  if (bt.defined()) {
    Operand<T> b(bt);
    const int64_t plane = yt.numel() / (N * c_out);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < c_out; ++c) {
        C* p = y.data + (n * c_out + c) * plane;
        for (int64_t i = 0; i < plane; ++i) p[i] += b.data[c];
      }
  }
  y.finish();
}

// inputs {x, grad_y}; attrs {weight_shape, conv attrs}. Per group and chunk of samples,
// plain: dW_g^T [cg*K, og] += im2col(X_g) @ GY_g^T; transposed: dW_g^T [og*K, cg] +=
// im2col(GY_g) @ X_g^T. The transposed form packs the smaller activation matrix; the result
// is added into dW transposed.
template <typename T>
void convolution_weight_grad_kernel(OpCall& call) {
  using C = compute_t<T>;
  const Tensor& xt = call.inputs[0];
  const Tensor& gyt = call.inputs[1];
  const Tensor& dwt = call.outs[0];
  const ConvCall a(call, 1);
  Result<T> dw(dwt);
  const int64_t N = xt.size(0), G = a.groups;
  if (dwt.numel() == 0) return;
  std::fill(dw.data, dw.data + dwt.numel(), C(0));
  if (N == 0 || xt.numel() == 0 || gyt.numel() == 0) {
    dw.finish();
    return;
  }
  Operand<T> x(xt), gy(gyt);
  const ConvGeometry g = a.transposed ? geometry(a, gyt.shape(), xt.shape(), dwt.shape())
                                      : geometry(a, xt.shape(), gyt.shape(), dwt.shape());
  const int64_t K = g.kernel_size(), P = g.grid_size(), I = g.image_size();
  const int64_t c_in = xt.size(1), c_out = gyt.size(1);
  const int64_t cg = c_in / G, og = c_out / G;
  // The side unfolded by im2col (image side) and the side used as is (grid side).
  const C* image_side = a.transposed ? gy.data : x.data;
  const C* grid_side = a.transposed ? x.data : gy.data;
  const int64_t image_ch = a.transposed ? c_out : c_in, grid_ch = a.transposed ? c_in : c_out;
  const int64_t image_g = a.transposed ? og : cg, grid_g = a.transposed ? cg : og;
  const int64_t rows = image_g * K;  // dW_g^T is [rows, grid_g]
  GemmScratch scratch;
  std::vector<C> col, act, part(size_t(rows * grid_g));
  const int64_t nb_max = chunk_samples(N, rows, P);
  for (int64_t n0 = 0; n0 < N; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, N - n0), ld = nb * P;
    for (int64_t gi = 0; gi < G; ++gi) {
      col.resize(size_t(rows * ld));
      for (int64_t j = 0; j < nb; ++j)
        im2col(image_side + ((n0 + j) * image_ch + gi * image_g) * I, image_g, g,
               col.data() + j * P, ld);
      act.resize(size_t(grid_g * ld));
      gather_samples(grid_side + gi * grid_g * P, grid_ch * P, grid_g, P, n0, nb, act.data());
      // part [rows, grid_g] = col [rows, ld] @ act^T [ld, grid_g]
      dense_gemm(rows, grid_g, ld, col.data(), ld, 1, act.data(), 1, ld, part.data(), grid_g,
                 false, scratch);
      // plain: dW_g [og, cg*K] (grid rows); transposed: dW_g [cg, og*K] (grid rows).
      C* dwg = dw.data + gi * grid_g * rows;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < grid_g; ++c) dwg[c * rows + r] += part[size_t(r * grid_g + c)];
    }
  }
  dw.finish();
}

// A float32 depthwise 2-d convolution (one input and one output channel per group) of
// contiguous NCHW operands, or of channels-last input and output: kiln's direct kernels
// (isa/depthwise_conv.h, decision 0071). The planar one runs before oneDNN, which it beats;
// the channels-last one, about even with oneDNN's, where oneDNN is off or declines (it
// replaced contiguous copies and a product per channel).
enum class OwnDepthwise { No, Planar, ChannelsLast };
OwnDepthwise own_depthwise(const OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const Tensor& out = call.outs[0];
  const int64_t groups = call.int_attr(5);
  if (x.dtype() != DType::F32 || x.dim() != 4 || call.bool_attr(3) || groups <= 1 ||
      groups != x.size(1) || groups != out.size(1) || !w.is_contiguous() ||
      (call.inputs.size() > 2 && call.inputs[2].defined() && !call.inputs[2].is_contiguous()))
    return OwnDepthwise::No;
  if (x.is_contiguous() && out.is_contiguous()) return OwnDepthwise::Planar;
  if (x.is_contiguous(MemoryFormat::ChannelsLast) && out.is_contiguous(MemoryFormat::ChannelsLast))
    return OwnDepthwise::ChannelsLast;
  return OwnDepthwise::No;
}

// The channels-last form: the weight [C, 1, kh, kw] transposed to [kh * kw, C] per call (a
// few thousand values).
void depthwise_channels_last(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& wt = call.inputs[1];
  const Tensor& out = call.outs[0];
  const ConvCall a(call, 0);
  const int64_t C = x.size(1), kh = wt.size(2), kw = wt.size(3), taps = kh * kw;
  const float* w = static_cast<const float*>(wt.raw_data());
  std::vector<float> w_taps(static_cast<size_t>(taps * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < taps; ++t) w_taps[size_t(t * C + c)] = w[c * taps + t];
  const DepthwiseGeometry d{x.size(0), C, x.size(2), x.size(3), out.size(2), out.size(3),
                            kh, kw, a.stride[0], a.stride[1], a.padding[0], a.padding[1],
                            a.dilation[0], a.dilation[1]};
  const bool bias = call.inputs.size() > 2 && call.inputs[2].defined();
  depthwise_conv2d().nhwc(static_cast<const float*>(x.raw_data()), w_taps.data(),
                          bias ? static_cast<const float*>(call.inputs[2].raw_data()) : nullptr,
                          static_cast<float*>(out.raw_data()), d);
}

// A float32 weight with bfloat16 activations (autocast's form, decision 0121) that oneDNN did
// not take: the call with the weight rounded to bfloat16.
OpCall with_rounded_weight(const OpCall& call) {
  OpCall rounded = call;
  rounded.inputs[1] = call.inputs[1].to(call.inputs[0].dtype());
  return rounded;
}

bool mixed_weight(const OpCall& call) {
  return call.inputs[1].dtype() != call.inputs[0].dtype();
}

void convolution_dispatch(OpCall& call) {
  if (mixed_weight(call)) {
    KILN_CHECK(call.inputs[0].dtype() == DType::BF16 && call.inputs[1].dtype() == DType::F32,
               Error, "convolution: expected a weight of the input's dtype, or a float32 weight "
               "with a bfloat16 input; got ", dtype_name(call.inputs[1].dtype()), " with ",
               dtype_name(call.inputs[0].dtype()));
    if (own_depthwise(call) != OwnDepthwise::Planar && !few_outputs_layer(call) &&
        onednn_convolution(call))
      return;
    OpCall rounded = with_rounded_weight(call);
    convolution_dispatch(rounded);
    return;
  }
  const OwnDepthwise own = own_depthwise(call);
  if (own != OwnDepthwise::Planar && !few_outputs_layer(call) && onednn_convolution(call))
    return;
  if (own == OwnDepthwise::ChannelsLast) {
    if (call.outs[0].numel() > 0) depthwise_channels_last(call);
    return;
  }
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const Tensor& w = call.inputs[1];
  if (!x.is_contiguous() || !out.is_contiguous() || !w.is_contiguous()) {
    // Channels-last operands: kiln's kernel works on contiguous NC[D]HW, so it runs on
    // contiguous copies (oneDNN, above, reads and writes channels-last in place).
    // Operands already contiguous are used as they are (a copied weight would also be
    // packed again by oneDNN on every call: it caches packings per weight tensor).
    OpCall inner = call;
    for (size_t i : {size_t(0), size_t(1)}) {
      if (call.inputs[i].is_contiguous()) continue;
      inner.inputs[i] = empty_tensor(call.inputs[i].shape(), x.dtype(), x.device());
      copy_same_shape(inner.inputs[i], call.inputs[i]);
    }
    if (!out.is_contiguous()) inner.outs[0] = empty_tensor(out.shape(), out.dtype(), out.device());
    convolution_dispatch(inner);
    if (!out.is_contiguous()) copy_same_shape(out, inner.outs[0]);
    return;
  }
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "convolution",
                      [&]<typename T>() { convolution_kernel<T>(call); });
}
// p[i] = f(p[i]) for i in [0, n), computed in float for bfloat16 (threaded when large).
template <typename T, typename F>
void map_in_place(T* p, int64_t n, F f) {
  using C = opmath_t<T>;
  parallel_region(n >= (int64_t(1) << 16), [&] {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = convert_value<T>(f(C(p[i])));
  });
}

// out = activation(out) in place (a dense tensor: contiguous or channels-last), in the
// formulas of oneDNN's post-ops (kiln/ops/conv.h).
template <typename T>
void apply_activation(const Tensor& out, const ConvEpilogue& e) {
  using C = opmath_t<T>;
  T* p = static_cast<T*>(out.raw_data());
  const int64_t n = out.numel();
  const C alpha = C(e.alpha), beta = C(e.beta);
  switch (e.activation) {
    case ConvActivation::Relu: map_in_place(p, n, [](C x) { return x < C(0) ? C(0) : x; }); break;
    case ConvActivation::Clip:
      map_in_place(p, n, [&](C x) { return std::min(std::max(x, alpha), beta); });
      break;
    case ConvActivation::HardSigmoid:
      map_in_place(p, n, [&](C x) { return std::min(std::max(alpha * x + beta, C(0)), C(1)); });
      break;
    case ConvActivation::HardSwish:
      map_in_place(p, n, [](C x) { return x * std::min(std::max(x + C(3), C(0)), C(6)) / C(6); });
      break;
    case ConvActivation::None: break;
  }
}

// convolution_activation: oneDNN with the activation as a post-op; else the convolution (any
// path) and the activation over its output.
void convolution_activation_dispatch(OpCall& call) {
  if (own_depthwise(call) != OwnDepthwise::Planar && !few_outputs_layer(call) &&
      onednn_convolution(call))
    return;
  if (mixed_weight(call)) {  // oneDNN did not take it: the weight rounded (decision 0121)
    OpCall rounded = with_rounded_weight(call);
    convolution_activation_dispatch(rounded);
    return;
  }
  const ConvEpilogue e{ConvActivation(call.int_attr(6)), call.double_attr(7),
                       call.double_attr(8)};
  OpCall plain = call;
  plain.attrs.resize(6);
  convolution_dispatch(plain);
  KILN_DISPATCH_FLOAT(call.outs[0].dtype(), "convolution_activation",
                      [&]<typename T>() { apply_activation<T>(call.outs[0], e); });
}

void convolution_weight_grad_dispatch(OpCall& call) {
  if (onednn_convolution_weight_grad(call)) return;
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "convolution_weight_grad",
                      [&]<typename T>() { convolution_weight_grad_kernel<T>(call); });
}

}  // namespace

void register_conv_kernels() {
  register_kernel("convolution", DeviceType::CPU, convolution_dispatch, kFloatDTypes);
  register_kernel("convolution_activation", DeviceType::CPU, convolution_activation_dispatch,
                  kFloatDTypes);
  register_kernel("convolution_weight_grad", DeviceType::CPU, convolution_weight_grad_dispatch,
                  kFloatDTypes);
}

}  // namespace kiln::cpu
