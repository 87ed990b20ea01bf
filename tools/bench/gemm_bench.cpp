// GEMM: kiln against oneDNN called directly (dnnl_sgemm, and the matmul primitive with
// weights prepacked once) and against the unit's peak measured by the `peak` section.
//  - square C = A @ B (kiln::mm, which packs a B used again unchanged once: decision 0031) at
//    opt.gemm_sizes, fp32 / bf16 / int8;
//  - with 16+ rows, kiln again with oneDNN switched off ("own": kiln's blocked kernels, against
//    the same oneDNN figures; they keep a packed copy of a reused B where the level has a
//    packed kernel — float32 from AVX2 up, bfloat16 / int8 on AMX — and pack B on every call
//    otherwise: decision 0043);
//  - LLM shapes y = x @ W^T (kiln::linear, W stored [N, K] as nn.Linear keeps it), M = 1, 8
//    and 128, (N, K) in {(4096, 4096), (11008, 4096), (4096, 11008)}. Below 16 rows (decoding
//    one or several sequences) the weights stream from DRAM: every system rotates among copies
//    totalling >= 1 GiB (more than the L3), and the figure of merit is weight bytes per
//    second against the measured DRAM read.
// Peaks: fp32 FMA; bf16 AMX tiles where present, else AVX-512 vdpbf16ps; int8 likewise.
// bf16 runs with bf16 inputs and outputs (fp32 accumulation), int8 as u8 x s8 -> s32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "kiln/backends/cpu/onednn.h"
#include "kiln/kiln.h"
#include "tools/bench/bench.h"
#include "tools/bench/onednn.h"

