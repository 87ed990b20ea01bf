// Behaviour specific to the asynchronous testing backend.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "conformance.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/event.h"

namespace kiln::testing_backend {
int testing_device_count_from_env();  // internal to libkiln; tested directly
}

namespace kiln_test {
namespace {

using kiln::DeviceType;
using kiln::Stream;

// The tests below need a testing device, so the suite is instantiated only when the testing
// backend has one (KILN_TESTING_DEVICES=0 gives it none; Registry tests in device_test.cpp
// check that case). The parameter is always DeviceType::Testing.
class TestingBackend : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kiln::is_available(DeviceType::Testing)) << "instantiated without devices";
  }
  kiln::Backend& backend() { return kiln::get_backend(DeviceType::Testing); }
  kiln::Device device(int i = 0) { return kiln::Device(DeviceType::Testing, i); }
};

std::vector<DeviceType> testing_if_it_has_devices() {
  if (kiln::is_available(DeviceType::Testing)) return {DeviceType::Testing};
  return {};
}

TEST_P(TestingBackend, DeviceMemoryIsLimitedToEightGiB) {
  constexpr size_t kNine = size_t(9) << 30;
  EXPECT_EQ(backend().raw_allocate(0, kNine), nullptr);
  EXPECT_EQ(backend().raw_allocate(backend().device_count(), 16), nullptr);
  kiln::CachingAllocator alloc(backend(), 0);
  try {
    alloc.allocate(kNine, kiln::default_stream(device()));
    FAIL() << "expected OutOfMemoryError";
  } catch (const kiln::OutOfMemoryError& e) {
    EXPECT_STREQ(e.what(), "testing:0 out of memory: tried to allocate 9.00 GiB; 0 bytes "
                           "allocated, 0 bytes reserved; the device refused the allocation "
                           "(device total 8.00 GiB)");
  }
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
  EXPECT_EQ(alloc.stats().num_raw_allocs, 0);
}

// Freeing memory that queued work still uses must not free it under that work (ASan would
// report the memset below as a use after free).
TEST_P(TestingBackend, RawFreeWaitsForWorkQueuedOnTheDevice) {
  Stream s = kiln::new_stream(device());
  Gate gate;
  void* p = backend().raw_allocate(0, 4096);
  ASSERT_NE(p, nullptr);
  std::atomic<bool> wrote{false};
  backend().launch(s, gate.waiter());
  backend().launch(s, [p, &wrote] {
    std::memset(p, 1, 4096);
    wrote = true;
  });
  backend().raw_free(0, p);
  gate.open();
  kiln::synchronize_device(device());
  EXPECT_TRUE(wrote.load());
  EXPECT_THROW(backend().raw_free(0, p), kiln::ValueError) << "double free is detected";
}

TEST_P(TestingBackend, EmptyCacheDoesNotPullMemoryFromUnderQueuedWork) {
  kiln::CachingAllocator alloc(backend(), 0);
  Stream s = kiln::new_stream(device());
  Gate gate;
  {
    kiln::DataPtr block = alloc.allocate(1 << 20, s);
    backend().launch(s, gate.waiter());
    backend().launch(s, [p = block.get()] { std::memset(p, 7, 1 << 20); });
  }  // freed into the cache while the work is pending
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
  gate.open();
  s.synchronize();
  kiln::synchronize_device(device());
}

TEST_P(TestingBackend, EachStreamHasItsOwnWorker) {
  Stream a = kiln::new_stream(device(0));
  Stream b = kiln::new_stream(device(0));
  std::thread::id ta, tb, t_default;
  backend().launch(a, [&] { ta = std::this_thread::get_id(); });
  backend().launch(b, [&] { tb = std::this_thread::get_id(); });
  backend().launch(kiln::default_stream(device(0)), [&] { t_default = std::this_thread::get_id(); });
  kiln::synchronize_device(device(0));
  EXPECT_NE(ta, tb);
  EXPECT_NE(ta, t_default);
  EXPECT_NE(ta, std::this_thread::get_id());
}

TEST_P(TestingBackend, SynchronizeFromTheStreamsOwnTaskIsAnErrorNotAHang) {
  Stream s = kiln::new_stream(device());
  std::string message;
  backend().launch(s, [&] {
    try {
      s.synchronize();
    } catch (const kiln::Error& e) {
      message = e.what();
    }
  });
  s.synchronize();
  EXPECT_NE(message.find("from a task running on that stream"), std::string::npos) << message;
}

TEST_P(TestingBackend, EventsRejectStreamsOfAnotherDeviceType) {
  kiln::Event cpu_event(DeviceType::CPU);
  EXPECT_THROW(cpu_event.record(kiln::default_stream(device())), kiln::DeviceError);
  kiln::Event e(DeviceType::Testing);
  e.record(kiln::default_stream(device()));
  EXPECT_THROW(e.wait(kiln::default_stream(kiln::Device(DeviceType::CPU, 0))), kiln::DeviceError);
  e.synchronize();
}

TEST_P(TestingBackend, StreamOfAnotherDeviceWaitsOnAnEvent) {
  // With one testing device, the waiting stream is a second stream on device 0 (the event's
  // worker still has to hold it back) and device 1 is rejected.
  int other = backend().device_count() >= 2 ? 1 : 0;
  if (other == 0) {
    EXPECT_THROW(kiln::new_stream(device(1)), kiln::DeviceError);
    EXPECT_THROW(kiln::Event(DeviceType::Testing).record(Stream(device(1), 0)),
                 kiln::DeviceError);
  }
  Stream a = kiln::new_stream(device(0));
  Stream b = kiln::new_stream(device(other));
  Gate gate;
  std::atomic<int> value{0};
  int observed = -1;
  backend().launch(a, gate.waiter());
  backend().launch(a, [&] { value = 5; });
  kiln::Event e(DeviceType::Testing);
  e.record(a);
  e.wait(b);
  backend().launch(b, [&] { observed = value.load(); });
  EXPECT_FALSE(b.query());
  gate.open();
  b.synchronize();
  EXPECT_EQ(observed, 5);
}

TEST(TestingBackendConfig, DeviceCountComesFromTheEnvironment) {
  const char* old = std::getenv("KILN_TESTING_DEVICES");
  std::string saved = old ? old : "";
  auto count_with = [](const char* value) {
    setenv("KILN_TESTING_DEVICES", value, 1);
    return kiln::testing_backend::testing_device_count_from_env();
  };
  EXPECT_EQ(count_with("3"), 3);
  EXPECT_EQ(count_with("0"), 0);
  EXPECT_EQ(count_with(""), 2);
  EXPECT_EQ(count_with("abc"), 2);  // ignored with a warning on stderr
  EXPECT_EQ(count_with("-1"), 2);
  EXPECT_EQ(count_with("4x"), 2);
  EXPECT_EQ(count_with("100000"), 2);
  unsetenv("KILN_TESTING_DEVICES");
  EXPECT_EQ(kiln::testing_backend::testing_device_count_from_env(), 2);
  if (old) setenv("KILN_TESTING_DEVICES", saved.c_str(), 1);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TestingBackend);
INSTANTIATE_TEST_SUITE_P(WithDevices, TestingBackend,
                         ::testing::ValuesIn(testing_if_it_has_devices()),
                         device_type_param_name);

}  // namespace
}  // namespace kiln_test
