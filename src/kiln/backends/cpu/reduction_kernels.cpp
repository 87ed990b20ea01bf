// CPU kernels for reductions over any set of dims. Every reduction op has attrs
// (int[] dims, bool keepdim, ...): the input is read through its strides (any layout), the
// kept dims walk the outputs and each output's reduced elements are visited in row-major
// order. Floating sums accumulate in double (compensated for float64 inputs) and round
// once; integer sums and products wrap in int64 and are narrowed at the end.
#include <cmath>
#include <limits>

#include "aligned_scratch.h"
#include "kiln/core/convert.h"
#include "kiln/dispatch/registry.h"
#include "isa/reduce_vec.h"
#include "isa/vec_math.h"
#include "kiln/tensor/empty.h"
#include "line_strides.h"
#include "reduce_utils.h"
#include "permuted_copy.h"
#include "kiln/tensor/strided_loop.h"
#include "reduction_fast.h"
#include "reduction_staging.h"
#include "scalar_math.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
namespace {

template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<opmath_t<T>>;

// Neumaier's compensated sum: exact enough for float64 inputs, cheap in double.
struct CompensatedSum {
  double sum = 0, comp = 0;
  void add(double v) {
    double t = sum + v;
    if (std::fabs(sum) >= std::fabs(v)) comp += (sum - t) + v;
    else comp += (v - t) + sum;
    sum = t;
  }
  double value() const {
    // Infinities and NaN make the compensation NaN; the plain sum is then the answer.
    return std::isfinite(sum) ? sum + comp : sum;
  }
};

// Runs r(each, n) for every output element of a one-output reduction, where each(f) calls
// f(T) on the reduced elements of that output and n is their count.
template <typename T, typename Out, typename R>
void reduce_into(const OpCall& call, R&& r) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  ReduceGeometry g = reduce_geometry(in, call.ints_attr(0), call.bool_attr(1), {&out});
  reduced_dims_in_memory_order(g);  // any order of the reduced elements
  const T* src = static_cast<const T*>(in.raw_data());
  Out* dst = static_cast<Out*>(out.raw_data());
  for_each_offset2(g.outer_shape, g.outer_in, g.outer_out[0], [&](int64_t io, int64_t oo) {
    const T* base = src + io;
    auto each = [&](auto&& f) { g.red.for_each([&](int64_t off) { f(base[off]); }); };
    dst[oo] = r(each, g.red_numel);
  });
}

// Reductions whose elements form one contiguous run per output (x.sum(), mask.any(-1)):
// part(x, n) reduces n elements of a run, join(a, b) combines two parts in order. Outputs go
// over the threads; with fewer outputs than threads each run is cut into pieces instead. The
// generic loop (a call per element) took 850 us for any() of 1M bools and 540 us for the sum
// (PyTorch 390 and 330). False where the runs are not contiguous.
template <typename T, typename Acc, typename Part, typename Join>
bool reduce_contiguous_runs(OpCall& call, Acc identity, Part&& part, Join&& join) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  ReduceGeometry g = reduce_geometry(in, call.ints_attr(0), call.bool_attr(1), {&out});
  reduced_dims_in_memory_order(g);  // any order of the reduced elements
  if (g.red_numel < 1 || g.red.shape.size() != 1 || g.red.strides[0] != 1) return false;
  const KeptOffsets offsets(g);
  const int64_t outputs = offsets.count(), n = g.red_numel;
  using Bytes = detail::element_storage_t<T>;  // bool read as its byte (strided_loop.h)
  const Bytes* src = static_cast<const Bytes*>(in.raw_data());
  Acc* dst = static_cast<Acc*>(out.raw_data());
  const bool parallel = outputs * n >= detail::kParallelElements;
  const int threads = parallel ? detail::elementwise_threads() : 1;
  if (outputs >= threads) {
    parallel_region(parallel && outputs > 1, [&] {
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outputs; ++o)
        dst[offsets.out(o)] = join(identity, part(src + offsets.in(o), n));
    });
    return true;
  }
  const int64_t pieces = 4 * int64_t(threads);
  struct Slot {
    Acc value;  // (not std::vector<bool>: its bits cannot be written from several threads)
  };
  std::vector<Slot> parts(static_cast<size_t>(pieces));
  for (int64_t o = 0; o < outputs; ++o) {
    const Bytes* x = src + offsets.in(o);
    parallel_region(parallel, [&] {
#pragma omp for schedule(static)
      for (int64_t c = 0; c < pieces; ++c)
        parts[size_t(c)].value = part(x + n * c / pieces, n * (c + 1) / pieces - n * c / pieces);
    });
    Acc r = identity;
    for (const Slot& a : parts) r = join(r, a.value);
    dst[offsets.out(o)] = r;
  }
  return true;
}

