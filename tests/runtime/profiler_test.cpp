// The op-level profiler: counts every op called from user code once (an op that another
// op's implementation calls is part of its caller's time), aggregates by op and device,
// clears on start, refuses a second start, and records nothing once stopped.
#include <gtest/gtest.h>

#include <chrono>

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

TEST(Profiler, TracesEachTopLevelCallWithShapes) {
  Tensor a = ones({3, 4}), b = ones({4, 5});
  profiler::start({/*trace=*/true, /*record_shapes=*/true, /*max_events=*/0});
  const int64_t before = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  Tensor c = matmul(a, b);
  Tensor d = add(c, c);
  profiler::stop();
  auto events = profiler::events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "matmul");
  EXPECT_EQ(events[0].device, "cpu");
  EXPECT_EQ(events[0].sequence, 0);
  EXPECT_EQ(events[1].sequence, 1);
  EXPECT_GE(events[0].start_ns, before);
  EXPECT_LE(events[0].start_ns + events[0].duration_ns, events[1].start_ns);
  EXPECT_EQ(events[0].input_shapes, (std::vector<std::vector<int64_t>>{{3, 4}, {4, 5}}));
  EXPECT_EQ(events[0].input_dtypes, (std::vector<std::string>{"float32", "float32"}));
  EXPECT_EQ(events[0].output_shapes, (std::vector<std::vector<int64_t>>{{3, 5}}));
  EXPECT_EQ(events[1].name, "add");
  EXPECT_EQ(events[0].thread, events[1].thread);
  // The aggregates are kept as without tracing.
  ASSERT_NE(find(profiler::stats(), "matmul"), nullptr);
}

TEST(Profiler, TracingIsOffByDefaultAndCapped) {
  profiler::start();
  Tensor x = add(ones({2}), ones({2}));
  profiler::stop();
  EXPECT_TRUE(profiler::events().empty());
  profiler::start({true, false, 2});
  for (int i = 0; i < 5; ++i) x = add(x, x);
  profiler::stop();
  auto events = profiler::events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].input_shapes.empty());  // shapes only with record_shapes
  EXPECT_EQ(profiler::dropped_events(), 3);
  EXPECT_EQ(find(profiler::stats(), "add")->calls, 5);
  EXPECT_THROW(profiler::start({true, false, -1}), ValueError);
  EXPECT_FALSE(profiler::is_enabled());
}

}  // namespace
}  // namespace kiln
