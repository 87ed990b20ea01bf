// Shared checks of the factorisation ops (linalg_checks.h).
#include "linalg_checks.h"

#include <algorithm>

#include "kiln/ops/linalg_decompositions.h"

namespace kiln::ops {

namespace {
// PyTorch's names of the scalar types in its messages ("Long", "Half").
const char* torch_type_name(DType t) {
  switch (t) {
    case DType::F16: return "Half";
    case DType::BF16: return "BFloat16";
    case DType::I64: return "Long";
    case DType::I32: return "Int";
    case DType::I16: return "Short";
    case DType::I8: return "Char";
    case DType::U8: return "Byte";
    case DType::Bool: return "Bool";
    case DType::F64: return "Double";
    case DType::C64: return "ComplexFloat";
    case DType::C128: return "ComplexDouble";
    default: return "Float";
  }
}
}  // namespace

void check_linalg_input(const char* fn, const Tensor& A) {
  KILN_CHECK(A.dim() >= 2, Error, fn, ": The input tensor A must have at least 2 dimensions.");
  KILN_CHECK(is_floating(A.dtype()) || is_complex(A.dtype()), Error, fn,
             ": Expected a floating point or complex tensor as input. Got ",
             torch_type_name(A.dtype()));
  // Complex matrices pass: the ops with complex kernels (LU, solve, inv, det) run, the others
  // refuse them in the dispatcher (not implemented for 'complex64').
  KILN_CHECK(A.dtype() == DType::F32 || A.dtype() == DType::F64 || is_complex(A.dtype()),
             NotImplementedError, fn,
             ": expected a float32 or float64 tensor (LAPACK has no 16-bit routines), got ",
             dtype_name(A.dtype()));
}

void check_square(const char* fn, const Tensor& A) {
  check_linalg_input(fn, A);
  KILN_CHECK(A.size(-1) == A.size(-2), Error, fn,
             ": A must be batches of square matrices, but they are ", A.size(-2), " by ",
             A.size(-1), " matrices");
}

Shape batch_of(const Tensor& A, size_t matrix_dims) {
  const Shape& s = A.shape();
  return Shape(s.begin(), s.end() - std::min(s.size(), matrix_dims));
}

Shape broadcast_batch(const char* fn, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(x == y || x == 1 || y == 1, ShapeError, fn,
               ": the batch dimensions of the operands do not broadcast: ", shape_str(a),
               " and ", shape_str(b));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

void raise_for_info(const char* fn, const Tensor& info, InfoMessage message) {
  // On the host: info may live on a device whose memory the host cannot read.
  const Tensor flat = info.to(Device(DeviceType::CPU, 0)).contiguous();
  const int32_t* codes = static_cast<const int32_t*>(flat.raw_data());
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (codes[i] == 0) continue;
    if (info.dim() > 0)
      KILN_THROW(LinAlgError, fn, ": (Batch element ", i, "): ", message(codes[i]));
    KILN_THROW(LinAlgError, fn, ": ", message(codes[i]));
  }
}

}  // namespace kiln::ops