// n elements of a contiguous run of T (bool as its byte) summed as int64 with wrap-around.
// Narrow types add into 32-bit lanes over blocks that cannot overflow them (2^23 values of
// at most 2^8 magnitude; int16 2^15 values), which the compiler vectorises without widening
// each value to 64 bits; bool counts its nonzero bytes.
template <typename T>
int64_t int_run_sum(const detail::element_storage_t<T>* x, int64_t n) {
  if constexpr (sizeof(T) <= 2) {
    constexpr int64_t kBlock = sizeof(T) == 1 ? int64_t(1) << 23 : int64_t(1) << 15;
    uint64_t s = 0;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = std::min(n, b + kBlock);
      int32_t block = 0;
      for (int64_t i = b; i < e; ++i) {
        if constexpr (std::is_same_v<T, bool>) block += int32_t(x[i] != 0);
        else block += int32_t(x[i]);
      }
      s += uint64_t(int64_t(block));
    }
    return int64_t(s);
  } else {
    uint64_t s = 0;  // unsigned: wraps as wrap_add does, and vectorises
    for (int64_t i = 0; i < n; ++i) s += uint64_t(int64_t(x[i]));
    return int64_t(s);
  }
}

// Sums of bool and integer inputs into int64 (the op's dtype rule, reduce_sum_meta) whose
// reduced elements form contiguous runs: the runs summed in their own type's width, no
// widened copy. False for other layouts.
bool int_sum_runs(OpCall& call) {
  if (call.outs[0].dtype() != DType::I64 ||
      !is_integral(call.inputs[0].dtype(), /*include_bool=*/true))
    return false;
  return KILN_DISPATCH_INTEGRAL(call.inputs[0].dtype(), "sum", [&]<typename T>() {
    return reduce_contiguous_runs<T, int64_t>(
        call, int64_t(0), [](const detail::element_storage_t<T>* x, int64_t n) {
          return int_run_sum<T>(x, n);
        },
        [](int64_t a, int64_t b) { return wrap_add(a, b); });
  });
}

template <typename T>
double as_double(T v) {
  return double(opmath_t<T>(v));
}

// The fast path, else the fast path on a copy in the layout it takes (float32 / bfloat16
// inputs, whose fast path then always applies; reduction_staging.h).
bool fast_or_staged(OpCall& call, FastReduceKind kind) {
  if (fast_reduce(call, kind)) return true;
  const DType dt = call.inputs[0].dtype();
  if ((dt != DType::F32 && dt != DType::BF16) || call.outs[0].dtype() != dt) return false;
  return reduce_on_staged_copy(call, [kind](OpCall& c) { return fast_reduce(c, kind); });
}

void sum_kernel(OpCall& call) {
  if (fast_or_staged(call, FastReduceKind::Sum) || int_sum_runs(call)) return;
  if (call.outs[0].dtype() != call.inputs[0].dtype()) {  // bool / integers into int64
    KILN_DISPATCH_INTEGRAL(call.inputs[0].dtype(), "sum", [&]<typename T>() {
      reduce_into<T, int64_t>(call, [](auto&& each, int64_t) {
        int64_t s = 0;
        each([&](T v) { s = wrap_add(s, int64_t(v)); });
        return s;
      });
    });
    return;
  }
  KILN_DISPATCH_ALL(call.inputs[0].dtype(), "sum", [&]<typename T>() {
    reduce_into<T, T>(call, [](auto&& each, int64_t) {
      if constexpr (is_float_v<T>) {
        CompensatedSum s;
        each([&](T v) { s.add(as_double(v)); });
        return convert_value<T>(s.value());
      } else {
        int64_t s = 0;
        each([&](T v) { s = wrap_add(s, int64_t(v)); });
        return convert_value<T>(s);
      }
    });
  });
}

void mean_kernel(OpCall& call) {
  if (fast_or_staged(call, FastReduceKind::Mean)) return;
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "mean", [&]<typename T>() {
    reduce_into<T, T>(call, [](auto&& each, int64_t n) {
      CompensatedSum s;
      each([&](T v) { s.add(as_double(v)); });
      return convert_value<T>(s.value() / double(n));
    });
  });
}

// float32 / bfloat16 products whose reduced elements form one contiguous run per output: the
// ISA's prod_run (reduce_vec.h: double lanes), outputs over the threads. The generic loop
// took 0.8 ms for prod(-1) of [2048, 512] float32 and four scalar double chains 0.17 ms
// (torch 0.05 ms). Products in double keep float32's values exact to the last bit in all
// but pathological cases (the order of the multiplies differs).
template <typename T>
bool prod_runs(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if (out.dtype() != in.dtype()) return false;
  ReduceGeometry g = reduce_geometry(in, call.ints_attr(0), call.bool_attr(1), {&out});
  reduced_dims_in_memory_order(g);  // any order of the reduced elements
  if (g.red_numel < 1 || g.red.shape.size() != 1 || g.red.strides[0] != 1) return false;
  const KeptOffsets offsets(g);
  const int64_t outputs = offsets.count();
  const int64_t n = g.red_numel;
  const T* src = static_cast<const T*>(in.raw_data());
  T* dst = static_cast<T*>(out.raw_data());
  const VecReduce& vr = reduce_vec();
  if (n < 32) {
    // Runs too short for prod_*'s lanes (it multiplies them as its tail: in order from 1.0),
    // four at a time transposed in registers: the same bits. The generic loop took 25 us for
    // [4096, 8] and prod_f32 30 us for [4096, 16] (PyTorch 13 and 21).
    const int64_t quads = (outputs + 3) / 4;
    parallel_region(quads > 1 && outputs * n >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
      for (int64_t q = 0; q < quads; ++q) {
        const int64_t o0 = q * 4, count = std::min<int64_t>(4, outputs - o0);
        const T* x[4];  // a last partial quad repeats its last run
        for (int r = 0; r < 4; ++r) x[r] = src + offsets.in(o0 + std::min<int64_t>(r, count - 1));
        double p[4];
        if constexpr (std::is_same_v<T, float>) vr.prod_four_runs_f32(x, n, p);
        else vr.prod_four_runs_bf16(reinterpret_cast<const uint16_t* const*>(x), n, p);
        for (int64_t r = 0; r < count; ++r) dst[offsets.out(o0 + r)] = convert_value<T>(p[r]);
      }
    });
    return true;
  }
  parallel_region(outputs > 1 && outputs * n >= (int64_t(1) << 15), [&] {
#pragma omp for schedule(static)
    for (int64_t o = 0; o < outputs; ++o) {
      const T* x = src + offsets.in(o);
      double p;
      if constexpr (std::is_same_v<T, float>) p = vr.prod_f32(x, n);
      else p = vr.prod_bf16(reinterpret_cast<const uint16_t*>(x), n);
      dst[offsets.out(o)] = convert_value<T>(p);
    }
  });
  return true;
}

