// Random ops and factories: reproducibility (seed and offset are the whole state; values
// depend on the element's logical index only, so they match across layouts and devices),
// the documented Philox element mapping, distribution checks with fixed seeds and bounds of
// about five standard errors (a correct implementation fails them with probability < 1e-5),
// 0-d and empty tensors, and the error messages.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <set>
#include <thread>

#include "kiln/runtime/threads.h"
#include "ops/test_util.h"

namespace kiln {
namespace {

using test::OnEachDevice;
using test::values;

constexpr int64_t kN = 100000;  // samples for distribution checks

struct Moments {
  double mean, var, min, max;
};
Moments moments(const std::vector<double>& v) {
  double s = 0, mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (double x : v) {
    s += x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  double mean = s / double(v.size()), ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, ss / double(v.size() - 1), mn, mx};
}

// Pearson's chi-square statistic of counts against expected probabilities (normalised).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  double total = 0, psum = 0;
  for (auto c : counts) total += double(c);
  for (auto p : probs) psum += p;
  double chi = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    double e = total * probs[k] / psum;
    if (e == 0) {
      EXPECT_EQ(counts[k], 0) << "category " << k << " has probability 0";
      continue;
    }
    chi += (double(counts[k]) - e) * (double(counts[k]) - e) / e;
  }
  return chi;
}
// An upper bound for a chi-square statistic with `dof` degrees of freedom that a correct
// sampler exceeds with probability well below 1e-5 (mean dof, sd sqrt(2 dof); the Wilson-
// Hilferty tail at 5 sd plus a margin).
double chi_square_bound(int dof) { return dof + 7.0 * std::sqrt(2.0 * dof) + 10.0; }

#define EXPECT_ERROR(ErrClass, stmt, substring)                                          \
  do {                                                                                   \
    std::string _msg;                                                                    \
    try {                                                                                \
      stmt;                                                                              \
      _msg = "<no error>";                                                               \
    } catch (const ErrClass& e) {                                                        \
      _msg = e.what();                                                                   \
    } catch (const std::exception& e) {                                                  \
      ADD_FAILURE() << "wrong exception type: " << e.what();                             \
      _msg = e.what();                                                                   \
    }                                                                                    \
    EXPECT_NE(_msg.find(substring), std::string::npos)                                   \
        << "expected an error containing \"" << (substring) << "\", got: " << _msg;      \
  } while (0)

// Exact host values of f(gen) for a generator seeded with `seed`.
std::vector<double> with_seed(uint64_t seed, const std::function<Tensor(Generator*)>& f) {
  Generator g(seed);
  return values(f(&g));
}

Tensor filled_uniform(const Shape& s, DType dt, Device dev, Generator* g, double from = 0,
                      double to = 1) {
  Tensor t = empty(s, TensorOptions(dt, dev));
  uniform_(t, from, to, g);
  return t;
}
Tensor filled_normal(const Shape& s, DType dt, Device dev, Generator* g, double mean = 0,
                     double std = 1) {
  Tensor t = empty(s, TensorOptions(dt, dev));
  normal_(t, mean, std, g);
  return t;
}

// Significand bits of each float dtype (the precision of its uniforms).
int digits_of(DType dt) {
  switch (dt) {
    case DType::F64: return 53;
    case DType::F32: return 24;
    case DType::F16: return 11;
    default: return 8;
  }
}

// ---------------------------------------------------------------------------------------
// Reproducibility and the counter contract.

class RandomRepro : public OnEachDevice {};

TEST_P(RandomRepro, SameSeedGivesIdenticalValuesInEveryDtype) {
  for (DType dt : test::float_dtypes()) {
    auto a = with_seed(42, [&](Generator* g) { return filled_uniform({257}, dt, device(), g); });
    auto b = with_seed(42, [&](Generator* g) { return filled_uniform({257}, dt, device(), g); });
    EXPECT_EQ(a, b) << dtype_name(dt);
    auto c = with_seed(42, [&](Generator* g) { return filled_normal({257}, dt, device(), g); });
    auto d = with_seed(42, [&](Generator* g) { return filled_normal({257}, dt, device(), g); });
    EXPECT_EQ(c, d) << dtype_name(dt);
  }
  auto r1 = with_seed(7, [&](Generator* g) { return randint(-5, 5, {100}, device(), g); });
  auto r2 = with_seed(7, [&](Generator* g) { return randint(-5, 5, {100}, device(), g); });
  EXPECT_EQ(r1, r2);
}

TEST_P(RandomRepro, DifferentSeedsGiveDifferentValues) {
  for (DType dt : test::float_dtypes()) {
    auto a = with_seed(1, [&](Generator* g) { return filled_uniform({64}, dt, device(), g); });
    auto b = with_seed(2, [&](Generator* g) { return filled_uniform({64}, dt, device(), g); });
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    // bf16 uniforms take 256 values: a few coincidences are expected, not most.
    EXPECT_LT(same, 16) << dtype_name(dt);
  }
}

TEST_P(RandomRepro, ConsecutiveCallsAdvanceTheOffsetAndGiveNewValues) {
  Generator g(99);
  Tensor a = rand({10}, device(), &g);
  EXPECT_EQ(g.offset(), 3u);  // 10 float32 draws: 3 Philox blocks of 4 words
  Tensor b = rand({10}, device(), &g);
  EXPECT_EQ(g.offset(), 6u);
  EXPECT_NE(values(a), values(b));
  // The second call is exactly what a generator positioned at offset 3 produces.
  Generator h(99);
  h.set_offset(3);
  EXPECT_EQ(values(rand({10}, device(), &h)), values(b));
  // And restoring a saved state replays it.
  Generator k(5);
  auto saved = k.state();
  auto first = values(randn({33}, TensorOptions(DType::F64, device()), &k));
  k.set_state(saved);
  EXPECT_EQ(values(randn({33}, TensorOptions(DType::F64, device()), &k)), first);
}

TEST_P(RandomRepro, EachOpReservesTheDocumentedNumberOfBlocks) {
  struct Case {
    const char* what;
    std::function<void(Generator*)> run;
    uint64_t blocks;
  };
  Device dev = device();
  std::vector<Case> cases = {
      {"uniform f32 x10", [&](Generator* g) { rand({10}, TensorOptions(DType::F32, dev), g); }, 3},
      {"uniform f16 x4", [&](Generator* g) { rand({4}, TensorOptions(DType::F16, dev), g); }, 1},
      {"uniform f64 x10", [&](Generator* g) { rand({10}, TensorOptions(DType::F64, dev), g); }, 5},
      {"normal f32 x5", [&](Generator* g) { randn({5}, TensorOptions(DType::F32, dev), g); }, 2},
      {"normal f64 x5", [&](Generator* g) { randn({5}, TensorOptions(DType::F64, dev), g); }, 3},
      {"bernoulli_ x9",
       [&](Generator* g) {
         Tensor t = empty({9}, dev);
         bernoulli_(t, 0.5, g);
       },
       3},
      {"bernoulli x8", [&](Generator* g) { bernoulli(full({8}, 0.5, dev), g); }, 2},
      {"dropout x5", [&](Generator* g) { dropout(ones({5}, dev), 0.5, true, g); }, 2},
      {"randint small x10", [&](Generator* g) { randint(0, 10, {10}, dev, g); }, 3},
      {"randint wide x10",
       [&](Generator* g) { randint(0, int64_t(1) << 40, {10}, dev, g); }, 5},
      {"multinomial repl 2x3",
       [&](Generator* g) { multinomial(ones({2, 4}, dev), 3, true, g); }, 3},
      {"multinomial no-repl 2x4",
       [&](Generator* g) { multinomial(ones({2, 4}, dev), 3, false, g); }, 4},
      {"randperm 7", [&](Generator* g) { randperm(7, TensorOptions(DType::I64, dev), g); }, 4},
      {"rand empty", [&](Generator* g) { rand({3, 0}, dev, g); }, 0},
  };
  for (auto& c : cases) {
    Generator g(1);
    g.set_offset(100);
    c.run(&g);
    EXPECT_EQ(g.offset(), 100 + c.blocks) << c.what;
  }
}

