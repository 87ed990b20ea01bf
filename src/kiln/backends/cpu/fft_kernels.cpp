// CPU kernels of the FFT ops (_fft_c2c, _fft_r2c, _fft_c2r): batched transforms along each
// dim with kiln's FFT engine (fft_engine.h; vector lanes per ISA, decision 0094), runs of a
// dim's lines spread over the threads, then the normalization.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/core/complex.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/strided_loop.h"
#include "fft_engine.h"

namespace kiln::cpu {

namespace {

// The lines along dim d of a contiguous tensor of shape `shape`, as `blocks` batches of
// `per_block` lines: line i of batch b starts at b * block_step + i * dist and steps by
// `stride`. When d is the last dim every line is one batch (dist n); otherwise the lines of
// one index before d are adjacent (dist 1), which the lane kernels load as whole vectors.
struct LineBatches {
  int64_t n = 1, stride = 1, blocks = 1, per_block = 1, dist = 1, block_step = 0;
  LineBatches(const Shape& shape, int64_t d) : n(shape[size_t(d)]) {
    int64_t outer = 1;
    for (int64_t k = 0; k < d; ++k) outer *= shape[size_t(k)];
    for (size_t k = size_t(d) + 1; k < shape.size(); ++k) stride *= shape[k];
    if (stride == 1) per_block = outer, dist = n;
    else blocks = outer, per_block = stride, block_step = n * stride;
  }
  int64_t count() const { return blocks * per_block; }
};

// fn(b, first, cnt) for runs of cnt lines of batch b from line `first`: runs of `quantum` lines
// (a plan's full lane groups), smaller when that leaves a thread idle; over the threads when
// there are enough points in all.
template <typename Fn>
void for_line_runs(const LineBatches& lb, int64_t quantum, Fn&& fn) {
  const int64_t threads = detail::elementwise_threads();
  if (lb.blocks * ((lb.per_block + quantum - 1) / quantum) < threads)
    quantum = std::max<int64_t>(1, (lb.per_block + threads - 1) / threads);
  const int64_t pieces = (lb.per_block + quantum - 1) / quantum, tasks = lb.blocks * pieces;
  auto run = [&](int64_t t) {
    const int64_t b = t / pieces, first = (t % pieces) * quantum;
    fn(b, first, std::min(quantum, lb.per_block - first));
  };
  if (tasks > 1 && lb.count() * lb.n >= 4096) detail::parallel_chunks(tasks, run);
  else for (int64_t t = 0; t < tasks; ++t) run(t);
}

// Transforms every line along dim d of the contiguous buffer `data` of shape `shape` in place.
template <typename R>
void transform_dim(std::complex<R>* data, const Shape& shape, int64_t d, bool forward) {
  const LineBatches lb(shape, d);
  if (lb.n == 1) return;
  const auto plan = fft::get_plan<R>(lb.n);
  for_line_runs(lb, plan->group_lines(), [&](int64_t b, int64_t first, int64_t cnt) {
    std::complex<R>* base = data + b * lb.block_step + first * lb.dist;
    plan->c2c(base, lb.stride, lb.dist, base, lb.stride, lb.dist, cnt, forward);
  });
}

// Transforms along dims[0, ndims) in turn; returns the product of their sizes (the point
// count that the normalization scales by).
template <typename R>
double transform_dims(std::complex<R>* data, const Shape& shape, const std::vector<int64_t>& dims,
                      size_t ndims, bool forward) {
  double count = 1;
  for (size_t j = 0; j < ndims; ++j) {
    const int64_t w = wrap_dim(dims[j], int64_t(shape.size()));
    transform_dim<R>(data, shape, w, forward);
    count *= double(shape[size_t(w)]);
  }
  return count;
}

// The scale of a normalization mode for transforms of `count` points in all.
double norm_scale(int64_t mode, double count) {
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / std::sqrt(count) : 1.0 / count;
}

// dst (contiguous, complex<R>) <- t (float or complex, any strides), converted by the shared
// threaded strided walk.
template <typename R>
void convert_into(const Tensor& t, const Tensor& dst) {
  using C = std::complex<R>;
  auto run = [&]<typename From>() {
    elementwise_kernel<C, From>(dst, {&t}, [](From v) {
      if constexpr (is_complex_v<From>) return C(R(v.real()), R(v.imag()));
      else return C(R(v), R(0));
    });
  };
  switch (t.dtype()) {
    case DType::F32: return run.template operator()<float>();
    case DType::F64: return run.template operator()<double>();
    case DType::C64: return run.template operator()<std::complex<float>>();
    case DType::C128: return run.template operator()<std::complex<double>>();
    default: KILN_THROW(NotImplementedError, "fft: unsupported dtype ", t.dtype());
  }
}

// A contiguous complex<R> working copy of t.
template <typename R>
Tensor complex_buffer(const Tensor& t) {
  Tensor buf = empty_tensor(t.shape(), dtype_of<std::complex<R>>, Device(DeviceType::CPU, 0));
  convert_into<R>(t, buf);
  return buf;
}

// t itself when it is a contiguous R tensor, else a contiguous R copy.
template <typename R>
Tensor real_buffer(const Tensor& t) {
  if (t.dtype() == dtype_of<R> && t.is_contiguous()) return t;
  Tensor buf = empty_tensor(t.shape(), dtype_of<R>, Device(DeviceType::CPU, 0));
  auto run = [&]<typename From>() {
    elementwise_kernel<R, From>(buf, {&t}, [](From v) { return R(v); });
  };
  switch (t.dtype()) {
    case DType::F32: run.template operator()<float>(); break;
    case DType::F64: run.template operator()<double>(); break;
    default: KILN_THROW(NotImplementedError, "fft: unsupported dtype ", t.dtype());
  }
  return buf;
}

// p[0, n) *= s, threaded for large buffers (T real or complex).
template <typename T, typename R>
void scale_all(T* p, int64_t n, R s) {
  if (s == R(1)) return;
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] *= s;
  };
  constexpr int64_t kPiece = int64_t(1) << 16;
  if (n < 2 * kPiece) return run(0, n);
  detail::parallel_chunks((n + kPiece - 1) / kPiece,
                          [&](int64_t c) { run(c * kPiece, std::min(n, (c + 1) * kPiece)); });
}

