// Conformance: streams (ordering, independence, errors, copies) on every backend.
#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include "conformance.h"
#include "kiln/runtime/allocator.h"

namespace kiln_test {
namespace {

using kiln::Backend;
using kiln::DataPtr;
using kiln::Stream;

class RuntimeStreams : public BackendTest {};

TEST_P(RuntimeStreams, WorkOnOneStreamRunsInSubmissionOrder) {
  for (Stream s : {kiln::default_stream(device()), kiln::new_stream(device())}) {
    constexpr int kTasks = 2000;
    std::vector<int> seen;  // only the stream touches it until synchronize()
    for (int i = 0; i < kTasks; ++i) {
      backend().launch(s, [&seen, i] {
        if (i % 200 == 0) std::this_thread::sleep_for(200us);  // let later tasks pile up
        seen.push_back(i);
      });
    }
    s.synchronize();
    EXPECT_TRUE(s.query());
    std::vector<int> expected(kTasks);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(seen, expected) << "on " << s;
  }
}

TEST_P(RuntimeStreams, NewStreamsHaveDistinctIdsOnTheRequestedDevice) {
  Stream a = kiln::new_stream(device(last_index()));
  Stream b = kiln::new_stream(device(last_index()));
  EXPECT_EQ(a.device, device(last_index()));
  EXPECT_NE(a.id, 0);
  EXPECT_NE(a.id, b.id);
  // Without an index, the current device is used.
  kiln::DeviceGuard guard(device(last_index()));
  EXPECT_EQ(kiln::new_stream(kiln::Device(type())).device, device(last_index()));
  EXPECT_EQ(kiln::default_stream(kiln::Device(type())), Stream(device(last_index()), 0));
}

TEST_P(RuntimeStreams, AsyncLaunchReturnsBeforeTheWorkRuns) {
  Stream s = kiln::new_stream(device());
  if (!is_async()) {
    // A synchronous backend has run the work, on the calling thread, before launch() returns.
    bool ran = false;
    std::thread::id ran_on;
    backend().launch(s, [&] {
      ran_on = std::this_thread::get_id();
      ran = true;
    });
    EXPECT_TRUE(ran) << backend().name() << " is synchronous: launch() must run the work";
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    EXPECT_TRUE(s.query()) << "nothing can be pending on a synchronous stream";
    s.synchronize();
    return;
  }
  Gate gate;
  std::atomic<bool> ran{false};
  backend().launch(s, gate.waiter());
  backend().launch(s, [&] { ran = true; });
  EXPECT_FALSE(s.query());
  EXPECT_FALSE(ran.load());
  gate.open();
  s.synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(s.query());
}

TEST_P(RuntimeStreams, DifferentStreamsRunIndependently) {
  Stream a = kiln::new_stream(device());
  Stream b = kiln::new_stream(device());
  if (!is_async()) {
    // Synchronous: each launch has finished when it returns, and no stream is left busy.
    std::atomic<bool> a_ran{false}, b_ran{false};
    backend().launch(a, [&] { a_ran = true; });
    EXPECT_TRUE(a_ran.load());
    EXPECT_FALSE(b_ran.load()) << "work on a must not run b's work";
    backend().launch(b, [&] { b_ran = true; });
    EXPECT_TRUE(b_ran.load());
    EXPECT_TRUE(a.query());
    EXPECT_TRUE(b.query());
    b.synchronize();
    a.synchronize();
    return;
  }
  Gate gate;
  std::atomic<bool> b_ran{false};
  backend().launch(a, gate.waiter());
  backend().launch(b, [&] { b_ran = true; });
  b.synchronize();  // must not wait for a, which is blocked
  EXPECT_TRUE(b_ran.load());
  EXPECT_FALSE(a.query());
  gate.open();
  a.synchronize();
}

TEST_P(RuntimeStreams, SynchronizeDeviceWaitsForEveryStream) {
  std::vector<Stream> streams = {kiln::default_stream(device()), kiln::new_stream(device()),
                                 kiln::new_stream(device())};
  std::vector<std::atomic<int>> done(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    backend().launch(streams[i], [&done, i] {
      std::this_thread::sleep_for(20ms);
      done[i] = 1;
    });
  }
  kiln::synchronize_device(device());
  for (size_t i = 0; i < streams.size(); ++i) {
    EXPECT_EQ(done[i].load(), 1) << "stream " << streams[i] << " was not waited for";
    EXPECT_TRUE(streams[i].query());
  }
}

TEST_P(RuntimeStreams, ErrorInLaunchedWorkIsReported) {
  Stream s = kiln::new_stream(device());
  std::string expected_prefix =
      "asynchronous error on " + device().str() + " stream " + std::to_string(s.id) + ": ";
  if (!is_async()) {
    // Synchronous backends report the error from launch() itself.
    try {
      backend().launch(s, [] { throw kiln::ValueError("boom"); });
      FAIL() << "launch() on a synchronous backend should rethrow";
    } catch (const kiln::ValueError& e) {
      EXPECT_STREQ(e.what(), "boom");
    }
    EXPECT_NO_THROW(s.synchronize());
    return;
  }
  std::atomic<bool> later_ran{false};
  EXPECT_NO_THROW(backend().launch(s, [] { throw kiln::ValueError("boom"); }));
  backend().launch(s, [] { throw kiln::ShapeError("second error"); });
  backend().launch(s, [&] { later_ran = true; });
  try {
    s.synchronize();
    FAIL() << "synchronize() should rethrow the task's error";
  } catch (const kiln::ValueError& e) {  // the first error, with its class kept
    EXPECT_EQ(std::string(e.what()), expected_prefix + "boom");
  }
  EXPECT_TRUE(later_ran.load()) << "work after a failed task must still run";
  EXPECT_NO_THROW(s.synchronize()) << "the error must be reported once";

  backend().launch(s, [] { throw std::runtime_error("not a kiln error"); });
  try {
    s.synchronize();
    FAIL() << "synchronize() should rethrow";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()), expected_prefix + "not a kiln error");
  }
}

