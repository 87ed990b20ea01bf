// The ceilings of this machine, measured in the same run as the kernels they judge:
// register-only loops for the fp32 FMA (AVX-512 or AVX2), AVX-512 BF16/VNNI, AVX2 int16
// multiply-add and AMX tile units (no memory
// traffic; each unit only where the CPU has it), and a read of 1 GiB for DRAM bandwidth
// (larger than any L3 these VMs report, 480 MiB on the AMX hosts, so not served from cache). Each runs on opt.threads OpenMP threads;
// a unit's figure is the best of 5 repetitions: other tenants of a shared host only ever slow
// these loops (on the Zen 5 VM two-thread FMA runs measured 275-463 GFLOP/s), and a ceiling set
// by a slowed run let the GEMMs it judges reach 107% of "peak". DRAM read stays the median:
// memory bandwidth is shared with the other tenants, and the matrix-vector rates it judges are
// medians taken under the same sharing (its best of 5 ran at up to 1.7x the median).
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <memory>
#include <new>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/host_memory.h"
#include "tools/bench/bench.h"

namespace kiln::tools::bench {
namespace {

// kChains independent chains per loop, on zmm registers. 16, not 12: on Zen 5 a standalone
// copy of gemm_bf16_avx512bf16.cpp's 8 x 32 tile (16 accumulators, data in L1) ran 458-477
// GFLOP/s on one core where the 12-chain vdpbf16ps loop measured 434-444.
constexpr int kChains = 16;

// FMA: latency 4 x 2 ports needs >= 8 chains.
__attribute__((target("avx512f"), noinline)) float fma_loop(int64_t iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(1.0f + 1e-3f * float(i));
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}
constexpr double kFmaFlopPerIter = kChains * 16 * 2;

// The same on ymm registers for CPUs with AVX2 + FMA but no AVX-512 (Zen 3 and older, Intel
// client cores): 12 chains, as the register file has 16 and two hold the constants.
constexpr int kChainsAvx2 = 12;
__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(int64_t iters) {
  __m256 a[kChainsAvx2];
  for (int i = 0; i < kChainsAvx2; ++i) a[i] = _mm256_set1_ps(1.0f + 1e-3f * float(i));
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChainsAvx2; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < kChainsAvx2; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return lanes[0] + lanes[7];
}
constexpr double kFmaAvx2FlopPerIter = kChainsAvx2 * 8 * 2;

// int8 without VNNI: kiln's AVX2 kernel (gemm_s8_avx2.cpp) widens to int16 pairs and runs
// vpmaddwd (8 lanes x 2 products) then vpaddd into the accumulator, so its ceiling is that
// pair of instructions with nothing else in the loop. Inline asm so that the compiler can
// neither hoist the multiply (its operands are loop-invariant here) nor spill the chains.
__attribute__((target("avx2"), always_inline)) inline __m256i madd_accumulate(__m256i acc,
                                                                          __m256i b, __m256i c) {
  __m256i products;
  asm("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0"
      : "+x"(acc), "=&x"(products)
      : "x"(b), "x"(c));
  return acc;
}
__attribute__((target("avx2"), noinline)) int madd_loop_avx2(int64_t iters) {
  __m256i a[kChainsAvx2];
  for (int i = 0; i < kChainsAvx2; ++i) a[i] = _mm256_set1_epi32(i);
  const __m256i b = _mm256_set1_epi16(3), c = _mm256_set1_epi16(-2);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChainsAvx2; ++i) a[i] = madd_accumulate(a[i], b, c);
  }
  __m256i s = a[0];
  for (int i = 1; i < kChainsAvx2; ++i) s = _mm256_add_epi32(s, a[i]);
  return _mm256_extract_epi32(s, 0);
}
constexpr double kMaddOpPerIter = kChainsAvx2 * 8 * 2 * 2;

// vpdpbusd: 16 lanes x 4 u8*s8 products, 2 ops each. Inline asm with
// the accumulator in place: GCC 12 lowers the intrinsic with register copies of the
// accumulators (kiln/backends/cpu/isa/vnni_accumulate.h), which this loop would then time.
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline __m512i dpbusd_in_place(
    __m512i acc, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
}
__attribute__((target("avx512f,avx512vnni"), noinline)) int vnni_loop(int64_t iters) {
  __m512i a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_epi32(i);
  const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) a[i] = dpbusd_in_place(a[i], b, c);
  }
  __m512i s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, a[i]);
  return _mm512_reduce_add_epi32(s);
}
constexpr double kVnniOpPerIter = kChains * 16 * 4 * 2;

// vdpbf16ps: 16 lanes x 2 bf16 products, 2 FLOP each.
__attribute__((target("avx512f,avx512bf16"), noinline)) float dpbf16_loop(int64_t iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(float(i));
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3380);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_dpbf16_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}
constexpr double kDpbf16FlopPerIter = kChains * 16 * 2 * 2;