void prod_kernel(OpCall& call) {
  const DType dt = call.inputs[0].dtype();
  if (dt == DType::F32 && (prod_runs<float>(call) ||
                           reduce_on_staged_copy(call, [](OpCall& c) { return prod_runs<float>(c); })))
    return;
  if (dt == DType::BF16 &&
      (prod_runs<BFloat16>(call) ||
       reduce_on_staged_copy(call, [](OpCall& c) { return prod_runs<BFloat16>(c); })))
    return;
  KILN_DISPATCH_ALL(call.inputs[0].dtype(), "prod", [&]<typename T>() {
    reduce_into<T, T>(call, [](auto&& each, int64_t) {
      if constexpr (is_float_v<T>) {
        double p = 1;
        each([&](T v) { p *= as_double(v); });
        return convert_value<T>(p);
      } else {
        int64_t p = 1;
        each([&](T v) { p = wrap_mul(p, int64_t(v)); });
        return convert_value<T>(p);
      }
    });
  });
}

// amax/amin: NaN propagates; the meta function rejects empty reductions.
template <bool kMax>
void extremum_kernel(OpCall& call) {
  if (fast_or_staged(call, kMax ? FastReduceKind::Max : FastReduceKind::Min)) return;
  KILN_DISPATCH_ALL(call.inputs[0].dtype(), kMax ? "amax" : "amin", [&]<typename T>() {
    using C = opmath_t<T>;
    reduce_into<T, T>(call, [](auto&& each, int64_t) {
      C best{};
      bool first = true;
      each([&](T v) {
        C x = C(v);
        if (first) best = x;
        else best = kMax ? nan_max(best, x) : nan_min(best, x);
        first = false;
      });
      return T(best);
    });
  });
}

template <bool kAll>
void all_any_kernel(OpCall& call) {
  // Contiguous runs: blocks of 1024 elements folded with | (& for all) in a vectorisable
  // loop, stopping at the first block that decides the run.
  const char* name = kAll ? "all" : "any";
  const bool done = KILN_DISPATCH_ALL(call.inputs[0].dtype(), name, [&]<typename T>() {
    using Bytes = detail::element_storage_t<T>;
    return reduce_contiguous_runs<T, bool>(
        call, kAll,
        [](const Bytes* x, int64_t n) {
          for (int64_t b = 0; b < n; b += 1024) {
            const int64_t e = std::min(n, b + 1024);
            unsigned hit = 0;  // any: a nonzero element; all: a zero one
            for (int64_t i = b; i < e; ++i)
              hit |= unsigned((opmath_t<T>(T(x[i])) != opmath_t<T>(0)) != kAll);
            if (hit) return !kAll;
          }
          return kAll;
        },
        [](bool a, bool b) { return kAll ? a && b : a || b; });
  });
  if (done) return;
  KILN_DISPATCH_ALL(call.inputs[0].dtype(), kAll ? "all" : "any", [&]<typename T>() {
    reduce_into<T, bool>(call, [](auto&& each, int64_t) {
      bool r = kAll;
      each([&](T v) {
        bool nz = opmath_t<T>(v) != opmath_t<T>(0);
        if (kAll) r = r && nz;
        else r = r || nz;
      });
      return r;
    });
  });
}

// var/std with attrs (dims, keepdim, correction): two passes in double (mean, then squared
// deviations); the divisor is max(0, n - correction) as PyTorch.
template <bool kStd>
void var_kernel(OpCall& call) {
  if (fast_or_staged(call, kStd ? FastReduceKind::Std : FastReduceKind::Var)) return;
  double correction = call.double_attr(2);
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), kStd ? "std" : "var", [&]<typename T>() {
    reduce_into<T, T>(call, [correction](auto&& each, int64_t n) {
      CompensatedSum s;
      each([&](T v) { s.add(as_double(v)); });
      double mean = s.value() / double(n);
      CompensatedSum m2;
      each([&](T v) {
        double d = as_double(v) - mean;
        m2.add(d * d);
      });
      double var = m2.value() / std::max(0.0, double(n) - correction);
      return convert_value<T>(kStd ? std::sqrt(var) : var);
    });
  });
}