TEST_P(RandomRepro, DefaultGeneratorIsUsedWithoutAGenerator) {
  Generator& def = default_generator(device());
  auto saved = def.state();
  def.manual_seed(1234);
  auto a = values(rand({50}, device()));
  auto b = with_seed(1234, [&](Generator* g) { return rand({50}, device(), g); });
  EXPECT_EQ(a, b);
  EXPECT_EQ(def.offset(), 13u);
  def.set_state(saved);
}

TEST_P(RandomRepro, ValuesDoNotDependOnTheMemoryLayout) {
  for (DType dt : test::float_dtypes()) {
    // Transposed: a {6, 4} buffer viewed as {4, 6}.
    Generator g1(3), g2(3);
    Tensor t = empty({6, 4}, TensorOptions(dt, device())).t();
    ASSERT_FALSE(t.is_contiguous());
    uniform_(t, -1, 1, &g1);
    Tensor c = filled_uniform({4, 6}, dt, device(), &g2, -1, 1);
    EXPECT_EQ(values(t), values(c)) << dtype_name(dt);
    normal_(t, 0, 1, &g1);
    normal_(c, 0, 1, &g2);
    EXPECT_EQ(values(t), values(c)) << dtype_name(dt);
    // Strided: every other column of a {4, 10} buffer; the other columns stay untouched.
    Generator g3(3), g4(3);
    Tensor base = zeros({4, 10}, TensorOptions(dt, device()));
    Tensor v = base.slice(1, 0, std::nullopt, 2);
    uniform_(v, 1, 2, &g3);
    EXPECT_EQ(values(v), values(filled_uniform({4, 5}, dt, device(), &g4, 1, 2)));
    auto odd = values(base.slice(1, 1, std::nullopt, 2));
    EXPECT_TRUE(std::all_of(odd.begin(), odd.end(), [](double x) { return x == 0; }));
  }
  // Integer and Bernoulli fills too.
  Generator g5(8), g6(8);
  Tensor ti = empty({5, 3}, TensorOptions(DType::I32, device())).t();
  Tensor tc = empty({3, 5}, TensorOptions(DType::I32, device()));
  bernoulli_(ti, 0.4, &g5);
  bernoulli_(tc, 0.4, &g6);
  EXPECT_EQ(values(ti), values(tc));
}

TEST_P(RandomRepro, InputLayoutDoesNotMatterForBernoulliAndDropout) {
  auto vals = test::random_values(24, 0, 1, 5);
  Tensor pc = test::make_layout(vals, {4, 6}, DType::F32, device(), test::Layout::Contiguous);
  Tensor pt = test::make_layout(vals, {4, 6}, DType::F32, device(), test::Layout::Transposed);
  Tensor ps = test::make_layout(vals, {4, 6}, DType::F32, device(), test::Layout::Strided);
  ASSERT_FALSE(pt.is_contiguous());
  ASSERT_FALSE(ps.is_contiguous());
  auto ref = with_seed(4, [&](Generator* g) { return bernoulli(pc, g); });
  EXPECT_EQ(with_seed(4, [&](Generator* g) { return bernoulli(pt, g); }), ref);
  EXPECT_EQ(with_seed(4, [&](Generator* g) { return bernoulli(ps, g); }), ref);
  auto dref = with_seed(4, [&](Generator* g) { return dropout(pc, 0.5, true, g); });
  EXPECT_EQ(with_seed(4, [&](Generator* g) { return dropout(pt, 0.5, true, g); }), dref);
  EXPECT_EQ(with_seed(4, [&](Generator* g) { return dropout(ps, 0.5, true, g); }), dref);
  // And multinomial reads its probabilities in any layout.
  Tensor mc = test::make_layout(vals, {4, 6}, DType::F64, device(), test::Layout::Contiguous);
  Tensor mt = test::make_layout(vals, {4, 6}, DType::F64, device(), test::Layout::Transposed);
  EXPECT_EQ(with_seed(4, [&](Generator* g) { return multinomial(mt, 5, true, g); }),
            with_seed(4, [&](Generator* g) { return multinomial(mc, 5, true, g); }));
  EXPECT_EQ(with_seed(4, [&](Generator* g) { return multinomial(mt, 5, false, g); }),
            with_seed(4, [&](Generator* g) { return multinomial(mc, 5, false, g); }));
}

// The documented mapping, recomputed here from philox4x32 directly.
TEST_P(RandomRepro, UniformFollowsTheDocumentedPhiloxMapping) {
  const uint64_t seed = 0x1234'5678'9abc'def0ull, offset = 77;
  for (DType dt : test::float_dtypes()) {
    Generator g(seed);
    g.set_offset(offset);
    auto got = values(filled_uniform({3, 7}, dt, device(), &g));
    for (uint64_t i = 0; i < got.size(); ++i) {
      double u;
      if (dt == DType::F64) {
        auto w = philox4x32(seed, offset + i / 2);
        uint64_t x = uint64_t(w[2 * (i % 2)]) | uint64_t(w[2 * (i % 2) + 1]) << 32;
        u = double(x >> 11) * 0x1p-53;
      } else {
        uint32_t x = philox4x32(seed, offset + i / 4)[i % 4];
        int d = digits_of(dt);
        u = std::ldexp(double(x >> (32 - d)), -d);
      }
      EXPECT_EQ(got[i], u) << dtype_name(dt) << " element " << i;
    }
  }
}

TEST_P(RandomRepro, NormalFollowsTheDocumentedBoxMullerMapping) {
  const uint64_t seed = 2024, offset = 5;
  Generator g(seed);
  g.set_offset(offset);
  auto got = values(filled_normal({9}, DType::F64, device(), &g, 1.0, 3.0));
  for (uint64_t i = 0; i < got.size(); ++i) {
    auto draw = [&](uint64_t k) {
      auto w = philox4x32(seed, offset + k / 2);
      uint64_t x = uint64_t(w[2 * (k % 2)]) | uint64_t(w[2 * (k % 2) + 1]) << 32;
      return double(x >> 11) * 0x1p-53;
    };
    uint64_t k = 2 * (i / 2);
    double r = std::sqrt(-2 * std::log(1 - draw(k)));
    double th = 2 * std::numbers::pi * draw(k + 1);
    double z = i % 2 == 0 ? r * std::cos(th) : r * std::sin(th);
    EXPECT_NEAR(got[i], z * 3.0 + 1.0, 1e-12) << "element " << i;
  }
}