// AMX: 4 accumulator tiles (0-3) fed by 2 A tiles (4, 5) and 2 B tiles (6, 7), each 16 rows
// x 64 bytes. One tdpbf16ps is 16 x 16 x 32 multiply-adds; one tdpbusd 16 x 16 x 64.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool amx_permission() {
  static const bool ok = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

// GCC 12's _tile_loadconfig tells the compiler only 8 bytes are read (HARDWARE.md): load the
// whole struct with our own asm.
void load_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  asm volatile("ldtilecfg %0" ::"m"(cfg));
  alignas(64) static uint8_t zeros[16 * 64] = {};
  const uint8_t* p = zeros;
  int64_t stride = 64;
  asm volatile(
      "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t"
      "tileloadd (%0,%1,1), %%tmm4\n\ttileloadd (%0,%1,1), %%tmm5\n\t"
      "tileloadd (%0,%1,1), %%tmm6\n\ttileloadd (%0,%1,1), %%tmm7" ::"r"(p),
      "r"(stride)
      : "memory");
}

__attribute__((noinline)) void amx_bf16_loop(int64_t iters) {
  load_tiles();
  for (int64_t it = 0; it < iters; ++it)
    asm volatile(
        "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\ttdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
        "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\ttdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::);
  asm volatile("tilerelease" ::);
}
constexpr double kAmxBf16FlopPerIter = 4.0 * 16 * 16 * 32 * 2;

__attribute__((noinline)) void amx_int8_loop(int64_t iters) {
  load_tiles();
  for (int64_t it = 0; it < iters; ++it)
    asm volatile(
        "tdpbusd %%tmm6, %%tmm4, %%tmm0\n\ttdpbusd %%tmm7, %%tmm4, %%tmm1\n\t"
        "tdpbusd %%tmm6, %%tmm5, %%tmm2\n\ttdpbusd %%tmm7, %%tmm5, %%tmm3" ::);
  asm volatile("tilerelease" ::);
}
constexpr double kAmxInt8OpPerIter = 4.0 * 16 * 16 * 64 * 2;

volatile double g_sink = 0;

// Runs body(iters) on `threads` threads at once; returns the best over reps of
// (ops per call x threads / slowest thread's time) in units of 1e9 per second.
template <typename Body>
double peak_rate(int threads, int64_t iters, double ops_per_iter, int reps, Body body) {
  std::vector<double> rates;
  body(iters / 10);  // warm-up (clock ramp, AVX-512 license)
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
#pragma omp parallel num_threads(threads)
    { body(iters); }
    double dt = now_s() - t0;
    rates.push_back(double(iters) * ops_per_iter * threads / dt / 1e9);
  }
  return stats_of(rates).max;
}

// The DRAM probe in the widest registers the CPU has: AVX-512, else SSE2 (every x86-64; one
// core's loads outrun DRAM at either width).
__attribute__((target("avx512f"), noinline)) double read_chunk_avx512(const float* p, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
  }
  double s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((noinline)) double read_chunk_sse2(const float* p, int64_t n) {
  __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm_add_ps(s0, _mm_load_ps(p + i));
    s1 = _mm_add_ps(s1, _mm_load_ps(p + i + 4));
    s2 = _mm_add_ps(s2, _mm_load_ps(p + i + 8));
    s3 = _mm_add_ps(s3, _mm_load_ps(p + i + 12));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
  double s = double(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

double read_chunk(const float* p, int64_t n) {
  return cpu::cpu_features().avx512f ? read_chunk_avx512(p, n) : read_chunk_sse2(p, n);
}

double dram_read_gbs(int threads, int64_t bytes, int reps) {
  int64_t n = bytes / 4;
  // kiln's host memory, as its tensors: huge pages where the kernel grants them (decision 0046),
  // so the probe is the ceiling for the memory kiln's kernels stream.
  float* p = static_cast<float*>(cpu::host_allocate(size_t(n) * 4));
  if (!p) throw std::bad_alloc();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = 1.0f;
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; ++r) {
    double t0 = now_s();
    read_in_parallel(p, bytes, threads);
    double dt = now_s() - t0;
    if (r > 0) rates.push_back(double(bytes) / dt / 1e9);  // first pass: warm-up
  }
  cpu::host_free(p);
  return stats_of(rates).median;
}

void line(const std::string& what, int threads, double v, const std::string& unit,
          const std::string& extra = "") {
  std::cout << "  " << std::left << std::setw(34) << what << std::right << std::setw(3)
            << threads << " thr " << std::setw(10) << fmt(v, 4) << " " << std::left
            << std::setw(8) << unit << extra << "\n";
}

}  // namespace

