// The per-thread chain of packed weights that the float32 kernel prefetches along
// (isa/packed_successor.h, decision 0119). It lives beside the AMX tests because this test
// program has the library's ISA folder on its include path.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "packed_successor.h"

namespace kiln::cpu {
namespace {

bool same_run(const PackedRun& a, const PackedRun& b) {
  return a.first == b.first && a.lines == b.lines;
}

TEST(PackedSuccessor, LearnsTheOrderOfWeightsAndPredictsIt) {
  // Three weights' storage (heap addresses no earlier call on this thread can have used, as
  // long as they are alive) and a first block of each.
  auto w1 = std::make_unique<char[]>(64), w2 = std::make_unique<char[]>(64),
       w3 = std::make_unique<char[]>(64);
  const PackedRun r1{w1.get(), 1}, r2{w2.get(), 2}, r3{w3.get(), 3};
  // First forward: nothing is known yet.
  EXPECT_EQ(packed_successor(w1.get(), r1).first, nullptr);
  EXPECT_EQ(packed_successor(w2.get(), r2).first, nullptr);
  EXPECT_EQ(packed_successor(w3.get(), r3).first, nullptr);
  // Second forward: each weight predicts the next one's first block; the last predicts the
  // first (the chain wrapped around from w3 to w1 at the start of this forward).
  EXPECT_TRUE(same_run(packed_successor(w1.get(), r1), r2));
  EXPECT_TRUE(same_run(packed_successor(w2.get(), r2), r3));
  EXPECT_TRUE(same_run(packed_successor(w3.get(), r3), r1));
  // The same weight twice in a row learns nothing and predicts nothing.
  EXPECT_EQ(packed_successor(w3.get(), r3).first, nullptr);
  // A changed order is learnt from the next call on: w1 -> w3 replaces w1 -> w2.
  EXPECT_TRUE(same_run(packed_successor(w1.get(), r1), r2));
  EXPECT_TRUE(same_run(packed_successor(w3.get(), r3), r1));
  EXPECT_TRUE(same_run(packed_successor(w1.get(), r1), r3));
}

TEST(PackedSuccessor, EachThreadKeepsItsOwnChain) {
  auto w1 = std::make_unique<char[]>(64), w2 = std::make_unique<char[]>(64);
  const PackedRun r1{w1.get(), 1}, r2{w2.get(), 2};
  packed_successor(w1.get(), r1);
  packed_successor(w2.get(), r2);
  packed_successor(w1.get(), r1);  // this thread now knows w1 -> w2 and w2 -> w1
  PackedRun seen_elsewhere{w1.get(), -1};
  std::thread other([&] { seen_elsewhere = packed_successor(w1.get(), r1); });
  other.join();
  EXPECT_EQ(seen_elsewhere.first, nullptr) << "another thread's chain leaked into this one";
  EXPECT_TRUE(same_run(packed_successor(w2.get(), r2), r1));
}

}  // namespace
}  // namespace kiln::cpu
