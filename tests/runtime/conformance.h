#pragma once
// The runtime conformance suite's fixture: every TEST_P in tests/runtime/conformance_*.cpp
// runs once per registered backend, so a new backend is checked by the same tests simply by
// being registered.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/guard.h"
#include "kiln/runtime/stream.h"

namespace kiln_test {

using namespace std::chrono_literals;

// A gate that a launched task waits on, so a test controls when queued work may run.
// Opens itself on destruction, so a failed assertion cannot leave a stream blocked forever.
class Gate {
 public:
  Gate() : future_(promise_.get_future().share()) {}
  ~Gate() { open(); }
  void open() {
    if (!opened_) {
      opened_ = true;
      promise_.set_value();
    }
  }
  // A callable for a task; keeps the shared state alive on its own.
  auto waiter() const {
    return [f = future_] { f.wait(); };
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_;
  bool opened_ = false;
};

class BackendTest : public ::testing::TestWithParam<kiln::DeviceType> {
 protected:
  kiln::DeviceType type() const { return GetParam(); }
  kiln::Backend& backend() const { return kiln::get_backend(type()); }
  kiln::Device device(int index = 0) const { return kiln::Device(type(), index); }
  int last_index() const { return backend().device_count() - 1; }

  // Whether launch() defers work (runs it on another thread) or runs it at once. Tests
  // that hold work back with a Gate do so only on asynchronous backends; on synchronous ones
  // they check instead that the work has run (and events completed) by the time the call
  // returns, and that errors come out of launch() itself.
  bool is_async() const {
    kiln::Stream s = kiln::default_stream(device());
    std::thread::id ran_on;
    backend().launch(s, [&] { ran_on = std::this_thread::get_id(); });
    s.synchronize();
    return ran_on != std::this_thread::get_id();
  }

  // The suites are instantiated only over backends with devices (backends_with_devices());
  // Registry.DeviceIndicesPastTheCountAreRejected covers a backend without devices.
  void SetUp() override {
    ASSERT_GT(backend().device_count(), 0) << backend().name() << " has no devices";
    reset_thread_state();
  }
  void TearDown() override {
    if (backend().device_count() > 0) reset_thread_state();
  }

  // Tests share the main thread; put its current device and streams back to the defaults.
  void reset_thread_state() {
    kiln::set_current_device_index(type(), 0);
    for (int i = 0; i < backend().device_count(); ++i) {
      kiln::set_current_stream(kiln::default_stream(device(i)));
    }
  }
};

// The registered backends that have at least one device: the conformance suites run over
// these. Evaluated when gtest registers the suites, so KILN_TESTING_DEVICES=0 leaves the
// testing backend out instead of running (or skipping) tests that need a device. The meta
// device holds no data and runs no work, so the suites' contract (work runs in order, bytes
// round-trip) does not apply to it: tests/runtime/meta_device_test.cpp checks its own.
inline std::vector<kiln::DeviceType> backends_with_devices() {
  std::vector<kiln::DeviceType> out;
  for (kiln::DeviceType t : kiln::registered_device_types()) {
    if (t != kiln::DeviceType::Meta && kiln::get_backend(t).device_count() > 0) out.push_back(t);
  }
  return out;
}

inline std::string device_type_param_name(
    const ::testing::TestParamInfo<kiln::DeviceType>& info) {
  return std::string(kiln::device_type_name(info.param));
}

}  // namespace kiln_test

// Every registered backend with a device (cpu always has one, so this is never empty).
#define KILN_INSTANTIATE_FOR_ALL_BACKENDS(Suite)                                       \
  INSTANTIATE_TEST_SUITE_P(AllBackends, Suite,                                         \
                           ::testing::ValuesIn(::kiln_test::backends_with_devices()),  \
                           ::kiln_test::device_type_param_name)
