// CPU kernels for index_select, gather, the scatter family, masked_fill, masked_select and
// nonzero. Every index value is checked against its dim before any memory is touched with
// it (the testing device runs these asynchronously, so the checks live here, with the data).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "index_loops.h"
#include "isa/data_moves.h"
#include "parallel_pieces.h"
#include "row_loops.h"
#include "kiln/tensor/copy_bytes.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/strided_loop.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

void register_advanced_index_kernels();
void register_shape_kernels();
void register_index_lerp_kernel();
void register_sort_kernels();

namespace {

// Strides of g with dim d zeroed (the dim the index moves along).
Strides without_dim(const Geom& g, int64_t d) {
  Strides s = g.strides;
  s[size_t(d)] = 0;
  return s;
}

int64_t checked_index(const char* op, int64_t v, int64_t d, int64_t size) {
  if (v < 0 || v >= size) index_out_of_bounds(op, v, d, size);
  return v;
}

// Whether every value of a row of indices lies in [0, size): its minimum and maximum, a loop
// that vectorises (a test per element with its throw path cost as much as a gather).
bool indices_in_range(const int64_t* row, int64_t step, int64_t len, int64_t size) {
  int64_t lo = 0, hi = 0;
  if (step == 1) {
    for (int64_t j = 0; j < len; ++j) {
      lo = std::min(lo, row[j]);
      hi = std::max(hi, row[j]);
    }
  } else {
    for (int64_t j = 0; j < len; ++j) {
      lo = std::min(lo, row[j * step]);
      hi = std::max(hi, row[j * step]);
    }
  }
  return lo >= 0 && hi < size;
}

// Contiguous x viewed as [outer, size, inner] (size = x's dim d) and a contiguous out as
// [outer, n, inner]: out[o, j, :] = x[o, idx[j], :]. Whole inner blocks are memcpy'd; with
// inner == 1 (selecting along the last dim, as nearest-neighbour resizing does) each row is
// a typed gather. Outer rows are spread over the threads when the copy is large.
template <typename E>
void gather_last_dim(const E* x, E* out, const int64_t* ix, int64_t n, int64_t outer,
                     int64_t size) {
  auto row = [&](int64_t r) {
    const E* xr = x + r * size;
    E* orow = out + r * n;
    for (int64_t j = 0; j < n; ++j) orow[j] = xr[ix[j]];
  };
  if (outer * n < (int64_t(1) << 16)) {  // small: no OpenMP region (a serialised one costs 0.25 us)
    for (int64_t r = 0; r < outer; ++r) row(r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer; ++r) row(r);
}

void gather_rows(const char* x, char* out, const int64_t* idx, int64_t n, const Shape& shape,
                 int64_t d, size_t es) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= shape[size_t(i)];
  for (size_t i = size_t(d) + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t size = shape[size_t(d)];
  if (inner == 1) {
    const bool done = with_word_of_size(es, [&]<typename W>() {
      gather_last_dim(reinterpret_cast<const W*>(x), reinterpret_cast<W*>(out), idx, n, outer,
                      size);
    });
    if (done) return;
  }
  const int64_t block = inner * int64_t(es);
  // (outer, index entry) pairs over the threads: selecting rows (outer = 1, an embedding
  // lookup) split the index itself, which the loop over outer rows alone left on one thread.
  // Rows of one outer block are walked without a division per row.
  const int64_t pairs = outer * n;
  auto copy_pairs = [&](int64_t q0, int64_t q1) {
    int64_t r = q0 / n, j = q0 % n;
    for (int64_t q = q0; q < q1; ++q) {
      detail::copy_bytes(out + q * block, x + (r * size + idx[j]) * block, size_t(block));
      if (++j == n) j = 0, ++r;
    }
  };
  if (pairs > 1 && pairs * inner >= detail::kParallelElements) {
    const int64_t pieces = 4 * int64_t(detail::elementwise_threads());
    detail::parallel_chunks(pieces, [&](int64_t c) {
      copy_pairs(pairs * c / pieces, pairs * (c + 1) / pieces);
    });
  } else {
    copy_pairs(0, pairs);
  }
}

// inputs: self, index (0-d or 1-d); attrs: dim.
void index_select_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const Tensor& out = call.outs[0];
  Geom xg = geom_of(x, true), og = geom_of(out, true);
  int64_t d = wrap_dim(call.int_attr(0), x.dim());
  int64_t n = index.numel(), size = xg.shape[size_t(d)];
  int64_t istride = index.dim() == 0 ? 0 : index.stride(0);
  // Unit-stride int64 indices are used in place once their range is known to be good (a
  // min / max loop); others are read and checked one by one into a vector.
  std::vector<int64_t> read;
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
  if (index.dtype() != DType::I64 || (istride != 1 && n > 1) ||
      !indices_in_range(idx, 1, n, size)) {
    read.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      read[size_t(i)] = checked_index("index_select()", read_index(bytes_of(index), index.dtype(),
                                                                  i * istride), d, size);
    idx = read.data();
  }
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  size_t es = x.element_size();
  if (x.is_contiguous() && out.is_contiguous() && x.dim() > 0) {
    gather_rows(s, o, idx, n, x.shape(), d, es);
    return;
  }
  int64_t xs = xg.strides[size_t(d)];
  for_each_offset(og.shape, {og.strides, without_dim(xg, d)},
                  [&](const int64_t* off, const int64_t* c) {
                    copy_elem(o, off[0], s, off[1] + idx[c[d]] * xs, es);
                  });
}

// out[..., i, ...] = x[..., index[..., i, ...], ...]; inputs: self, index; attrs: dim.
// The rows of an index tensor (its last dim) with the rows of the tensors walked beside it:
// row(c, i, offs) per index row, where i is the row's start in the index and offs[k] the
// start in tensors[k] (strides[k], whose entry at dim d is zeroed where the index moves
// along d). Rows go over the threads when `parallel`.
struct IndexRows {
  const Tensor& index;
  std::vector<Strides> strides;
  template <typename F>
  void each(bool parallel, F&& row) const {
    const int64_t nd = index.dim();
    const Strides& is = index.strides();
    auto run = [&](const int64_t* c, int64_t i) {
      int64_t offs[4] = {0, 0, 0, 0};
      for (size_t k = 0; k < strides.size(); ++k)
        for (int64_t d = 0; d + 1 < nd; ++d) offs[k] += c[d] * strides[k][size_t(d)];
      row(c, i, offs);
    };
    if (parallel) {
      for_each_row(index.shape(), is, run);
      return;
    }
    // Serially, in row-major order (rows may write the same elements).
    std::vector<int64_t> c(static_cast<size_t>(nd - 1), 0);
    const int64_t rows = index.numel() / std::max<int64_t>(index.size(nd - 1), 1);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t i = 0;
      for (int64_t d = 0; d + 1 < nd; ++d) i += c[size_t(d)] * is[size_t(d)];
      run(c.data(), i);
      for (int64_t d = nd - 1; d-- > 0;) {
        if (++c[size_t(d)] < index.size(d)) break;
        c[size_t(d)] = 0;
      }
    }
  }
  // Every index value in [0, size), else the op's error before anything is written. Rows
  // are tested by indices_in_range; only when one fails are the values searched for the one
  // to report.
  void check(const char* op, int64_t d, int64_t size) const {
    const int64_t* ip = static_cast<const int64_t*>(index.raw_data());
    const int64_t len = index.size(index.dim() - 1), step = index.strides().back();
    std::atomic<bool> suspect{false};
    for_each_row(index.shape(), index.strides(), [&](const int64_t*, int64_t i) {
      if (!suspect.load(std::memory_order_relaxed) &&
          !indices_in_range(ip + i, step, len, size))
        suspect.store(true, std::memory_order_relaxed);
    });
    if (!suspect.load()) return;
    for_each_row(index.shape(), index.strides(), [&](const int64_t*, int64_t i) {
      for (int64_t j = 0; j < len; ++j) checked_index(op, ip[i + j * step], d, size);
    });
  }

};

