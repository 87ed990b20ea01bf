#include "kiln/core/shape.h"

#include <ostream>
#include <sstream>

#include "kiln/core/error.h"

namespace kiln {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    KILN_CHECK(s >= 0, Error, "negative dimension ", s, " in shape ", shape_str(shape));
    KILN_CHECK(!__builtin_mul_overflow(n, s, &n), Error, "shape ", shape_str(shape),
               " has more elements than fit in int64");
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides st(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i] > 1 ? shape[i] : 1;
  }
  return st;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = ndim > 0 ? ndim : 1;
  KILN_CHECK(dim >= -n && dim < n, IndexError, "Dimension out of range (expected to be in range of [",
             -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, ShapeError,
               "shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast: the size of dimension ", i, " must match (", da, " vs ", db,
               ") or one of them must be 1");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln
