#pragma once
// `kiln bench`: shared pieces of the benchmark tool (options, timing, records, output).
// Every figure is a median over timed calls after warm-up; systems compared on one line are
// timed interleaved (A B A B ...) so that clock drift and foreign load hit both alike.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::tools::bench {

struct Options {
  bool quick = false;  // smoke run: tiny sizes, few iterations (CI)
  bool full = false;   // adds the 4096 GEMMs
  int threads = 2;
  double budget_s = 0.4;  // timed seconds per case and system (at least min_iters calls)
  int min_iters = 5, max_iters = 200;
  std::vector<std::string> sections;  // empty: all
  std::vector<int64_t> gemm_sizes;    // square GEMM sizes
  std::vector<int64_t> elt_sizes;     // elementwise sizes (elements)
  std::string json_path;
  bool want(const std::string& section) const;
};

// Seconds since an arbitrary epoch (steady clock).
double now_s();

// CPU time used by other processes while it is alive, in cores (0: machine to ourselves).
class ForeignLoad {
 public:
  ForeignLoad();
  double cores() const;  // foreign cores averaged since construction

 private:
  double wall0_, own0_;
  long long busy0_;
};

struct Stats {
  double median = 0, min = 0, max = 0;
  int n = 0;
};
Stats stats_of(std::vector<double> samples);

// Times each function (seconds per call), interleaved: warm-up, then rounds of one call of
// each, each round starting one function later than the last, until the budget is spent
// (min_iters..max_iters rounds). A case whose single call takes longer than slow_s gets
// min(3, ...) rounds.
std::vector<Stats> time_interleaved(const std::vector<std::function<void()>>& fns,
                                    const Options& opt, int warmup = 2, double* foreign = nullptr);

// Reads [data, data + bytes) once with `threads` threads in the widest vector loads (the DRAM
// probe's loop; data 64-byte aligned, bytes a multiple of 4): a read of the same bytes timed
// beside a kernel that streams them.
void read_in_parallel(const void* data, int64_t bytes, int threads);

// One measured figure. `value` is in `unit`; higher_is_better says which way is good.
struct Record {
  std::string section, name, system, metric, unit, note;
  double value = 0;
  bool higher_is_better = true;
  int n = 0;
  double foreign_cores = -1;
};

class Report {
 public:
  void add(Record r) { records_.push_back(std::move(r)); }
  void note(const std::string& section, const std::string& name, const std::string& system,
            const std::string& text);
  const std::vector<Record>& records() const { return records_; }
  void write_json(const std::string& path, const Options& opt) const;

 private:
  std::vector<Record> records_;
};

// Sections (one file each).
void bench_peak(const Options& opt, Report& rep);      // FMA / AMX peaks, DRAM read, copy
void bench_gemm(const Options& opt, Report& rep);      // kiln vs oneDNN vs peak
void bench_elementwise(const Options& opt, Report& rep);
void bench_xpu(const Options& opt, Report& rep);         // the OpenCL GPU backend (xpu_bench.cpp)
void bench_dispatch(const Options& opt, Report& rep);

// Measured ceilings other sections compare against (filled by bench_peak; 0 if not run).
struct Ceilings {
  double fma_gflops = 0;       // fp32 FMA, opt.threads threads
  double amx_bf16_gflops = 0;  // AMX tdpbf16ps
  double dpbf16_gflops = 0;    // AVX-512 vdpbf16ps
  double amx_int8_gops = 0;    // AMX tdpbusd
  double vnni_int8_gops = 0;   // AVX-512 vpdpbusd
  double madd_int8_gops = 0;   // AVX2 vpmaddwd + vpaddd (CPUs without VNNI)
  double dram_read_gbs = 0;    // 1 GiB read
  // The peak a bf16 / int8 GEMM is judged against: AMX where present, else AVX-512, else
  // what kiln's kernels fall back on (bf16 widened to fp32 FMA; int8 as int16 pairs).
  double bf16_peak() const {
    if (amx_bf16_gflops > 0) return amx_bf16_gflops;
    return dpbf16_gflops > 0 ? dpbf16_gflops : fma_gflops;
  }
  double int8_peak() const {
    if (amx_int8_gops > 0) return amx_int8_gops;
    return vnni_int8_gops > 0 ? vnni_int8_gops : madd_int8_gops;
  }
};
Ceilings& ceilings();

// Formatting helpers for the tables.
std::string fmt(double v, int prec = 3);
std::string ratio(double num, double den);  // "1.23x" or "-"

}  // namespace kiln::tools::bench