// The ISA's checked row gather for W (isa/data_moves.h), or null (4- and 8-byte values from
// AVX2 up: the bounds test and the gather in one vector pass, where the baseline build
// tested the row's minimum and maximum in one scalar pass and copied in another).
template <typename W>
auto row_gather() {
  using Fn = bool (*)(const W*, const int64_t*, int64_t, int64_t, W*);
  if constexpr (sizeof(W) == 4) return Fn(data_moves().gather_b32);
  else if constexpr (sizeof(W) == 8) return Fn(data_moves().gather_b64);
  else return Fn(nullptr);
}

// gather with an int64 index of at least one dim, typed by the element size: a row of the
// index at a time, rows over the threads. The element loop (a dtype switch, a check and a
// byte copy per element, one thread) took 2.6 ms for a [2048, 256] index into [2048, 512]
// float32 (torch 0.16 ms).
bool gather_by_rows(const Tensor& x, const Tensor& index, const Tensor& out, int64_t d) {
  const int64_t nd = index.dim();
  if (index.dtype() != DType::I64 || nd == 0 || index.numel() == 0) return false;
  Strides xs = x.strides();
  const int64_t xs_d = xs[size_t(d)], xs_last = xs.back();
  xs[size_t(d)] = 0;
  const IndexRows rows{index, {out.strides(), xs}};
  const int64_t len = index.size(nd - 1), is = index.strides().back(),
                os = out.strides().back(), size = x.size(d);
  const bool along_last = d == nd - 1;
  if (along_last && len > 0 && x.is_contiguous() && index.is_contiguous() && out.is_contiguous() &&
      Shape(x.shape().begin(), x.shape().end() - 1) ==
          Shape(index.shape().begin(), index.shape().end() - 1)) {
    // Dense rows (x [..., size], index and out [..., len] with the same leading dims): one
    // flat loop over the rows, without the per-row offset bookkeeping that cost 13 ns a row
    // (gather of [4096, 4] indices: 53 us, torch 14).
    std::atomic<bool> bad_row{false};
    const int64_t n_rows = index.numel() / len;
    const bool done = with_word_of_size(x.element_size(), [&]<typename W>() {
      const int64_t* ip = static_cast<const int64_t*>(index.raw_data());
      const W* xp = static_cast<const W*>(x.raw_data());
      W* op = static_cast<W*>(out.raw_data());
      const auto vector_gather = row_gather<W>();
      parallel_pieces(index.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo / len; r < n_rows && r * len < hi; ++r) {
          if (r * len < lo) continue;  // a row belongs to the piece holding its first value
          const int64_t* ir = ip + r * len;
          const W* xrow = xp + r * size;
          W* orow = op + r * len;
          if (vector_gather) {  // checks and gathers in one pass
            if (!vector_gather(xrow, ir, len, size, orow))
              bad_row.store(true, std::memory_order_relaxed);
            continue;
          }
          if (!indices_in_range(ir, 1, len, size)) {
            bad_row.store(true, std::memory_order_relaxed);
            continue;
          }
          for (int64_t j = 0; j < len; ++j) orow[j] = xrow[ir[j]];
        }
      });
    });
    if (bad_row.load()) rows.check("gather()", d, size);
    return done;
  }
  // Each index row is checked just before it is used (while it is in the cache; a separate
  // pass over the whole index cost as much as the gather). A bad row is skipped and reported
  // after the loop: the output is a fresh tensor, so what was written does not matter.
  std::atomic<bool> bad{false};
  const bool done = with_word_of_size(x.element_size(), [&]<typename W>() {
    const int64_t* ip = static_cast<const int64_t*>(index.raw_data());
    const W* xp = static_cast<const W*>(x.raw_data());
    W* op = static_cast<W*>(out.raw_data());
    rows.each(index.numel() >= detail::kParallelElements,
              [&](const int64_t*, int64_t i, const int64_t* offs) {
      const int64_t* ir = ip + i;
      if (!indices_in_range(ir, is, len, size)) {
        bad.store(true, std::memory_order_relaxed);
        return;
      }
      W* orow = op + offs[0];
      const W* xrow = xp + offs[1];
      if (along_last && os == 1 && is == 1 && xs_d == 1) {  // the common case, unit strides
        for (int64_t j = 0; j < len; ++j) orow[j] = xrow[ir[j]];
      } else if (along_last) {
        for (int64_t j = 0; j < len; ++j) orow[j * os] = xrow[ir[j * is] * xs_d];
      } else {
        for (int64_t j = 0; j < len; ++j) orow[j * os] = xrow[j * xs_last + ir[j * is] * xs_d];
      }
    });
  });
  if (bad.load()) rows.check("gather()", d, size);  // raises the first bad value's error
  return done;
}

