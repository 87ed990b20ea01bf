// CPU kernels for sort, topk and unique. Keys compare in the op-math type (float for the
// 16-bit floats); NaN orders as the largest value and all NaNs as equivalent, so sorts are
// strict weak orders; equal keys keep their input order (stable).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "index_loops.h"
#include "sort_network.h"
#include "kiln/tensor/empty.h"

namespace kiln::cpu {

namespace {

template <typename C>
bool less_nan_last(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) return !std::isnan(a) && (std::isnan(b) || a < b);
  else return a < b;
}

// topk with k up to this many (and k * 8 < n) selects in one scan (see sort_slices).
constexpr int64_t kScanTopK = 64;

// Lines longer than a sorting network takes whose keys fit 32 bits are radix-sorted (see
// radix_sort_line); shorter ones go through sort_line_by_network (decisions 0148, 0153). One
// thread, us per line of fresh random float32, AMD Zen 4, whole sort op: the network 0.030 at
// n = 8, 0.16 at 32, 0.61-0.72 at 64; std::sort over the same integers 0.084 at 8, 0.54 at 32;
// the radix sort 0.94 at 64, 1.14-1.17 at 96.
constexpr int64_t kRadixMinLine = kSortNetworkMaxLine + 1;

// Whether T's keys map to 32-bit unsigned integers in sort order (radix_key).
template <typename T>
inline constexpr bool kRadixKeys =
    std::is_same_v<T, float> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int16_t> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>;

// An unsigned key whose order is the sort's: floats by their bits (the sign flipped for
// positives, all bits for negatives), -0 as +0 (equal keys: ties keep input order), every NaN
// the largest key (last ascending, first descending); integers offset to unsigned.
template <typename T>
inline uint32_t radix_key(T v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
    return uint32_t(v);
  } else if constexpr (std::is_integral_v<T>) {
    return uint32_t(int32_t(v)) ^ 0x80000000u;
  } else {
    const float f = float(v);
    if (f != f) return 0xFFFFFFFFu;
    if (f == 0.0f) return 0x80000000u;
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
}

struct KeyIndex {
  uint32_t key, index;
};

// Stable LSD radix sort of n (key, index) pairs by key, 8 bits per pass (passes whose digit
// is the same in every key skipped); returns whichever of a / tmp holds the result. Equal
// keys keep their order, so with indices in input order the result is std::stable_sort's.
// sort(-1) of [1024, 1024] float32 with std::sort over (key, index) pairs and a NaN-aware
// comparator: 23.4 ms on two threads (PyTorch 20.7).
KeyIndex* radix_sort_line(KeyIndex* a, KeyIndex* tmp, int64_t n) {
  for (int shift = 0; shift < 32; shift += 8) {
    int64_t count[256] = {};
    for (int64_t i = 0; i < n; ++i) ++count[(a[i].key >> shift) & 255u];
    if (count[(a[0].key >> shift) & 255u] == n) continue;
    int64_t at = 0;
    for (int64_t& c : count) {
      const int64_t m = c;
      c = at;
      at += m;
    }
    for (int64_t i = 0; i < n; ++i) tmp[count[(a[i].key >> shift) & 255u]++] = a[i];
    std::swap(a, tmp);
  }
  return a;
}

// Sorts one line of n <= kSortNetworkMaxLine 32-bit keys: each (key, index) pair as one 64-bit
// integer, key above index, so that integer order is the sort's order with ties in index order
// (stable), through a sorting network; writes the first k values and indices. Parameters, not
// a lambda's captures: through those the compiler reloaded every stride after each store.
template <typename T>
void sort_line_by_network(const T* x, int64_t xs, int64_t n, bool descending, int64_t k, T* v,
                          int64_t vs, int64_t* idx, int64_t is) {
  uint64_t pairs[kSortNetworkMaxLine];
  const uint32_t flip = descending ? 0xFFFFFFFFu : 0u;
  for (int64_t j = 0; j < n; ++j)
    pairs[j] = (uint64_t(radix_key(x[j * xs]) ^ flip) << 32) | uint64_t(j);
  sort_short_line(pairs, n);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t src = int64_t(pairs[j] & 0xFFFFFFFFu);
    v[j * vs] = x[src * xs];
    idx[j * is] = src;
  }
}

