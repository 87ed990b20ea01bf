// CPU kernels for advanced indexing: index (read x[i0, i1, ...]) and index_put (write,
// optionally accumulating). The ops layer has turned bool masks into integer indices and
// broadcast all index tensors to one shape; negative indices count from the end.
#include <atomic>
#include <type_traits>

#include "index_loops.h"
#include "row_loops.h"
#include "scalar_math.h"

namespace kiln::cpu {

namespace {

// Where each dim of x[idx...] comes from, as strides per result dim: `rest` moves along the
// dims of the indexed tensor that are not indexed, `idx[m]` along the broadcast index dims.
struct IndexPlan {
  Shape shape;                    // the result shape
  Strides rest;                   // strides of the indexed tensor (0 on index dims)
  std::vector<Strides> idx;       // per defined index: its strides (0 on the other dims)
  std::vector<int64_t> dims;      // per defined index: the dim of the indexed tensor
  std::vector<const Tensor*> ts;  // per defined index: the tensor
};

// target: the indexed tensor (its shape and strides); idx: one entry per leading dim.
IndexPlan make_plan(const Tensor& target, const std::vector<Tensor>& idx) {
  IndexPlan p;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k].defined()) {
      p.dims.push_back(int64_t(k));
      p.ts.push_back(&idx[k]);
    }
  KILN_INTERNAL_ASSERT(!p.dims.empty(), "advanced indexing without an index tensor");
  const Shape& b = p.ts[0]->shape();
  const int64_t nd = target.dim(), nb = int64_t(b.size());
  bool adjacent = p.dims.back() - p.dims.front() + 1 == int64_t(p.dims.size());
  auto add_x_dim = [&](int64_t d) {
    p.shape.push_back(target.size(d));
    p.rest.push_back(target.stride(d));
    for (auto& s : p.idx) s.push_back(0);
  };
  auto add_b_dims = [&] {
    for (int64_t j = 0; j < nb; ++j) {
      p.shape.push_back(b[size_t(j)]);
      p.rest.push_back(0);
      for (size_t m = 0; m < p.ts.size(); ++m) p.idx[m].push_back(p.ts[m]->stride(j));
    }
  };
  p.idx.resize(p.ts.size());
  auto indexed = [&](int64_t d) { return d < int64_t(idx.size()) && idx[size_t(d)].defined(); };
  if (adjacent) {
    for (int64_t d = 0; d < p.dims.front(); ++d) add_x_dim(d);
    add_b_dims();
    for (int64_t d = p.dims.back() + 1; d < nd; ++d) add_x_dim(d);
  } else {
    add_b_dims();
    for (int64_t d = 0; d < nd; ++d)
      if (!indexed(d)) add_x_dim(d);
  }
  return p;
}

// The index tensors of a plan read through pointers, with the indexed dims' sizes and
// strides taken once (Tensor::size / stride check their argument on every call).
class IndexedOffsets {
 public:
  IndexedOffsets(const IndexPlan& p, const Tensor& target) {
    for (size_t m = 0; m < p.ts.size(); ++m) {
      const int64_t d = p.dims[m];
      sources_.push_back({bytes_of(*p.ts[m]), p.ts[m]->dtype(), d, target.size(d),
                          target.stride(d)});
    }
  }

  // Calls visit(j, offset) for j < len: the element offset in the indexed tensor selected by
  // the index values at offs[m] + j * steps[m] (one per defined index), starting from
  // base + j * base_step. An index outside its dim raises IndexError (kRaise) or ends the run
  // with false, the element unvisited.
  template <bool kRaise, typename Visit>
  bool for_run(int64_t base, int64_t base_step, const int64_t* offs, const int64_t* steps,
               int64_t len, Visit&& visit) const {
    if (sources_.size() == 1) {  // one index tensor: its own loop, the dtype read once
      const Source& q = sources_[0];
      if (q.dtype == DType::I64)
        return one_index<kRaise>(q, reinterpret_cast<const int64_t*>(q.data) + offs[0], steps[0],
                                 base, base_step, len, visit);
      return one_index<kRaise>(q, reinterpret_cast<const int32_t*>(q.data) + offs[0], steps[0],
                               base, base_step, len, visit);
    }
    if (sources_.size() == 2 && sources_[0].dtype == DType::I64 &&
        sources_[1].dtype == DType::I64)  // x[rows, cols]: the pair read in one loop
      return two_indices<kRaise>(reinterpret_cast<const int64_t*>(sources_[0].data) + offs[0],
                                 reinterpret_cast<const int64_t*>(sources_[1].data) + offs[1],
                                 steps, base, base_step, len, visit);
    for (int64_t j = 0; j < len; ++j) {
      int64_t at = base + j * base_step;
      for (size_t m = 0; m < sources_.size(); ++m) {
        const Source& q = sources_[m];
        const int64_t v = read_index(q.data, q.dtype, offs[m] + j * steps[m]);
        if (!in_range(q, v)) return fail<kRaise>(q, v);
        at += (v < 0 ? v + q.size : v) * q.stride;
      }
      visit(j, at);
    }
    return true;
  }