void gather_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& index = call.inputs[1];
  const Tensor& out = call.outs[0];
  if (gather_by_rows(x, index, out, wrap_dim(call.int_attr(0), x.dim()))) return;
  Geom xg = geom_of(x, true), ig = geom_of(index, true), og = geom_of(out, true);
  int64_t d = wrap_dim(call.int_attr(0), x.dim());
  int64_t size = xg.shape[size_t(d)], xs = xg.strides[size_t(d)];
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  const char* ip = bytes_of(index);
  size_t es = x.element_size();
  DType it = index.dtype();
  for_each_offset(ig.shape, {og.strides, ig.strides, without_dim(xg, d)},
                  [&](const int64_t* off, const int64_t*) {
                    int64_t v = checked_index("gather()", read_index(ip, it, off[1]), d, size);
                    copy_elem(o, off[0], s, off[2] + v * xs, es);
                  });
}

// Calls f(out_offset, index_offset_list...) for each index element: f(target, off) where
// target is out's element offset and off the offsets of {index, src}.
template <typename F>
void for_each_scatter_target(const char* op, const OpCall& call, const Tensor& out,
                             const Tensor* src, F&& f) {
  const Tensor& index = call.inputs[1];
  Geom og = geom_of(out, true), ig = geom_of(index, true);
  int64_t d = wrap_dim(call.int_attr(0), out.dim());
  int64_t size = og.shape[size_t(d)], os = og.strides[size_t(d)];
  std::vector<Strides> strides{ig.strides, without_dim(og, d)};
  if (src) strides.push_back(geom_of(*src, true).strides);
  else strides.push_back(Strides(ig.shape.size(), 0));
  const char* ip = bytes_of(index);
  DType it = index.dtype();
  // Check every index before writing anything, so a bad index leaves the output untouched.
  for_each_offset(ig.shape, {ig.strides}, [&](const int64_t* off, const int64_t*) {
    checked_index(op, read_index(ip, it, off[0]), d, size);
  });
  for_each_offset(ig.shape, strides, [&](const int64_t* off, const int64_t*) {
    f(off[1] + read_index(ip, it, off[0]) * os, off[2]);
  });
}

// inputs: self, index, src; attrs: dim.
void scatter_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Tensor& src = call.inputs[2];
  copy_same_shape(out, call.inputs[0]);
  char* o = bytes_of(out);
  const char* s = bytes_of(src);
  size_t es = out.element_size();
  for_each_scatter_target("scatter()", call, out, &src,
                          [&](int64_t t, int64_t so) { copy_elem(o, t, s, so, es); });
}

// inputs: self, index; attrs: dim, value.
void scatter_value_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  copy_same_shape(out, call.inputs[0]);
  ElemBytes v = scalar_bytes(call.scalar_attr(1), out.dtype());
  char* o = bytes_of(out);
  size_t es = out.element_size();
  for_each_scatter_target("scatter()", call, out, nullptr,
                          [&](int64_t t, int64_t) { copy_elem(o, t, v.bytes, 0, es); });
}

enum class Reduce { Sum, Prod, Mean, Amax, Amin };

Reduce parse_reduce(const std::string& r) {
  if (r == "sum") return Reduce::Sum;
  if (r == "prod") return Reduce::Prod;
  if (r == "mean") return Reduce::Mean;
  if (r == "amax") return Reduce::Amax;
  if (r == "amin") return Reduce::Amin;
  KILN_THROW(ValueError, "scatter_reduce(): unknown reduce '", r, "'");
}

// target += src at scatter_add's positions (target laid out as the contiguous out; Acc the
// sum type): a row of an int64 index at a time, typed (the element loop took 3.4 ms for a
// [2048, 256] index into [2048, 512] float32, torch 0.24 ms). Along the last dim each index
// row writes only its own output row, so rows go over the threads; along another dim rows
// may meet at an element and run in order. False (nothing done) for other index forms.
template <typename Acc, typename T>
bool scatter_add_rows(const OpCall& call, const char* op, const Tensor& out, Acc* target,
                      const T* s) {
  const Tensor& index = call.inputs[1];
  const Tensor& src = call.inputs[2];
  const int64_t d = wrap_dim(call.int_attr(0), out.dim()), nd = index.dim();
  if (index.dtype() != DType::I64 || nd == 0 || index.numel() == 0) return false;
  Strides os = out.strides();
  const int64_t os_d = os[size_t(d)], os_last = os.back();
  os[size_t(d)] = 0;
  const IndexRows rows{index, {os, src.strides()}};
  rows.check(op, d, out.size(d));
  const int64_t len = index.size(nd - 1), is = index.strides().back(), ss = src.strides().back();
  const bool along_last = d == nd - 1;
  const int64_t* ip = static_cast<const int64_t*>(index.raw_data());
  rows.each(along_last && index.numel() >= detail::kParallelElements,
            [&](const int64_t*, int64_t i, const int64_t* offs) {
    const int64_t* ir = ip + i;
    Acc* orow = target + offs[0];
    const T* srow = s + offs[1];
    if (along_last) {
      for (int64_t j = 0; j < len; ++j)
        orow[ir[j * is] * os_d] += convert_value<Acc>(srow[j * ss]);
    } else {
      for (int64_t j = 0; j < len; ++j)
        orow[j * os_last + ir[j * is] * os_d] += convert_value<Acc>(srow[j * ss]);
    }
  });
  return true;
}

// 16-bit floats scattered along dim 0 of a 2-D output by an index that is constant along
// each row (expand(index[:, None]): the embedding's gradient): the source rows grouped by
// their target row, each target row summed in float32 (widened once, the group's rows added
// in source order, rounded once) and the groups over the threads. Only the target rows are
// touched: the general 16-bit path below widened the whole output into a float32 copy and
// narrowed it back, 53 ms of a bfloat16 GPT-2-small training step for a [50257, 768]
// embedding fed by 1024 tokens (8 ms in float32). False (nothing done) for other forms.
template <typename T>
bool scatter_add_row_groups(const OpCall& call, const char* op, const Tensor& out, T* o,
                            const T* s) {
  const Tensor& index = call.inputs[1];
  const Tensor& src = call.inputs[2];
  if (out.dim() != 2 || index.dim() != 2 || src.dim() != 2 || index.dtype() != DType::I64 ||
      wrap_dim(call.int_attr(0), 2) != 0 || index.strides()[1] != 0 || index.numel() == 0)
    return false;
  // Any source layout: the gradient of embedding(...).sum() is sum's ones expanded with stride
  // 0 (which took the whole-output path: 44 ms for a [30522, 768] bfloat16 table fed by 512
  // tokens, 4.5 in float32).
  const int64_t rows = index.size(0), len = index.size(1), ss = src.strides()[0];
  const int64_t sj = src.strides()[1];
  const int64_t* ip = static_cast<const int64_t*>(index.raw_data());
  const int64_t is = index.strides()[0];
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    checked_index(op, ip[i * is], 0, out.size(0));
    order[size_t(i)] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return ip[a * is] < ip[b * is]; });
  std::vector<int64_t> starts;  // the first position in order of each target row's group
  for (int64_t k = 0; k < rows; ++k)
    if (k == 0 || ip[order[size_t(k)] * is] != ip[order[size_t(k - 1)] * is])
      starts.push_back(k);
  starts.push_back(rows);
  const int64_t groups = int64_t(starts.size()) - 1, orow = out.strides()[0];
  parallel_region(groups > 1 && rows * len >= detail::kParallelElements, [&] {
    std::vector<float> acc(static_cast<size_t>(len));
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      T* target = o + ip[order[size_t(starts[size_t(g)])] * is] * orow;
      for (int64_t j = 0; j < len; ++j) acc[size_t(j)] = float(target[j]);
      for (int64_t k = starts[size_t(g)]; k < starts[size_t(g) + 1]; ++k) {
        const T* srow = s + order[size_t(k)] * ss;
        if (sj == 1) {
          for (int64_t j = 0; j < len; ++j) acc[size_t(j)] += float(srow[j]);
        } else {
          for (int64_t j = 0; j < len; ++j) acc[size_t(j)] += float(srow[j * sj]);
        }
      }
      for (int64_t j = 0; j < len; ++j) target[j] = T(acc[size_t(j)]);
    }
  });
  return true;
}

