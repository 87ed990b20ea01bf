// Philox 4x32-10 known answers and the Generator's state handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <set>
#include <thread>
#include <vector>

#include "conformance.h"
#include "kiln/runtime/generator.h"

namespace kiln_test {
namespace {

using Words = std::array<uint32_t, 4>;

uint64_t key_of(uint32_t k0, uint32_t k1) { return uint64_t(k1) << 32 | k0; }
uint64_t ctr_of(uint32_t lo, uint32_t hi) { return uint64_t(hi) << 32 | lo; }

// Random123's kat_vectors for philox4x32 with 10 rounds (key words and counter words are
// listed low word first, as the library stores them).
TEST(Philox, KnownAnswerZeros) {
  EXPECT_EQ(kiln::philox4x32(0, 0, 0), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(Philox, KnownAnswerAllOnes) {
  EXPECT_EQ(kiln::philox4x32(~uint64_t(0), ~uint64_t(0), ~uint64_t(0)),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(Philox, KnownAnswerPiDigits) {
  EXPECT_EQ(kiln::philox4x32(key_of(0xa4093822, 0x299f31d0), ctr_of(0x243f6a88, 0x85a308d3),
                             ctr_of(0x13198a2e, 0x03707344)),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, EveryInputWordMatters) {
  Words base = kiln::philox4x32(1, 2, 3);
  EXPECT_NE(kiln::philox4x32(1ull << 32 | 1, 2, 3), base);  // key high word
  EXPECT_NE(kiln::philox4x32(1, 2 | 1ull << 32, 3), base);  // counter word 1
  EXPECT_NE(kiln::philox4x32(1, 2, 3 | 1ull << 32), base);  // counter word 3
  EXPECT_EQ(kiln::philox4x32(1, 2), kiln::philox4x32(1, 2, 0));
}

TEST(Philox, UnitConversionsStayInTheHalfOpenInterval) {
  EXPECT_EQ(kiln::uint32_to_unit_float(0), 0.0f);
  EXPECT_LT(kiln::uint32_to_unit_float(0xffffffffu), 1.0f);
  EXPECT_EQ(kiln::uint32_to_unit_float(0x80000000u), 0.5f);
  EXPECT_EQ(kiln::uint64_to_unit_double(0), 0.0);
  EXPECT_LT(kiln::uint64_to_unit_double(~uint64_t(0)), 1.0);
  EXPECT_EQ(kiln::uint64_to_unit_double(uint64_t(1) << 63), 0.5);
}

TEST(Generator, SeedAndOffsetAreTheWholeState) {
  kiln::Generator g(1234);
  EXPECT_EQ(g.seed(), 1234u);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(g.reserve(10), 0u);
  EXPECT_EQ(g.reserve(5), 10u);
  EXPECT_EQ(g.offset(), 15u);
  kiln::Generator::State saved = g.state();
  uint64_t next = g.reserve(3);
  g.set_state(saved);
  EXPECT_EQ(g.reserve(3), next);
  g.manual_seed(99);
  EXPECT_EQ(g.seed(), 99u);
  EXPECT_EQ(g.offset(), 0u) << "manual_seed resets the offset";
  g.set_offset(7);
  EXPECT_EQ(g.reserve(1), 7u);
}

TEST(Generator, SameSeedGivesTheSameWords) {
  auto draw = [](kiln::Generator& g, int n) {
    std::vector<uint32_t> out;
    uint64_t first = g.reserve(uint64_t(n));
    for (int i = 0; i < n; ++i) {
      for (uint32_t w : kiln::philox4x32(g.seed(), first + uint64_t(i))) out.push_back(w);
    }
    return out;
  };
  kiln::Generator a(42), b(42), c(43);
  std::vector<uint32_t> wa = draw(a, 64);
  EXPECT_EQ(wa, draw(b, 64));
  EXPECT_NE(wa, draw(c, 64));
  EXPECT_NE(wa, draw(a, 64)) << "the offset advanced, so the next draw differs";
  std::set<uint32_t> distinct(wa.begin(), wa.end());
  EXPECT_GT(distinct.size(), wa.size() - 2);
}

TEST(Generator, ConcurrentReservationsNeverOverlap) {
  kiln::Generator g(5);
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) got[size_t(t)].push_back(g.reserve(2));
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), size_t(kThreads * kEach));
  EXPECT_EQ(g.offset(), uint64_t(2 * kThreads * kEach));
  EXPECT_EQ(*all.rbegin(), uint64_t(2 * kThreads * kEach - 2));
}

class RuntimeGenerators : public BackendTest {};

TEST_P(RuntimeGenerators, DefaultGeneratorsAreSeededTogether) {
  kiln::Generator& g0 = kiln::default_generator(device(0));
  EXPECT_EQ(&g0, &kiln::default_generator(kiln::Device(type())));
  kiln::manual_seed(2024);
  for (int i = 0; i < backend().device_count(); ++i) {
    kiln::Generator& g = kiln::default_generator(device(i));
    EXPECT_EQ(g.seed(), 2024u) << device(i);
    EXPECT_EQ(g.offset(), 0u) << device(i);
  }
  EXPECT_EQ(kiln::default_generator(kiln::Device(kiln::DeviceType::CPU, 0)).seed(), 2024u);
  EXPECT_EQ(g0.reserve(8), 0u);
  EXPECT_EQ(g0.offset(), 8u);
  kiln::Generator& last = kiln::default_generator(device(last_index()));
  if (&last != &g0) {
    EXPECT_EQ(last.offset(), 0u) << "devices keep separate offsets";
  }
  kiln::manual_seed(2024);
  EXPECT_EQ(g0.offset(), 0u);
  EXPECT_THROW(kiln::default_generator(device(backend().device_count())), kiln::DeviceError);
}

KILN_INSTANTIATE_FOR_ALL_BACKENDS(RuntimeGenerators);

}  // namespace
}  // namespace kiln_test