void c2c_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(out.dtype(), "_fft_c2c", [&]<typename C>() {
    using R = typename C::value_type;
    C* o = static_cast<C*>(out.raw_data());  // fresh and contiguous: transformed in place
    convert_into<R>(in, out);
    const double count = transform_dims<R>(o, in.shape(), dims, dims.size(), call.bool_attr(2));
    scale_all(o, out.numel(), R(norm_scale(call.int_attr(1), count)));
  });
}

// Real input: the one-sided transform of the real last dim straight into out (each real line
// a half-length complex transform, Plan::r2c), then the other dims in place on out
// (transforming them after trimming the last dim is the same and cheaper).
void r2c_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(out.dtype(), "_fft_r2c", [&]<typename C>() {
    using R = typename C::value_type;
    const Tensor src = real_buffer<R>(in);
    const R* x = static_cast<const R*>(src.raw_data());
    C* o = static_cast<C*>(out.raw_data());
    const int64_t last = wrap_dim(dims.back(), in.dim());
    const LineBatches lin(in.shape(), last), lout(out.shape(), last);
    const auto plan = fft::get_plan<R>(lin.n);
    for_line_runs(lin, plan->group_lines(), [&](int64_t b, int64_t first, int64_t cnt) {
      plan->r2c(x + b * lin.block_step + first * lin.dist, lin.stride, lin.dist,
                o + b * lout.block_step + first * lout.dist, lout.stride, lout.dist, cnt, lout.n);
    });
    const double count =
        double(lin.n) * transform_dims<R>(o, out.shape(), dims, dims.size() - 1, true);
    scale_all(o, out.numel(), R(norm_scale(call.int_attr(1), count)));
  });
}

// Half spectrum -> real: inverse complex transforms over the other dims first (on a working
// copy), then the lines of the last dim, each extended by Hermitian symmetry
// (X[n-k] = conj X[k]) to n points (Plan::c2r: a half-length transform each), straight into out.
void c2r_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& dims = call.ints_attr(0);
  KILN_DISPATCH_COMPLEX(in.dtype(), "_fft_c2r", [&]<typename C>() {
    using R = typename C::value_type;
    // The other dims are transformed in place on a copy; with none, a contiguous input is read
    // as it is (Plan::c2r only reads it).
    const bool direct = dims.size() == 1 && in.is_contiguous();
    Tensor work = direct ? in : complex_buffer<R>(in);
    C* buf = static_cast<C*>(work.raw_data());
    double count = transform_dims<R>(buf, in.shape(), dims, dims.size() - 1, false);
    const int64_t last = wrap_dim(dims.back(), in.dim());
    const LineBatches lin(in.shape(), last), lout(out.shape(), last);
    count *= double(lout.n);
    const auto plan = fft::get_plan<R>(lout.n);
    R* o = static_cast<R*>(out.raw_data());
    for_line_runs(lout, plan->group_lines(), [&](int64_t b, int64_t first, int64_t cnt) {
      plan->c2r(buf + b * lin.block_step + first * lin.dist, lin.stride, lin.dist, lin.n,
                o + b * lout.block_step + first * lout.dist, lout.stride, lout.dist, cnt);
    });
    scale_all(o, out.numel(), R(norm_scale(call.int_attr(1), count)));
  });
}

}  // namespace

void register_fft_kernels() {
  register_kernel("_fft_c2c", DeviceType::CPU, c2c_kernel, kComplexDTypes);
  register_kernel("_fft_r2c", DeviceType::CPU, r2c_kernel, kComplexDTypes);
  register_kernel("_fft_c2r", DeviceType::CPU, c2r_kernel, kComplexDTypes);
}

}  // namespace kiln::cpu
