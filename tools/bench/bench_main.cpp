// `kiln bench`: the C++ half of kiln's benchmark suite (benchmarks/run.py drives the whole
// suite, adds the PyTorch peer and the models, and writes benchmarks/RESULTS.md).
//
//   kiln bench [--quick] [--full] [--threads N] [--budget S] [--sections a,b]
//              [--gemm-sizes 256,512] [--elt-sizes 1M,16M] [--json FILE]
//
// Sections: peak (fp32 FMA / AMX tile peaks, DRAM read), gemm (kiln vs oneDNN vs peak),
// elementwise (GB/s vs a copy), dispatch (ns per small op).
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/kiln.h"
#include "tools/bench/bench.h"
#include "tools/commands.h"

namespace kiln::tools::bench {

bool Options::want(const std::string& section) const {
  return sections.empty() || std::find(sections.begin(), sections.end(), section) != sections.end();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

long long proc_stat_busy() {  // busy jiffies of the whole machine
  std::ifstream f("/proc/stat");
  std::string cpu;
  long long v[8] = {};
  f >> cpu;
  for (auto& x : v) f >> x;
  return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // user nice system irq softirq steal
}

double own_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int64_t parse_count(const std::string& s) {  // 4096, 1M, 16M, 1G
  double mult = 1;
  std::string num = s;
  char last = s.empty() ? 0 : s.back();
  if (last == 'K' || last == 'k') mult = 1 << 10;
  if (last == 'M' || last == 'm') mult = 1 << 20;
  if (last == 'G' || last == 'g') mult = 1 << 30;
  if (mult != 1) num = s.substr(0, s.size() - 1);
  return int64_t(std::stod(num) * mult);
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

int usage() {
  std::cerr << "usage: kiln bench [--quick] [--full] [--threads N] [--budget SECONDS]\n"
               "                  [--sections peak,gemm,elementwise,dispatch]\n"
               "                  [--gemm-sizes 256,512,...] [--elt-sizes 1M,16M,...] [--json FILE]\n"
               "The whole suite with PyTorch and the models: python benchmarks/run.py\n";
  return 2;
}

}  // namespace

ForeignLoad::ForeignLoad() : wall0_(now_s()), own0_(own_cpu_s()), busy0_(proc_stat_busy()) {}

double ForeignLoad::cores() const {
  double wall = std::max(now_s() - wall0_, 1e-9);
  double busy = double(proc_stat_busy() - busy0_) / double(sysconf(_SC_CLK_TCK));
  return std::max(0.0, (busy - (own_cpu_s() - own0_)) / wall);
}

Stats stats_of(std::vector<double> s) {
  Stats st;
  if (s.empty()) return st;
  std::sort(s.begin(), s.end());
  st.n = int(s.size());
  st.min = s.front();
  st.max = s.back();
  st.median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  return st;
}

std::vector<Stats> time_interleaved(const std::vector<std::function<void()>>& fns,
                                    const Options& opt, int warmup, double* foreign) {
  std::vector<std::vector<double>> samples(fns.size());
  double slowest = 0;
  for (int w = 0; w < warmup && slowest < 1.0; ++w)  // a slow case: one warm-up call is enough
    for (const auto& f : fns) {
      double t0 = now_s();
      f();
      slowest = std::max(slowest, now_s() - t0);
    }
  int min_iters = opt.min_iters, max_iters = opt.max_iters;
  if (slowest * double(fns.size()) * min_iters > 4 * opt.budget_s + 2.0)
    min_iters = max_iters = std::min(3, max_iters);
  ForeignLoad load;
  double start = now_s();
  for (int r = 0; r < max_iters; ++r) {
    // Each round starts one function later: a function that always ran right after another
    // inherited its state (caches, idle threads), which skewed the comparison by position.
    // kiln bf16 256^3 measured 4-15% below the same kernels run second (the "own" column).
    for (size_t n = 0; n < fns.size(); ++n) {
      const size_t i = (n + size_t(r)) % fns.size();
      double t0 = now_s();
      fns[i]();
      samples[i].push_back(now_s() - t0);
    }
    if (r + 1 >= min_iters && now_s() - start > opt.budget_s * double(fns.size())) break;
  }
  if (foreign) *foreign = load.cores();
  std::vector<Stats> out;
  for (auto& s : samples) out.push_back(stats_of(s));
  return out;
}

void Report::note(const std::string& section, const std::string& name, const std::string& system,
                  const std::string& text) {
  Record r;
  r.section = section;
  r.name = name;
  r.system = system;
  r.metric = "note";
  r.note = text;
  records_.push_back(r);
}

void Report::write_json(const std::string& path, const Options& opt) const {
  std::ofstream f(path);
  const auto& feat = cpu::cpu_features();
  f << "{\n \"tool\": \"kiln bench\",\n \"threads\": " << opt.threads
    << ",\n \"cpu\": \"" << json_escape(feat.model_name) << "\",\n \"isa_level\": \""
    << cpu::isa_level_name(cpu::isa_level()) << "\",\n \"kiln_version\": \"" << version()
    << "\",\n \"build_type\": \"" << build_type() << "\",\n \"records\": [\n";
  for (size_t i = 0; i < records_.size(); ++i) {
    const Record& r = records_[i];
    f << "  {\"section\": \"" << json_escape(r.section) << "\", \"name\": \"" << json_escape(r.name)
      << "\", \"system\": \"" << json_escape(r.system) << "\", \"metric\": \"" << r.metric
      << "\", \"unit\": \"" << r.unit << "\", \"value\": " << std::setprecision(6)
      << (std::isfinite(r.value) ? r.value : 0.0) << ", \"higher_is_better\": "
      << (r.higher_is_better ? "true" : "false") << ", \"n\": " << r.n
      << ", \"foreign_cores\": " << std::setprecision(3) << r.foreign_cores << ", \"note\": \""
      << json_escape(r.note) << "\"}" << (i + 1 < records_.size() ? "," : "") << "\n";
  }
  f << " ]\n}\n";
}

Ceilings& ceilings() {
  static Ceilings c;
  return c;
}

std::string fmt(double v, int prec) {
  if (!std::isfinite(v) || v == 0) return "-";
  std::ostringstream s;
  s << std::setprecision(prec) << v;
  return s.str();
}

std::string ratio(double num, double den) {
  if (!(num > 0) || !(den > 0)) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << num / den << "x";
  return s.str();
}

}  // namespace kiln::tools::bench

namespace kiln::tools {

int run_bench(int argc, char** argv) {
  using namespace bench;
  Options opt;
  std::string gemm_sizes, elt_sizes;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--quick") opt.quick = true;
    else if (a == "--full") opt.full = true;
    else if (a == "--threads") opt.threads = std::stoi(value());
    else if (a == "--budget") opt.budget_s = std::stod(value());
    else if (a == "--sections") opt.sections = split(value());
    else if (a == "--gemm-sizes") gemm_sizes = value();
    else if (a == "--elt-sizes") elt_sizes = value();
    else if (a == "--json") opt.json_path = value();
    else if (a == "--help" || a == "-h") return usage();
    else {
      std::cerr << "kiln bench: unknown option " << a << "\n";
      return usage();
    }
  }
  if (opt.quick) {
    opt.budget_s = std::min(opt.budget_s, 0.02);
    opt.min_iters = 2;
    opt.max_iters = 5;
  }
  if (!gemm_sizes.empty()) {
    for (auto& s : split(gemm_sizes)) opt.gemm_sizes.push_back(parse_count(s));
  } else if (opt.quick) {
    opt.gemm_sizes = {128};
  } else {
    opt.gemm_sizes = {256, 512, 1024, 2048};
    if (opt.full) opt.gemm_sizes.push_back(4096);
  }
  if (!elt_sizes.empty()) {
    for (auto& s : split(elt_sizes)) opt.elt_sizes.push_back(parse_count(s));
  } else if (opt.quick) {
    opt.elt_sizes = {1 << 16};
  } else {
    opt.elt_sizes = {1 << 20, 16 << 20, 64 << 20};
  }
  omp_set_num_threads(opt.threads);
  std::cout << std::unitbuf;  // rows appear as they are measured, also through a pipe

  const auto& feat = cpu::cpu_features();
  std::cout << "kiln bench: kiln " << version() << " (" << build_type() << "), cpu "
            << feat.model_name << ", isa level " << cpu::isa_level_name(cpu::isa_level())
            << ", threads " << opt.threads << (opt.quick ? ", quick run" : "") << "\n";
  Report rep;
  double t0 = now_s();
  if (opt.want("peak")) bench_peak(opt, rep);
  if (opt.want("gemm")) bench_gemm(opt, rep);
  if (opt.want("elementwise")) bench_elementwise(opt, rep);
  if (opt.want("dispatch")) bench_dispatch(opt, rep);
  // Only when asked for: the device backend is not part of the CPU suite.
  if (!opt.sections.empty() && opt.want("xpu")) bench_xpu(opt, rep);
  std::cout << "kiln bench: done in " << std::fixed << std::setprecision(1) << now_s() - t0
            << " s\n";
  if (!opt.json_path.empty()) {
    rep.write_json(opt.json_path, opt);
    std::cout << "wrote " << opt.json_path << "\n";
  }
  return 0;
}

}  // namespace kiln::tools