// norm with attrs (dims, keepdim, p).
void norm_kernel(OpCall& call) {
  double p = call.double_attr(2);
  if (p == 2 && fast_or_staged(call, FastReduceKind::Norm2)) return;
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "norm", [&]<typename T>() {
    reduce_into<T, T>(call, [p](auto&& each, int64_t) {
      if (std::isinf(p)) {
        double best = p > 0 ? 0.0 : std::numeric_limits<double>::infinity();
        each([&](T v) {
          double a = std::fabs(as_double(v));
          best = p > 0 ? nan_max(best, a) : nan_min(best, a);
        });
        return convert_value<T>(best);
      }
      CompensatedSum s;
      if (p == 0) {
        each([&](T v) { s.add(as_double(v) != 0 ? 1.0 : 0.0); });
        return convert_value<T>(s.value());
      }
      if (p == 1) {
        each([&](T v) { s.add(std::fabs(as_double(v))); });
        return convert_value<T>(s.value());
      }
      if (p == 2) {
        each([&](T v) {
          double a = as_double(v);
          s.add(a * a);
        });
        return convert_value<T>(std::sqrt(s.value()));
      }
      each([&](T v) { s.add(std::pow(std::fabs(as_double(v)), p)); });
      return convert_value<T>(std::pow(s.value(), 1.0 / p));
    });
  });
}

// logsumexp: max first, then log(sum(exp(x - max))) + max; an infinite max is treated as 0
// so that all -inf gives -inf and any +inf gives +inf, as PyTorch.
// float32 / bfloat16 whose reduced elements form one contiguous run per output: the vector
// row function, outputs over the threads. The element loop (a double exp per element, one
// thread) took 7.9 ms for logsumexp(-1) of [2048, 512] float32 (torch 0.55 ms).
bool logsumexp_rows(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const VecMathF32& vm = vec_math_f32();
  if (!vm.logsumexp_row || !vm.widen_bf16 || out.dtype() != in.dtype() ||
      (in.dtype() != DType::F32 && in.dtype() != DType::BF16))
    return false;
  ReduceGeometry g = reduce_geometry(in, call.ints_attr(0), call.bool_attr(1), {&out});
  reduced_dims_in_memory_order(g);  // any order of the reduced elements
  if (g.red_numel == 0 || g.red.shape.size() != 1 || g.red.strides[0] != 1) return false;
  const KeptOffsets offsets(g);
  const int64_t outputs = offsets.count(), n = g.red_numel;
  const bool bf16 = in.dtype() == DType::BF16;
  parallel_region(outputs > 1 && outputs * n >= (int64_t(1) << 15), [&] {
    AlignedVector<float> row(bf16 ? static_cast<size_t>(n) : 0);
#pragma omp for schedule(static)
    for (int64_t o = 0; o < outputs; ++o) {
      if (!bf16) {
        static_cast<float*>(out.raw_data())[offsets.out(o)] =
            vm.logsumexp_row(static_cast<const float*>(in.raw_data()) + offsets.in(o), n);
        continue;
      }
      vm.widen_bf16(static_cast<const uint16_t*>(in.raw_data()) + offsets.in(o), row.data(), n);
      static_cast<BFloat16*>(out.raw_data())[offsets.out(o)] =
          BFloat16(vm.logsumexp_row(row.data(), n));
    }
  });
  return true;
}

void logsumexp_kernel(OpCall& call) {
  const DType dt = call.inputs[0].dtype();
  if (logsumexp_rows(call) || ((dt == DType::F32 || dt == DType::BF16) &&
                               reduce_on_staged_copy(call, logsumexp_rows)))
    return;
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "logsumexp", [&]<typename T>() {
    reduce_into<T, T>(call, [](auto&& each, int64_t) {
      double m = -std::numeric_limits<double>::infinity();
      each([&](T v) { m = nan_max(m, as_double(v)); });
      if (std::isnan(m)) return convert_value<T>(m);
      if (std::isinf(m)) m = 0;
      CompensatedSum s;
      each([&](T v) { s.add(std::exp(as_double(v) - m)); });
      return convert_value<T>(std::log(s.value()) + m);
    });
  });
}

