// Event: the device-generic wrapper. The backend's EventImpl is created on the first record,
// because only then is the device known (an Event is constructed with just a device type).
#include "kiln/runtime/event.h"

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"

namespace kiln {

namespace {
const char* yes_no(bool b) { return b ? "yes" : "no"; }
}  // namespace

Event::Event(DeviceType type, bool enable_timing) : type_(type), timing_(enable_timing) {}
Event::~Event() = default;
Event::Event(Event&&) noexcept = default;
Event& Event::operator=(Event&&) noexcept = default;

void Event::record() { record(current_stream(Device(type_))); }

void Event::record(const Stream& stream) {
  KILN_CHECK(stream.device.type == type_, DeviceError, "Event::record: this event is for ",
             device_type_name(type_), " devices, got a stream on ", stream.device);
  if (!impl_) {
    Device d = resolve_device(stream.device);
    impl_ = get_backend(type_).create_event(d.index, timing_);
    device_ = d;
  } else {
    KILN_CHECK(stream.device == device_, DeviceError, "Event::record: this event belongs to ",
               device_, " (where it was first recorded), got a stream on ", stream.device);
  }
  impl_->record(stream);
  recorded_ = true;
}

void Event::wait(const Stream& stream) {
  KILN_CHECK(stream.device.type == type_, DeviceError, "Event::wait: this event is for ",
             device_type_name(type_), " devices, got a stream on ", stream.device);
  if (!recorded_) return;  // nothing to wait for, as in CUDA/PyTorch
  impl_->block(stream);
}

bool Event::query() const { return !recorded_ || impl_->query(); }

void Event::synchronize() const {
  if (recorded_) impl_->synchronize();
}

double Event::elapsed_time(const Event& end) const {
  KILN_CHECK(timing_ && end.timing_, Error,
             "Event::elapsed_time: both events must be created with enable_timing=true; got "
             "start timed: ", yes_no(timing_), ", end timed: ", yes_no(end.timing_));
  KILN_CHECK(type_ == end.type_, DeviceError, "Event::elapsed_time: both events must be on "
             "the same device type; got ", device_type_name(type_), " and ",
             device_type_name(end.type_));
  KILN_CHECK(recorded_ && end.recorded_, Error,
             "Event::elapsed_time: both events must be recorded first; got start recorded: ",
             yes_no(recorded_), ", end recorded: ", yes_no(end.recorded_));
  KILN_CHECK(query() && end.query(), Error,
             "Event::elapsed_time: both events must have completed (call synchronize() on the "
             "end event first); got start completed: ", yes_no(query()),
             ", end completed: ", yes_no(end.query()));
  return impl_->elapsed_ms(*end.impl_);
}

}  // namespace kiln
