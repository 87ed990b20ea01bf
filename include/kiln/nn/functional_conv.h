#pragma once
// nn::functional convolution and pooling, as torch.nn.functional: unbatched inputs
// ([C, *spatial]) are accepted, and padding may be "same" or "valid". Per-dim arguments
// take one value (repeated) or one per spatial dim.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::nn::functional {

// Explicit per-dim padding, or "same" (output size = input size; stride 1 only) or "valid"
// (no padding).
struct ConvPadding {
  std::vector<int64_t> values{0};
  std::string mode;  // "" (explicit), "same" or "valid"
  ConvPadding() = default;
  ConvPadding(int64_t p) : values{p} {}                            // NOLINT
  ConvPadding(int p) : values{p} {}                                // NOLINT: literal 0
  ConvPadding(std::vector<int64_t> p) : values(std::move(p)) {}    // NOLINT
  ConvPadding(std::initializer_list<int64_t> p) : values(p) {}     // NOLINT
  ConvPadding(const char* m) : mode(m) {}                          // NOLINT
  ConvPadding(std::string m) : mode(std::move(m)) {}               // NOLINT
};

using IntList = std::vector<int64_t>;

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const ConvPadding& padding = {},
              const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const ConvPadding& padding = {},
              const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const ConvPadding& padding = {},
              const IntList& dilation = {1}, int64_t groups = 1);
// Argument order as torch: (input, weight, bias, stride, padding, output_padding, groups,
// dilation); weight [C_in, C_out / groups, *kernel].
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});

// stride empty: equal to kernel_size.
Tensor max_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
// (values, flat indices within each input plane), as return_indices=True.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& kernel_size,
                                                  const IntList& stride = {},
                                                  const IntList& padding = {0},
                                                  const IntList& dilation = {1},
                                                  bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, const IntList& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, const IntList& output_size);

}  // namespace kiln::nn::functional