// Accumulates in double (floats) or int64 with wrap-around (integers, bool), one rounding
// to the output type at the end.
template <typename T>
void scatter_reduce_typed(OpCall& call, Reduce red, bool include_self, const char* op) {
  const Tensor& out = call.outs[0];
  const Tensor& src = call.inputs[2];
  constexpr bool is_float = !std::is_integral_v<T>;
  using A = std::conditional_t<is_float, double, int64_t>;
  copy_same_shape(out, call.inputs[0]);
  KILN_INTERNAL_ASSERT(out.is_contiguous(), "scatter_reduce output must be contiguous");
  T* o = out.data_ptr<T>();
  const T* s = src.data_ptr<T>();
  int64_t n = out.numel();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (red == Reduce::Sum && include_self) {
      // scatter_add (the embedding gradient): add into the output directly, as PyTorch does,
      // touching only the indexed elements (no accumulator copy of the whole output).
      if (scatter_add_rows(call, op, out, o, s)) return;
      for_each_scatter_target(op, call, out, &src, [&](int64_t t, int64_t so) { o[t] += s[so]; });
      return;
    }
  }
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    if (red == Reduce::Sum && include_self && scatter_add_row_groups(call, op, out, o, s))
      return;
  }
  if constexpr (is_float) {
    if (red == Reduce::Sum && include_self) {
      // 16-bit floats: float32 sums (one rounding per output; float32's 24-bit significand
      // keeps sums of bfloat16 / float16 values far below their own rounding), added by rows
      // as above, the conversions in parallel. Double sums and serial conversions made
      // max_pool's bfloat16 gradient ([8, 64, 112, 112], ResNet-50's stem) take 62 ms.
      std::unique_ptr<float[]> acc(new float[size_t(n)]);
      parallel_region(n >= detail::kParallelElements, [&] {
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; ++i) acc[size_t(i)] = convert_value<float>(o[i]);
      });
      if (scatter_add_rows(call, op, out, acc.get(), s)) {
        parallel_region(n >= detail::kParallelElements, [&] {
#pragma omp for schedule(static)
          for (int64_t i = 0; i < n; ++i) o[i] = convert_value<T>(acc[size_t(i)]);
        });
        return;
      }
    }
  }
  std::vector<A> acc(static_cast<size_t>(n));
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) acc[size_t(i)] = convert_value<A>(o[i]);
  auto combine = [red](A a, A b) -> A {
    switch (red) {
      case Reduce::Sum:
      case Reduce::Mean:
        if constexpr (is_float) return a + b;
        else return int64_t(uint64_t(a) + uint64_t(b));
      case Reduce::Prod:
        if constexpr (is_float) return a * b;
        else return int64_t(uint64_t(a) * uint64_t(b));
      case Reduce::Amax:
        if constexpr (is_float) {
          if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
        }
        return a < b ? b : a;
      case Reduce::Amin:
        if constexpr (is_float) {
          if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
        }
        return b < a ? b : a;
    }
    return a;
  };
  for_each_scatter_target(op, call, out, &src, [&](int64_t t, int64_t so) {
    A v = convert_value<A>(s[so]);
    A& a = acc[size_t(t)];
    if (!include_self && count[size_t(t)] == 0) a = v;
    else a = combine(a, v);
    ++count[size_t(t)];
  });
  for (int64_t i = 0; i < n; ++i) {
    A a = acc[size_t(i)];
    if (red == Reduce::Mean && count[size_t(i)] > 0) {
      int64_t cnt = count[size_t(i)] + (include_self ? 1 : 0);
      if constexpr (is_float) a = a / double(cnt);
      else a = a / cnt - ((a % cnt != 0) && (a < 0) ? 1 : 0);  // floor division
    }
    if constexpr (std::is_same_v<T, bool>) o[i] = a != 0;
    else o[i] = convert_value<T>(a);
  }
}

// inputs: self, index, src; attrs: dim, reduce, include_self.
void scatter_reduce_kernel(OpCall& call) {
  Reduce red = parse_reduce(call.string_attr(1));
  bool include_self = call.bool_attr(2);
  KILN_DISPATCH_ALL(call.outs[0].dtype(), "scatter_reduce", [&]<typename T>() {
    scatter_reduce_typed<T>(call, red, include_self, "scatter_reduce()");
  });
}

// inputs: self, index, src; attrs: dim.
void scatter_add_kernel(OpCall& call) {
  KILN_DISPATCH_ALL(call.outs[0].dtype(), "scatter_add", [&]<typename T>() {
    scatter_reduce_typed<T>(call, Reduce::Sum, true, "scatter_add()");
  });
}