// max.dim / min.dim (outs: values, indices) and argmax / argmin (outs: indices). The index
// counts the reduced elements in row-major order (the flat index when reducing all dims);
// the first extremum wins and the first NaN beats everything.
// arg_kernel over one dim of a contiguous input with contiguous outputs ([outer, L, inner]),
// in threaded units: a line when the dim is the last, else blocks of adjacent columns that
// keep their running extremum while the lines are read in order (contiguous loads; the
// generic loop walked each column with a stride: max(dim=0) of [2048, 2048] float32 took
// 18.6 ms against PyTorch's 12). Same rules: the first extremum wins, the first NaN beats
// everything.
// The first j with line[j] == m, or the first NaN when m is NaN (m is one of the values).
// Blocks of 16 are compared at once (a fixed-width loop the compiler vectorises), then the
// block holding the hit is searched.
template <typename T>
int64_t first_index_of(const T* line, int64_t L, float m) {
  auto hit_at = [&](int64_t j) {
    const float x = float(line[j]);
    return m != m ? x != x : x == m;
  };
  int64_t j = 0;
  if (m != m) {
    for (; j + 16 <= L; j += 16) {
      bool hit = false;
      for (int k = 0; k < 16; ++k) hit |= float(line[j + k]) != float(line[j + k]);
      if (hit) break;
    }
  } else {
    for (; j + 16 <= L; j += 16) {
      bool hit = false;
      for (int k = 0; k < 16; ++k) hit |= float(line[j + k]) == m;
      if (hit) break;
    }
  }
  for (; j < L; ++j)
    if (hit_at(j)) return j;
  return L - 1;
}

// argmax / argmin (and max.dim / min.dim) of one long float32 or bfloat16 line in two vector
// passes: the extremum (VecReduce, NaN-propagating), then its first position. The scalar loop
// tested each element for NaN and a new extremum: argmax over GPT-2's 50257 logits, once per
// generated token, took 63 us (PyTorch 83 us). False where the level has no vector
// extremum or the line is short.
template <bool kMax, typename T>
bool arg_line_two_pass(const T* line, int64_t L, int64_t& index) {
  constexpr int64_t kMinLine = 256;
  if (L < kMinLine) return false;
  const VecReduce& v = reduce_vec();
  float m;
  if constexpr (std::is_same_v<T, float>) {
    const auto fn = kMax ? v.max_f32 : v.min_f32;
    if (!fn) return false;
    m = fn(line, L);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    const auto fn = kMax ? v.max_bf16 : v.min_bf16;
    if (!fn) return false;
    m = fn(reinterpret_cast<const uint16_t*>(line), L);
  } else {
    return false;
  }
  index = first_index_of(line, L, m);
  return true;
}

// The position of the extremum along one contiguous line of L >= 1 elements: the vector
// passes above, else the running extremum in registers (the first extremum wins, the first
// NaN beats everything).
template <bool kMax, typename T>
int64_t arg_line(const T* base, int64_t L) {
  using C = opmath_t<T>;
  int64_t at;
  if (arg_line_two_pass<kMax>(base, L, at)) return at;
  C b = C(base[0]);
  int64_t bi = 0;
  bool nan = false;
  if constexpr (std::is_floating_point_v<C>) nan = std::isnan(b);
  for (int64_t j = 1; j < L && !nan; ++j) {
    const C x = C(base[j]);
    bool take = kMax ? x > b : x < b;
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) take = nan = true;
    }
    if (take) b = x, bi = j;
  }
  return bi;
}

template <bool kMax, bool kValues, typename T>
bool arg_one_dim(OpCall& call);

// One dim of stride 1 in any other layout (a slice, a row step, a transposed input reduced
// along its dim that is contiguous in memory; any output layout): the lines' offsets are
// walked once and the lines spread over the threads. The generic loop walked each line
// through an odometer on one thread: max(-1) of x[::2] for a [1024, 1024] float32 x took
// 544 us (PyTorch 150), min(0) of x.t() 1.14 ms (PyTorch 0.34).
template <bool kMax, bool kValues, typename T>
bool arg_strided_lines(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const auto& dims = call.ints_attr(0);
  if (dims.size() != 1 || in.dim() < 1 || in.numel() == 0) return false;
  const int64_t d = wrap_dim(dims[0], in.dim()), L = in.size(d);
  if (L < 2 || in.stride(d) != 1) return false;
  std::vector<const Tensor*> outs;
  for (const auto& o : call.outs) outs.push_back(&o);
  const ReduceGeometry g = reduce_geometry(in, dims, call.bool_attr(1), outs);
  const Strides& idx_strides = g.outer_out[kValues ? 1 : 0];
  const Strides& val_strides = g.outer_out[0];
  std::vector<std::array<int64_t, 3>> lines;
  for_each_offsets<3>(g.outer_shape, {&g.outer_in, &idx_strides, &val_strides},
                      [&](const std::array<int64_t, 3>& o) { lines.push_back(o); });
  const T* src = static_cast<const T*>(in.raw_data());
  int64_t* idx_dst = static_cast<int64_t*>(call.outs[kValues ? 1 : 0].raw_data());
  T* val_dst = static_cast<T*>(call.outs[0].raw_data());
  auto line = [&](int64_t u) {
    const std::array<int64_t, 3>& o = lines[size_t(u)];
    const int64_t at = arg_line<kMax>(src + o[0], L);
    idx_dst[o[1]] = at;
    if constexpr (kValues) val_dst[o[2]] = src[o[0] + at];
  };
  const int64_t units = int64_t(lines.size());
  if (units > 1 && in.numel() >= (int64_t(1) << 15)) detail::parallel_chunks(units, line);
  else for (int64_t u = 0; u < units; ++u) line(u);
  return true;
}

