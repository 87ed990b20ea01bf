#pragma once
// PyTorch's print options (torch.set_printoptions): digits after the point, the element count
// above which a tensor is summarised, the items kept at each edge of a summarised dim, the
// line width that rows wrap at, and scientific notation forced on / off or chosen per tensor.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct PrintOptions {
  int precision = 4;
  int64_t threshold = 1000;
  int64_t edgeitems = 3;
  int64_t linewidth = 80;
  std::optional<bool> sci_mode;  // nullopt: chosen from the values, as PyTorch
};

PrintOptions print_options();
void set_print_options(const PrintOptions& options);

class Tensor;
// repr(t) with more suffixes after device and dtype (Python's grad_fn=<...> or
// requires_grad=True), wrapped onto a new line where they pass the line width, as torch's.
std::string tensor_repr(const Tensor& t, const std::vector<std::string>& extra_suffixes);

}  // namespace kiln
