// Device names and parsing, and the backend registry's probes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/event.h"
#include "kiln/runtime/stream.h"

namespace kiln_test {
namespace {

using kiln::Device;
using kiln::DeviceType;

int expected_testing_devices() {
  const char* env = std::getenv("KILN_TESTING_DEVICES");
  return env == nullptr || *env == '\0' ? 2 : std::atoi(env);
}

TEST(DeviceType, NamesRoundTrip) {
  EXPECT_EQ(kiln::device_type_name(DeviceType::CPU), "cpu");
  EXPECT_EQ(kiln::device_type_name(DeviceType::XPU), "xpu");
  EXPECT_EQ(kiln::device_type_name(DeviceType::Testing), "testing");
  for (int i = 0; i < kiln::kNumDeviceTypes; ++i) {
    auto t = DeviceType(i);
    EXPECT_EQ(kiln::device_type_from_name(kiln::device_type_name(t)), t);
  }
  try {
    kiln::device_type_from_name("gpu");
    FAIL() << "expected DeviceError";
  } catch (const kiln::DeviceError& e) {
    EXPECT_STREQ(e.what(),
                 "unknown device type 'gpu'; expected one of: cpu, xpu, testing, meta");
  }
}

TEST(Device, ParsesTypeAndOptionalIndex) {
  EXPECT_EQ(Device::parse("cpu"), Device(DeviceType::CPU));
  EXPECT_FALSE(Device::parse("cpu").has_index());
  EXPECT_EQ(Device::parse("cpu:0"), Device(DeviceType::CPU, 0));
  EXPECT_EQ(Device::parse("testing"), Device(DeviceType::Testing));
  EXPECT_EQ(Device::parse("testing:1"), Device(DeviceType::Testing, 1));
  EXPECT_EQ(Device::parse("xpu:0"), Device(DeviceType::XPU, 0));
  EXPECT_EQ(Device::parse("testing:32767").index, 32767);
}

TEST(Device, PrintsAsItParses) {
  for (const char* spec : {"cpu", "cpu:0", "testing", "testing:1", "xpu:3"}) {
    EXPECT_EQ(Device::parse(spec).str(), spec);
    std::ostringstream os;
    os << Device::parse(spec);
    EXPECT_EQ(os.str(), spec);
  }
}

TEST(Device, RejectsMalformedStringsSayingWhatWasExpected) {
  for (const char* bad : {"", "gpu", "CPU", ":0", "cpu:", "cpu:-1", "cpu:+1", "cpu:x",
                          "cpu:1x", "cpu: 1", " cpu", "testing:1:2", "testing:32768",
                          "testing:99999999999999999999"}) {
    try {
      Device::parse(bad);
      ADD_FAILURE() << "'" << bad << "' should not parse";
    } catch (const kiln::DeviceError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
    }
  }
  try {
    Device::parse("testing:abc");
  } catch (const kiln::DeviceError& e) {
    EXPECT_STREQ(e.what(), "invalid device string 'testing:abc': expected 'testing:<index>' "
                           "with a non-negative integer index below 32768, got index 'abc'");
  }
  try {
    Device::parse("gpu:0");
  } catch (const kiln::DeviceError& e) {
    EXPECT_STREQ(e.what(), "invalid device string 'gpu:0': expected '<type>' or "
                           "'<type>:<index>' with <type> one of cpu, xpu, testing, meta, got type "
                           "'gpu'");
  }
}

TEST(Device, HashSeparatesTypeAndIndex) {
  std::hash<Device> h;
  EXPECT_NE(h(Device(DeviceType::CPU, 0)), h(Device(DeviceType::Testing, 0)));
  EXPECT_NE(h(Device(DeviceType::Testing, 0)), h(Device(DeviceType::Testing, 1)));
  EXPECT_NE(h(Device(DeviceType::Testing)), h(Device(DeviceType::Testing, 0)));
}

TEST(Registry, BuiltinBackendsAreRegistered) {
  auto types = kiln::registered_device_types();
  EXPECT_NE(std::find(types.begin(), types.end(), DeviceType::CPU), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), DeviceType::Testing), types.end());
  EXPECT_EQ(kiln::get_backend(DeviceType::CPU).name(), "cpu");
  EXPECT_EQ(kiln::get_backend(DeviceType::Testing).type(), DeviceType::Testing);
}

TEST(Registry, DeviceCountProbes) {
  EXPECT_EQ(kiln::get_backend(DeviceType::CPU).device_count(), 1);
  EXPECT_EQ(kiln::get_backend(DeviceType::Testing).device_count(), expected_testing_devices());
  EXPECT_TRUE(kiln::is_available(DeviceType::CPU));
  EXPECT_EQ(kiln::is_available(DeviceType::Testing), expected_testing_devices() > 0);
}

