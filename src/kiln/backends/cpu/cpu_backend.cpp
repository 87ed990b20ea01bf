// The CPU backend's runtime part: one device, "cpu:0", whose streams are synchronous. Work
// "launched" on a CPU stream runs at once on the calling thread, so streams are always idle
// and an event completes when it is recorded.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/host_memory.h"
#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/internal.h"
#include "kiln/tensor/copy_bytes.h"

namespace kiln {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuEvent final : public EventImpl {
 public:
  explicit CpuEvent(bool timing) : timing_(timing) {}

  void record(const Stream&) override {
    recorded_ = true;
    time_ns_ = now_ns();  // synchronous streams: everything before it has completed
  }
  void block(const Stream&) override {}  // synchronous: nothing can be pending
  bool query() const override { return true; }
  void synchronize() const override {}
  double elapsed_ms(const EventImpl& end) const override {
    return double(end.completion_time_ns() - completion_time_ns()) / 1e6;
  }
  int64_t completion_time_ns() const override {
    KILN_CHECK(timing_, Error, "cpu event: elapsed time needs an event created with "
               "enable_timing=true, got one without timing");
    KILN_CHECK(recorded_, Error, "cpu event: elapsed time needs a recorded event, got one "
               "that was never recorded");
    return time_ns_;
  }

 private:
  bool timing_;
  bool recorded_ = false;
  int64_t time_ns_ = 0;
};

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  int device_count() const noexcept override { return 1; }

  DeviceProperties properties(int device_index) const override {
    check_index(device_index);
    DeviceProperties p;
    const cpu::CpuFeatures& features = cpu::cpu_features();
    p.name = features.model_name.empty() ? "cpu" : features.model_name;
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_size > 0) p.total_memory = int64_t(pages) * int64_t(page_size);
    // The ISA level the kernels use (after KILN_CPU_ISA), then every detected feature.
    p.capabilities = "isa " + cpu::isa_level_name(cpu::isa_level()) + ":";
    for (const std::string& f : features.names()) p.capabilities += " " + f;
    return p;
  }

  int64_t create_stream(int device_index) override {
    check_index(device_index);
    return next_stream_id_.fetch_add(1, std::memory_order_relaxed);
  }
  bool stream_query(const Stream& s) override {
    check_stream(s);
    return true;
  }
  void stream_synchronize(const Stream& s) override { check_stream(s); }
  void launch(const Stream& s, std::function<void()> fn) override {
    check_stream(s);
    fn();  // exceptions reach the caller at once: there is nothing asynchronous to defer
  }

  std::unique_ptr<EventImpl> create_event(int device_index, bool enable_timing) override {
    check_index(device_index);
    return std::make_unique<CpuEvent>(enable_timing);
  }

  void* raw_allocate(int device_index, size_t nbytes) override {
    if (device_index != 0) return nullptr;
    return cpu::host_allocate(nbytes);
  }
  void raw_free(int, void* ptr) override { cpu::host_free(ptr); }

  void copy_async(void* dst, const void* src, size_t nbytes, CopyKind, const Stream& s) override {
    check_stream(s);
    if (nbytes > 0) detail::copy_bytes(dst, src, nbytes);
  }

  bool host_accessible() const override { return true; }

 private:
  static void check_index(int device_index) {
    KILN_CHECK(device_index == 0, DeviceError, "cpu: expected device index 0 (there is one "
               "cpu device), got ", device_index);
  }
  void check_stream(const Stream& s) const {
    KILN_CHECK(s.device == Device(DeviceType::CPU, 0), DeviceError,
               "cpu backend: expected a stream on cpu:0, got one on ", s.device);
    int64_t made = next_stream_id_.load(std::memory_order_relaxed);
    KILN_CHECK(s.id >= 0 && s.id < made, DeviceError, "cpu:0 has no stream ", s.id,
               ": expected an id in [0, ", made, ") from new_stream()");
  }

  std::atomic<int64_t> next_stream_id_{1};  // 0 is the default stream
};

}  // namespace

namespace detail {
std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }
}  // namespace detail

}  // namespace kiln