// inputs: self, mask (broadcast to out); attrs: value.
void masked_fill_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& mask = call.inputs[1];
  const Tensor& out = call.outs[0];
  const Scalar& value = call.scalar_attr(0);
  // The select on the element's bits through a mask, as where_kernel: `m ? v : a` on a
  // bfloat16 compiled to a branch per element that a random mask mispredicts half the time
  // ([4096, 8] bfloat16: 117 us against PyTorch's 38).
  const ElemBytes fill = scalar_bytes(value, out.dtype());
  auto select = [&]<typename W>() {
    W v;
    std::memcpy(&v, fill.bytes, sizeof(W));
    elementwise_kernel<W, W, bool>(out, {&x, &mask}, [v](W a, bool m) {
      const W sel = W(W(0) - W(m));
      return W((v & sel) | (a & W(~sel)));
    });
  };
  if (x.dtype() == out.dtype() && with_word_of_size(out.element_size(), select)) return;
  if (is_complex(out.dtype())) {  // complex128: 16-byte elements, no integer word
    KILN_DISPATCH_COMPLEX(out.dtype(), "masked_fill", [&]<typename C>() {
      C v;
      std::memcpy(&v, fill.bytes, sizeof(C));
      elementwise_kernel<C, C, bool>(out, {&x, &mask}, [v](C a, bool m) { return m ? v : a; });
    });
    return;
  }
  KILN_DISPATCH_ALL(out.dtype(), "masked_fill", [&]<typename T>() {
    T v;
    ElemBytes b = scalar_bytes(value, out.dtype());
    std::memcpy(&v, b.bytes, sizeof(T));
    elementwise_kernel<T, T, bool>(out, {&x, &mask}, [v](T a, bool m) { return m ? v : a; });
  });
}

// Selections from a contiguous tensor in two threaded passes over pieces of its elements:
// count(b, e) counts the selected elements of [b, e); allocate(total) makes the output on the
// calling thread; emit(b, e, k) writes the selections of [b, e) from output position k on
// (the counts of the pieces before it). The single-threaded element loops took 1.2 ms for
// nonzero of [512, 512] float32 (torch 0.39) and 25 ms for x[mask] of [2048, 512] (torch
// 3.5).
template <typename Count, typename Allocate, typename Emit>
void select_in_pieces(int64_t n, Count&& count, Allocate&& allocate, Emit&& emit) {
  const int64_t pieces =
      n >= detail::kParallelElements ? 4 * int64_t(detail::elementwise_threads()) : 1;
  std::vector<int64_t> start(static_cast<size_t>(pieces + 1), 0);
  auto run = [pieces](auto&& piece) {
    if (pieces > 1) detail::parallel_chunks(pieces, piece);
    else piece(0);
  };
  run([&](int64_t p) { start[size_t(p + 1)] = count(n * p / pieces, n * (p + 1) / pieces); });
  for (int64_t p = 0; p < pieces; ++p) start[size_t(p + 1)] += start[size_t(p)];
  allocate(start.back());
  if (start.back() == 0) return;
  run([&](int64_t p) { emit(n * p / pieces, n * (p + 1) / pieces, start[size_t(p)]); });
}

// masked_select of a contiguous x and mask (same shape), typed by the element size.
bool masked_select_contiguous(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& mask = call.inputs[1];
  if (!x.is_contiguous() || !mask.is_contiguous() || x.shape() != mask.shape()) return false;
  const bool* m = mask.data_ptr<bool>();
  const int64_t n = x.numel();
  auto count = [&](int64_t b, int64_t e) {
    int64_t k = 0;
    for (int64_t i = b; i < e; ++i) k += m[i] ? 1 : 0;
    return k;
  };
  Tensor out;
  const bool done = with_word_of_size(x.element_size(), [&]<typename W>() {
    const W* src = static_cast<const W*>(x.raw_data());
    select_in_pieces(
        n, count, [&](int64_t total) { out = empty_tensor({total}, x.dtype(), x.device()); },
        [&](int64_t b, int64_t e, int64_t k) {
          W* dst = static_cast<W*>(out.raw_data());
          for (int64_t i = b; i < e; ++i)
            if (m[i]) dst[k++] = src[i];
        });
  });
  if (done) call.outs = {out};
  return done;
}

// inputs: self and mask of one shape. Output: the selected elements, 1-D.
void masked_select_kernel(OpCall& call) {
  if (masked_select_contiguous(call)) return;
  const Tensor& x = call.inputs[0];
  const Tensor& mask = call.inputs[1];
  const bool* m = mask.data_ptr<bool>();
  int64_t n = 0;
  for_each_offset(mask.shape(), {mask.strides()},
                  [&](const int64_t* off, const int64_t*) { n += m[off[0]] ? 1 : 0; });
  Tensor out = empty_tensor({n}, x.dtype(), x.device());
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  size_t es = x.element_size();
  int64_t j = 0;
  for_each_offset(x.shape(), {x.strides(), mask.strides()},
                  [&](const int64_t* off, const int64_t*) {
                    if (m[off[1]]) copy_elem(o, j++, s, off[0], es);
                  });
  call.outs = {out};
}