TEST(Registry, MissingBackendIsNamedWithTheAvailableOnes) {
  auto types = kiln::registered_device_types();
  bool xpu_listed = std::find(types.begin(), types.end(), DeviceType::XPU) != types.end();
  if (kiln::Backend* xpu = kiln::find_backend(DeviceType::XPU)) {
    // An xpu build: the backend is found by every lookup, and its availability follows its
    // device count.
    EXPECT_TRUE(xpu_listed);
    EXPECT_EQ(&kiln::get_backend(DeviceType::XPU), xpu);
    EXPECT_EQ(xpu->type(), DeviceType::XPU);
    EXPECT_EQ(xpu->name(), "xpu");
    EXPECT_EQ(kiln::is_available(DeviceType::XPU), xpu->device_count() > 0);
    return;
  }
  EXPECT_FALSE(xpu_listed);
  EXPECT_FALSE(kiln::is_available(DeviceType::XPU));
  try {
    kiln::get_backend(DeviceType::XPU);
    FAIL() << "expected DeviceError";
  } catch (const kiln::DeviceError& e) {
    EXPECT_STREQ(e.what(), "no backend registered for device type 'xpu'; available: cpu, "
                           "testing, meta");
  }
  EXPECT_THROW(kiln::current_stream(Device(DeviceType::XPU, 0)), kiln::DeviceError);
}

// Every registered backend rejects the device index equal to its count; for a backend without
// devices (KILN_TESTING_DEVICES=0) that is index 0, so nothing can be used on it.
TEST(Registry, DeviceIndicesPastTheCountAreRejected) {
  for (DeviceType t : kiln::registered_device_types()) {
    SCOPED_TRACE(std::string(kiln::device_type_name(t)));
    kiln::Backend& b = kiln::get_backend(t);
    int count = b.device_count();
    ASSERT_GE(count, 0);
    EXPECT_EQ(kiln::is_available(t), count > 0);
    Device past(t, count);
    EXPECT_THROW(b.properties(count), kiln::DeviceError);
    EXPECT_EQ(b.raw_allocate(count, 16), nullptr);
    EXPECT_THROW(kiln::new_stream(past), kiln::DeviceError);
    EXPECT_THROW(kiln::default_stream(past), kiln::DeviceError);
    EXPECT_THROW(kiln::current_stream(past), kiln::DeviceError);
    EXPECT_THROW(kiln::set_current_device_index(t, count), kiln::DeviceError);
    EXPECT_THROW(kiln::Event(t).record(kiln::Stream(past, 0)), kiln::DeviceError);
    if (count == 0) {
      // Not even the current device (index 0) is usable.
      EXPECT_THROW(kiln::current_stream(Device(t)), kiln::DeviceError);
      EXPECT_THROW(kiln::new_stream(Device(t)), kiln::DeviceError);
    } else {
      EXPECT_LT(kiln::current_device_index(t), count);
      EXPECT_NO_THROW(kiln::default_stream(Device(t, count - 1)));
    }
  }
}

TEST(Registry, RefusesASecondBackendOfAType) {
  EXPECT_THROW(kiln::register_backend(nullptr), kiln::ValueError);
  struct FakeCpu : kiln::Backend {
    DeviceType type() const override { return DeviceType::CPU; }
    int device_count() const noexcept override { return 7; }
    kiln::DeviceProperties properties(int) const override { return {}; }
    int64_t create_stream(int) override { return 0; }
    bool stream_query(const kiln::Stream&) override { return true; }
    void stream_synchronize(const kiln::Stream&) override {}
    void launch(const kiln::Stream&, std::function<void()>) override {}
    std::unique_ptr<kiln::EventImpl> create_event(int, bool) override { return nullptr; }
    void* raw_allocate(int, size_t) override { return nullptr; }
    void raw_free(int, void*) override {}
    void copy_async(void*, const void*, size_t, CopyKind, const kiln::Stream&) override {}
  };
  try {
    kiln::register_backend(std::make_unique<FakeCpu>());
    FAIL() << "expected DeviceError";
  } catch (const kiln::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("'cpu' is already registered"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(kiln::get_backend(DeviceType::CPU).device_count(), 1) << "the original stays";
}

TEST(Registry, PropertiesDescribeTheDevices) {
  kiln::DeviceProperties cpu = kiln::get_backend(DeviceType::CPU).properties(0);
  EXPECT_FALSE(cpu.name.empty());
  EXPECT_GT(cpu.total_memory, 0);
  EXPECT_THROW(kiln::get_backend(DeviceType::CPU).properties(1), kiln::DeviceError);
  if (expected_testing_devices() > 0) {
    kiln::DeviceProperties t = kiln::get_backend(DeviceType::Testing).properties(0);
    EXPECT_EQ(t.total_memory, int64_t(8) << 30);
    EXPECT_FALSE(t.name.empty());
  }
}

}  // namespace
}  // namespace kiln_test