 private:
  struct Source {
    const char* data;
    DType dtype;
    int64_t dim, size, stride;
  };
  static bool in_range(const Source& q, int64_t v) { return v >= -q.size && v < q.size; }
  template <bool kRaise>
  static bool fail(const Source& q, int64_t v) {
    if constexpr (kRaise) index_out_of_bounds("index", v, q.dim, q.size);
    return false;
  }
  template <bool kRaise, typename I, typename Visit>
  static bool one_index(const Source& q, const I* index, int64_t step, int64_t base,
                        int64_t base_step, int64_t len, Visit& visit) {
    for (int64_t j = 0; j < len; ++j) {
      const int64_t v = int64_t(index[j * step]);
      if (!in_range(q, v)) return fail<kRaise>(q, v);
      visit(j, base + j * base_step + (v < 0 ? v + q.size : v) * q.stride);
    }
    return true;
  }
  template <bool kRaise, typename Visit>
  bool two_indices(const int64_t* first, const int64_t* second, const int64_t* steps,
                   int64_t base, int64_t base_step, int64_t len, Visit& visit) const {
    const Source &p = sources_[0], &q = sources_[1];
    for (int64_t j = 0; j < len; ++j) {
      const int64_t u = first[j * steps[0]], v = second[j * steps[1]];
      if (!in_range(p, u)) return fail<kRaise>(p, u);
      if (!in_range(q, v)) return fail<kRaise>(q, v);
      visit(j, base + j * base_step + (u < 0 ? u + p.size : u) * p.stride +
                   (v < 0 ? v + q.size : v) * q.stride);
    }
    return true;
  }
  std::vector<Source> sources_;
};

// The loop of a plan over operands {moved, indexed tensor, index tensors...} (strides per
// operand): run<kRaise>(offs, len) for each run along the last dim. Threaded from
// kParallelElements with out-of-range indices only flagged by the runs (no exception leaves
// a thread), then, if one was, the whole loop again on this thread raising the first in
// order: the error is the one a serial loop gives.
template <typename Run>
void indexed_loop(const Shape& shape, const std::vector<Strides>& strides, Run&& run) {
  const int64_t n = numel_of(shape);
  auto serial = [&] {
    for_each_run_in_range(shape, strides, 0, n, [&](const int64_t* offs, int64_t len) {
      run.template operator()<true>(offs, len);
    });
  };
  if (n < detail::kParallelElements) return serial();
  const int64_t pieces = 4 * int64_t(detail::elementwise_threads());
  std::atomic<bool> bad{false};
  detail::parallel_chunks(pieces, [&](int64_t c) {
    for_each_run_in_range(shape, strides, n * c / pieces, n * (c + 1) / pieces,
                          [&](const int64_t* offs, int64_t len) {
                            if (!run.template operator()<false>(offs, len))
                              bad.store(true, std::memory_order_relaxed);
                          });
  });
  if (bad.load()) serial();
}

// loop(move) with move(to, from) copying element `from` of src to element `to` of dst (es
// bytes each): as a word of that size where there is one, else bytes.
template <typename Loop>
void with_element_moves(char* dst, const char* src, size_t es, Loop&& loop) {
  if (with_word_of_size(es, [&]<typename W>() {
        W* d = reinterpret_cast<W*>(dst);
        const W* s = reinterpret_cast<const W*>(src);
        loop([&](int64_t to, int64_t from) { d[to] = s[from]; });
      }))
    return;
  loop([&](int64_t to, int64_t from) { copy_elem(dst, to, src, from, es); });
}

// The strides along the last dim of each operand of a plan's loop (0-d: none needed).
std::vector<int64_t> last_steps(const std::vector<Strides>& strides) {
  std::vector<int64_t> steps;
  for (const Strides& s : strides) steps.push_back(s.empty() ? 0 : s.back());
  return steps;
}

