#pragma once
// Event: a marker recorded on a stream. Another stream can wait on it (cross-stream
// ordering without blocking the host), the host can query or wait for it, and two timed
// events give the elapsed time between them.
#include <memory>

#include "kiln/runtime/stream.h"

namespace kiln {

// What a backend implements for its events.
class EventImpl {
 public:
  virtual ~EventImpl() = default;
  virtual void record(const Stream& stream) = 0;
  virtual void block(const Stream& stream) = 0;  // stream waits for the last record
  virtual bool query() const = 0;                // true when recorded work has finished
  virtual void synchronize() const = 0;
  // Milliseconds between this event and end; both must be timed and completed.
  virtual double elapsed_ms(const EventImpl& end) const = 0;
  // Host time (steady clock, ns) when the recorded point completed; for elapsed_ms.
  virtual int64_t completion_time_ns() const = 0;
};

class Event {
 public:
  explicit Event(DeviceType type = DeviceType::CPU, bool enable_timing = false);
  ~Event();
  Event(Event&&) noexcept;
  Event& operator=(Event&&) noexcept;

  void record();                      // on the current stream of the current device
  void record(const Stream& stream);
  void wait(const Stream& stream);    // make stream wait for this event (not the host)
  bool query() const;                 // true if never recorded, or the work has finished
  void synchronize() const;           // host waits
  double elapsed_time(const Event& end) const;  // milliseconds, as torch.Event.elapsed_time
  bool is_recorded() const { return recorded_; }
  DeviceType device_type() const { return type_; }

 private:
  DeviceType type_;
  bool timing_;
  bool recorded_ = false;
  Device device_{};
  std::unique_ptr<EventImpl> impl_;
};

}  // namespace kiln