template <bool kMax, bool kValues, typename T>
bool arg_one_dim(OpCall& call) {
  using C = opmath_t<T>;
  const Tensor& in = call.inputs[0];
  const auto& dims = call.ints_attr(0);
  if (dims.size() != 1 || in.dim() < 2 || in.numel() == 0) return false;
  for (const Tensor& o : call.outs)
    if (!o.is_contiguous()) return false;
  const int64_t d = wrap_dim(dims[0], in.dim());
  // Contiguous, or a slice / row step whose lines are read through their strides
  // (line_strides.h); a line along the last dim must itself be contiguous.
  int64_t in_outer = 0, in_line = 0;
  if (!outer_line_strides(in, d, in_outer, in_line)) return false;
  int64_t inner = 1;
  for (int64_t k = d + 1; k < in.dim(); ++k) inner *= in.size(k);
  const int64_t L = in.size(d), outer = in.numel() / (L * inner);
  if (inner == 1 && in_line != 1 && L > 1) return false;
  const T* src = static_cast<const T*>(in.raw_data());
  int64_t* idx_dst = static_cast<int64_t*>(call.outs[kValues ? 1 : 0].raw_data());
  T* val_dst = static_cast<T*>(call.outs[0].raw_data());
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock, units = outer * blocks;
  auto unit = [&](int64_t u) {
    const int64_t o = u / blocks, c0 = u % blocks * kBlock, w = std::min(kBlock, inner - c0);
    const T* base = src + o * in_outer + c0;
    if (inner == 1) {  // the last dim: one contiguous line
      const int64_t at = arg_line<kMax>(base, L);
      idx_dst[o] = at;
      if constexpr (kValues) val_dst[o] = base[at];
      return;
    }
    C best[kBlock];
    int64_t best_i[kBlock];
    bool is_nan[kBlock];
    for (int64_t i = 0; i < w; ++i) {
      best[i] = C(base[i]);
      best_i[i] = 0;
      if constexpr (std::is_floating_point_v<C>) is_nan[i] = std::isnan(best[i]);
      else is_nan[i] = false;
    }
    for (int64_t j = 1; j < L; ++j) {
      const T* line = base + j * in_line;
      for (int64_t i = 0; i < w; ++i) {
        const C x = C(line[i]);
        if (is_nan[i]) continue;
        bool take = kMax ? x > best[i] : x < best[i];
        if constexpr (std::is_floating_point_v<C>) {
          if (std::isnan(x)) take = is_nan[i] = true;
        }
        if (take) {
          best[i] = x;
          best_i[i] = j;
        }
      }
    }
    for (int64_t i = 0; i < w; ++i) {
      idx_dst[o * inner + c0 + i] = best_i[i];
      if constexpr (kValues) val_dst[o * inner + c0 + i] = T(best[i]);
    }
  };
  if (units > 1 && in.numel() >= (int64_t(1) << 15)) detail::parallel_chunks(units, unit);
  else for (int64_t u = 0; u < units; ++u) unit(u);
  return true;
}

template <bool kMax, bool kValues>
void arg_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  bool done = false;
  KILN_DISPATCH_ALL(in.dtype(), call.op->name.c_str(), [&]<typename T>() {
    done = arg_one_dim<kMax, kValues, T>(call) || arg_strided_lines<kMax, kValues, T>(call);
  });
  if (done) return;
  // Along a strided dim of a strided input (min(0) of x[::2]): the contiguous kernel on a copy
  // made by the blocked copy; the element loop took 2.4-2.7x PyTorch's time.
  if (!in.is_contiguous() && in.dim() >= 2 && in.numel() >= 4096 &&
      call.ints_attr(0).size() == 1) {
    const Tensor src = contiguous_copy_by_blocks(in);
    if (src.defined()) {
      OpCall c = call;
      c.inputs[0] = src;
      KILN_DISPATCH_ALL(in.dtype(), call.op->name.c_str(), [&]<typename T>() {
        done = arg_one_dim<kMax, kValues, T>(c);
      });
      if (done) return;
    }
  }
  std::vector<const Tensor*> outs;
  for (const auto& o : call.outs) outs.push_back(&o);
  ReduceGeometry g = reduce_geometry(in, call.ints_attr(0), call.bool_attr(1), outs);
  const Strides& idx_strides = g.outer_out[kValues ? 1 : 0];
  const Strides& val_strides = g.outer_out[0];
  KILN_DISPATCH_ALL(in.dtype(), call.op->name.c_str(), [&]<typename T>() {
    using C = opmath_t<T>;
    const T* src = static_cast<const T*>(in.raw_data());
    int64_t* idx_dst = static_cast<int64_t*>(call.outs[kValues ? 1 : 0].raw_data());
    T* val_dst = static_cast<T*>(call.outs[0].raw_data());
    for_each_offsets<3>(g.outer_shape, {&g.outer_in, &idx_strides, &val_strides},
                        [&](const std::array<int64_t, 3>& o) {
      const T* base = src + o[0];
      C best{};
      int64_t best_i = 0, i = 0;
      bool best_nan = false;
      g.red.for_each([&](int64_t off) {
        C x = C(base[off]);
        if (!best_nan) {
          bool take = i == 0;
          if constexpr (std::is_floating_point_v<C>) {
            if (std::isnan(x)) {
              take = true;
              best_nan = true;
            }
          }
          if (!take) take = kMax ? x > best : x < best;
          if (take) {
            best = x;
            best_i = i;
          }
        }
        ++i;
      });
      idx_dst[o[1]] = best_i;
      if constexpr (kValues) val_dst[o[2]] = T(best);
    });
  });
}

