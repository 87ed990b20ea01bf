// Ops the xpu backend runs through host memory on purpose (decision 0086):
// - random ops: the CPU kernel draws from the same counter-based generator with the same
//   seed and offset, so a seeded program gets the same numbers on xpu as on cpu;
// - ops whose output size depends on the data (nonzero, masked_select, unique,
//   repeat_interleave with a repeats tensor, one_hot inferring its classes): their size has to
//   reach the host before the output exists anyway;
// - sort and topk; scatter_reduce, index_put with accumulate=True (advanced indexing's
//   backward) and scatter_add's general index forms (xpu_scatter_add.cpp runs the common one
//   on the device): deterministic sums in the CPU's order, without float atomics, which
//   OpenCL 1.2 lacks;
// - the linear-algebra factorisations (LAPACK on the host, decision 0076): sequential pivoting
//   that a GPU runs well only through a vendor solver library.
// The inputs are copied to the host, the CPU kernel runs, and the results are copied back
// into the xpu outputs. Unlike KILN_FALLBACK=cpu this is the op's xpu kernel: no warning.
#include "kiln/core/error.h"
#include "kiln/dispatch/registration.h"
#include "kiln/tensor/empty.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

void run_on_host(OpCall& call) {
  const KernelEntry& cpu = call.op->kernels[size_t(DeviceType::CPU)];
  KILN_CHECK(cpu.fn != nullptr, NotImplementedError, "op '", call.op->name, "' has no kernel for xpu");
  const Device cpu_device(DeviceType::CPU, 0);
  OpCall host;
  host.op = call.op;
  host.attrs = call.attrs;
  host.device = cpu_device;
  for (const Tensor& t : call.inputs) host.inputs.push_back(t.defined() ? to_host(t) : t);
  if (!call.op->dynamic_shape)
    for (const Tensor& t : call.outs) host.outs.push_back(to_host(t));  // values kept for in-place ops
  cpu.fn(host);
  if (call.op->dynamic_shape) {
    Device device = call.device ? *call.device : call.inputs[0].device();
    call.outs.clear();
    for (const Tensor& h : host.outs) {
      Tensor d = empty_tensor(h.shape(), h.dtype(), device);
      from_host(d, h.is_contiguous() ? h : h.contiguous());
      call.outs.push_back(d);
    }
    return;
  }
  for (size_t i = 0; i < call.outs.size(); ++i) from_host(call.outs[i], host.outs[i]);
}

void register_host_staged_kernels() {
  for (const char* name : {"uniform_", "normal_", "bernoulli_", "random_", "bernoulli", "dropout",
                           "multinomial", "randperm", "_standard_gamma", "poisson", "binomial",
                           "_standard_gamma_grad", "nonzero", "masked_select", "unique", "sort",
                           "topk", "scatter_reduce", "repeat_interleave",
                           "one_hot.infer", "linalg_cholesky_ex", "linalg_det", "linalg_eigh",
                           "linalg_lu_factor_ex", "linalg_lu_solve", "linalg_qr", "linalg_slogdet",
                           "linalg_solve_ex", "linalg_solve_triangular", "linalg_svd"}) {
    const KernelEntry cpu = detail::registered_kernel(name, DeviceType::CPU);
    if (cpu.fn) register_kernel(name, DeviceType::XPU, run_on_host, cpu.dtypes);
  }
}

}  // namespace kiln::xpu