void read_in_parallel(const void* data, int64_t bytes, int threads) {
  const float* p = static_cast<const float*>(data);
  const int64_t n = bytes / 4;
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t chunk = (n / nt) & ~int64_t(63);
    int64_t b = chunk * id, e = id == nt - 1 ? n : b + chunk;
    total += read_chunk(p + b, e - b);
  }
  g_sink = g_sink + total;
}

void bench_peak(const Options& opt, Report& rep) {
  const auto& f = cpu::cpu_features();
  std::cout << "\n== peak: register-only loops and DRAM read (units: best of 5; DRAM: median of 5)\n";
  const int reps = opt.quick ? 2 : 5;
  const int64_t scale = opt.quick ? 20 : 1;
  auto record = [&](const std::string& name, int threads, double v, const std::string& unit) {
    Record r;
    r.section = "peak";
    r.name = name;
    r.system = "machine";
    r.metric = threads == opt.threads ? "rate" : "rate_" + std::to_string(threads) + "t";
    r.unit = unit;
    r.value = v;
    r.n = reps;
    rep.add(r);
  };
  std::vector<int> counts = {1};
  if (opt.threads != 1) counts.push_back(opt.threads);
  for (int t : counts) {
    if (f.avx512f) {
      double v = peak_rate(t, 40'000'000 / scale, kFmaFlopPerIter, reps,
                           [](int64_t n) { g_sink = g_sink + fma_loop(n); });
      line("fp32 FMA (AVX-512)", t, v, "GFLOP/s");
      record("fp32_fma", t, v, "GFLOP/s");
      if (t == opt.threads) ceilings().fma_gflops = v;
    } else if (f.avx2 && f.fma) {
      double v = peak_rate(t, 40'000'000 / scale, kFmaAvx2FlopPerIter, reps,
                           [](int64_t n) { g_sink = g_sink + fma_loop_avx2(n); });
      line("fp32 FMA (AVX2)", t, v, "GFLOP/s");
      record("fp32_fma", t, v, "GFLOP/s");
      if (t == opt.threads) ceilings().fma_gflops = v;
    }
    if (!f.avx512_vnni && f.avx2) {
      double v = peak_rate(t, 20'000'000 / scale, kMaddOpPerIter, reps,
                           [](int64_t n) { g_sink = g_sink + madd_loop_avx2(n); });
      line("int8 as int16 vpmaddwd (AVX2)", t, v, "GOP/s");
      record("int8_madd", t, v, "GOP/s");
      if (t == opt.threads) ceilings().madd_int8_gops = v;
    }
    if (f.avx512_vnni) {
      double v = peak_rate(t, 20'000'000 / scale, kVnniOpPerIter, reps,
                           [](int64_t n) { g_sink = g_sink + vnni_loop(n); });
      line("int8 vpdpbusd (AVX-512 VNNI)", t, v, "GOP/s");
      record("int8_vnni", t, v, "GOP/s");
      if (t == opt.threads) ceilings().vnni_int8_gops = v;
    }
    if (f.avx512_bf16) {
      double v = peak_rate(t, 20'000'000 / scale, kDpbf16FlopPerIter, reps,
                           [](int64_t n) { g_sink = g_sink + dpbf16_loop(n); });
      line("bf16 vdpbf16ps (AVX-512 BF16)", t, v, "GFLOP/s");
      record("bf16_dpbf16", t, v, "GFLOP/s");
      if (t == opt.threads) ceilings().dpbf16_gflops = v;
    }
    if (f.amx_bf16 && amx_permission()) {
      double v = peak_rate(t, 4'000'000 / scale, kAmxBf16FlopPerIter, reps, amx_bf16_loop);
      line("bf16 tdpbf16ps (AMX)", t, v, "GFLOP/s");
      record("amx_bf16", t, v, "GFLOP/s");
      if (t == opt.threads) ceilings().amx_bf16_gflops = v;
    }
    if (f.amx_int8 && amx_permission()) {
      double v = peak_rate(t, 4'000'000 / scale, kAmxInt8OpPerIter, reps, amx_int8_loop);
      line("int8 tdpbusd (AMX)", t, v, "GOP/s");
      record("amx_int8", t, v, "GOP/s");
      if (t == opt.threads) ceilings().amx_int8_gops = v;
    }
    double bw = dram_read_gbs(t, opt.quick ? (int64_t(64) << 20) : (int64_t(1) << 30), reps);
    line(opt.quick ? "memory read (64 MiB)" : "DRAM read (1 GiB)", t, bw, "GB/s");
    record("dram_read", t, bw, "GB/s");
    if (t == opt.threads) ceilings().dram_read_gbs = bw;
  }
  if (!f.avx512f && !(f.avx2 && f.fma))
    rep.note("peak", "fp32_fma", "machine", "no AVX2 + FMA on this CPU: not measured");
  if (!f.amx_bf16) rep.note("peak", "amx_bf16", "machine", "no AMX on this CPU: not measured");
}

}  // namespace kiln::tools::bench
