// CPU kernels of convolution and convolution_weight_grad: im2col / col2im plus a matrix
// product per sample and group (dense_gemm: the ISA-selected float32 microkernel).
// float16 / bfloat16 are computed in float32 buffers and rounded once at the end; float64
// in double. Inputs arrive contiguous (the op layer makes them so).
#include <type_traits>
#include <vector>

#include "dense_gemm.h"
#include "im2col.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"

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

// inputs {x, w, bias?}; plain: per sample and group, y_g = W_g @ im2col(x_g); transposed:
// y_g = col2im(W_g^T @ x_g). Then bias per output channel.
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
  GemmScratch scratch;
  std::vector<C> col;
  if (!a.transposed) {
    const int64_t cg = c_in / G, og = c_out / G;  // channels per group in / out
    const bool identity = g.is_identity();
    if (!identity) col.resize(size_t(cg * K * P));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < G; ++gi) {
        const C* xg = x.data + (n * c_in + gi * cg) * I;
        const C* cols = xg;
        if (!identity) {
          im2col(xg, cg, g, col.data());
          cols = col.data();
        }
        dense_gemm(og, P, cg * K, w.data + gi * og * cg * K, cg * K, 1, cols, P, 1,
                   y.data + (n * c_out + gi * og) * P, P, false, scratch);
      }
  } else {
    const int64_t cg = c_in / G, og = c_out / G;  // weight [c_in, og, *k]
    col.resize(size_t(og * K * P));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < G; ++gi) {
        const C* wg = w.data + gi * cg * og * K;
        // col [og*K, P] = W_g^T [og*K, cg] @ x_g [cg, P]
        dense_gemm(og * K, P, cg, wg, 1, og * K, x.data + (n * c_in + gi * cg) * P, P, 1,
                   col.data(), P, false, scratch);
        col2im(col.data(), og, g, y.data + (n * c_out + gi * og) * I);
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

// inputs {x, grad_y}; attrs {weight_shape, conv attrs}. Plain: dW_g = sum_n gy_g @
// im2col(x_g)^T; transposed: dW_g = sum_n x_g @ im2col(gy_g)^T.
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
  if (N == 0 || xt.numel() == 0 || gyt.numel() == 0) {
    std::fill(dw.data, dw.data + dwt.numel(), C(0));
    dw.finish();
    return;
  }
  Operand<T> x(xt), gy(gyt);
  const ConvGeometry g = a.transposed ? geometry(a, gyt.shape(), xt.shape(), dwt.shape())
                                      : geometry(a, xt.shape(), gyt.shape(), dwt.shape());
  const int64_t K = g.kernel_size(), P = g.grid_size(), I = g.image_size();
  const int64_t c_in = xt.size(1), c_out = gyt.size(1);
  const int64_t cg = c_in / G, og = c_out / G;
  GemmScratch scratch;
  std::vector<C> col;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gi = 0; gi < G; ++gi) {
      const bool accumulate = n > 0;
      if (!a.transposed) {
        // dW_g [og, cg*K] += gy_g [og, P] @ col^T, col = im2col(x_g) [cg*K, P]
        col.resize(size_t(cg * K * P));
        im2col(x.data + (n * c_in + gi * cg) * I, cg, g, col.data());
        dense_gemm(og, cg * K, P, gy.data + (n * c_out + gi * og) * P, P, 1, col.data(), 1, P,
                   dw.data + gi * og * cg * K, cg * K, accumulate, scratch);
      } else {
        // dW_g [cg, og*K] += x_g [cg, P] @ col^T, col = im2col(gy_g) [og*K, P]
        col.resize(size_t(og * K * P));
        im2col(gy.data + (n * c_out + gi * og) * I, og, g, col.data());
        dense_gemm(cg, og * K, P, x.data + (n * c_in + gi * cg) * P, P, 1, col.data(), 1, P,
                   dw.data + gi * cg * og * K, og * K, accumulate, scratch);
      }
    }
  dw.finish();
}

void convolution_dispatch(OpCall& call) {
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "convolution",
                      [&]<typename T>() { convolution_kernel<T>(call); });
}
void convolution_weight_grad_dispatch(OpCall& call) {
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "convolution_weight_grad",
                      [&]<typename T>() { convolution_weight_grad_kernel<T>(call); });
}

}  // namespace

void register_conv_kernels() {
  register_kernel("convolution", DeviceType::CPU, convolution_dispatch, kFloatDTypes);
  register_kernel("convolution_weight_grad", DeviceType::CPU, convolution_weight_grad_dispatch,
                  kFloatDTypes);
}

}  // namespace kiln::cpu