// inputs: self, index per dim (undefined: whole dim). Runs along the last dim of the result,
// elements moved as words of their size, threaded: x[i] of 2^20 random indices into 2^20
// float32 took 34.6 ms through Tensor::size / stride and memcpy per element, 6.1-7.7 with the
// index pointers and strides read once (an odometer step per element, one thread), 1.6-1.9
// this way (PyTorch 2.2-2.9 in the same runs).
void index_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  std::vector<Tensor> idx(call.inputs.begin() + 1, call.inputs.end());
  IndexPlan p = make_plan(x, idx);
  KILN_INTERNAL_ASSERT(p.shape == out.shape(), "index: planned shape ", shape_str(p.shape),
                       " != output shape ", shape_str(out.shape()));
  std::vector<Strides> strides{out.strides(), p.rest};
  strides.insert(strides.end(), p.idx.begin(), p.idx.end());
  const std::vector<int64_t> steps = last_steps(strides);
  const IndexedOffsets offset_of(p, x);
  with_element_moves(bytes_of(out), bytes_of(x), x.element_size(), [&](auto move) {
    indexed_loop(p.shape, strides, [&]<bool kRaise>(const int64_t* offs, int64_t len) {
      const int64_t o0 = offs[0], os = steps[0];
      return offset_of.for_run<kRaise>(offs[1], steps[1], offs + 2, steps.data() + 2, len,
                                       [&](int64_t j, int64_t at) { move(o0 + j * os, at); });
    });
  });
}

template <typename T>
T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>) return wrap_add(a, b);
  else return T(opmath_t<T>(a) + opmath_t<T>(b));
}

// inputs: self, values (of the indexing result's shape), index per dim; attrs: accumulate.
// Every index is checked first (threaded), so nothing is written when one is out of range;
// the writes stay on one thread: repeated indices keep the last value (or add up) in order.
// 2^20 random indices into 2^20 float32: x[i] = v 11.0-11.5 -> 2.5-2.9 ms, accumulating
// 23.5-25.9 -> 3.5-3.8 (PyTorch 1.7-2.7 and 4.4-6.0) with runs in place of the odometer.
void index_put_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& values = call.inputs[1];
  const Tensor& out = call.outs[0];
  bool accumulate = call.bool_attr(0);
  std::vector<Tensor> idx(call.inputs.begin() + 2, call.inputs.end());
  IndexPlan p = make_plan(out, idx);
  KILN_INTERNAL_ASSERT(p.shape == values.shape(), "index_put: planned shape ", shape_str(p.shape),
                       " != values shape ", shape_str(values.shape()));
  std::vector<Strides> strides{values.strides(), p.rest};
  strides.insert(strides.end(), p.idx.begin(), p.idx.end());
  const std::vector<int64_t> steps = last_steps(strides);
  const IndexedOffsets offset_of(p, out);
  indexed_loop(p.shape, strides, [&]<bool kRaise>(const int64_t* offs, int64_t len) {
    return offset_of.for_run<kRaise>(offs[1], steps[1], offs + 2, steps.data() + 2, len,
                                     [](int64_t, int64_t) {});
  });
  copy_same_shape(out, x);
  // move(at, from): the element at offset `at` of out receives values' element `from`.
  auto scatter = [&](auto move) {
    for_each_run_in_range(p.shape, strides, 0, numel_of(p.shape),
                          [&](const int64_t* offs, int64_t len) {
                            const int64_t v0 = offs[0], vs = steps[0];
                            offset_of.for_run<true>(
                                offs[1], steps[1], offs + 2, steps.data() + 2, len,
                                [&](int64_t j, int64_t at) { move(at, v0 + j * vs); });
                          });
  };
  if (!accumulate) {
    with_element_moves(bytes_of(out), bytes_of(values), out.element_size(), scatter);
    return;
  }
  if (is_complex(out.dtype())) {
    KILN_DISPATCH_COMPLEX(out.dtype(), "index_put", [&]<typename C>() {
      C* o = static_cast<C*>(out.raw_data());
      const C* v = static_cast<const C*>(values.raw_data());
      scatter([&](int64_t at, int64_t from) { o[at] += v[from]; });
    });
    return;
  }
  KILN_DISPATCH_ALL(out.dtype(), "index_put", [&]<typename T>() {
    T* o = static_cast<T*>(out.raw_data());
    const T* v = static_cast<const T*>(values.raw_data());
    scatter([&](int64_t at, int64_t from) { o[at] = add_values(o[at], v[from]); });
  });
}

}  // namespace

void register_advanced_index_kernels() {
  register_kernel("index", DeviceType::CPU, index_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("index_put", DeviceType::CPU, index_put_kernel, kAllDTypes | kComplexDTypes);
}

}  // namespace kiln::cpu
