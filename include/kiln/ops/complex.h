#pragma once
// Complex tensors: views of their parts, construction from parts, and the functions whose
// result is real (abs is in elementwise.h and gives a real result for complex input).
#include "kiln/tensor/tensor.h"

namespace kiln {

// [..., 2] real view of a complex tensor (shares its storage), as torch.view_as_real.
Tensor view_as_real(const Tensor& t);
// Complex view of a real [..., 2] tensor whose last dim has stride 1 and whose other strides
// and offset are even, as torch.view_as_complex.
Tensor view_as_complex(const Tensor& t);
// The real / imaginary part as a real view (real() of a real tensor is the tensor itself;
// imag() of a real tensor is an error, as torch).
Tensor real(const Tensor& t);
Tensor imag(const Tensor& t);
// real + i imag from two float tensors of one dtype (broadcast), as torch.complex.
Tensor complex(const Tensor& real, const Tensor& imag);
Tensor conj_physical(const Tensor& t);  // a copy with negated imaginary parts
// conj_physical(t) for complex t, t itself otherwise: gradients of holomorphic functions are
// g * conj(f'(z)) (torch's conjugate Wirtinger convention), the real formulas unchanged.
Tensor conj_if_complex(const Tensor& t);
Tensor angle(const Tensor& t);          // arg(t) of a complex tensor, real
Tensor sgn(const Tensor& t);            // t / |t| (0 at 0) of a complex tensor

// FFTs over `dims` (ATen's _fft_c2c / _fft_r2c / _fft_c2r). normalization: 0 none, 1 by
// 1/sqrt(n), 2 by 1/n, n the product of the transformed (signal) sizes.
Tensor fft_c2c(const Tensor& t, const std::vector<int64_t>& dims, int64_t normalization,
               bool forward);
// Real input -> complex; with onesided the last dim of dims keeps n/2 + 1 bins.
Tensor fft_r2c(const Tensor& t, const std::vector<int64_t>& dims, int64_t normalization,
               bool onesided);
// Hermitian half-spectrum -> real output whose last dim of dims has last_dim_size elements
// (the input's last dim holds its first last_dim_size / 2 + 1 bins).
Tensor fft_c2r(const Tensor& t, const std::vector<int64_t>& dims, int64_t normalization,
               int64_t last_dim_size);

}  // namespace kiln