// Output: [n, ndim] int64 coordinates of the nonzero elements, in row-major order.
// nonzero of a contiguous tensor: counts per piece, then each piece writes the coordinates of
// its nonzero elements, stepping a coordinate counter along its range.
bool nonzero_contiguous(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t nd = x.dim(), n = x.numel();
  if (!x.is_contiguous() || nd == 0) return false;
  Tensor out;
  KILN_DISPATCH_ALL(x.dtype(), "nonzero", [&]<typename T>() {
    const T* p = static_cast<const T*>(x.raw_data());
    auto count = [&](int64_t b, int64_t e) {
      int64_t k = 0;
      for (int64_t i = b; i < e; ++i) k += convert_value<bool>(p[i]) ? 1 : 0;
      return k;
    };
    const Shape& shape = x.shape();
    auto allocate = [&](int64_t total) {
      out = empty_tensor({total, nd}, DType::I64, x.device());
    };
    // Walked a last-dim row at a time: the leading coordinates change once per row, the last
    // one is the loop index (an odometer step and a coordinate copy per element took 1.8x
    // PyTorch's time for nonzero of [8, 4096] float32).
    const int64_t row_len = shape[size_t(nd - 1)];
    select_in_pieces(n, count, allocate, [&](int64_t b, int64_t e, int64_t k) {
      int64_t* dst = static_cast<int64_t*>(out.raw_data());
      std::vector<int64_t> c(static_cast<size_t>(nd));  // the leading coordinates of row i
      for (int64_t d = nd - 1, r = b / row_len; d-- > 0;) {
        c[size_t(d)] = r % shape[size_t(d)];
        r /= shape[size_t(d)];
      }
      for (int64_t i = b; i < e;) {
        const int64_t j0 = i % row_len, j1 = std::min(row_len, j0 + (e - i));
        const T* row = p + (i - j0);
        for (int64_t j = j0; j < j1; ++j) {
          if (!convert_value<bool>(row[j])) continue;
          int64_t* at = dst + k * nd;
          for (int64_t d = 0; d + 1 < nd; ++d) at[d] = c[size_t(d)];
          at[nd - 1] = j;
          ++k;
        }
        i += j1 - j0;
        for (int64_t d = nd - 1; d-- > 0;) {  // the next row's leading coordinates
          if (++c[size_t(d)] < shape[size_t(d)]) break;
          c[size_t(d)] = 0;
        }
      }
    });
  });
  call.outs = {out};
  return true;
}

void nonzero_kernel(OpCall& call) {
  if (nonzero_contiguous(call)) return;
  const Tensor& x = call.inputs[0];
  std::vector<int64_t> coords;
  int64_t n = 0, nd = x.dim();
  KILN_DISPATCH_ALL(x.dtype(), "nonzero", [&]<typename T>() {
    const T* p = static_cast<const T*>(x.raw_data());
    for_each_offset(x.shape(), {x.strides()}, [&](const int64_t* off, const int64_t* c) {
      if (!convert_value<bool>(p[off[0]])) return;
      coords.insert(coords.end(), c, c + nd);
      ++n;
    });
  });
  Tensor out = empty_tensor({n, nd}, DType::I64, x.device());
  if (!coords.empty()) std::memcpy(out.raw_data(), coords.data(), coords.size() * sizeof(int64_t));
  call.outs = {out};
}

}  // namespace

void register_indexing_kernels() {
  register_kernel("index_select", DeviceType::CPU, index_select_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("gather", DeviceType::CPU, gather_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("scatter", DeviceType::CPU, scatter_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("scatter.value", DeviceType::CPU, scatter_value_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("scatter_add", DeviceType::CPU, scatter_add_kernel, kAllDTypes);
  register_kernel("scatter_reduce", DeviceType::CPU, scatter_reduce_kernel, kAllDTypes);
  register_kernel("masked_fill", DeviceType::CPU, masked_fill_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("masked_select", DeviceType::CPU, masked_select_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("nonzero", DeviceType::CPU, nonzero_kernel, kAllDTypes);
  register_advanced_index_kernels();
  register_shape_kernels();
  register_sort_kernels();
  register_index_lerp_kernel();
}

}  // namespace kiln::cpu