// The element offsets of line s's first entry in three tensors of the same outer shape,
// stepped line by line like an odometer: a division per dimension and line took a fifth of
// the time of sorting [65536, 8] float32 by network.
class LineOffsets {
 public:
  LineOffsets(const Shape& outer, const Geom* const (&g)[3], int64_t first)
      : outer_(outer), coord_(outer.size()) {
    for (int k = 0; k < 3; ++k) strides_[k] = g[k]->strides;
    for (int64_t r = first, dim = int64_t(outer.size()); dim-- > 0;) {
      coord_[size_t(dim)] = r % outer[size_t(dim)];
      r /= outer[size_t(dim)];
      for (int k = 0; k < 3; ++k) off[k] += coord_[size_t(dim)] * strides_[k][size_t(dim)];
    }
  }
  void next() {
    for (size_t dim = outer_.size(); dim-- > 0;) {
      if (++coord_[dim] < outer_[dim]) {
        for (int k = 0; k < 3; ++k) off[k] += strides_[k][dim];
        return;
      }
      for (int k = 0; k < 3; ++k) off[k] -= (coord_[dim] - 1) * strides_[k][dim];
      coord_[dim] = 0;
    }
  }
  int64_t off[3] = {0, 0, 0};

 private:
  const Shape& outer_;
  Shape coord_;
  Strides strides_[3];
};

// Sorts every slice of x along d and writes the first k entries of each into vals/idx
// (whose dim d has size k). Descending puts NaN first. Ties (equal keys, and all NaNs) are
// broken by the index, a total order whose sorted sequence is exactly std::stable_sort's, so
// the unstable std::sort and, for topk with k well below n, std::partial_sort (n log k) give
// the same values and indices. Slices are spread over the threads.
template <typename T>
void sort_slices(const Tensor& x, const Tensor& vals, const Tensor& idx, int64_t d,
                 bool descending, int64_t k) {
  using C = opmath_t<T>;
  using Entry = std::pair<C, int64_t>;
  Geom xg = geom_of(x, true), vg = geom_of(vals, true), ig = geom_of(idx, true);
  int64_t n = xg.shape[size_t(d)];
  int64_t xs = xg.strides[size_t(d)], vs = vg.strides[size_t(d)], is = ig.strides[size_t(d)];
  Shape outer = xg.shape;
  outer[size_t(d)] = 1;
  const T* xp = static_cast<const T*>(x.raw_data());
  T* vp = static_cast<T*>(vals.raw_data());
  int64_t* ip = idx.data_ptr<int64_t>();
  auto asc = [](const Entry& a, const Entry& b) {
    if (less_nan_last<C>(a.first, b.first)) return true;
    if (less_nan_last<C>(b.first, a.first)) return false;
    return a.second < b.second;
  };
  auto desc = [](const Entry& a, const Entry& b) {
    if (less_nan_last<C>(b.first, a.first)) return true;
    if (less_nan_last<C>(a.first, b.first)) return false;
    return a.second < b.second;
  };
  const int64_t slices = numel_of(outer);
  if (slices == 0 || n == 0) return;
  const bool scan = k >= 1 && k <= kScanTopK && k * 8 < n;
  // Whether key a ranks strictly before key b in the output order (ties: neither).
  auto ranks_before = [descending](C a, C b) {
    return descending ? less_nan_last<C>(b, a) : less_nan_last<C>(a, b);
  };
  // Long lines of 32-bit keys, unless topk's scan takes them: the radix sort.
  const bool radix = kRadixKeys<T> && n >= kRadixMinLine && n < (int64_t(1) << 32) && !scan;
  // Shorter lines of such keys (and not topk's scan): sort_line_by_network.
  const bool packed = kRadixKeys<T> && n <= kSortNetworkMaxLine && !scan;
  auto sort_range = [&](int64_t begin, int64_t end) {
    std::vector<Entry> buf(static_cast<size_t>(radix || packed ? 0 : n));
    std::vector<KeyIndex> keys(static_cast<size_t>(radix ? 2 * n : 0));
    const Geom* const geoms[3] = {&xg, &vg, &ig};
    LineOffsets at(outer, geoms, begin);
    for (int64_t s = begin; s < end; ++s, at.next()) {
      const int64_t* off = at.off;
      if (radix) {
        KeyIndex* a = keys.data();
        for (int64_t j = 0; j < n; ++j) {
          const uint32_t key = radix_key(xp[off[0] + j * xs]);
          a[j] = {descending ? ~key : key, uint32_t(j)};
        }
        const KeyIndex* sorted = radix_sort_line(a, a + n, n);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t src = sorted[j].index;
          vp[off[1] + j * vs] = xp[off[0] + src * xs];
          ip[off[2] + j * is] = src;
        }
        continue;
      }
      if (packed) {
        sort_line_by_network(xp + off[0], xs, n, descending, k, vp + off[1], vs, ip + off[2], is);
        continue;
      }
      if (scan) {
        // A few of many (topk for sampling, k <= 64): one pass keeping the best k so far in
        // order; an element is compared with the k-th best only, and enters (by insertion)
        // when strictly better: an equal key seen later has the larger index, so it ranks
        // after, the same total order as the sorts. Entries are few on ordinary data
        // (about k ln(n / k)). topk(10) of [2048, 2048] float32 rows: partial_sort over
        // copied (key, index) pairs took 1.36x PyTorch's time.
        int64_t count = 0;
        for (int64_t j = 0; j < n; ++j) {
          const C v = C(xp[off[0] + j * xs]);
          if (count == k && !ranks_before(v, buf[size_t(k - 1)].first)) continue;
          int64_t p = count < k ? count++ : k - 1;
          for (; p > 0 && ranks_before(v, buf[size_t(p - 1)].first); --p)
            buf[size_t(p)] = buf[size_t(p - 1)];
          buf[size_t(p)] = {v, j};
        }
      } else {
        for (int64_t j = 0; j < n; ++j) buf[size_t(j)] = {C(xp[off[0] + j * xs]), j};
      }
      const auto mid = buf.begin() + k;
      if (scan) {
        // buf[0, k) holds the result already.
      } else if (descending) {
        if (k * 8 < n) std::partial_sort(buf.begin(), mid, buf.end(), desc);
        else std::sort(buf.begin(), buf.end(), desc);
      } else {
        if (k * 8 < n) std::partial_sort(buf.begin(), mid, buf.end(), asc);
        else std::sort(buf.begin(), buf.end(), asc);
      }
      for (int64_t j = 0; j < k; ++j) {
        int64_t src = buf[size_t(j)].second;
        vp[off[1] + j * vs] = xp[off[0] + src * xs];
        ip[off[2] + j * is] = src;
      }
    }
  };
  // Threads from 2048 elements: sorting costs tens of ns per element (64 lines of 64 float32:
  // 59 us on one thread, 36 on two).
  const int threads =
      slices > 1 && slices * n >= (int64_t(1) << 11) ? detail::elementwise_threads() : 1;
  const int64_t pieces = std::min<int64_t>(slices, 4 * int64_t(threads));
  if (threads <= 1 || pieces <= 1) return sort_range(0, slices);
  detail::parallel_chunks(pieces, [&](int64_t p) {
    sort_range(slices * p / pieces, slices * (p + 1) / pieces);
  });
}