// Outputs of 2^16 elements and more are filled by the threads, each piece with its own Philox
// cache: the documented mapping holds for every element (an odd count, so the last normal
// pair is cut), and one thread gives the same values as two.
TEST_P(RandomRepro, ThreadedFillsFollowTheMappingForAnyThreadCount) {
  const uint64_t seed = 99, offset = 3;
  const int64_t n = 200003;
  auto fill = [&](int threads, bool normal) {
    const int saved = get_num_threads();
    set_num_threads(threads);
    Generator g(seed);
    g.set_offset(offset);
    Tensor t = normal ? filled_normal({n}, DType::F32, device(), &g, 1.0, 3.0)
                      : filled_uniform({n}, DType::F32, device(), &g);
    set_num_threads(saved);
    return values(t);
  };
  const auto u1 = fill(1, false), u2 = fill(2, false);
  const auto z1 = fill(1, true), z2 = fill(2, true);
  EXPECT_EQ(u1, u2);
  EXPECT_EQ(z1, z2);
  auto unit = [&](uint64_t k) {
    return float(std::ldexp(double(philox4x32(seed, offset + k / 4)[k % 4] >> 8), -24));
  };
  for (uint64_t i = 0; i < uint64_t(n); ++i) {
    ASSERT_EQ(u2[i], unit(i)) << "uniform element " << i;
    const uint64_t k = 2 * (i / 2);
    const double r = std::sqrt(-2.0 * std::log(1.0 - double(unit(k))));
    const double th = 2 * std::numbers::pi * double(unit(k + 1));
    const double z = (i % 2 == 0 ? r * std::cos(th) : r * std::sin(th)) * 3.0 + 1.0;
    ASSERT_NEAR(z2[i], z, 1e-4 * (1 + std::fabs(z))) << "normal element " << i;
  }
}

// Draws come from a buffer of Philox blocks generated in bulk (eight per AVX-512 step): the
// mapping holds where the counter's low word carries into the high word and where the 64-bit
// counter wraps to 0, for 32-bit (float32) and 64-bit (float64) draws, at a threaded size.
TEST_P(RandomRepro, UniformAcrossCounterCarryAndWrap) {
  const uint64_t seed = 0xfeed'0000'beefull;
  const int64_t n = 70001;
  for (uint64_t offset : {(uint64_t(1) << 32) - 50, ~uint64_t(0) - 50}) {
    for (DType dt : {DType::F32, DType::F64}) {
      Generator g(seed);
      g.set_offset(offset);
      const auto got = values(filled_uniform({n}, dt, device(), &g));
      for (uint64_t i = 0; i < uint64_t(n); ++i) {
        double u;
        if (dt == DType::F64) {
          auto w = philox4x32(seed, offset + i / 2);  // wraps modulo 2^64
          uint64_t x = uint64_t(w[2 * (i % 2)]) | uint64_t(w[2 * (i % 2) + 1]) << 32;
          u = double(x >> 11) * 0x1p-53;
        } else {
          u = std::ldexp(double(philox4x32(seed, offset + i / 4)[i % 4] >> 8), -24);
        }
        ASSERT_EQ(got[i], u) << dtype_name(dt) << " offset " << offset << " element " << i;
      }
    }
  }
}

TEST_P(RandomRepro, RandintAndBernoulliFollowTheDocumentedMapping) {
  const uint64_t seed = 31337;
  Generator g(seed);
  auto got = values(randint(-10, 90, {11}, device(), &g));
  for (uint64_t i = 0; i < got.size(); ++i) {
    uint32_t x = philox4x32(seed, i / 4)[i % 4];
    EXPECT_EQ(got[i], double(-10 + int64_t((uint64_t(x) * 100) >> 32))) << i;
  }
  Generator h(seed);
  auto bits = randint(0, int64_t(1) << 62, {6}, device(), &h).to_vector<int64_t>();  // exact
  for (uint64_t i = 0; i < bits.size(); ++i) {
    auto w = philox4x32(seed, i / 2);
    uint64_t x = uint64_t(w[2 * (i % 2)]) | uint64_t(w[2 * (i % 2) + 1]) << 32;
    EXPECT_EQ(bits[i], int64_t(x >> 2)) << i;  // x * 2^62 >> 64
  }
  Generator b(seed);
  Tensor t = empty({13}, TensorOptions(DType::U8, device()));
  auto coin = values(bernoulli_(t, 0.3, &b));
  for (uint64_t i = 0; i < coin.size(); ++i) {
    uint32_t x = philox4x32(seed, i / 4)[i % 4];
    EXPECT_EQ(coin[i], double(x) * 0x1p-32 < 0.3 ? 1.0 : 0.0) << i;
  }
}

TEST_P(RandomRepro, SeparateGeneratorsAreIndependentOfThreads) {
  auto ref = with_seed(11, [&](Generator* g) { return randn({1000}, device(), g); });
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      got[size_t(k)] = with_seed(11, [&](Generator* g) { return randn({1000}, device(), g); });
    });
  for (auto& t : threads) t.join();
  for (auto& v : got) EXPECT_EQ(v, ref);
}

TEST_P(RandomRepro, ConcurrentCallsOnOneGeneratorGetDisjointRanges) {
  Generator g(77);
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 10; ++rep) {
        auto v = values(rand({8}, TensorOptions(DType::F64, device()), &g));
        got[size_t(k)].insert(got[size_t(k)].end(), v.begin(), v.end());
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.offset(), 4u * 10u * 4u);
  std::set<double> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 4u * 10u * 8u);  // no range handed out twice
}

KILN_INSTANTIATE_ON_EACH_DEVICE(RandomRepro);

// Bit-identical results on every device (the asynchronous testing device included) and on
// the cpu, for every op.
class RandomAcrossDevices : public OnEachDevice {};