TEST_P(RuntimeStreams, SynchronizeDeviceReportsAnErrorOfAnyStream) {
  Stream s = kiln::new_stream(device());
  if (!is_async()) {
    // Synchronous backends report the error from launch() itself, so synchronize_device()
    // has nothing left to report.
    try {
      backend().launch(s, [] { throw kiln::Error("late failure"); });
      FAIL() << "launch() on a synchronous backend should rethrow";
    } catch (const kiln::Error& e) {
      EXPECT_STREQ(e.what(), "late failure");
    }
    EXPECT_NO_THROW(kiln::synchronize_device(device()));
    EXPECT_TRUE(s.query());
    return;
  }
  backend().launch(s, [] { throw kiln::Error("late failure"); });
  try {
    kiln::synchronize_device(device());
    FAIL() << "synchronize_device() should report the stream's error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("late failure"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(kiln::synchronize_device(device()));
}

TEST_P(RuntimeStreams, AsyncCopiesRoundTripThroughTheDevice) {
  Stream s = kiln::new_stream(device(last_index()));
  constexpr size_t kWords = 1 << 16;
  constexpr size_t kBytes = kWords * sizeof(uint32_t);
  std::vector<uint32_t> host(kWords), back(kWords, 0);
  for (size_t i = 0; i < kWords; ++i) host[i] = uint32_t(i * 2654435761u);
  kiln::CachingAllocator& alloc = kiln::allocator_for(device(last_index()));
  DataPtr d1 = alloc.allocate(kBytes, s);
  DataPtr d2 = alloc.allocate(kBytes, s);
  ASSERT_NE(d1.get(), nullptr);
  ASSERT_NE(d2.get(), nullptr);

  bool async = is_async();
  Gate gate;
  if (async) backend().launch(s, gate.waiter());
  backend().copy_async(d1.get(), host.data(), kBytes, Backend::CopyKind::HostToDevice, s);
  backend().copy_async(d2.get(), d1.get(), kBytes, Backend::CopyKind::DeviceToDevice, s);
  backend().copy_async(back.data(), d2.get(), kBytes, Backend::CopyKind::DeviceToHost, s);
  if (async) {
    EXPECT_EQ(back[1], 0u) << "the copy ran before the work queued ahead of it";
    gate.open();
  }
  s.synchronize();
  EXPECT_EQ(back, host);
}

TEST_P(RuntimeStreams, UnknownStreamsAndDevicesAreRejected) {
  Stream bogus(device(), 1'000'000'000);
  EXPECT_THROW(backend().stream_query(bogus), kiln::DeviceError);
  EXPECT_THROW(backend().launch(bogus, [] {}), kiln::DeviceError);
  EXPECT_THROW(bogus.synchronize(), kiln::DeviceError);
  try {
    kiln::current_stream(device(backend().device_count()));
    FAIL() << "a device index past the count should be rejected";
  } catch (const kiln::DeviceError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[0, " + std::to_string(backend().device_count()) + ")"),
              std::string::npos) << msg;
  }
  EXPECT_THROW(kiln::new_stream(device(backend().device_count())), kiln::DeviceError);
  EXPECT_THROW(kiln::set_current_device_index(type(), backend().device_count()),
               kiln::DeviceError);
  EXPECT_EQ(kiln::current_device_index(type()), 0);
}

KILN_INSTANTIATE_FOR_ALL_BACKENDS(RuntimeStreams);

}  // namespace
}  // namespace kiln_test
