#include "testing_event.h"

#include <chrono>

#include "kiln/core/error.h"
#include "testing_backend.h"

namespace kiln::testing_backend {

void Marker::complete() {
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  {
    std::lock_guard lock(mutex);
    time_ns = now;
    done = true;
  }
  cv.notify_all();
}

void Marker::wait() {
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return done; });
}

bool Marker::is_done() {
  std::lock_guard lock(mutex);
  return done;
}

std::shared_ptr<Marker> TestingEvent::last() const {
  std::lock_guard lock(mutex_);
  return last_;
}

void TestingEvent::record(const Stream& stream) {
  KILN_CHECK(stream.device.index == device_index_, DeviceError, "testing event of testing:",
             device_index_, " cannot be recorded on a stream of ", stream.device);
  TestingStream& target = backend_.stream(stream);  // validates the stream first
  auto marker = std::make_shared<Marker>();
  {
    std::lock_guard lock(mutex_);
    last_ = marker;
  }
  target.enqueue([marker] { marker->complete(); });
}

void TestingEvent::block(const Stream& stream) {
  TestingStream& waiter = backend_.stream(stream);
  std::shared_ptr<Marker> marker = last();
  if (!marker || marker->is_done()) return;
  waiter.enqueue([marker] { marker->wait(); });
}

bool TestingEvent::query() const {
  std::shared_ptr<Marker> marker = last();
  return !marker || marker->is_done();
}

void TestingEvent::synchronize() const {
  if (std::shared_ptr<Marker> marker = last()) marker->wait();
}

int64_t TestingEvent::completion_time_ns() const {
  KILN_CHECK(timing_, Error, "testing event: elapsed time needs an event created with "
             "enable_timing=true, got one without timing");
  std::shared_ptr<Marker> marker = last();
  KILN_CHECK(marker != nullptr, Error, "testing event: elapsed time needs a recorded event, "
             "got one that was never recorded");
  std::lock_guard lock(marker->mutex);
  KILN_CHECK(marker->done, Error, "testing event: elapsed time needs a completed event, got "
             "one whose recorded work is still pending (synchronize it first)");
  return marker->time_ns;
}

double TestingEvent::elapsed_ms(const EventImpl& end) const {
  return double(end.completion_time_ns() - completion_time_ns()) / 1e6;
}

}  // namespace kiln::testing_backend