namespace kiln::tools::bench {
namespace {

struct Shape3 {
  int64_t M, N, K;
  bool linear;  // y = x @ W^T with W [N, K]; else C = A @ B with B [K, N]
};

std::string shape_name(const Shape3& s) {
  std::ostringstream o;
  if (s.linear) o << "linear M=" << s.M << " N=" << s.N << " K=" << s.K;
  else if (s.M == s.N && s.N == s.K) o << s.M << "^3";
  else o << s.M << "x" << s.N << "x" << s.K;
  return o.str();
}

// Number of weight copies so that a rotation reads >= 1 GiB (M = 1 only).
// Rows below which a product streams its weight (the weight-bytes-per-second rows).
constexpr int64_t kStreamingRows = 16;

int copies_for(const Shape3& s, size_t elem_bytes, bool quick) {
  if (s.M >= kStreamingRows) return 1;
  double wbytes = double(s.N) * double(s.K) * double(elem_bytes);
  double total = quick ? 8e6 : double(int64_t(1) << 30);
  return std::max(1, int(std::ceil(total / wbytes)));
}

struct Row {
  std::string dtype, shape;
  double kiln = 0, sgemm = 0, mm = 0;  // GFLOP/s (GOP/s for int8)
  double own = 0;  // kiln with oneDNN switched off: its own blocked kernels (16+ rows)
  double read = 0;  // M < 16: a plain read of the same weight copies, in rate units
  std::string kiln_note, onednn_impl;
  double foreign = 0;
};

void print_header() {
  std::cout << "  " << std::left << std::setw(6) << "dtype" << std::setw(30) << "shape"
            << std::right << std::setw(9) << "kiln" << std::setw(9) << "sgemm" << std::setw(9)
            << "dnnl-mm" << std::setw(11) << "kiln/dnnl" << std::setw(11) << "kiln/peak"
            << std::setw(11) << "dnnl/peak" << std::setw(9) << "kiln" << std::setw(9) << "dnnl"
            << std::setw(10) << "kiln/DRAM" << std::setw(9) << "read" << std::setw(10)
            << "kiln/read" << std::setw(8) << "load" << std::setw(9) << "own"
            << std::setw(10) << "own/dnnl"
            << "\n  " << std::setw(36) << "" << std::setw(27) << "(GFLOP/s or GOP/s)"
            << std::setw(61) << "(M<16: weight GB/s; read: the same weights read, interleaved)"
            << "\n";
}

void emit(const Options& opt, Report& rep, const Row& r, const Shape3& s, double peak,
          size_t wbytes_per_elem) {
  double best = std::max(r.sgemm, r.mm);
  double wb = double(s.N) * double(s.K) * double(wbytes_per_elem);
  double flop = 2.0 * double(s.M) * double(s.N) * double(s.K);
  auto gbs = [&](double gflops) { return gflops > 0 ? gflops / flop * wb : 0.0; };
  std::cout << "  " << std::left << std::setw(6) << r.dtype << std::setw(30) << r.shape
            << std::right << std::setw(9) << (r.kiln > 0 ? fmt(r.kiln, 4) : "n/i") << std::setw(9)
            << fmt(r.sgemm, 4) << std::setw(9) << fmt(r.mm, 4) << std::setw(11)
            << ratio(r.kiln, best) << std::setw(11) << ratio(r.kiln, peak) << std::setw(11)
            << ratio(best, peak);
  if (s.M < kStreamingRows)
    std::cout << std::setw(9) << fmt(gbs(r.kiln), 3) << std::setw(9) << fmt(gbs(best), 3)
              << std::setw(10) << ratio(gbs(r.kiln), ceilings().dram_read_gbs) << std::setw(9)
              << fmt(gbs(r.read), 3) << std::setw(10) << ratio(gbs(r.kiln), gbs(r.read));
  else
    std::cout << std::setw(47) << "";
  std::cout << std::setw(8) << std::fixed << std::setprecision(2) << r.foreign
            << std::defaultfloat;
  if (r.own > 0) std::cout << std::setw(9) << fmt(r.own, 4) << std::setw(10) << ratio(r.own, best);
  if (!r.kiln_note.empty()) std::cout << "  kiln: " << r.kiln_note;
  std::cout << "\n";
  const std::string unit = r.dtype == "int8" ? "GOP/s" : "GFLOP/s";
  auto add = [&](const std::string& system, double v, const std::string& note) {
    Record rec;
    rec.section = "gemm";
    rec.name = r.dtype + " " + r.shape;
    rec.system = system;
    rec.metric = "rate";
    rec.unit = unit;
    rec.value = v;
    rec.foreign_cores = r.foreign;
    rec.note = note;
    if (v > 0) {
      rep.add(rec);
      if (s.M < kStreamingRows) {
        rec.metric = "weight_gbs";
        rec.unit = "GB/s";
        rec.value = gbs(v);
        rep.add(rec);
      }
    } else if (!note.empty()) {
      rep.note("gemm", rec.name, system, note);
    }
  };
  add("kiln", r.kiln, r.kiln_note);
  if (r.own > 0) add("kiln_own", r.own, "oneDNN switched off (kiln::cpu::set_onednn_enabled)");
  add("onednn_sgemm", r.sgemm, "");
  add("onednn_matmul", r.mm, r.onednn_impl);
  if (s.M < kStreamingRows && r.read > 0) {
    Record rec;
    rec.section = "gemm";
    rec.name = r.dtype + " " + r.shape;
    rec.system = "weight_read";
    rec.metric = "weight_gbs";
    rec.unit = "GB/s";
    rec.value = gbs(r.read);
    rec.foreign_cores = r.foreign;
    rec.note = "a plain read of the same weight copies, timed interleaved with the products";
    rep.add(rec);
  }
  (void)opt;
}

// kiln's bf16 GEMM speed at n^3, to skip cases its path would take minutes for: the best of
// two calls after two untimed ones. The first call makes oneDNN's plan (its JIT), the second
// packs the B it sees again (decision 0031); timing the second alone once read 29.8 GFLOP/s
// at 512^3 (the product itself ran at 1850) and skipped bf16 4096^3 as "4.6 s per call".
double probe_rate(DType dt, int64_t n) {
  Tensor a = to_dtype(randn({n, n}), dt), b = to_dtype(randn({n, n}), dt);
  mm(a, b);
  mm(a, b);
  double best = 1e30;
  for (int i = 0; i < 2; ++i) {
    const double t0 = now_s();
    mm(a, b);
    best = std::min(best, now_s() - t0);
  }
  return 2.0 * double(n * n * n) / best / 1e9;
}

// Bytes uniform in [lo, hi] (a power-of-two span), eight from each 64-bit splitmix64 draw:
// std::uniform_int_distribution over mt19937, one draw per byte, took a third of the gemm
// section's time making the int8 weights.
std::vector<uint8_t> random_bytes(size_t n, int lo, int hi, unsigned seed) {
  const uint64_t span = uint64_t(hi - lo + 1);
  KILN_CHECK(span <= 256 && (span & (span - 1)) == 0, Error, "random_bytes: span ", span,
             " is not a power of two up to 256");
  uint64_t state = seed;
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (size_t b = 0; b < 8 && i + b < n; ++b)
      v[i + b] = uint8_t(lo + int((z >> (8 * b)) & (span - 1)));
  }
  return v;
}

void run_case(const Options& opt, Report& rep, const Shape3& s, const std::string& dtype,
              double kiln_probe_gflops) {
  const bool dnnl = onednn_available();
  const double flop = 2.0 * double(s.M) * double(s.N) * double(s.K);
  Row row;
  row.dtype = dtype;
  row.shape = shape_name(s);
  std::vector<std::function<void()>> fns;
  std::vector<double*> slots;
  const int64_t wrows = s.linear ? s.N : s.K, wcols = s.linear ? s.K : s.N;
  double peak = ceilings().fma_gflops;

  // Objects that must outlive the timing.
  std::vector<Tensor> kw;  // kiln weights (rotation)
  Tensor kx, kout;
  std::vector<std::unique_ptr<OnednnMatmul>> mms;
  std::vector<std::vector<uint8_t>> int8_w;
  std::vector<float> cf;
  std::vector<uint8_t> cbuf, xbuf;
  int rot = 0, rot_s = 0, rot_m = 0, rot_o = 0, rot_r = 0;
  // kiln's own kernels timed separately where oneDNN would otherwise take the product
  // (decision 0017: 16+ rows); fewer rows run kiln's kernels either way.
  const bool own_kernels_differ = cpu::onednn_enabled() && s.M >= 16;

  if (dtype == "fp32" || dtype == "bf16") {
    const DType dt = dtype == "fp32" ? DType::F32 : DType::BF16;
    const size_t es = element_size(dt);
    int R = copies_for(s, es, opt.quick);
    for (int i = 0; i < R; ++i) kw.push_back(to_dtype(randn({wrows, wcols}), dt));
    kx = to_dtype(randn({s.M, s.K}), dt);
    if (dtype == "bf16") peak = ceilings().bf16_peak();
    // kiln
    bool skip = false;
    if (dt != DType::F32 && kiln_probe_gflops > 0) {
      double predicted = flop / (kiln_probe_gflops * 1e9);
      if (predicted > (opt.quick ? 0.2 : 1.0)) {
        std::ostringstream o;
        o << "not measured: kiln's bf16 matmul is the scalar reference loop ("
          << fmt(kiln_probe_gflops, 3) << " GFLOP/s at 512^3), about " << fmt(predicted, 2)
          << " s per call here";
        row.kiln_note = o.str();
        skip = true;
      }
    }
    if (!skip) {
      // A Linear layer packs its weight whole from its second unchanged use (oneDNN's layout
      // from 4 rows, decisions 0019 / 0045 / 0120), as the oneDNN matmul beside it is given
      // prepacked weights: each copy is used twice before timing, so the rotation measures the
      // steady state of a model's layers, not the packing of copies the warm-up did not reach.
      if (s.linear)
        for (int use = 0; use < 2; ++use)
          for (const Tensor& w : kw) kout = linear(kx, w);
      fns.push_back([&, R] {
        const Tensor& w = kw[size_t(rot++ % R)];
        kout = s.linear ? linear(kx, w) : mm(kx, w);
      });
      slots.push_back(&row.kiln);
      if (own_kernels_differ) {
        fns.push_back([&, R] {
          const Tensor& w = kw[size_t(rot_o++ % R)];
          cpu::set_onednn_enabled(false);
          kout = s.linear ? linear(kx, w) : mm(kx, w);
          cpu::set_onednn_enabled(true);
        });
        slots.push_back(&row.own);
      }
    }
    if (dnnl) {
      // A third of the rotation ahead of kiln's copy, the read below two thirds: the rounds of
      // time_interleaved start at a different function each time, so two functions that read
      // the same copy in one round would find it in the cache (the 480 MiB L3) for the second.
      const int off = R / 3;
      if (dt == DType::F32) {
        cf.resize(size_t(s.M * s.N));
        fns.push_back([&, R, off] {
          const Tensor& w = kw[size_t((rot_s++ + off) % R)];
          onednn_sgemm(s.M, s.N, s.K, kx.data_ptr<float>(), w.data_ptr<float>(), s.linear,
                       cf.data());
        });
        slots.push_back(&row.sgemm);
      }
      auto dtt = dt == DType::F32 ? DnnlType::F32 : DnnlType::BF16;
      try {
        for (int i = 0; i < R; ++i)
          mms.push_back(std::make_unique<OnednnMatmul>(s.M, s.N, s.K, dtt, dtt, dtt,
                                                       kw[size_t(i)].raw_data(), s.linear));
        row.onednn_impl = mms[0]->impl();
        cbuf.resize(size_t(s.M * s.N) * es);
        fns.push_back([&, R] { mms[size_t(rot_m++ % R)]->run(kx.raw_data(), cbuf.data()); });
        slots.push_back(&row.mm);
      } catch (const std::runtime_error& e) {  // e.g. bf16 below the ISA level oneDNN needs
        mms.clear();
        row.onednn_impl = std::string("unavailable: ") + e.what();
      }
    }
  } else {  // int8: u8 x s8 -> s32
    peak = ceilings().int8_peak();
    int R = copies_for(s, 1, opt.quick);
    for (int i = 0; i < R; ++i) int8_w.push_back(random_bytes(size_t(s.N * s.K), -64, 63, 7 + i));
    xbuf = random_bytes(size_t(s.M * s.K), 0, 127, 3);
    // kiln: int_mm (u8 x s8 -> s32, the VNNI kernel where the CPU has it) on the same bytes.
    kx = empty({s.M, s.K}, TensorOptions(DType::U8));
    std::memcpy(kx.raw_data(), xbuf.data(), xbuf.size());
    for (int i = 0; i < R; ++i) {
      Tensor w = empty({wrows, wcols}, TensorOptions(DType::I8));
      std::memcpy(w.raw_data(), int8_w[size_t(i)].data(), int8_w[size_t(i)].size());
      kw.push_back(w);
    }
    if (s.linear)  // as above: int_mm packs a W.t() seen again unchanged (decision 0031)
      for (int use = 0; use < 2; ++use)
        for (const Tensor& w : kw) kout = int_mm(kx, w.t());
    fns.push_back([&, R] {
      const Tensor& w = kw[size_t(rot++ % R)];
      kout = int_mm(kx, s.linear ? w.t() : w);
    });
    slots.push_back(&row.kiln);
    if (own_kernels_differ) {
      fns.push_back([&, R] {
        const Tensor& w = kw[size_t(rot_o++ % R)];
        cpu::set_onednn_enabled(false);
        kout = int_mm(kx, s.linear ? w.t() : w);
        cpu::set_onednn_enabled(true);
      });
      slots.push_back(&row.own);
    }
    if (dnnl) {
      for (int i = 0; i < R; ++i)
        mms.push_back(std::make_unique<OnednnMatmul>(s.M, s.N, s.K, DnnlType::U8, DnnlType::S8,
                                                     DnnlType::S32, int8_w[size_t(i)].data(),
                                                     s.linear));
      row.onednn_impl = mms[0]->impl();
      cbuf.resize(size_t(s.M * s.N) * 4);
      fns.push_back([&, R] { mms[size_t(rot_m++ % R)]->run(xbuf.data(), cbuf.data()); });
      slots.push_back(&row.mm);
    }
  }
  // Streaming rows: a plain read of the same weight copies, timed interleaved with the
  // products, is the ceiling they are judged against under the same sharing of the memory
  // (the peak section's DRAM probe ran minutes before; decision 0061).
  if (s.M < kStreamingRows && !fns.empty() && !kw.empty()) {
    // Two thirds of a rotation away from kiln's copy (sgemm reads the copy a third away): the
    // copies read in the same round are all different, whatever the order.
    fns.push_back([&] {
      const Tensor& w = kw[(size_t(rot_r++) + 2 * kw.size() / 3) % kw.size()];
      read_in_parallel(w.raw_data(), w.nbytes(), opt.threads);
    });
    slots.push_back(&row.read);
  }
  if (!fns.empty()) {
    auto st = time_interleaved(fns, opt, 2, &row.foreign);
    for (size_t i = 0; i < st.size(); ++i) *slots[i] = flop / st[i].median / 1e9;
  }
  // Agreement check (fp32 only): kiln against sgemm on the last copies they used.
  if (dtype == "fp32" && dnnl && row.kiln > 0 && !kw.empty()) {
    const Tensor& w = kw[0];
    Tensor k = s.linear ? linear(kx, w) : mm(kx, w);
    onednn_sgemm(s.M, s.N, s.K, kx.data_ptr<float>(), w.data_ptr<float>(), s.linear, cf.data());
    const float* kp = k.data_ptr<float>();
    double maxd = 0, maxv = 1e-30;
    for (size_t i = 0; i < cf.size(); ++i) {
      maxd = std::max(maxd, double(std::fabs(kp[i] - cf[i])));
      maxv = std::max(maxv, double(std::fabs(cf[i])));
    }
    if (maxd / maxv > 1e-3) row.kiln_note += " MISMATCH vs oneDNN: max rel diff " + fmt(maxd / maxv);
  }
  emit(opt, rep, row, s, peak, dtype == "fp32" ? 4 : dtype == "bf16" ? 2 : 1);
}

}  // namespace

