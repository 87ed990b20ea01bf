#pragma once
// Tensor plumbing inside xpu kernels, without dispatching ops (kernels never call ops):
// contiguous device copies, rows views for reductions, and host staging.
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {
struct OpCall;
}

namespace kiln::xpu {

// t itself when contiguous, else a contiguous copy on t's device.
Tensor contiguous_on_device(const Tensor& t);
// A view of t with its dims reordered (no data moved).
Tensor permuted_view(const Tensor& t, const std::vector<int64_t>& order);
// A contiguous view of t (which must be contiguous) with another shape.
Tensor reshaped_view(const Tensor& t, const Shape& shape);
// Writes src (contiguous, same numel) into dst, any strides (dst's shape read row-major).
void copy_into(const Tensor& dst, const Tensor& src);

// A contiguous host copy of an xpu tensor (waits for the device).
Tensor to_host(const Tensor& t);
// Writes a contiguous host tensor into an xpu tensor of the same shape (any strides).
void from_host(const Tensor& dst, const Tensor& host);

// Runs the op's CPU kernel on host copies of the inputs and writes its results into the xpu
// outputs (xpu_host_staged.cpp): the xpu kernel of ops that stage through host memory.
void run_on_host(OpCall& call);

// Dims as non-negative indices, sorted and unique; empty means every dim.
std::vector<int64_t> normalized_dims(const std::vector<int64_t>& dims, int64_t ndim);

}  // namespace kiln::xpu