TEST_P(RandomAcrossDevices, SameSeedGivesBitIdenticalValuesToTheCpu) {
  Device cpu(DeviceType::CPU, 0), dev = device();
  std::vector<std::pair<std::string, std::function<Tensor(Device, Generator*)>>> ops = {
      {"randint", [](Device d, Generator* g) { return randint(-100, 100, {7, 9}, d, g); }},
      {"randint wide",
       [](Device d, Generator* g) { return randint(INT64_MIN, INT64_MAX, {33}, d, g); }},
      {"bernoulli_",
       [](Device d, Generator* g) {
         Tensor t = empty({65}, d);
         return bernoulli_(t, 0.25, g);
       }},
      {"bernoulli",
       [](Device d, Generator* g) { return bernoulli(rand({40}, d, g), g); }},
      {"dropout", [](Device d, Generator* g) { return dropout(randn({50}, d, g), 0.3, true, g); }},
      {"multinomial repl",
       [](Device d, Generator* g) { return multinomial(rand({3, 8}, d, g), 20, true, g); }},
      {"multinomial no-repl",
       [](Device d, Generator* g) { return multinomial(rand({3, 8}, d, g), 6, false, g); }},
      {"randperm",
       [](Device d, Generator* g) { return randperm(100, TensorOptions(DType::I64, d), g); }},
  };
  for (DType dt : test::float_dtypes()) {
    ops.push_back({std::string("rand ") + std::string(dtype_name(dt)),
                   [dt](Device d, Generator* g) { return rand({5, 13}, TensorOptions(dt, d), g); }});
    ops.push_back({std::string("randn ") + std::string(dtype_name(dt)),
                   [dt](Device d, Generator* g) { return randn({5, 13}, TensorOptions(dt, d), g); }});
  }
  for (auto& [name, f] : ops) {
    Generator a(555), b(555);
    Tensor on_cpu = f(cpu, &a);
    Tensor on_dev = f(dev, &b);
    EXPECT_EQ(on_dev.device().type, dev.type) << name;
    EXPECT_EQ(on_dev.dtype(), on_cpu.dtype()) << name;
    EXPECT_EQ(values(on_dev), values(on_cpu)) << name;
    EXPECT_EQ(a.offset(), b.offset()) << name;
  }
}

KILN_INSTANTIATE_ON_EACH_DEVICE(RandomAcrossDevices);

// ---------------------------------------------------------------------------------------
// uniform_ / rand

class Uniform : public OnEachDevice {};

TEST_P(Uniform, MeanAndVarianceMatchInEveryFloatDtype) {
  const double from = -2, to = 3, w = to - from;
  const double mean = (from + to) / 2, var = w * w / 12;
  const double se_mean = std::sqrt(var / kN);
  const double se_var = std::sqrt((std::pow(w, 4) / 80 - var * var) / kN);
  for (DType dt : test::float_dtypes()) {
    auto v = with_seed(10, [&](Generator* g) { return filled_uniform({kN}, dt, device(), g, from, to); });
    auto m = moments(v);
    // Quantisation of the uniform (digits bits) and rounding to the dtype shift the moments
    // by at most about one step of each.
    double q = w * std::ldexp(1.0, -digits_of(dt)) + std::ldexp(std::fabs(to), -digits_of(dt));
    EXPECT_NEAR(m.mean, mean, 5 * se_mean + q) << dtype_name(dt);
    EXPECT_NEAR(m.var, var, 5 * se_var + 2 * w * q) << dtype_name(dt);
    EXPECT_GE(m.min, from) << dtype_name(dt);
    EXPECT_LT(m.max, to) << dtype_name(dt);
    // Each tenth of the range gets its share (chi-square, 9 degrees of freedom).
    std::vector<int64_t> counts(10, 0);
    for (double x : v) counts[size_t(std::min(9.0, std::floor((x - from) / w * 10)))]++;
    if (dt != DType::BF16 && dt != DType::F16)  // coarse dtypes don't split bins evenly
      EXPECT_LT(chi_square(counts, std::vector<double>(10, 1.0)), chi_square_bound(9))
          << dtype_name(dt);
  }
}

TEST_P(Uniform, RandIsInTheUnitIntervalWithTheRequestedDtype) {
  for (DType dt : test::float_dtypes()) {
    Tensor t = rand({1000}, TensorOptions(dt, device()));
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.device(), device());
    auto m = moments(values(t));
    EXPECT_GE(m.min, 0.0);
    EXPECT_LT(m.max, 1.0);
  }
  EXPECT_EQ(rand({3}, device()).dtype(), default_float_dtype());
}

TEST_P(Uniform, ZeroDimAndEmptyTensors) {
  Generator g(1);
  Tensor s = rand({}, device(), &g);
  EXPECT_EQ(s.dim(), 0);
  double x = s.item<double>();
  EXPECT_GE(x, 0.0);
  EXPECT_LT(x, 1.0);
  EXPECT_EQ(g.offset(), 1u);
  for (Shape shape : {Shape{0}, Shape{3, 0}, Shape{0, 4, 2}}) {
    Tensor e = rand(shape, device(), &g);
    EXPECT_EQ(e.shape(), shape);
    EXPECT_EQ(e.numel(), 0);
    Tensor n = randn(shape, TensorOptions(DType::F64, device()), &g);
    EXPECT_EQ(n.shape(), shape);
  }
  EXPECT_EQ(g.offset(), 1u);  // empty tensors draw nothing
}

TEST_P(Uniform, EqualBoundsGiveThatValue) {
  Tensor t = empty({20}, TensorOptions(DType::F32, device()));
  uniform_(t, 2.5, 2.5);
  for (double x : values(t)) EXPECT_EQ(x, 2.5);
}

TEST_P(Uniform, ReducedPrecisionValuesStayBelowTheUpperBound) {
  // [1, 3) in half precision: values near 3 would round up to 3 without the guard.
  for (DType dt : {DType::F16, DType::BF16}) {
    auto v = with_seed(6, [&](Generator* g) { return filled_uniform({20000}, dt, device(), g, 1, 3); });
    auto m = moments(v);
    EXPECT_GE(m.min, 1.0) << dtype_name(dt);
    EXPECT_LT(m.max, 3.0) << dtype_name(dt);
  }
}

