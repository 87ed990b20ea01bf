#pragma once
// Host references for reduction tests: the groups of input values each output of a
// reduction sees (in row-major order of the reduced dims), computed with plain index
// arithmetic independent of kiln's kernels, and inputs in every layout the tests use.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/test_util.h"

namespace kiln::test {

struct RefGroups {
  Shape out_shape;
  std::vector<std::vector<double>> groups;  // one per output element, row-major
};

inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

// dims empty: all dims. Negative dims count from the end. 0-d inputs accept 0 / -1.
inline RefGroups ref_groups(const std::vector<double>& vals, const Shape& shape,
                            const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t nd = int64_t(shape.size());
  std::vector<bool> red(shape.size(), dims.empty());
  for (int64_t d : dims)
    if (nd > 0) red[size_t(d < 0 ? d + nd : d)] = true;
  RefGroups r;
  Shape kept;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!red[i]) {
      r.out_shape.push_back(shape[i]);
      kept.push_back(shape[i]);
    } else if (keepdim) {
      r.out_shape.push_back(1);
    }
  }
  int64_t nout = 1;
  for (int64_t s : kept) nout *= s;
  r.groups.assign(size_t(nout), {});
  for (size_t i = 0; i < vals.size(); ++i) {
    std::vector<int64_t> idx = unravel(int64_t(i), shape);
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!red[d]) o = o * shape[d] + idx[d];
    r.groups[size_t(o)].push_back(vals[i]);
  }
  return r;
}

template <typename F>
std::vector<double> map_groups(const RefGroups& g, F&& f) {
  std::vector<double> out;
  for (const auto& grp : g.groups) out.push_back(f(grp));
  return out;
}

// Random test values suited to dtype (small integers for integer types, 0/1 for bool).
inline std::vector<double> values_for(DType t, size_t n, uint32_t seed, double lo = -3,
                                      double hi = 3) {
  if (t == DType::Bool) return random_values(n, 0, 2, seed, true);
  if (t == DType::U8) return random_values(n, 0, std::max(hi, 1.0) + 1, seed, true);
  if (is_integral(t)) return random_values(n, lo, hi + 1, seed, true);
  return rounded(random_values(n, lo, hi, seed), t);
}

// Input layouts for reductions: those of test_util.h plus an expanded (broadcast) one.
enum class InLayout { Contiguous, Transposed, Strided, Expanded };
inline const std::vector<InLayout>& in_layouts() {
  static const std::vector<InLayout> v = {InLayout::Contiguous, InLayout::Transposed,
                                          InLayout::Strided, InLayout::Expanded};
  return v;
}
inline std::string layout_name(InLayout l) {
  switch (l) {
    case InLayout::Contiguous: return "contiguous";
    case InLayout::Transposed: return "transposed";
    case InLayout::Strided: return "strided";
    case InLayout::Expanded: return "expanded";
  }
  return "?";
}

// A tensor of shape whose logical values are returned in vals (row-major). For Expanded,
// dim 0 is a broadcast of a single slice, so vals repeats that slice.
inline Tensor make_input(std::vector<double>& vals, const Shape& shape, DType dtype,
                         Device device, InLayout layout) {
  if (layout == InLayout::Expanded && !shape.empty()) {
    Shape one = shape;
    one[0] = 1;
    size_t slice = size_t(numel_of(one));
    std::vector<double> base(vals.begin(), vals.begin() + std::min(slice, vals.size()));
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = base[i % std::max<size_t>(slice, 1)];
    return make(base, one, dtype, device).expand(shape);
  }
  if (layout == InLayout::Strided && !shape.empty()) {
    // Every other element of a twice-as-long last dim (any rank; filler -777 between).
    Shape big = shape;
    big.back() *= 2;
    std::vector<double> bv(size_t(numel_of(big)), -777.0);
    size_t inner = size_t(shape.back());
    for (size_t i = 0; i < vals.size(); ++i) bv[(i / inner) * inner * 2 + (i % inner) * 2] = vals[i];
    return make(bv, big, dtype, device).slice(-1, 0, std::nullopt, 2);
  }
  if (layout == InLayout::Transposed && shape.size() >= 2)
    return make_layout(vals, shape, dtype, device, Layout::Transposed);
  return make(vals, shape, dtype, device);
}

// Expects an error of type E whose message contains every one of parts.
template <typename E, typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    expect_python_class_of<E>(e);
    std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

inline double ref_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}

}  // namespace kiln::test