// Lines shorter than this keep the element loop: eight calls of the vector conversions per
// four lines cost more than the conversions themselves. cumsum(-1) of bfloat16, two threads
// (Zen 4, a loaded host): [4096, 8] 39 us with the vector conversions, 27-36 without
// (PyTorch 37); [2048, 16] 17 against 25-35.
constexpr int64_t kVectorScanMinLine = 16;

// kLines bfloat16 lines of length L (at x and y, L apart) scanned side by side as in
// scan_kernel, a chunk of columns at a time: the chunk widened to float32 with the ISA's
// vector loop, each running value still a double chain rounded to float32 and then to
// bfloat16 (the same two roundings as convert_value), and narrowed back with the vector
// loop. The element-wise bfloat16 conversions in the chain loop made cumsum(-1) of
// [2048, 512] bfloat16 3.2x the float32 time (952 against 295 us; PyTorch 598).
template <bool kProd, int64_t kLines>
void scan_bf16_lines(const VecMathF32& vm, const uint16_t* x, uint16_t* y, int64_t L) {
  constexpr int64_t kChunk = 256;
  alignas(64) float in[kLines][kChunk], out[kLines][kChunk];
  double a[kLines];
  std::fill(a, a + kLines, kProd ? 1.0 : 0.0);
  for (int64_t j0 = 0; j0 < L; j0 += kChunk) {
    const int64_t w = std::min(kChunk, L - j0);
    for (int64_t r = 0; r < kLines; ++r) vm.widen_bf16(x + r * L + j0, in[r], w);
    for (int64_t j = 0; j < w; ++j) {
      for (int64_t r = 0; r < kLines; ++r) {  // unrolled by the compiler (kLines chains)
        a[r] = kProd ? a[r] * double(in[r][j]) : a[r] + double(in[r][j]);
        out[r][j] = float(a[r]);
      }
    }
    for (int64_t r = 0; r < kLines; ++r) vm.narrow_bf16(out[r], y + r * L + j0, w);
  }
}

// cumsum / cumprod along attrs[0]; floats accumulate in double, integers wrap in int64.
// Contiguous input and output ([outer, L, inner]) are scanned in units spread over the
// threads: whole lines when the dim is the last, else blocks of up to 256 adjacent columns
// whose running values advance together one line at a time (contiguous loads instead of a
// strided walk per column: cumsum(dim=0) of [2048, 2048] float32 took 27 ms, now 3.4;
// PyTorch 2.13 21 ms).
template <bool kProd>
void scan_kernel(OpCall& call);

// A strided input or output (a transposed, sliced or row-stepped tensor): scanned through
// contiguous buffers filled and emptied by the blocked copy (permuted_copy.h), so the scan
// takes the threaded contiguous units below instead of the element loop on one thread:
// cumsum(-1) of x.t() for a [2048, 512] float32 x took 7.6 ms (PyTorch 3.1).
template <bool kProd>
bool scan_staged(const OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  if ((in.is_contiguous() && out.is_contiguous()) || in.dim() == 0 || in.numel() < 4096 ||
      in.dtype() != out.dtype() || in.shape() != out.shape())
    return false;
  return run_on_contiguous(in, out, [&](const Tensor& src, const Tensor& dst) {
    OpCall c = call;
    c.inputs[0] = src;
    c.outs[0] = dst;
    scan_kernel<kProd>(c);
    return true;
  });
}

