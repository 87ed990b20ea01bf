#pragma once
// Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d: parameters named, shaped and
// initialised as torch.nn's (kaiming_uniform_(a = sqrt(5)) weight, bias uniform in
// +-1/sqrt(fan_in)), so state dicts load in both directions. padding_mode "zeros" only.
#include <string>

#include "kiln/nn/functional_conv.h"
#include "kiln/nn/module.h"
#include "kiln/ops/factory.h"
#include "kiln/runtime/generator.h"

namespace kiln::nn {

struct ConvOptionsNd {
  std::vector<int64_t> stride{1};
  functional::ConvPadding padding{};  // 0
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
  bool bias = true;
  std::vector<int64_t> output_padding{0};  // transposed only
  TensorOptions tensor{};
};

// The shared body: `spatial` dims, plain or transposed.
class ConvNd : public Module {
 public:
  void reset_parameters(Generator* gen = nullptr);
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels, spatial_dims;
  const bool transposed;
  const std::vector<int64_t> kernel_size;
  const ConvOptionsNd options;
  Tensor& weight;  // plain [out, in / groups, *k]; transposed [in, out / groups, *k]
  Tensor& bias;    // [out] or undefined

 protected:
  ConvNd(const char* name, int64_t spatial_dims, bool transposed, int64_t in_channels,
         int64_t out_channels, std::vector<int64_t> kernel_size, ConvOptionsNd options);
  Tensor run(const Tensor& x) const;
};

#define KILN_CONV_MODULE(NAME, DIMS, TRANSPOSED)                                           \
  class NAME : public ConvNd {                                                            \
   public:                                                                                \
    NAME(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,     \
         ConvOptionsNd options = {})                                                      \
        : ConvNd(#NAME, DIMS, TRANSPOSED, in_channels, out_channels,                      \
                 std::move(kernel_size), std::move(options)) {}                           \
    Tensor forward(const Tensor& x) const { return run(x); }                              \
    Tensor operator()(const Tensor& x) const { return run(x); }                           \
  };
KILN_CONV_MODULE(Conv1d, 1, false)
KILN_CONV_MODULE(Conv2d, 2, false)
KILN_CONV_MODULE(Conv3d, 3, false)
KILN_CONV_MODULE(ConvTranspose1d, 1, true)
KILN_CONV_MODULE(ConvTranspose2d, 2, true)
#undef KILN_CONV_MODULE

}  // namespace kiln::nn