TEST_P(Uniform, Errors) {
  Generator g(1);
  Tensor b = empty({3}, TensorOptions(DType::Bool, device()));
  EXPECT_ERROR(NotImplementedError, uniform_(b, 0, 1, &g), "\"uniform_\" not implemented for 'bool'");
  Tensor i = empty({3}, TensorOptions(DType::I64, device()));
  EXPECT_ERROR(NotImplementedError, uniform_(i, 0, 1, &g), "\"uniform_\" not implemented for 'int64'");
  Tensor f = empty({3}, device());
  EXPECT_ERROR(Error, uniform_(f, 2, 1, &g),
               "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
  EXPECT_ERROR(Error, uniform_(f, 0, INFINITY, &g), "uniform_ expects finite bounds");
  EXPECT_ERROR(Error, uniform_(f, -1.7e308, 1.7e308, &g), "to-from to exceed the limit");
  EXPECT_ERROR(NotImplementedError, rand({2}, TensorOptions(DType::I32, device()), &g), "int32");
  EXPECT_EQ(g.offset(), 0u);  // rejected calls draw nothing
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Uniform);

// ---------------------------------------------------------------------------------------
// normal_ / randn

class Normal : public OnEachDevice {};

TEST_P(Normal, MeanVarianceAndTailsMatchInEveryFloatDtype) {
  const double mu = 1.5, sigma = 2.0;
  for (DType dt : test::float_dtypes()) {
    auto v = with_seed(20, [&](Generator* g) { return filled_normal({kN}, dt, device(), g, mu, sigma); });
    auto m = moments(v);
    double eps = std::ldexp(1.0, -digits_of(dt)) * 8;  // rounding of values up to ~8
    EXPECT_NEAR(m.mean, mu, 5 * sigma / std::sqrt(double(kN)) + eps) << dtype_name(dt);
    EXPECT_NEAR(m.var, sigma * sigma,
                5 * std::sqrt(2.0 / kN) * sigma * sigma + 4 * eps * sigma) << dtype_name(dt);
    // P(|z| > 1.96) = 0.05 and P(z > 0) = 0.5, each within 5 standard errors.
    int64_t tail = 0, pos = 0;
    double third = 0;
    for (double x : v) {
      double z = (x - mu) / sigma;
      tail += std::fabs(z) > 1.959963984540054;
      pos += z > 0;
      third += z * z * z;
    }
    EXPECT_NEAR(double(tail) / kN, 0.05, 5 * std::sqrt(0.05 * 0.95 / kN)) << dtype_name(dt);
    EXPECT_NEAR(double(pos) / kN, 0.5, 5 * std::sqrt(0.25 / kN)) << dtype_name(dt);
    EXPECT_NEAR(third / kN, 0.0, 5 * std::sqrt(15.0 / kN)) << dtype_name(dt);  // Var(z^3) = 15
  }
}

TEST_P(Normal, NeighboursAreUncorrelated) {
  // Elements 2k and 2k+1 come from the same Box-Muller pair; 2k+1 and 2k+2 from different
  // pairs. Both correlations must vanish (standard error 1/sqrt(n)).
  auto v = with_seed(21, [&](Generator* g) { return filled_normal({kN}, DType::F64, device(), g); });
  double same = 0, next = 0;
  for (int64_t k = 0; k + 2 < kN; k += 2) {
    same += v[size_t(k)] * v[size_t(k + 1)];
    next += v[size_t(k + 1)] * v[size_t(k + 2)];
  }
  double n = double(kN / 2);
  EXPECT_NEAR(same / n, 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(next / n, 0.0, 5 / std::sqrt(n));
}

TEST_P(Normal, ZeroStdGivesTheMeanAndOddSizesWork) {
  Tensor t = empty({7}, TensorOptions(DType::F64, device()));
  normal_(t, -3.25, 0.0);
  for (double x : values(t)) EXPECT_EQ(x, -3.25);
  Tensor s = randn({}, device());
  EXPECT_EQ(s.dim(), 0);
  EXPECT_TRUE(std::isfinite(s.item<double>()));
  // An odd count: the last element uses the cosine branch of a full pair.
  auto a = with_seed(3, [&](Generator* g) { return randn({5}, TensorOptions(DType::F64, device()), g); });
  auto b = with_seed(3, [&](Generator* g) { return randn({6}, TensorOptions(DType::F64, device()), g); });
  EXPECT_EQ(a, std::vector<double>(b.begin(), b.begin() + 5));
}

TEST_P(Normal, Errors) {
  Generator g(1);
  Tensor f = empty({3}, device());
  EXPECT_ERROR(Error, normal_(f, 0, -1, &g), "normal expects std >= 0.0, but found std -1");
  Tensor b = empty({3}, TensorOptions(DType::Bool, device()));
  EXPECT_ERROR(NotImplementedError, normal_(b, 0, 1, &g), "\"normal_\" not implemented for 'bool'");
  Tensor i = empty({3}, TensorOptions(DType::I16, device()));
  EXPECT_ERROR(NotImplementedError, normal_(i, 0, 1, &g), "int16");
  EXPECT_ERROR(NotImplementedError, randn({2}, TensorOptions(DType::Bool, device()), &g), "bool");
  EXPECT_EQ(g.offset(), 0u);
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Normal);

// ---------------------------------------------------------------------------------------
// bernoulli_ / bernoulli

class Bernoulli : public OnEachDevice {};

TEST_P(Bernoulli, ScalarProbabilityFrequencyInEveryDtype) {
  const double p = 0.3;
  for (DType dt : test::all_dtypes()) {
    Generator g(30);
    Tensor t = empty({kN}, TensorOptions(dt, device()));
    bernoulli_(t, p, &g);
    auto v = values(t);
    int64_t ones_count = 0;
    for (double x : v) {
      ASSERT_TRUE(x == 0 || x == 1) << dtype_name(dt) << ": " << x;
      ones_count += x == 1;
    }
    EXPECT_NEAR(double(ones_count) / kN, p, 5 * std::sqrt(p * (1 - p) / kN)) << dtype_name(dt);
  }
}

TEST_P(Bernoulli, ZeroAndOneAreExact) {
  Tensor t = empty({1000}, device());
  for (double x : values(bernoulli_(t, 0.0))) EXPECT_EQ(x, 0.0);
  for (double x : values(bernoulli_(t, 1.0))) EXPECT_EQ(x, 1.0);
  Tensor s = empty({}, TensorOptions(DType::Bool, device()));
  EXPECT_EQ(bernoulli_(s, 1.0).item<bool>(), true);
}

TEST_P(Bernoulli, TensorProbabilitiesPerColumnInEveryFloatDtype) {
  const std::vector<double> ps = {0.1, 0.5, 0.9, 0.0, 1.0};
  const int64_t rows = 20000;
  std::vector<double> probs;
  for (int64_t r = 0; r < rows; ++r) probs.insert(probs.end(), ps.begin(), ps.end());
  for (DType dt : test::float_dtypes()) {
    Tensor p = test::make(probs, {rows, 5}, dt, device());
    Generator g(31);
    Tensor out = bernoulli(p, &g);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_EQ(out.shape(), (Shape{rows, 5}));
    auto v = values(out);
    std::vector<int64_t> ones_count(5, 0);
    for (int64_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < 5; ++c) ones_count[c] += v[size_t(r) * 5 + c] == 1;
    for (size_t c = 0; c < 5; ++c) {
      double pc = test::round_to(ps[c], dt);
      EXPECT_NEAR(double(ones_count[c]) / rows, pc, 5 * std::sqrt(pc * (1 - pc) / rows) + 1e-12)
          << dtype_name(dt) << " column " << c;
    }
  }
}

TEST_P(Bernoulli, ZeroDimAndEmptyProbabilities) {
  EXPECT_EQ(bernoulli(scalar_tensor(1.0, device())).item<double>(), 1.0);
  EXPECT_EQ(bernoulli(scalar_tensor(0.0, device())).item<double>(), 0.0);
  Tensor e = bernoulli(empty({0, 3}, device()));
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
}

TEST_P(Bernoulli, Errors) {
  Generator g(1);
  Tensor t = empty({3}, device());
  EXPECT_ERROR(Error, bernoulli_(t, 1.5, &g), "bernoulli_ expects p to be in [0, 1], but got p=1.5");
  EXPECT_ERROR(Error, bernoulli_(t, -0.1, &g), "bernoulli_ expects p to be in [0, 1]");
  EXPECT_ERROR(Error, bernoulli_(t, NAN, &g), "bernoulli_ expects p to be in [0, 1]");
  EXPECT_ERROR(NotImplementedError, bernoulli(ones({3}, TensorOptions(DType::I64, device())), &g),
               "\"bernoulli\" not implemented for 'int64'");
  EXPECT_EQ(g.offset(), 0u);
  // Out-of-range probabilities are found by the kernel (asynchronously on devices: the error
  // surfaces when the result is read).
  Tensor bad = test::make({0.5, 1.5}, {2}, DType::F32, device());
  EXPECT_ERROR(Error, values(bernoulli(bad, &g)),
               "bernoulli expects all probabilities to be in [0, 1]");
  Tensor nan = test::make({NAN}, {1}, DType::F64, device());
  EXPECT_ERROR(Error, values(bernoulli(nan, &g)), "but got p=nan");
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Bernoulli);

// ---------------------------------------------------------------------------------------
// dropout

class Dropout : public OnEachDevice {};

TEST_P(Dropout, KeepsAboutOneMinusPAndScalesExactly) {
  const double p = 0.3;  // 1/(1-p) is not exact in any dtype: the rounding is checked too
  auto xs = test::random_values(size_t(kN), -4, 4, 40);
  for (DType dt : test::float_dtypes()) {
    auto xr = test::rounded(xs, dt);
    Tensor x = test::make(xr, {kN}, dt, device());
    Generator g(41);
    Tensor y = dropout(x, p, true, &g);
    EXPECT_EQ(y.dtype(), dt);
    auto v = values(y);
    double scale = test::round_to(1.0 / (1.0 - p), dt);
    int64_t kept = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == 0 && xr[i] != 0) continue;  // dropped
      ++kept;
      ASSERT_EQ(v[i], test::round_to(xr[i] * scale, dt)) << dtype_name(dt) << " at " << i;
    }
    EXPECT_NEAR(double(kept) / kN, 1 - p, 5 * std::sqrt(p * (1 - p) / kN)) << dtype_name(dt);
  }
}

