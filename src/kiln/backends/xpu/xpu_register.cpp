// Registers every xpu kernel (called once from ensure_ops_registered, after the CPU kernels:
// the host-staged kernels copy the CPU kernels' dtype lists).
#include "kiln/dispatch/registry.h"

namespace kiln::xpu {

void register_elementwise_kernels();  // xpu_elementwise_kernels.cpp
void register_reduction_kernels();    // xpu_reduction_kernels.cpp
void register_matmul_kernels();       // xpu_matmul_kernels.cpp
void register_indexing_kernels();     // xpu_indexing_kernels.cpp
void register_host_staged_kernels();  // xpu_host_staged.cpp
void register_loss_kernels();         // xpu_loss_kernels.cpp
void register_conv_kernels();         // xpu_conv_kernels.cpp
void register_pooling_kernels();      // xpu_pooling_kernels.cpp
void register_ggml_kernels();         // xpu_ggml_kernels.cpp
void register_pointwise_program_kernel();  // xpu_pointwise_program.cpp
void register_advanced_indexing_kernels();  // xpu_advanced_indexing.cpp
void register_pad_kernel();                 // xpu_pad_kernel.cpp
void register_scan_kernels();               // xpu_scan_kernels.cpp
void register_fused_update_kernels();       // xpu_fused_update_kernels.cpp
void register_scatter_add_kernel();         // xpu_scatter_add.cpp

void register_xpu_kernels() {
  register_elementwise_kernels();
  register_reduction_kernels();
  register_matmul_kernels();
  register_indexing_kernels();
  register_host_staged_kernels();
  register_loss_kernels();
  register_conv_kernels();
  register_pooling_kernels();
  register_ggml_kernels();
  register_pointwise_program_kernel();
  register_advanced_indexing_kernels();
  register_pad_kernel();
  register_scan_kernels();
  register_fused_update_kernels();
  register_scatter_add_kernel();
}

}  // namespace kiln::xpu
