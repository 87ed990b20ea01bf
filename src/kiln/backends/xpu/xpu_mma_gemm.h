#pragma once
// bfloat16 products on NVIDIA tensor cores (sm_80 and later) from OpenCL: the driver's
// OpenCL compiler accepts inline PTX, so the kernel issues mma.sync m16n8k16 (bfloat16 in,
// float32 accumulate). Used only where the device reports compute capability 8 or more and
// the program builds; anywhere else the portable tiled kernel runs (xpu_matmul_kernels.cpp).
#include <string>

namespace kiln::xpu {

// Whether the tensor-core kernel can run on the device (KILN_XPU_MMA=0 turns it off); false
// after its program once failed to build there.
bool mma_gemm_usable(int device);
void mark_mma_gemm_unusable(int device);

// The OpenCL C of kernel kiln_gemm_mma, to follow the product prelude (GemmGeometry,
// gemm_batch_offsets in xpu_matmul_kernels.cpp): the same arguments as kiln_gemm, work-groups of 256
// items each computing a 128x128 block of C (A_K_FAST / B_K_FAST pick the load order; VEC
// loads 8 elements at a time where mma_vector_loads_apply says so).
const char* mma_gemm_source();

// The pipelined variant, kiln_gemm_mma_async (xpu_mma_gemm_async.cpp): same arguments, for
// VEC operands only (16-byte aligned rows), blocks of BM (a define: 128 or 64) x 128 rows and
// columns. Off with KILN_XPU_MMA=1 (the first kernel only, for comparison) or after its
// program once failed to build on the device.
const char* mma_gemm_async_source();
bool mma_async_usable(int device);
void mark_mma_async_unusable(int device);

}  // namespace kiln::xpu