TEST_P(Dropout, TheMaskIsTheBernoulliMaskOfOneMinusP) {
  // Same seed: dropout keeps element i exactly where bernoulli_(1 - p) draws a one.
  const double p = 0.35;
  auto mask = with_seed(42, [&](Generator* g) {
    Tensor t = empty({500}, TensorOptions(DType::F64, device()));
    return bernoulli_(t, 1 - p, g);
  });
  auto y = with_seed(42, [&](Generator* g) { return dropout(ones({500}, TensorOptions(DType::F64, device())), p, true, g); });
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i] != 0, mask[i] == 1) << i;
}

TEST_P(Dropout, EvalModeZeroPAndEmptyReturnTheInput) {
  Tensor x = randn({4, 5}, device());
  Generator g(1);
  EXPECT_TRUE(dropout(x, 0.5, false, &g).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, &g).is_same(x));
  Tensor e = empty({0, 5}, device());
  EXPECT_TRUE(dropout(e, 0.5, true, &g).is_same(e));
  Tensor xi = ones({3}, TensorOptions(DType::I32, device()));
  EXPECT_TRUE(dropout(xi, 0.5, false, &g).is_same(xi));
  EXPECT_EQ(g.offset(), 0u);
}

TEST_P(Dropout, POneGivesZerosOfTheInputDtype) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::Bool}) {
    Tensor x = ones({2, 3}, TensorOptions(dt, device()));
    Tensor y = dropout(x, 1.0, true);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.shape(), (Shape{2, 3}));
    for (double v : values(y)) EXPECT_EQ(v, 0.0);
  }
}

TEST_P(Dropout, ZeroDimInput) {
  Tensor x = scalar_tensor(3.0, TensorOptions(DType::F64, device()));
  double y = dropout(x, 0.5, true).item<double>();
  EXPECT_TRUE(y == 0.0 || y == 6.0) << y;
}

TEST_P(Dropout, Errors) {
  Generator g(1);
  Tensor x = ones({3}, device());
  EXPECT_ERROR(ValueError, dropout(x, 1.5, true, &g),
               "dropout probability has to be between 0 and 1, but got 1.5");
  EXPECT_ERROR(ValueError, dropout(x, -0.5, true, &g), "dropout probability has to be between 0 and 1");
  EXPECT_ERROR(Error, dropout(ones({3}, TensorOptions(DType::I64, device())), 0.5, true, &g),
               "dropout: expected a floating-point input for p in (0, 1)");
  EXPECT_ERROR(Error, dropout(ones({3}, TensorOptions(DType::Bool, device())), 0.5, true, &g),
               "but got bool");
  EXPECT_EQ(g.offset(), 0u);
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Dropout);

// ---------------------------------------------------------------------------------------
// randint

class Randint : public OnEachDevice {};

TEST_P(Randint, UniformOverTheRangeInEveryDtype) {
  for (DType dt : test::all_dtypes()) {
    if (dt == DType::Bool) continue;
    int64_t low = dt == DType::U8 ? 0 : -3, high = low + 10;
    Generator g(50);
    Tensor t = randint(low, high, {kN}, TensorOptions(dt, device()), &g);
    EXPECT_EQ(t.dtype(), dt);
    std::vector<int64_t> counts(10, 0);
    for (double x : values(t)) {
      ASSERT_EQ(x, std::floor(x)) << dtype_name(dt);
      ASSERT_GE(x, double(low)) << dtype_name(dt);
      ASSERT_LT(x, double(high)) << dtype_name(dt);
      counts[size_t(int64_t(x) - low)]++;
    }
    EXPECT_LT(chi_square(counts, std::vector<double>(10, 1.0)), chi_square_bound(9))
        << dtype_name(dt);
  }
}

TEST_P(Randint, BoolAndDefaultDtype) {
  Tensor t = randint(0, 5, {4}, device());
  EXPECT_EQ(t.dtype(), DType::I64);
  Tensor b = randint(0, 2, {kN}, TensorOptions(DType::Bool, device()));
  int64_t n1 = 0;
  for (double x : values(b)) n1 += x == 1;
  EXPECT_NEAR(double(n1) / kN, 0.5, 5 * std::sqrt(0.25 / kN));
  Tensor one = randint(7, 8, {10}, device());
  for (double x : values(one)) EXPECT_EQ(x, 7.0);
}

TEST_P(Randint, WideRangesUseSixtyFourBitDraws) {
  // [0, 2^40): the mean is 2^39 - 1/2 with standard error 2^40 / sqrt(12 n).
  auto v = with_seed(51, [&](Generator* g) { return randint(0, int64_t(1) << 40, {kN}, device(), g); });
  double two40 = std::ldexp(1.0, 40);
  auto m = moments(v);
  EXPECT_NEAR(m.mean, two40 / 2, 5 * two40 / std::sqrt(12.0 * kN));
  EXPECT_GE(m.min, 0.0);
  EXPECT_LT(m.max, two40);
  // The full int64 range: both halves about equally often, values spread over it.
  Generator g(52);
  auto full_range = randint(INT64_MIN, INT64_MAX, {kN}, device(), &g).to_vector<int64_t>();
  int64_t neg = 0;
  std::set<int64_t> distinct(full_range.begin(), full_range.end());
  for (int64_t x : full_range) neg += x < 0;
  EXPECT_NEAR(double(neg) / kN, 0.5, 5 * std::sqrt(0.25 / kN));
  EXPECT_EQ(distinct.size(), size_t(kN));
}

