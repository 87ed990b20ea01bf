// parallel_region (src/kiln/backends/cpu/parallel_region.h): a body holding `#pragma omp for`
// runs on the calling thread alone, outside any OpenMP region, when it is not to be parallel;
// over a team when it is; and as a whole loop per caller when called from the threads of an
// active region.
#include <omp.h>

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

#include "parallel_region.h"

namespace kiln::test {
namespace {

constexpr int kIterations = 97;

TEST(ParallelRegion, NotParallelRunsTheLoopDirectlyOnTheCallingThread) {
  int count = 0, level = -1, threads = 0, team_threads = 0;
  cpu::parallel_region(false, [&] {
    level = omp_get_level();  // 0: no region was opened, not even a team of one
    team_threads = omp_get_num_threads();
#pragma omp for schedule(static)
    for (int i = 0; i < kIterations; ++i) {
      ++count;
      threads |= 1 << omp_get_thread_num();
    }
  });
  EXPECT_EQ(level, 0);
  EXPECT_EQ(team_threads, 1);
  EXPECT_EQ(count, kIterations);
  EXPECT_EQ(threads, 1);  // thread 0 only
}

TEST(ParallelRegion, ParallelSplitsTheLoopOverTheTeam) {
  std::vector<std::atomic<int>> seen(kIterations);
  std::atomic<int> level{-1};
  cpu::parallel_region(true, [&] {
    level = omp_get_level();
#pragma omp for schedule(static)
    for (int i = 0; i < kIterations; ++i) seen[size_t(i)]++;
  });
  EXPECT_EQ(level.load(), 1);
  for (int i = 0; i < kIterations; ++i) EXPECT_EQ(seen[size_t(i)].load(), 1) << i;
}

// From inside an active region, a body that is not to be parallel keeps a region of its own
// (a team of one per caller): its `omp for` must not bind to the outer team and split the
// loop among the callers.
TEST(ParallelRegion, InsideAnActiveRegionEachCallerRunsTheWholeLoop) {
  int counts[2] = {0, 0}, outer_threads = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    outer_threads = omp_get_num_threads();
    const int me = omp_get_thread_num();
    cpu::parallel_region(false, [&] {
#pragma omp for schedule(static)
      for (int i = 0; i < kIterations; ++i) ++counts[me];
    });
  }
  if (outer_threads < 2) GTEST_SKIP() << "OpenMP gave the outer region one thread";
  EXPECT_EQ(counts[0], kIterations);
  EXPECT_EQ(counts[1], kIterations);
}

}  // namespace
}  // namespace kiln::test