void bench_gemm(const Options& opt, Report& rep) {
  std::cout << "\n== gemm: kiln vs oneDNN " << onednn_version()
            << " (sgemm; matmul primitive with prepacked weights) vs the unit's peak\n"
            << "   peaks: fp32 FMA " << fmt(ceilings().fma_gflops, 4) << " GFLOP/s, bf16 "
            << fmt(ceilings().bf16_peak(), 4)
            << (ceilings().amx_bf16_gflops > 0  ? " (AMX)"
                : ceilings().dpbf16_gflops > 0  ? " (AVX-512 BF16, no AMX)"
                                                : " (fp32 FMA: no bf16 unit)")
            << " GFLOP/s, int8 " << fmt(ceilings().int8_peak(), 4)
            << (ceilings().amx_int8_gops > 0    ? " (AMX)"
                : ceilings().vnni_int8_gops > 0 ? " (VNNI)"
                                                : " (AVX2 vpmaddwd: no VNNI)")
            << " GOP/s, DRAM read "
            << fmt(ceilings().dram_read_gbs, 3) << " GB/s ('-': peak section not run)\n";
  if (!onednn_available())
    rep.note("gemm", "onednn", "onednn", "oneDNN not built into kiln bench (libdnnl-dev missing)");
  std::vector<Shape3> shapes;
  for (int64_t n : opt.gemm_sizes) shapes.push_back({n, n, n, false});
  if (opt.quick) {
    shapes.push_back({1, 256, 256, true});
    shapes.push_back({16, 256, 256, true});
  } else {
    for (int64_t m : {1, 8, 128})
      for (auto nk : {std::pair<int64_t, int64_t>{4096, 4096}, {11008, 4096}, {4096, 11008}})
        shapes.push_back({m, nk.first, nk.second, true});
  }
  const double bf16_rate = probe_rate(DType::BF16, opt.quick ? 128 : 512);
  print_header();
  for (const char* dt : {"fp32", "bf16", "int8"})
    for (const auto& s : shapes) run_case(opt, rep, s, dt, bf16_rate);
}

}  // namespace kiln::tools::bench