TEST_P(Randint, ZeroDimEmptyAndLikeFactories) {
  Tensor s = randint(3, 9, {}, device());
  EXPECT_EQ(s.dim(), 0);
  EXPECT_GE(s.item<int64_t>(), 3);
  EXPECT_LT(s.item<int64_t>(), 9);
  EXPECT_EQ(randint(0, 2, {2, 0}, device()).shape(), (Shape{2, 0}));
  Tensor proto = zeros({3, 4}, TensorOptions(DType::I16, device()));
  Tensor r = randint_like(proto, -2, 2);
  EXPECT_EQ(r.dtype(), DType::I16);
  EXPECT_EQ(r.shape(), proto.shape());
  EXPECT_EQ(r.device(), device());
  for (double x : values(r)) EXPECT_TRUE(x >= -2 && x < 2);
  Tensor fproto = zeros({5}, TensorOptions(DType::F64, device()));
  EXPECT_EQ(rand_like(fproto).dtype(), DType::F64);
  EXPECT_EQ(randn_like(fproto, DType::BF16).dtype(), DType::BF16);
  EXPECT_EQ(randn_like(fproto).device(), device());
}

TEST_P(Randint, Errors) {
  Generator g(1);
  EXPECT_ERROR(Error, randint(5, 5, {3}, device(), &g),
               "random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
  EXPECT_ERROR(Error, randint(5, 2, {3}, device(), &g), "from=5 >= to=2");
  EXPECT_ERROR(Error, randint(-1, 10, {3}, TensorOptions(DType::U8, device()), &g),
               "random_ expects [from, to) to lie within [0, 255] for dtype uint8");
  EXPECT_ERROR(Error, randint(0, 200, {3}, TensorOptions(DType::I8, device()), &g), "int8");
  EXPECT_ERROR(Error, randint(0, 3, {3}, TensorOptions(DType::Bool, device()), &g), "bool");
  EXPECT_ERROR(Error, randint(0, 5000, {3}, TensorOptions(DType::F16, device()), &g),
               "float16");
  EXPECT_EQ(g.offset(), 0u);
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Randint);

// ---------------------------------------------------------------------------------------
// multinomial

class Multinomial : public OnEachDevice {};

TEST_P(Multinomial, WithReplacementFrequenciesInEveryFloatDtype) {
  const std::vector<double> w = {1, 2, 3, 4, 0};  // unnormalised; category 4 never drawn
  for (DType dt : test::float_dtypes()) {
    Tensor probs = test::make(w, {5}, dt, device());
    Generator g(60);
    Tensor s = multinomial(probs, kN, true, &g);
    EXPECT_EQ(s.dtype(), DType::I64);
    EXPECT_EQ(s.shape(), (Shape{kN}));
    std::vector<int64_t> counts(5, 0);
    for (int64_t k : s.to_vector<int64_t>()) {
      ASSERT_TRUE(k >= 0 && k < 5) << k;
      counts[size_t(k)]++;
    }
    EXPECT_LT(chi_square(counts, w), chi_square_bound(3)) << dtype_name(dt);
  }
}

TEST_P(Multinomial, RowsOfATwoDimDistribution) {
  Tensor probs = test::make({0.0, 0.0, 1.0, 0.0,  //
                             0.5, 0.5, 0.0, 0.0,  //
                             0.1, 0.2, 0.3, 0.4},
                            {3, 4}, DType::F64, device());
  Tensor s = multinomial(probs, 20000, true);
  EXPECT_EQ(s.shape(), (Shape{3, 20000}));
  auto v = s.to_vector<int64_t>();
  std::vector<std::vector<int64_t>> counts(3, std::vector<int64_t>(4, 0));
  for (size_t r = 0; r < 3; ++r)
    for (size_t j = 0; j < 20000; ++j) counts[r][size_t(v[r * 20000 + j])]++;
  EXPECT_EQ(counts[0][2], 20000);
  EXPECT_LT(chi_square(counts[1], {0.5, 0.5, 0, 0}), chi_square_bound(1));
  EXPECT_LT(chi_square(counts[2], {0.1, 0.2, 0.3, 0.4}), chi_square_bound(3));
}

TEST_P(Multinomial, WithoutReplacementGivesDistinctIndices) {
  Tensor probs = rand({50, 10}, TensorOptions(DType::F64, device()));
  for (int64_t n : {1, 4, 10}) {
    Tensor s = multinomial(probs, n, false);
    EXPECT_EQ(s.shape(), (Shape{50, n}));
    auto v = s.to_vector<int64_t>();
    for (size_t r = 0; r < 50; ++r) {
      std::set<int64_t> row(v.begin() + long(r * size_t(n)), v.begin() + long((r + 1) * size_t(n)));
      EXPECT_EQ(row.size(), size_t(n)) << "row " << r;
      for (int64_t k : row) EXPECT_TRUE(k >= 0 && k < 10);
    }
  }
}

TEST_P(Multinomial, WithoutReplacementFirstPickFollowsTheProbabilities) {
  // The first draw without replacement is an ordinary categorical draw.
  const std::vector<double> w = {0.05, 0.15, 0.3, 0.5};
  for (DType dt : test::float_dtypes()) {
    const int64_t rows = 20000;
    Tensor probs = test::make(w, {1, 4}, dt, device()).expand({rows, 4});
    Generator g(61);
    auto v = multinomial(probs, 2, false, &g).to_vector<int64_t>();
    std::vector<int64_t> first(4, 0);
    for (int64_t r = 0; r < rows; ++r) {
      first[size_t(v[size_t(r) * 2])]++;
      ASSERT_NE(v[size_t(r) * 2], v[size_t(r) * 2 + 1]);
    }
    EXPECT_LT(chi_square(first, test::rounded(w, dt)), chi_square_bound(3)) << dtype_name(dt);
  }
}

TEST_P(Multinomial, WithoutReplacementZeroProbabilitiesComeLast) {
  // As PyTorch: with fewer positive categories than samples, the zero-probability categories
  // fill the remaining places.
  Tensor probs = test::make({0.0, 3.0, 0.0, 1.0}, {4}, DType::F32, device());
  for (int rep = 0; rep < 20; ++rep) {
    auto v = multinomial(probs, 4, false).to_vector<int64_t>();
    std::set<int64_t> head(v.begin(), v.begin() + 2), tail(v.begin() + 2, v.end());
    EXPECT_EQ(head, (std::set<int64_t>{1, 3}));
    EXPECT_EQ(tail, (std::set<int64_t>{0, 2}));
  }
}

TEST_P(Multinomial, EmptyRows) {
  Tensor s = multinomial(empty({0, 3}, device()), 2, true);
  EXPECT_EQ(s.shape(), (Shape{0, 2}));
}

TEST_P(Multinomial, ArgumentErrors) {
  Generator g(1);
  Tensor p = ones({4}, device());
  EXPECT_ERROR(Error, multinomial(p, 5, false, &g),
               "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  EXPECT_ERROR(Error, multinomial(p, 0, true, &g), "cannot sample n_sample <= 0 samples");
  EXPECT_ERROR(Error, multinomial(ones({2, 2, 2}, device()), 1, true, &g),
               "prob_dist must be 1 or 2 dim");
  EXPECT_ERROR(Error, multinomial(scalar_tensor(1.0, device()), 1, true, &g),
               "prob_dist must be 1 or 2 dim");
  EXPECT_ERROR(Error, multinomial(ones({4}, TensorOptions(DType::I64, device())), 1, true, &g),
               "multinomial only supports floating-point dtypes for input, got: int64");
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_NO_THROW(values(multinomial(p, 9, true, &g)));  // more samples than categories: fine
}

TEST_P(Multinomial, InvalidDistributionErrors) {
  auto probs = [&](std::vector<double> v) { return test::make(v, {int64_t(v.size())}, DType::F32, device()); };
  // Without replacement (PyTorch's wording for that path).
  EXPECT_ERROR(Error, values(multinomial(probs({0.5, -0.1}), 1, false)),
               "probability tensor contains either `inf`, `nan` or element < 0");
  EXPECT_ERROR(Error, values(multinomial(probs({0.5, INFINITY}), 1, false)),
               "probability tensor contains either `inf`, `nan` or element < 0");
  EXPECT_ERROR(Error, values(multinomial(probs({NAN, 1.0}), 1, false)),
               "probability tensor contains either `inf`, `nan` or element < 0");
  EXPECT_ERROR(Error, values(multinomial(probs({0.0, 0.0}), 1, false)),
               "invalid multinomial distribution (sum of probabilities <= 0)");
  // With replacement.
  EXPECT_ERROR(Error, values(multinomial(probs({0.5, -0.1}), 3, true)),
               "invalid multinomial distribution (encountering probability entry < 0)");
  EXPECT_ERROR(Error, values(multinomial(probs({INFINITY, 1.0}), 3, true)),
               "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  EXPECT_ERROR(Error, values(multinomial(probs({NAN, 1.0}), 3, true)),
               "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  Tensor rows = test::make({1, 2, 0, 0}, {2, 2}, DType::F64, device());
  EXPECT_ERROR(Error, values(multinomial(rows, 3, true)),
               "invalid multinomial distribution (sum of probabilities <= 0)");
  // The device is usable after a failed call.
  EXPECT_EQ(multinomial(probs({0.0, 1.0}), 3, true).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 1}));
}

TEST_P(Multinomial, HugeFiniteWeightsWhoseSumOverflows) {
  Tensor probs = test::make({1e308, 1e308, 0.0}, {3}, DType::F64, device());
  auto v = multinomial(probs, 2000, true).to_vector<int64_t>();
  int64_t zeros_count = 0;
  for (int64_t k : v) {
    ASSERT_TRUE(k == 0 || k == 1) << k;
    zeros_count += k == 0;
  }
  EXPECT_NEAR(double(zeros_count) / 2000, 0.5, 5 * std::sqrt(0.25 / 2000));
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Multinomial);

// ---------------------------------------------------------------------------------------
// randperm

class Randperm : public OnEachDevice {};

TEST_P(Randperm, IsAPermutationInEveryDtype) {
  for (DType dt : {DType::I64, DType::I32, DType::I16, DType::U8, DType::F32, DType::F64,
                   DType::F16, DType::BF16, DType::I8}) {
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(2), int64_t(10), int64_t(100)}) {
      if (dt == DType::I8 && n > 100) continue;
      Tensor p = randperm(n, TensorOptions(dt, device()));
      EXPECT_EQ(p.dtype(), dt);
      EXPECT_EQ(p.shape(), (Shape{n}));
      auto v = values(p);
      std::sort(v.begin(), v.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[size_t(i)], double(i)) << dtype_name(dt);
    }
  }
  auto big = randperm(5000, device()).to_vector<int64_t>();
  std::vector<int64_t> sorted = big;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 5000; ++i) ASSERT_EQ(sorted[size_t(i)], i);
  EXPECT_NE(big, sorted);  // not the identity (probability 1/5000!)
}

