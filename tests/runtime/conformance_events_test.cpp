// Conformance: events (cross-stream ordering, query/synchronize, timing) on every backend.
#include <atomic>

#include "conformance.h"
#include "kiln/runtime/event.h"

namespace kiln_test {
namespace {

using kiln::Event;
using kiln::Stream;

class RuntimeEvents : public BackendTest {};

// Stream a does slow work and records; b waits on the event and reads a's result. Without
// the wait, b would read the value before a wrote it (a is held back by a gate).
TEST_P(RuntimeEvents, WaitOrdersWorkAcrossStreams) {
  Stream a = kiln::new_stream(device());
  Stream b = kiln::new_stream(device());
  bool async = is_async();
  Gate gate;
  std::atomic<int> value{0};
  int observed = -1;
  backend().launch(a, [&, wait = gate.waiter()] {
    if (async) wait();
    std::this_thread::sleep_for(10ms);
    value = 42;
  });
  Event e(type());
  e.record(a);
  EXPECT_TRUE(e.is_recorded());
  e.wait(b);
  backend().launch(b, [&] { observed = value.load(); });
  if (async) {
    EXPECT_FALSE(e.query());
    EXPECT_FALSE(b.query()) << "b must be held back by the event";
    gate.open();
  }
  b.synchronize();
  EXPECT_EQ(observed, 42);
  EXPECT_TRUE(e.query());
  e.synchronize();
  a.synchronize();
}

TEST_P(RuntimeEvents, WaitCapturesTheRecordMadeBeforeIt) {
  Stream a = kiln::new_stream(device());
  Stream b = kiln::new_stream(device());
  Stream c = kiln::new_stream(device());
  if (!is_async()) {
    // Synchronous: the work before the record has run, the event completes when recorded,
    // and work after a wait on it sees that work at once.
    std::atomic<int> value{0};
    int observed = -1;
    backend().launch(a, [&] { value = 7; });
    Event e(type());
    e.record(a);
    EXPECT_TRUE(e.query()) << backend().name() << " events complete when recorded";
    e.wait(b);
    backend().launch(b, [&] { observed = value.load(); });
    EXPECT_EQ(observed, 7);
    EXPECT_TRUE(b.query());
    e.record(c);
    EXPECT_TRUE(e.query());
    e.synchronize();
    return;
  }
  Gate gate;
  std::atomic<int> value{0};
  int observed = -1;
  backend().launch(a, gate.waiter());
  backend().launch(a, [&] { value = 7; });
  Event e(type());
  e.record(a);
  e.wait(b);
  backend().launch(b, [&] { observed = value.load(); });
  e.record(c);      // re-recorded on an idle stream: completes at once
  e.synchronize();  // waits for the latest record only
  EXPECT_TRUE(e.query());
  EXPECT_FALSE(b.query()) << "b's wait must still refer to the record on a";
  gate.open();
  b.synchronize();
  EXPECT_EQ(observed, 7);
}

TEST_P(RuntimeEvents, HostSynchronizeWaitsForRecordedWork) {
  Stream s = kiln::new_stream(device());
  std::atomic<bool> done{false};
  backend().launch(s, [&] {
    std::this_thread::sleep_for(20ms);
    done = true;
  });
  Event e(type());
  e.record(s);
  e.synchronize();
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(e.query());
}

TEST_P(RuntimeEvents, RecordUsesTheCurrentStream) {
  Stream s = kiln::new_stream(device());
  if (!is_async()) {
    // Synchronous: recording on the current stream completes the event at once, after the
    // work launched on that stream before it.
    bool ran = false;
    backend().launch(s, [&] { ran = true; });
    Event e(type());
    {
      kiln::StreamGuard guard(s);
      e.record();
    }
    EXPECT_TRUE(ran);
    EXPECT_TRUE(e.is_recorded());
    EXPECT_TRUE(e.query()) << backend().name() << " events complete when recorded";
    e.synchronize();
    EXPECT_TRUE(e.query());
    return;
  }
  Gate gate;
  backend().launch(s, gate.waiter());
  Event e(type());
  {
    kiln::StreamGuard guard(s);
    e.record();  // on s, which is blocked
  }
  EXPECT_FALSE(e.query());
  gate.open();
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST_P(RuntimeEvents, UnrecordedEventIsCompleteAndWaitIsANoOp) {
  Event e(type());
  EXPECT_FALSE(e.is_recorded());
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(e.synchronize());
  Stream s = kiln::new_stream(device());
  bool ran = false;
  e.wait(s);
  backend().launch(s, [&] { ran = true; });
  s.synchronize();
  EXPECT_TRUE(ran);
}

TEST_P(RuntimeEvents, ElapsedTimeCoversTheWorkBetweenEvents) {
  Stream s = kiln::new_stream(device());
  Event start(type(), /*enable_timing=*/true), end(type(), /*enable_timing=*/true);
  start.record(s);
  backend().launch(s, [] { std::this_thread::sleep_for(30ms); });
  end.record(s);
  end.synchronize();
  double ms = start.elapsed_time(end);
  EXPECT_GE(ms, 30.0);
  EXPECT_LT(ms, 60'000.0);
  EXPECT_LE(end.elapsed_time(start), -30.0) << "reversed order gives a negative time";
}

TEST_P(RuntimeEvents, ElapsedTimeRejectsUntimedUnrecordedOrPendingEvents) {
  auto expect_error = [](const Event& a, const Event& b, const std::string& needle) {
    try {
      a.elapsed_time(b);
      ADD_FAILURE() << "elapsed_time should fail with '" << needle << "'";
    } catch (const kiln::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Stream s = kiln::new_stream(device());
  Event untimed(type()), t1(type(), true), t2(type(), true);
  expect_error(t1, t2, "recorded");
  untimed.record(s);
  t1.record(s);
  expect_error(untimed, t1, "enable_timing");
  expect_error(t1, t2, "end recorded: no");
  if (is_async()) {
    Gate gate;
    backend().launch(s, gate.waiter());
    t2.record(s);
    expect_error(t1, t2, "completed");
    gate.open();
  } else {
    t2.record(s);
  }
  t2.synchronize();
  EXPECT_GE(t1.elapsed_time(t2), 0.0);
}

TEST_P(RuntimeEvents, EventStaysOnTheDeviceOfItsFirstRecord) {
  if (backend().device_count() < 2) {
    // One device: re-recording on any stream of it is allowed; device 1 does not exist.
    Event e(type());
    e.record(kiln::default_stream(device(0)));
    Stream other = kiln::new_stream(device(0));
    EXPECT_NO_THROW(e.record(other));
    EXPECT_THROW(e.record(Stream(device(1), 0)), kiln::DeviceError);
    e.wait(kiln::default_stream(device(0)));
    e.synchronize();
    Event fresh(type());
    EXPECT_THROW(fresh.record(Stream(device(1), 0)), kiln::DeviceError)
        << "a first record on a device index out of range is an error";
    EXPECT_FALSE(fresh.is_recorded());
    return;
  }
  Event e(type());
  e.record(kiln::default_stream(device(0)));
  EXPECT_THROW(e.record(kiln::default_stream(device(1))), kiln::DeviceError);
  // Waiting from another device of the same type is allowed.
  Stream other = kiln::new_stream(device(1));
  e.wait(other);
  other.synchronize();
}

TEST_P(RuntimeEvents, EventsMove) {
  Stream s = kiln::new_stream(device());
  Event a(type(), true);
  a.record(s);
  Event b = std::move(a);
  EXPECT_TRUE(b.is_recorded());
  b.synchronize();
  EXPECT_TRUE(b.query());
  EXPECT_EQ(b.device_type(), type());
}

KILN_INSTANTIATE_FOR_ALL_BACKENDS(RuntimeEvents);

}  // namespace
}  // namespace kiln_test