template <bool kProd>
void scan_kernel(OpCall& call) {
  if (scan_staged<kProd>(call)) return;
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  LineGeometry g = line_geometry(in, out, call.int_attr(0));
  KILN_DISPATCH_ALL(in.dtype(), kProd ? "cumprod" : "cumsum", [&]<typename T>() {
    const T* src = static_cast<const T*>(in.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    using Acc = std::conditional_t<is_float_v<T>, double, int64_t>;
    if (in.dim() > 0 && in.numel() > 0 && in.is_contiguous() && out.is_contiguous()) {
      const int64_t d = wrap_dim(call.int_attr(0), in.dim()), L = in.size(d);
      int64_t inner = 1;
      for (int64_t k = d + 1; k < in.dim(); ++k) inner *= in.size(k);
      const int64_t outer = in.numel() / (L * inner);
      constexpr int64_t kBlock = 256;
      auto step = [](Acc a, T x) {
        Acc v;
        if constexpr (is_float_v<T>) v = as_double(x);
        else v = Acc(x);
        return kProd ? wrap_mul(a, v) : wrap_add(a, v);
      };
      if (inner == 1) {
        // Lines along the last dim: each running value is one chain of dependent additions
        // (about 1 ns per element: cumsum(1) of [2048, 2048] float32 took 2.0-3.4 ms), so
        // kLines lines advance side by side, each still added in its own order. Single lines
        // per unit when there are too few lines to share between the threads that way, and
        // for integers, whose one-cycle additions were slower side by side (int64 cumsum(1):
        // 1.5-1.8 -> 2.3-2.6 ms).
        constexpr int64_t kLines = 4;
        const int64_t per = is_float_v<T> && outer >= 8 * kLines ? kLines : 1;
        const int64_t units = (outer + per - 1) / per;
        auto lines = [&](int64_t u) {
          const int64_t l0 = u * per, m = std::min(per, outer - l0);
          const T* x = src + l0 * L;
          T* y = dst + l0 * L;
          if constexpr (std::is_same_v<T, BFloat16>) {
            const VecMathF32& vm = vec_math_f32();
            if (m == kLines && L >= kVectorScanMinLine && vm.widen_bf16 && vm.narrow_bf16)
              return scan_bf16_lines<kProd, kLines>(vm, reinterpret_cast<const uint16_t*>(x),
                                                    reinterpret_cast<uint16_t*>(y), L);
          }
          if (m == kLines) {
            Acc a[kLines];
            std::fill(a, a + kLines, kProd ? Acc(1) : Acc(0));
            for (int64_t j = 0; j < L; ++j) {
              for (int64_t r = 0; r < kLines; ++r) {  // unrolled by the compiler (4 chains)
                a[r] = step(a[r], x[r * L + j]);
                y[r * L + j] = convert_value<T>(a[r]);
              }
            }
            return;
          }
          for (int64_t r = 0; r < m; ++r) {
            Acc a = kProd ? Acc(1) : Acc(0);
            for (int64_t j = 0; j < L; ++j) {
              a = step(a, x[r * L + j]);
              y[r * L + j] = convert_value<T>(a);
            }
          }
        };
        if (units > 1 && in.numel() >= (int64_t(1) << 15)) detail::parallel_chunks(units, lines);
        else for (int64_t u = 0; u < units; ++u) lines(u);
        return;
      }
      const int64_t blocks = (inner + kBlock - 1) / kBlock, units = outer * blocks;
      auto unit = [&](int64_t u) {
        const int64_t o = u / blocks, c0 = u % blocks * kBlock;
        const int64_t w = std::min(kBlock, inner - c0), base = o * L * inner + c0;
        Acc acc[kBlock];
        std::fill(acc, acc + w, kProd ? Acc(1) : Acc(0));
        for (int64_t j = 0; j < L; ++j) {
          const T* x = src + base + j * inner;
          T* y = dst + base + j * inner;
          for (int64_t i = 0; i < w; ++i) {
            Acc v;
            if constexpr (is_float_v<T>) v = as_double(x[i]);
            else v = Acc(x[i]);
            acc[i] = kProd ? wrap_mul(acc[i], v) : wrap_add(acc[i], v);
            y[i] = convert_value<T>(acc[i]);
          }
        }
      };
      if (units > 1 && in.numel() >= (int64_t(1) << 15)) detail::parallel_chunks(units, unit);
      else for (int64_t u = 0; u < units; ++u) unit(u);
      return;
    }
    for_each_offset2(g.outer_shape, g.outer_in, g.outer_out, [&](int64_t io, int64_t oo) {
      Acc acc = kProd ? Acc(1) : Acc(0);
      for (int64_t j = 0; j < g.len; ++j) {
        Acc v;
        if constexpr (is_float_v<T>) v = as_double(src[io + j * g.in_step]);
        else v = Acc(src[io + j * g.in_step]);
        acc = kProd ? wrap_mul(acc, v) : wrap_add(acc, v);
        dst[oo + j * g.out_step] = convert_value<T>(acc);
      }
    });
  });
}

}  // namespace

void register_softmax_kernels();           // softmax_kernels.cpp
void register_softmax_backward_kernels();  // softmax_backward_kernels.cpp

void register_reduction_kernels() {
  register_softmax_kernels();
  register_softmax_backward_kernels();
  auto reg = [](const char* name, KernelFn fn, DTypeMask mask) {
    register_kernel(name, DeviceType::CPU, fn, mask);
  };
  reg("sum", sum_kernel, kAllDTypes);
  reg("mean", mean_kernel, kFloatDTypes);
  reg("prod", prod_kernel, kAllDTypes);
  reg("amax", extremum_kernel<true>, kAllDTypes);
  reg("amin", extremum_kernel<false>, kAllDTypes);
  reg("all", all_any_kernel<true>, kAllDTypes);
  reg("any", all_any_kernel<false>, kAllDTypes);
  reg("var", var_kernel<false>, kFloatDTypes);
  reg("std", var_kernel<true>, kFloatDTypes);
  reg("norm", norm_kernel, kFloatDTypes);
  reg("logsumexp", logsumexp_kernel, kFloatDTypes);
  reg("max.dim", arg_kernel<true, true>, kAllDTypes);
  reg("min.dim", arg_kernel<false, true>, kAllDTypes);
  reg("argmax", arg_kernel<true, false>, kAllDTypes);
  reg("argmin", arg_kernel<false, false>, kAllDTypes);
  reg("cumsum", scan_kernel<false>, kAllDTypes);
  reg("cumprod", scan_kernel<true>, kAllDTypes);
}

}  // namespace kiln::cpu
