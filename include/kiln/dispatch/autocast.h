#pragma once
// Autocast (torch.autocast): inside an enabled region of a device type, the products and
// convolutions run in a lower precision (bfloat16 by default on cpu, float16 on xpu, as
// torch) and a few precision-sensitive ops (nll_loss, prod, the linalg factorisations) in
// float32, whatever their inputs' float dtypes; float64 is never touched. The casts are ops
// recorded by autograd (the interceptor sits above it), so gradients reach float32 weights in
// float32. Casts of leaves that require grad (weights) are cached until the outermost region
// exits (or while their version is unchanged). State is per thread, as torch's.
#include "kiln/core/dtype.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

bool is_autocast_enabled(DeviceType device);
// t as autocast casts an operand of the products (mm, matmul, addmm, ...): in the autocast
// dtype of its device where autocast is enabled there and t is a float32 / float16 / bfloat16
// tensor, the cast cached for leaves that require grad; t itself otherwise. For functions
// that cast an operand before reshaping it (linear: the weight before its transpose).
Tensor autocast_product_operand(const Tensor& t);
void set_autocast_enabled(DeviceType device, bool enabled);
DType get_autocast_dtype(DeviceType device);
void set_autocast_dtype(DeviceType device, DType dtype);  // bfloat16 or float16
bool is_autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);
// Region nesting (the Python context manager): the cache is cleared when it returns to 0.
int increment_autocast_nesting();
int decrement_autocast_nesting();
void clear_autocast_cache();

}  // namespace kiln