// attrs: dim, descending, stable.
void sort_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  int64_t d = wrap_dim(call.int_attr(0), x.dim());
  if (x.dim() == 0) d = 0;
  int64_t n = x.dim() == 0 ? 1 : x.size(d);
  KILN_DISPATCH_ALL(x.dtype(), "sort", [&]<typename T>() {
    sort_slices<T>(x, call.outs[0], call.outs[1], d, call.bool_attr(1), n);
  });
}

// attrs: k, dim, largest, sorted (results are always sorted).
void topk_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  int64_t k = call.int_attr(0);
  int64_t d = wrap_dim(call.int_attr(1), x.dim());
  if (x.dim() == 0) d = 0;
  KILN_DISPATCH_ALL(x.dtype(), "topk", [&]<typename T>() {
    sort_slices<T>(x, call.outs[0], call.outs[1], d, call.bool_attr(2), k);
  });
}

template <typename C>
bool equal_keys(C a, C b) {
  return a == b;  // NaN != NaN: every NaN is its own unique value, as PyTorch
}

// Unique over all elements (flattened) or over slices along a dim. attrs: sorted,
// return_inverse, return_counts, dim (optional, wrapped). Dynamic shape.
template <typename T>
void unique_typed(OpCall& call) {
  // Keys in the op-math type (bool as uint8_t: std::vector<bool> has no data()).
  using C = std::conditional_t<std::is_same_v<T, bool>, uint8_t, opmath_t<T>>;
  const Tensor& x = call.inputs[0];
  bool want_inverse = call.bool_attr(1), want_counts = call.bool_attr(2);
  bool by_dim = call.has_attr(3);
  int64_t d = by_dim ? call.int_attr(3) : 0;
  // View x as [n, m]: n items (elements, or slices along d) of m keys each, item-major.
  Shape pshape;
  Strides pstrides;
  if (by_dim) {
    pshape.push_back(x.size(d));
    pstrides.push_back(x.stride(d));
    for (int64_t k = 0; k < x.dim(); ++k)
      if (k != d) {
        pshape.push_back(x.size(k));
        pstrides.push_back(x.stride(k));
      }
  } else {
    pshape = x.shape();
    pstrides = x.strides();
  }
  int64_t n = by_dim ? x.size(d) : x.numel();
  int64_t m = n == 0 ? 0 : x.numel() / n;
  std::vector<C> keys;
  keys.reserve(size_t(x.numel()));
  const T* xp = static_cast<const T*>(x.raw_data());
  for_each_offset(pshape, {pstrides},
                  [&](const int64_t* off, const int64_t*) { keys.push_back(C(xp[off[0]])); });
  auto item = [&](int64_t i) { return keys.data() + i * m; };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const C *pa = item(a), *pb = item(b);
    for (int64_t t = 0; t < m; ++t) {
      if (less_nan_last<C>(pa[t], pb[t])) return true;
      if (less_nan_last<C>(pb[t], pa[t])) return false;
    }
    return false;
  });
  auto same = [&](int64_t a, int64_t b) {
    const C *pa = item(a), *pb = item(b);
    for (int64_t t = 0; t < m; ++t)
      if (!equal_keys<C>(pa[t], pb[t])) return false;
    return true;
  };
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t cur = order[size_t(i)];
    if (first.empty() || !same(first.back(), cur)) {
      first.push_back(cur);
      counts.push_back(0);
    }
    ++counts.back();
    inverse[size_t(cur)] = int64_t(first.size()) - 1;
  }
  int64_t u = int64_t(first.size());
  Shape vshape = by_dim ? x.shape() : Shape{u};
  if (by_dim) vshape[size_t(d)] = u;
  Tensor values = empty_tensor(vshape, x.dtype(), x.device());
  T* vp = static_cast<T*>(values.raw_data());
  if (by_dim) {
    // Output slice g is input slice first[g].
    Shape oshape = pshape;
    oshape[0] = u;
    Strides ostrides{values.stride(d)}, xstrides = pstrides;
    for (int64_t k = 0; k < x.dim(); ++k)
      if (k != d) ostrides.push_back(values.stride(k));
    xstrides[0] = 0;
    for_each_offset(oshape, {ostrides, xstrides}, [&](const int64_t* off, const int64_t* c) {
      vp[off[0]] = xp[off[1] + first[size_t(c[0])] * x.stride(d)];
    });
  } else {
    for (int64_t g = 0; g < u; ++g) vp[g] = convert_value<T>(keys[size_t(first[size_t(g)])]);
  }
  Tensor inv = empty_tensor(want_inverse ? (by_dim ? Shape{n} : x.shape()) : Shape{0},
                            DType::I64, x.device());
  if (want_inverse && n > 0)
    std::memcpy(inv.raw_data(), inverse.data(), size_t(n) * sizeof(int64_t));
  Tensor cnt = empty_tensor(Shape{want_counts ? u : 0}, DType::I64, x.device());
  if (want_counts && u > 0) std::memcpy(cnt.raw_data(), counts.data(), size_t(u) * sizeof(int64_t));
  call.outs = {values, inv, cnt};
}

void unique_kernel(OpCall& call) {
  KILN_DISPATCH_ALL(call.inputs[0].dtype(), "unique", [&]<typename T>() { unique_typed<T>(call); });
}

}  // namespace

void register_sort_kernels() {
  register_kernel("sort", DeviceType::CPU, sort_kernel, kAllDTypes);
  register_kernel("topk", DeviceType::CPU, topk_kernel, kAllDTypes);
  register_kernel("unique", DeviceType::CPU, unique_kernel, kAllDTypes);
}

}  // namespace kiln::cpu
