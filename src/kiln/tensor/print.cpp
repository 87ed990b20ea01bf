// Printing in PyTorch's style: tensor([[1., 2.],\n        [3., 4.]], dtype=kiln.float64).
// Floats print with 4 decimals ("1.5000"), or as "1." when every value is whole, or in
// scientific notation when the range is wide; more than 1000 elements are summarised with
// "..." keeping 3 items at each edge of each dim.
#include <cmath>
#include <functional>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "kiln/ops/copy.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

namespace {

struct Formatter {
  bool floating = false, is_bool = false, all_int = true, sci = false;
  size_t width = 1;

  std::string fmt(double v) const {
    char buf[64];
    if (is_bool) return v != 0 ? "True" : "False";
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%lld", (long long)v);
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci)
      std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (all_int)
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    else
      std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
};

constexpr int64_t kThreshold = 1000, kEdge = 3;

void collect(const std::vector<double>& vals, const Shape& shape, bool summarize,
             std::vector<double>& shown) {
  // Gathers the values that will be printed (for width and format decisions).
  std::vector<int64_t> idx(shape.size(), 0);
  Strides st = contiguous_strides(shape);
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t base) {
    if (d == shape.size()) {
      shown.push_back(vals[size_t(base)]);
      return;
    }
    int64_t n = shape[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdge && i == kEdge) i = n - kEdge;
      rec(d + 1, base + i * st[d]);
    }
  };
  if (numel_of(shape) > 0) rec(0, 0);
}

void print_rec(std::ostream& os, const std::vector<double>& vals, const Shape& shape,
               const Strides& st, size_t d, int64_t base, const Formatter& f, bool summarize,
               size_t indent) {
  if (d == shape.size()) {
    std::string s = f.fmt(vals[size_t(base)]);
    os << std::string(f.width > s.size() ? f.width - s.size() : 0, ' ') << s;
    return;
  }
  os << '[';
  int64_t n = shape[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) {
      os << (d + 1 == shape.size() ? " ..." : "...");
      os << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + d + 1, ' '));
      i = n - kEdge;
    }
    print_rec(os, vals, shape, st, d + 1, base + i * st[d], f, summarize, indent);
    if (i + 1 < n) {
      if (d + 1 == shape.size()) {
        os << ", ";
      } else {
        os << ',' << std::string(shape.size() - d - 1, '\n') << std::string(indent + d + 1, ' ');
      }
    }
  }
  os << ']';
}

}  // namespace

std::string Tensor::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> vals = t.to_vector<double>();
  const Shape& shape = t.shape();
  bool summarize = t.numel() > kThreshold;
  Formatter f;
  f.floating = t.is_floating_point();
  f.is_bool = t.dtype() == DType::Bool;
  std::vector<double> shown;
  collect(vals, shape, summarize, shown);
  if (f.floating) {
    double amax = 0, amin = INFINITY;
    bool any = false;
    for (double v : shown) {
      if (!std::isfinite(v)) continue;
      any = true;
      if (v != std::trunc(v)) f.all_int = false;
      amax = std::max(amax, std::fabs(v));
      if (v != 0) amin = std::min(amin, std::fabs(v));
    }
    if (any && (amax >= 1e8 || (amin != INFINITY && (amax / amin > 1000.0 || amin < 1e-4)))) {
      f.sci = !(f.all_int && amax < 1e8);
    }
  }
  for (double v : shown) f.width = std::max(f.width, f.fmt(v).size());

  const std::string prefix = "tensor(";
  os << prefix;
  if (t.numel() == 0 && t.dim() > 0) {
    os << "[]";
  } else if (t.dim() == 0) {
    os << f.fmt(vals[0]);
  } else {
    print_rec(os, vals, shape, contiguous_strides(shape), 0, 0, f, summarize, prefix.size());
  }
  if (t.numel() == 0 && t.dim() != 1) {
    os << ", size=(";
    for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << (shape.size() == 1 ? ",)" : ")");
  }
  if (!t.device().is_cpu()) os << ", device='" << t.device().str() << "'";
  bool default_dtype = t.dtype() == default_float_dtype() || t.dtype() == DType::I64 ||
                       t.dtype() == DType::Bool;
  if (!default_dtype) os << ", dtype=" << t.dtype();
  os << ')';
  return os;
}

}  // namespace kiln