TEST_P(Randperm, AllPermutationsOfThreeAreEquallyLikely) {
  const int reps = 6000;
  Generator g(70);
  std::vector<Tensor> perms;
  for (int k = 0; k < reps; ++k) perms.push_back(randperm(3, device(), &g));
  std::map<std::vector<int64_t>, int64_t> counts;
  for (auto& p : perms) counts[p.to_vector<int64_t>()]++;
  ASSERT_EQ(counts.size(), 6u);
  std::vector<int64_t> c;
  for (auto& [perm, n] : counts) c.push_back(n);
  EXPECT_LT(chi_square(c, std::vector<double>(6, 1.0)), chi_square_bound(5));
}

TEST_P(Randperm, EachPositionIsUniform) {
  // Value at position 0 of randperm(10), over many draws: uniform over 0..9.
  Generator g(71);
  std::vector<Tensor> perms;
  for (int k = 0; k < 4000; ++k) perms.push_back(randperm(10, device(), &g));
  std::vector<int64_t> counts(10, 0), last(10, 0);
  for (auto& p : perms) {
    auto v = p.to_vector<int64_t>();
    counts[size_t(v[0])]++;
    last[size_t(v[9])]++;
  }
  EXPECT_LT(chi_square(counts, std::vector<double>(10, 1.0)), chi_square_bound(9));
  EXPECT_LT(chi_square(last, std::vector<double>(10, 1.0)), chi_square_bound(9));
}

TEST_P(Randperm, Errors) {
  Generator g(1);
  EXPECT_ERROR(Error, randperm(-1, device(), &g), "randperm: n must be non-negative, got -1");
  EXPECT_ERROR(Error, randperm(300, TensorOptions(DType::U8, device()), &g),
               "randperm: n is too large for result tensor type: 'uint8'");
  EXPECT_NO_THROW(randperm(256, TensorOptions(DType::U8, device()), &g));
  EXPECT_ERROR(Error, randperm(2050, TensorOptions(DType::F16, device()), &g), "float16");
  EXPECT_ERROR(NotImplementedError, randperm(3, TensorOptions(DType::Bool, device()), &g),
               "\"randperm\" not implemented for 'bool'");
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Randperm);

// ---------------------------------------------------------------------------------------
// Registry data.

TEST(RandomRegistry, OpsAreMarkedRandomAndHaveCpuKernels) {
  ensure_ops_registered();
  for (const char* name : {"uniform_", "normal_", "bernoulli_", "bernoulli", "dropout", "random_",
                           "multinomial", "randperm"}) {
    const OpDef& op = get_op(name);
    EXPECT_TRUE(op.random) << name;
    EXPECT_NE(op.kernels[size_t(DeviceType::CPU)].fn, nullptr) << name;
    EXPECT_NE(op.schema.find("int seed, int offset"), std::string::npos) << name;
  }
  EXPECT_EQ(find_kernel(get_op("uniform_"), DeviceType::CPU, DType::I32), nullptr);
  EXPECT_NE(find_kernel(get_op("uniform_"), DeviceType::CPU, DType::BF16), nullptr);
}

}  // namespace
}  // namespace kiln
