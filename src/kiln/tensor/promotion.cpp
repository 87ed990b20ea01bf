#include "kiln/tensor/promotion.h"

namespace kiln {

namespace {
void fold(bool& has, DType& acc, DType t) {
  acc = has ? promote_types(acc, t) : t;
  has = true;
}
// PyTorch's combine_categories: the higher-priority result wins unless the lower one is of
// a higher category.
DType combine(bool has_hi, DType hi, bool has_lo, DType lo, bool& has_out) {
  has_out = has_hi || has_lo;
  if (!has_hi) return lo;
  if (!has_lo) return hi;
  if (is_complex(hi)) return hi;
  // A complex lower-priority operand keeps a floating tensor's precision (float64 tensor *
  // 1j is complex128, float32 * 1j complex64) and wins over integers.
  if (is_complex(lo)) return is_floating(hi) ? complex_dtype_for(hi) : lo;
  if (is_floating(hi)) return hi;
  if (hi == DType::Bool || is_floating(lo)) return promote_types(hi, lo);
  return hi;
}
}  // namespace

void ResultTypeState::add(const Tensor& t) {
  if (t.impl()->is_wrapped_number) {
    DType d = is_floating(t.dtype())  ? default_float_dtype()
              : is_complex(t.dtype()) ? complex_dtype_for(default_float_dtype())
                                      : t.dtype();
    fold(has_wrapped_, wrapped_, d);
  } else if (t.dim() == 0) {
    fold(has_zero_, zero_, t.dtype());
  } else {
    fold(has_dim_, dim_, t.dtype());
  }
}

void ResultTypeState::add(const Scalar& s) { fold(has_wrapped_, wrapped_, s.default_dtype()); }

DType ResultTypeState::result() const {
  bool has_low = false, has_all = false;
  DType low = combine(has_zero_, zero_, has_wrapped_, wrapped_, has_low);
  DType r = combine(has_dim_, dim_, has_low, low, has_all);
  return has_all ? r : default_float_dtype();
}

DType result_type(const Tensor& a, const Tensor& b) {
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}
DType result_type(const Tensor& a, const Scalar& b) {
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

bool can_cast(DType from, DType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && !is_floating(to) && !is_complex(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

}  // namespace kiln
