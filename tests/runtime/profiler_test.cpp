// The op-level profiler: counts every op called from user code once (an op that another
// op's implementation calls is part of its caller's time), aggregates by op and device,
// clears on start, refuses a second start, and records nothing once stopped.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

namespace kiln {
namespace {

const profiler::OpStats* find(const std::vector<profiler::OpStats>& v, const std::string& name,
                              const std::string& device = "cpu") {
  for (const auto& s : v)
    if (s.name == name && s.device == device) return &s;
  return nullptr;
}

TEST(Profiler, CountsTopLevelOpsByNameAndDevice) {
  Tensor a = ones({64, 64}), b = ones({64, 64});
  profiler::start();
  for (int i = 0; i < 3; ++i) a = add(a, b);
  Tensor m = matmul(a, b);
  Tensor t = ones({8}, TensorOptions(Device(DeviceType::Testing, 0)));
  Tensor u = mul(t, t);
  u.cpu();
  profiler::stop();
  auto stats = profiler::stats();
  const auto* add_stats = find(stats, "add");
  ASSERT_NE(add_stats, nullptr);
  EXPECT_EQ(add_stats->calls, 3);
  EXPECT_GT(add_stats->total_us, 0.0);
  EXPECT_GE(add_stats->total_us, add_stats->max_us);
  EXPECT_NE(find(stats, "mul", "testing"), nullptr);
  EXPECT_EQ(find(stats, "mul", "cpu"), nullptr);
  for (size_t i = 1; i < stats.size(); ++i) EXPECT_GE(stats[i - 1].total_us, stats[i].total_us);
  std::string table = profiler::table(2);
  EXPECT_NE(table.find("total"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4);  // header, 2 rows, total
}

TEST(Profiler, StopsRecordingAndClearsOnStart) {
  profiler::start();
  Tensor x = add(ones({4}), ones({4}));
  EXPECT_THROW(profiler::start(), Error);
  profiler::stop();
  EXPECT_FALSE(profiler::is_enabled());
  x = add(x, x);  // not recorded
  auto stats = profiler::stats();
  ASSERT_NE(find(stats, "add"), nullptr);
  EXPECT_EQ(find(stats, "add")->calls, 1);
  profiler::start();
  profiler::stop();
  EXPECT_TRUE(profiler::stats().empty());
}

}  // namespace
}  // namespace kiln
