// Conformance: current device/stream per thread and the RAII guards, on every backend.
#include "conformance.h"

namespace kiln_test {
namespace {

using kiln::DeviceGuard;
using kiln::Stream;
using kiln::StreamGuard;

class RuntimeGuards : public BackendTest {};

TEST_P(RuntimeGuards, DeviceGuardSetsAndRestores) {
  int last = last_index();
  ASSERT_EQ(kiln::current_device_index(type()), 0);
  {
    DeviceGuard guard(device(last));
    EXPECT_EQ(kiln::current_device_index(type()), last);
    EXPECT_EQ(kiln::resolve_device(kiln::Device(type())), device(last));
    {
      DeviceGuard inner(device(0));
      EXPECT_EQ(kiln::current_device_index(type()), 0);
    }
    EXPECT_EQ(kiln::current_device_index(type()), last);
  }
  EXPECT_EQ(kiln::current_device_index(type()), 0);
  {
    DeviceGuard no_index{kiln::Device(type())};  // no index: leaves the device alone
    EXPECT_EQ(kiln::current_device_index(type()), 0);
  }
  EXPECT_THROW(DeviceGuard bad(device(backend().device_count())), kiln::DeviceError);
  EXPECT_EQ(kiln::current_device_index(type()), 0);
}

TEST_P(RuntimeGuards, DeviceGuardRestoresWhenAnExceptionUnwinds) {
  int last = last_index();
  kiln::set_current_device_index(type(), last);
  try {
    DeviceGuard guard(device(0));
    EXPECT_EQ(kiln::current_device_index(type()), 0);
    throw kiln::ValueError("unwind");
  } catch (const kiln::ValueError&) {
  }
  EXPECT_EQ(kiln::current_device_index(type()), last);
}

TEST_P(RuntimeGuards, StreamGuardSetsStreamAndDeviceAndRestores) {
  int last = last_index();
  Stream s = kiln::new_stream(device(last));
  Stream before = kiln::current_stream(device(last));
  ASSERT_EQ(before, kiln::default_stream(device(last)));
  {
    StreamGuard guard(s);
    EXPECT_EQ(kiln::current_stream(kiln::Device(type())), s);
    EXPECT_EQ(kiln::current_device_index(type()), last);
  }
  EXPECT_EQ(kiln::current_stream(device(last)), before);
  EXPECT_EQ(kiln::current_device_index(type()), 0);

  // Restores a non-default previous stream too, also when an exception unwinds.
  Stream s1 = kiln::new_stream(device(last));
  Stream s2 = kiln::new_stream(device(last));
  kiln::set_current_stream(s1);
  try {
    StreamGuard guard(s2);
    EXPECT_EQ(kiln::current_stream(device(last)), s2);
    throw kiln::Error("unwind");
  } catch (const kiln::Error&) {
  }
  EXPECT_EQ(kiln::current_stream(device(last)), s1);
  EXPECT_EQ(kiln::current_device_index(type()), 0);
}

TEST_P(RuntimeGuards, CurrentStreamIsPerDevice) {
  if (backend().device_count() < 2) {
    // One device: its current stream is set and restored; device 1 does not exist.
    Stream s = kiln::new_stream(device(0));
    kiln::set_current_stream(s);
    EXPECT_EQ(kiln::current_stream(device(0)), s);
    {
      StreamGuard guard(kiln::default_stream(device(0)));
      EXPECT_EQ(kiln::current_stream(device(0)), kiln::default_stream(device(0)));
      DeviceGuard device_guard(device(0));
      EXPECT_EQ(kiln::current_device_index(type()), 0);
    }
    EXPECT_EQ(kiln::current_stream(device(0)), s);
    EXPECT_EQ(kiln::current_device_index(type()), 0);
    EXPECT_THROW(kiln::current_stream(device(1)), kiln::DeviceError);
    EXPECT_THROW(kiln::set_current_stream(Stream(device(1), 0)), kiln::DeviceError);
    EXPECT_THROW(StreamGuard bad(Stream(device(1), 0)), kiln::DeviceError);
    EXPECT_EQ(kiln::current_stream(device(0)), s) << "a rejected stream changes nothing";
    return;
  }
  Stream s = kiln::new_stream(device(1));
  kiln::set_current_stream(s);
  EXPECT_EQ(kiln::current_stream(device(1)), s);
  EXPECT_EQ(kiln::current_stream(device(0)), kiln::default_stream(device(0)));
}

TEST_P(RuntimeGuards, CurrentStreamAndDeviceArePerThread) {
  int last = last_index();
  Stream s = kiln::new_stream(device());
  kiln::set_current_stream(s);
  kiln::set_current_device_index(type(), last);
  Stream seen_stream;
  int seen_device = -1;
  std::thread([&] {
    seen_stream = kiln::current_stream(device());
    seen_device = kiln::current_device_index(type());
    kiln::set_current_stream(kiln::new_stream(device()));  // must not leak to the main thread
    kiln::set_current_device_index(type(), 0);
  }).join();
  EXPECT_EQ(seen_stream, kiln::default_stream(device()));
  EXPECT_EQ(seen_device, 0);
  EXPECT_EQ(kiln::current_stream(device()), s);
  EXPECT_EQ(kiln::current_device_index(type()), last);
}

TEST_P(RuntimeGuards, SetCurrentStreamRejectsBadStreams) {
  EXPECT_THROW(kiln::set_current_stream(Stream(device(), -1)), kiln::DeviceError);
  EXPECT_THROW(kiln::set_current_stream(Stream(device(backend().device_count()), 0)),
               kiln::DeviceError);
  EXPECT_EQ(kiln::current_stream(device()), kiln::default_stream(device()));
}

KILN_INSTANTIATE_FOR_ALL_BACKENDS(RuntimeGuards);

}  // namespace
}  // namespace kiln_test
