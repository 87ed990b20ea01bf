#pragma once
// Matrix products through oneDNN's matmul primitive (Debian libdnnl-dev 2.6) for the shapes
// where it beats kiln's own blocked kernels (decision 0017). Built only with KILN_HAVE_DNNL;
// otherwise onednn_matmul always returns false and kiln's kernels run.
#include <cstdint>

#include "kiln/core/dtype.h"

namespace kiln {
class Tensor;
}

namespace kiln::cpu {

// C = alpha * A @ B for one [M, K] x [K, N] product of float32 or bfloat16 matrices given by
// element strides (C written, not accumulated; bfloat16 results rounded once from float32
// sums). Returns false, having done nothing, when oneDNN is absent, switched off
// (KILN_ONEDNN=0), or the shape is one where kiln's kernel is the faster (see the rule in
// onednn_matmul.cpp).
// out_f32: C is float32 even for bfloat16 operands (the caller then adds its own terms and
// rounds once). bias: a contiguous row of N values of dtype added to every row of the
// product inside oneDNN (Linear's bias: addmm with beta = 1 and self broadcast over rows).
// b_tensor: the 2-D tensor whose memory B is, when the caller has one. A B seen again
// unchanged (a weight) is reordered once into oneDNN's blocked layout and that copy reused
// while the tensor lives unmodified (decision 0031); otherwise oneDNN packs B inside every call.
bool onednn_matmul(DType dtype, int64_t M, int64_t N, int64_t K, const void* A, int64_t a_rs,
                   int64_t a_cs, const void* B, int64_t b_rs, int64_t b_cs, void* C, int64_t c_rs,
                   float alpha, bool out_f32 = false, const void* bias = nullptr,
                   const Tensor* b_tensor = nullptr);

// The same for `batch` products at once (element strides between consecutive products a_bs,
// b_bs (0: B shared by all), c_bs), float32 or bfloat16 output of the operands' dtype.
bool onednn_matmul_batched(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                           const void* A, int64_t a_bs, int64_t a_rs, int64_t a_cs, const void* B,
                           int64_t b_bs, int64_t b_rs, int64_t b_cs, void* C, int64_t c_bs,
                           int64_t c_rs, float alpha);

}  // namespace kiln::cpu
