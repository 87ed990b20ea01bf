#pragma once
// Events of the testing device. Each record() creates a fresh Marker that the stream's worker
// completes when it reaches it; a waiting stream captures the Marker of the latest record at
// wait time, so recording the event again later cannot make an earlier wait wait longer
// (or, recorded on another stream, release it too early).
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kiln/runtime/event.h"

namespace kiln::testing_backend {

class TestingBackend;

struct Marker {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  int64_t time_ns = 0;  // steady clock when the worker reached the marker

  void complete();
  void wait();
  bool is_done();
};

class TestingEvent final : public EventImpl {
 public:
  TestingEvent(TestingBackend& backend, int device_index, bool timing)
      : backend_(backend), device_index_(device_index), timing_(timing) {}

  void record(const Stream& stream) override;
  void block(const Stream& stream) override;
  bool query() const override;
  void synchronize() const override;
  double elapsed_ms(const EventImpl& end) const override;
  int64_t completion_time_ns() const override;

 private:
  std::shared_ptr<Marker> last() const;

  TestingBackend& backend_;
  const int device_index_;
  const bool timing_;
  mutable std::mutex mutex_;
  std::shared_ptr<Marker> last_;  // null until recorded
};

}  // namespace kiln::testing_backend
