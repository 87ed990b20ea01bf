// Behaviour specific to the asynchronous testing backend.
#include <atomic>
#include <cstdlib>
#include <cstring>

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

class TestingBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kiln::is_available(DeviceType::Testing)) GTEST_SKIP() << "no testing devices";
  }
  kiln::Backend& backend() { return kiln::get_backend(DeviceType::Testing); }
  kiln::Device device(int i = 0) { return kiln::Device(DeviceType::Testing, i); }
};

TEST_F(TestingBackend, DeviceMemoryIsLimitedToEightGiB) {
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
TEST_F(TestingBackend, RawFreeWaitsForWorkQueuedOnTheDevice) {
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

TEST_F(TestingBackend, EmptyCacheDoesNotPullMemoryFromUnderQueuedWork) {
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

TEST_F(TestingBackend, EachStreamHasItsOwnWorker) {
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

TEST_F(TestingBackend, SynchronizeFromTheStreamsOwnTaskIsAnErrorNotAHang) {
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

TEST_F(TestingBackend, EventsRejectStreamsOfAnotherDeviceType) {
  kiln::Event cpu_event(DeviceType::CPU);
  EXPECT_THROW(cpu_event.record(kiln::default_stream(device())), kiln::DeviceError);
  kiln::Event e(DeviceType::Testing);
  e.record(kiln::default_stream(device()));
  EXPECT_THROW(e.wait(kiln::default_stream(kiln::Device(DeviceType::CPU, 0))), kiln::DeviceError);
  e.synchronize();
}

TEST_F(TestingBackend, StreamOfAnotherDeviceWaitsOnAnEvent) {
  if (backend().device_count() < 2) GTEST_SKIP() << "needs two testing devices";
  Stream a = kiln::new_stream(device(0));
  Stream b = kiln::new_stream(device(1));
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

TEST_F(TestingBackend, DeviceCountComesFromTheEnvironment) {
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

}  // namespace
}  // namespace kiln_test
