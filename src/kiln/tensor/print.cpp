// Printing in PyTorch's style: tensor([[1., 2.],\n        [3., 4.]], dtype=kiln.float64).
// Floats print with `precision` decimals ("1.5000"), or as "1." when every value is whole, or
// in scientific notation when the shown values' range is wide; more than `threshold` elements
// are summarised with "..." keeping `edgeitems` items at each edge of each dim (only those
// are read: printing a large tensor copied every element to the host as doubles); rows
// wrap at `linewidth` (print_options.h, torch.set_printoptions). Checked against torch 2.13.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/ops/complex.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/tensor/print_options.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

namespace {

// s without its leading spaces.
std::string f_trim(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return std::string(s.begin() + std::ptrdiff_t(i), s.end());
}

std::mutex g_options_mutex;
PrintOptions g_options;

struct Formatter {
  bool floating = false, is_bool = false, all_int = true, sci = false;
  int precision = 4;
  size_t width = 1;

  std::string fmt(double v) const {
    char buf[512];
    if (is_bool) return v != 0 ? "True" : "False";
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%lld", (long long)v);
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci)
      std::snprintf(buf, sizeof buf, "%.*e", precision, v);
    else if (all_int)
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    else
      std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf;
  }
};

// What is printed of t: each dim longer than 2 * edge cut to its first and last `edge` items
// (cut[d] says which were), on the host, contiguous. One advanced-indexing read with an index
// per dim (broadcast against the others), so only the shown elements are touched: narrowing
// and concatenating dim by dim copied whole slabs of a large tensor first.
Tensor shown_part(const Tensor& t, bool summarize, int64_t edge, std::vector<bool>& cut) {
  cut.assign(size_t(t.dim()), false);
  bool any = false;
  for (int64_t d = 0; summarize && d < t.dim(); ++d) {
    cut[size_t(d)] = t.size(d) > 2 * edge;
    any = any || cut[size_t(d)];
  }
  if (!any) return t.cpu().contiguous();
  std::vector<Tensor> indices;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = t.size(d);
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < n; ++i)
      if (!cut[size_t(d)] || i < edge || i >= n - edge) keep.push_back(i);
    Shape s(size_t(t.dim()), 1);
    s[size_t(d)] = int64_t(keep.size());
    indices.push_back(tensor_from(keep, s, TensorOptions(DType::I64, t.device())));
  }
  return index(t, indices).cpu().contiguous();
}

struct Layout {
  const std::vector<std::string>& items;  // each shown element, formatted (and padded)
  size_t item_width;  // the width that sets how many elements fit a line
  const Shape& shape;  // of the shown part
  const std::vector<bool>& cut;
  int64_t edge;
  int64_t linewidth;
};

// torch's _Formatter over the shown values: width, whole-number and scientific modes.
Formatter make_formatter(const std::vector<double>& vals, bool floating, bool is_bool,
                         const PrintOptions& o) {
  Formatter f;
  f.floating = floating;
  f.is_bool = is_bool;
  f.precision = o.precision;
  if (f.floating) {
    double amax = 0, amin = INFINITY;
    bool any = false;
    for (double v : vals) {
      if (!std::isfinite(v)) continue;
      any = true;
      if (v != std::trunc(v)) f.all_int = false;
      amax = std::max(amax, std::fabs(v));
      if (v != 0) amin = std::min(amin, std::fabs(v));
    }
    // torch's _Formatter: the ratio and size of the nonzero finite values shown.
    if (any && amin != INFINITY)
      f.sci = amax / amin > 1000.0 || amax > 1.0e8 || (!f.all_int && amin < 1.0e-4);
    if (o.sci_mode) f.sci = *o.sci_mode;
  }
  // torch's width: of the nonzero finite values for floats (a "-0.0000", "inf" or "nan" may
  // be wider and is not padded), of every value otherwise.
  for (double v : vals)
    if (!f.floating || (std::isfinite(v) && v != 0)) f.width = std::max(f.width, f.fmt(v).size());
  return f;
}

std::string padded(const Formatter& f, double v) {
  std::string s = f.fmt(v);
  return std::string(f.width > s.size() ? f.width - s.size() : 0, ' ') + s;
}

// torch's complex _scalar_str: the padded real part, then the imaginary part with its sign
// ("+" added when it has none) and "j", unpadded.
std::string complex_item(const Formatter& re, const Formatter& im, double a, double b) {
  std::string imag = f_trim(padded(im, b) + "j");
  return padded(re, a) + (imag[0] == '-' || imag[0] == '+' ? "" : "+") + imag;
}

