// Memory-bound ops in GB/s against a copy at memory bandwidth, and the per-op dispatch cost.
//
// elementwise: every op is timed interleaved with a parallel copy of the same size (opt.threads
// threads, destination preallocated; memcpy below 16 MiB, non-temporal stores above, see
// parallel_memcpy), so each ratio compares the op with the copy under the same clock and load. Bytes counted: inputs read + output written once (no write-allocate); a copy
// moves 2 x 4 bytes per element. Forms: out= (add, mul, exp: output preallocated), in place
// (relu_), allocating (gelu, softmax, layer_norm: a new output per call, as users call them),
// full reductions to a scalar (sum, mean, max). softmax and layer_norm run over rows of 1024.
// The same forms are timed for PyTorch by benchmarks/run.py.
//
// dispatch: kiln::add on 1-element float32 tensors, ns per call (best of 7 runs of N calls).
#include <omp.h>

#include <cstring>
#include <iomanip>
#include <iostream>

#include "kiln/kiln.h"
#include "kiln/nn/functional.h"
#include "kiln/tensor/streaming_store.h"
#include "tools/bench/bench.h"

namespace kiln::tools::bench {
namespace {

// The copy every op is compared with: each thread copies its share, with memcpy for sizes
// that fit the cache and with non-temporal stores (kiln::detail::stream_copy, 4 KiB at a
// time) from kStreamingStoreBytes, which is how memory bandwidth is reached there (glibc's
// memcpy switches to non-temporal stores only above a threshold derived from the reported
// cache size, which in this VM is the host's). The reference is thus the faster copy, not
// whichever one glibc picks.
void parallel_memcpy(float* dst, const float* src, int64_t n) {
  const bool stream = n * int64_t(sizeof(float)) >= detail::kStreamingStoreBytes;
#pragma omp parallel
  {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t chunk = (n / nt + 1023) & ~int64_t(1023);  // whole 4 KiB blocks
    int64_t b = std::min(n, chunk * id), e = std::min(n, b + chunk);
    if (e > b && !stream) std::memcpy(dst + b, src + b, size_t(e - b) * sizeof(float));
    if (e > b && stream) {
      int64_t i = b;
      for (; i + 1024 <= e; i += 1024) detail::stream_copy(dst + i, src + i, 4096);
      if (i < e) std::memcpy(dst + i, src + i, size_t(e - i) * sizeof(float));
      detail::stream_fence();
    }
  }
}

std::string size_name(int64_t n) {
  if (n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

}  // namespace

void bench_elementwise(const Options& opt, Report& rep) {
  std::cout << "\n== elementwise, reductions, softmax, layer_norm: GB/s (float32) vs a parallel "
               "memcpy of the same size timed interleaved\n";
  std::cout << "  " << std::left << std::setw(12) << "op" << std::setw(8) << "size" << std::setw(12)
            << "form" << std::right << std::setw(10) << "kiln GB/s" << std::setw(10) << "memcpy"
            << std::setw(12) << "kiln/copy" << std::setw(8) << "load" << "\n";
  for (int64_t n : opt.elt_sizes) {
    const int64_t rows = std::max<int64_t>(1, n / 1024), cols = n / rows;
    Tensor x = randn({rows, cols}), y = randn({rows, cols}), out = empty({rows, cols});
    Tensor w = randn({cols}), b = randn({cols});
    Tensor ref_dst = empty({rows, cols});
    Tensor keep;
    const double eb = 4.0 * double(n);
    struct Op {
      const char* name;
      const char* form;
      double bytes;
      std::function<void()> fn;
    };
    std::vector<Op> ops = {
        {"copy_", "out=", 2 * eb, [&] { copy_(out, x); }},
        {"add", "out=", 3 * eb, [&] { add_out(x, y, out); }},
        {"mul", "out=", 3 * eb, [&] { mul_out(x, y, out); }},
        {"relu", "in-place", 2 * eb, [&] { relu_(out); }},
        {"exp", "out=", 2 * eb, [&] { exp_out(x, out); }},
        {"gelu", "alloc", 2 * eb, [&] { keep = Tensor(); keep = gelu(x); }},
        {"sum", "reduce", eb, [&] { keep = sum(x); }},
        {"mean", "reduce", eb, [&] { keep = mean(x); }},
        {"max", "reduce", eb, [&] { keep = max(x); }},
        {"softmax", "alloc", 2 * eb, [&] { keep = Tensor(); keep = softmax(x, -1); }},
        {"layer_norm", "alloc", 2 * eb,
         [&] { keep = Tensor(); keep = nn::functional::layer_norm(x, {cols}, w, b); }},
    };
    float* dst = ref_dst.data_ptr<float>();
    const float* src = x.data_ptr<float>();
    for (const Op& op : ops) {
      double foreign = 0;
      auto st = time_interleaved({[&] { parallel_memcpy(dst, src, n); }, op.fn}, opt, 2, &foreign);
      double copy_gbs = 2 * eb / st[0].median / 1e9, gbs = op.bytes / st[1].median / 1e9;
      std::cout << "  " << std::left << std::setw(12) << op.name << std::setw(8) << size_name(n)
                << std::setw(12) << op.form << std::right << std::setw(10) << fmt(gbs, 4)
                << std::setw(10) << fmt(copy_gbs, 4) << std::setw(12) << ratio(gbs, copy_gbs)
                << std::setw(8) << std::fixed << std::setprecision(2) << foreign
                << std::defaultfloat << "\n";
      Record r;
      r.section = "elementwise";
      r.name = std::string(op.name) + " " + size_name(n);
      r.metric = "gbs";
      r.unit = "GB/s";
      r.n = st[1].n;
      r.foreign_cores = foreign;
      r.note = op.form;
      r.system = "kiln";
      r.value = gbs;
      rep.add(r);
      r.system = "memcpy";
      r.value = copy_gbs;
      r.note = "";
      rep.add(r);
    }
  }
}

void bench_dispatch(const Options& opt, Report& rep) {
  std::cout << "\n== dispatch: one small op from C++ (1-element float32 tensors), ns per call, "
               "best of 7\n";
  const int64_t calls = opt.quick ? 2000 : 200000;
  Tensor a = ones({1}), b = ones({1}), out = empty({1});
  struct Case {
    const char* name;
    std::function<void()> fn;
  };
  Tensor keep;
  std::vector<Case> cases = {{"kiln::add(a, b)", [&] { keep = add(a, b); }},
                             {"kiln::add_out(a, b, out)", [&] { add_out(a, b, out); }}};
  for (const auto& c : cases) {
    for (int i = 0; i < 1000; ++i) c.fn();
    std::vector<double> runs;
    ForeignLoad load;
    for (int r = 0; r < 7; ++r) {
      double t0 = now_s();
      for (int64_t i = 0; i < calls; ++i) c.fn();
      runs.push_back((now_s() - t0) / double(calls) * 1e9);
    }
    double best = stats_of(runs).min;
    std::cout << "  " << std::left << std::setw(28) << c.name << std::right << std::setw(8)
              << fmt(best, 4) << " ns  (target <= 1000 ns)\n";
    Record r;
    r.section = "dispatch";
    r.name = std::string("cpp ") + c.name;
    r.system = "kiln";
    r.metric = "ns_per_op";
    r.unit = "ns";
    r.value = best;
    r.higher_is_better = false;
    r.n = 7;
    r.foreign_cores = load.cores();
    rep.add(r);
  }
}

}  // namespace kiln::tools::bench
