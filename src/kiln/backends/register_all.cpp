// Registers every built-in op definition and kernel, once, on first use of the registry.
#include <mutex>

#include "kiln/dispatch/registry.h"
#include "kiln/kiln.h"

namespace kiln {
namespace ops {
void register_copy_ops();
void register_factory_ops();
void register_view_ops();
void register_unary_ops();
void register_binary_ops();
void register_reduction_ops();
void register_linalg_ops();
void register_fused_linear_op();
void register_indexing_ops();
void register_random_ops();
void register_random_sampling_ops();
void register_conv_ops();
void register_pooling_ops();
void register_normalization_ops();
void register_group_norm_ops();       // group_norm.cpp
void register_activation_backward_ops();  // activation_backward.cpp
void register_hard_sigmoid_family_ops();  // hard_sigmoid_family.cpp
void register_nll_loss_ops();
void register_cross_entropy_rows_ops();
void register_adam_step_op();
void register_pointwise_program_op();
void register_lstm_cell_op();
void register_linalg_factor_ops();    // linalg_factor_ops.cpp
void register_linalg_spectral_ops();  // linalg_spectral_ops.cpp
void register_ggml_linear_op();       // quant/ggml_linear.cpp
void register_complex_ops();          // complex_ops.cpp
void register_sparse_mm_op();         // sparse_mm.cpp
}  // namespace ops
namespace cpu {
void register_copy_kernels();
void register_unary_kernels();
void register_binary_kernels();
void register_reduction_kernels();
void register_linalg_kernels();
void register_ggml_linear_kernel();
void register_fused_linear_kernel();
void register_indexing_kernels();
void register_random_kernels();
void register_random_sampling_kernels();
void register_conv_kernels();
void register_pooling_kernels();
void register_normalization_kernels();
void register_norm_backward_kernels();
void register_batch_norm_kernels();
void register_group_norm_kernels();  // group_norm_kernels.cpp
void register_activation_backward_kernels();  // activation_backward_kernels.cpp
void register_hard_sigmoid_family_kernels();  // hard_sigmoid_family_kernels.cpp
void register_nll_loss_kernels();
void register_cross_entropy_rows_kernels();
void register_adam_step_kernel();
void register_pointwise_program_kernel();
void register_float16_native();
void register_lstm_cell_kernel();
void register_linalg_factor_kernels();
void register_linalg_spectral_kernels();
void register_complex_kernels();  // complex_kernels.cpp
void register_complex_math_kernels();  // complex_math_kernels.cpp
void register_fft_kernels();      // fft_kernels.cpp
void register_sparse_mm_kernel();  // sparse_mm_kernel.cpp
}  // namespace cpu
namespace testing_backend {
void register_testing_kernels();
}
#ifdef KILN_WITH_XPU
namespace xpu {
void register_xpu_kernels();
}
#endif

void ensure_ops_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    ops::register_copy_ops();
    ops::register_factory_ops();
    ops::register_view_ops();
    ops::register_unary_ops();
    ops::register_binary_ops();
    ops::register_reduction_ops();
    ops::register_linalg_ops();
    ops::register_fused_linear_op();
    ops::register_indexing_ops();
    ops::register_random_ops();
    ops::register_random_sampling_ops();
    ops::register_conv_ops();
    ops::register_pooling_ops();
    ops::register_normalization_ops();
    ops::register_group_norm_ops();
    ops::register_activation_backward_ops();
    ops::register_hard_sigmoid_family_ops();
    ops::register_nll_loss_ops();
    ops::register_cross_entropy_rows_ops();
    ops::register_adam_step_op();
    ops::register_pointwise_program_op();
    ops::register_lstm_cell_op();
    ops::register_linalg_factor_ops();
    ops::register_linalg_spectral_ops();
    ops::register_ggml_linear_op();
    ops::register_complex_ops();
    ops::register_sparse_mm_op();
    cpu::register_copy_kernels();
    cpu::register_unary_kernels();
    cpu::register_binary_kernels();
    cpu::register_reduction_kernels();
    cpu::register_linalg_kernels();
    cpu::register_fused_linear_kernel();
    cpu::register_indexing_kernels();
    cpu::register_random_kernels();
    cpu::register_random_sampling_kernels();
    cpu::register_conv_kernels();
    cpu::register_pooling_kernels();
    cpu::register_normalization_kernels();
    cpu::register_norm_backward_kernels();
    cpu::register_batch_norm_kernels();
    cpu::register_group_norm_kernels();
    cpu::register_activation_backward_kernels();
    cpu::register_hard_sigmoid_family_kernels();
    cpu::register_nll_loss_kernels();
    cpu::register_cross_entropy_rows_kernels();
    cpu::register_adam_step_kernel();
    cpu::register_pointwise_program_kernel();
    cpu::register_float16_native();
    cpu::register_lstm_cell_kernel();
    cpu::register_linalg_factor_kernels();
    cpu::register_linalg_spectral_kernels();
    cpu::register_ggml_linear_kernel();
    cpu::register_complex_kernels();
    cpu::register_complex_math_kernels();
    cpu::register_fft_kernels();
    cpu::register_sparse_mm_kernel();
    testing_backend::register_testing_kernels();
#ifdef KILN_WITH_XPU
    xpu::register_xpu_kernels();
#endif
  });
}

std::string version() { return KILN_VERSION; }
std::string build_type() { return KILN_BUILD_TYPE; }

}  // namespace kiln