// torch's _tensor_str_with_formatter: the last dim as wrapped lines of elements, "..." an
// element where the dim was cut; outer dims one row per line, rows apart by blank lines.
void print_rec(std::ostream& os, const Layout& L, const Strides& st, size_t d, int64_t base,
               size_t indent) {
  const int64_t n = L.shape[d];
  if (d + 1 == L.shape.size()) {
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (L.cut[d] && i == L.edge) items.push_back(" ...");
      items.push_back(L.items[size_t(base + i * st[d])]);
    }
    const int64_t per_line =
        std::max<int64_t>(1, (L.linewidth - int64_t(indent)) / int64_t(L.item_width + 2));
    os << '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0 && int64_t(i) % per_line == 0) os << ",\n" << std::string(indent + 1, ' ');
      else if (i > 0) os << ", ";
      os << items[i];
    }
    os << ']';
    return;
  }
  os << '[';
  std::string row_sep = ",";
  row_sep.append(L.shape.size() - d - 1, '\n').append(indent + 1, ' ');
  for (int64_t i = 0; i < n; ++i) {
    if (L.cut[d] && i == L.edge) os << "..." << row_sep;
    print_rec(os, L, st, d + 1, base + i * st[d], indent + 1);
    if (i + 1 < n) os << row_sep;
  }
  os << ']';
}

}  // namespace

PrintOptions print_options() {
  std::lock_guard lock(g_options_mutex);
  return g_options;
}

void set_print_options(const PrintOptions& options) {
  std::lock_guard lock(g_options_mutex);
  g_options = options;
}

std::string Tensor::str() const { return tensor_repr(*this, {}); }

namespace {
// A meta tensor has no values: torch's form, tensor(..., device='meta', size=(2, 3)).
std::string meta_tensor_repr(const Tensor& t, const std::vector<std::string>& extra_suffixes) {
  std::string s = "tensor(..., device='meta', size=(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  s += t.dim() == 1 ? ",)" : ")";
  if (t.dtype() != default_float_dtype()) {
    std::ostringstream dtype_name;
    dtype_name << "dtype=" << t.dtype();
    s += ", " + dtype_name.str();
  }
  for (const std::string& suffix : extra_suffixes) s += ", " + suffix;
  return s + ")";
}
}  // namespace

std::string tensor_repr(const Tensor& t, const std::vector<std::string>& extra_suffixes) {
  if (!t.defined()) return "tensor(undefined)";
  if (t.device().type == DeviceType::Meta) return meta_tensor_repr(t, extra_suffixes);
  const PrintOptions o = print_options();
  const bool summarize = t.numel() > o.threshold;
  std::vector<bool> cut;
  const Tensor part = t.numel() > 0 ? shown_part(t, summarize, o.edgeitems, cut) : Tensor();
  // Every shown element formatted; complex values with one formatter per part, as torch.
  std::vector<std::string> items;
  size_t item_width = 1;
  if (t.numel() > 0 && is_complex(t.dtype())) {
    const std::vector<double> both = view_as_real(part).to_vector<double>();
    std::vector<double> re(both.size() / 2), im(both.size() / 2);
    for (size_t k = 0; k < re.size(); ++k) re[k] = both[2 * k], im[k] = both[2 * k + 1];
    const Formatter fr = make_formatter(re, true, false, o), fi = make_formatter(im, true, false, o);
    for (size_t k = 0; k < re.size(); ++k) items.push_back(complex_item(fr, fi, re[k], im[k]));
    item_width = fr.width + fi.width + 1;
  } else if (t.numel() > 0) {
    const std::vector<double> vals = part.to_vector<double>();
    const Formatter f = make_formatter(vals, t.is_floating_point(), t.dtype() == DType::Bool, o);
    for (double v : vals) items.push_back(padded(f, v));
    item_width = f.width;
  }

  const std::string prefix = "tensor(";
  std::ostringstream os;
  os << prefix;
  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  std::ostringstream dtype_name;
  dtype_name << "dtype=" << t.dtype();
  if (t.numel() == 0) {
    os << "[]";
    if (t.dim() != 1) {
      std::string size = "size=(";
      for (int64_t i = 0; i < t.dim(); ++i) size += (i ? ", " : "") + std::to_string(t.size(i));
      suffixes.push_back(size + ")");
    }
    if (t.dtype() != default_float_dtype()) suffixes.push_back(dtype_name.str());  // as torch
  } else {
    if (t.dim() == 0) {
      os << f_trim(items[0]);
    } else {
      const Layout layout{items, item_width, part.shape(), cut, o.edgeitems, o.linewidth};
      print_rec(os, layout, contiguous_strides(part.shape()), 0, 0, prefix.size());
    }
    if (t.dtype() != default_float_dtype() && t.dtype() != complex_dtype_for(default_float_dtype()) &&
        t.dtype() != DType::I64 && t.dtype() != DType::Bool)
      suffixes.push_back(dtype_name.str());
  }
  suffixes.insert(suffixes.end(), extra_suffixes.begin(), extra_suffixes.end());
  // torch's _add_suffixes: a suffix that would pass the line width starts a new line.
  std::string text = os.str();
  const size_t newline = text.rfind('\n');
  int64_t last = int64_t(text.size()) - (newline == std::string::npos ? -1 : int64_t(newline)) + 1;
  for (const std::string& suffix : suffixes) {
    if (last + int64_t(suffix.size()) + 2 > o.linewidth) {
      text += ",\n" + std::string(prefix.size(), ' ') + suffix;
      last = int64_t(prefix.size() + suffix.size());
    } else {
      text += ", " + suffix;
      last += int64_t(suffix.size()) + 2;
    }
  }
  return text + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << tensor_repr(t, {}); }

}  // namespace kiln
