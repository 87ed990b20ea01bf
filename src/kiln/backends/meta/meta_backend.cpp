// The meta backend: one device, "meta", whose tensors have a shape, dtype and strides but no
// memory (PyTorch's meta device). Ops on meta tensors run their meta functions only (the
// dispatcher allocates the outputs and skips the kernel), so a model built on meta costs no
// memory and no initialisation time, and shapes can be inferred without data. Nothing is
// ever computed, so streams are always idle and events complete when recorded. Reading a
// meta tensor's values (a copy to another device) is an error; writing host values into one
// is accepted and does nothing, as in PyTorch.
#include <atomic>
#include <memory>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"

namespace kiln {

namespace {

class MetaEvent final : public EventImpl {
 public:
  explicit MetaEvent(bool timing) : timing_(timing) {}
  void record(const Stream&) override { recorded_ = true; }
  void block(const Stream&) override {}
  bool query() const override { return true; }
  void synchronize() const override {}
  double elapsed_ms(const EventImpl& end) const override {
    return double(end.completion_time_ns() - completion_time_ns()) / 1e6;
  }
  // No work ever runs on the meta device: every recorded event completes at time 0.
  int64_t completion_time_ns() const override {
    KILN_CHECK(timing_, Error, "meta event: elapsed time needs an event created with "
               "enable_timing=true, got one without timing");
    KILN_CHECK(recorded_, Error, "meta event: elapsed time needs a recorded event, got one "
               "that was never recorded");
    return 0;
  }

 private:
  bool timing_;
  bool recorded_ = false;
};

class MetaBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::Meta; }
  int device_count() const noexcept override { return 1; }

  DeviceProperties properties(int device_index) const override {
    check_index(device_index);
    DeviceProperties p;
    p.name = "meta";
    p.capabilities = "shapes, dtypes and strides only: no memory, ops compute nothing";
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
  // Work on a meta stream has no data to act on; it is dropped (no kernel reaches here: the
  // dispatcher never runs kernels for meta tensors).
  void launch(const Stream& s, std::function<void()>) override { check_stream(s); }

  std::unique_ptr<EventImpl> create_event(int device_index, bool enable_timing) override {
    check_index(device_index);
    return std::make_unique<MetaEvent>(enable_timing);
  }

  // Meta storages hold no memory (allocate_on gives them a null block); a raw request is
  // refused as out of memory, which the caching allocator reports.
  void* raw_allocate(int, size_t) override { return nullptr; }
  void raw_free(int, void*) override {}

  void copy_async(void*, const void*, size_t, CopyKind kind, const Stream& s) override {
    check_stream(s);
    KILN_CHECK(kind != CopyKind::DeviceToHost, NotImplementedError,
               "Cannot copy out of meta tensor; no data! (a meta tensor has a shape and a dtype "
               "but no values: create it on a real device, or use to_empty() and load values)");
    // Into a meta tensor, or between meta tensors: there are no bytes to move.
  }

 private:
  static void check_index(int device_index) {
    KILN_CHECK(device_index == 0, DeviceError, "meta: expected device index 0 (there is one "
               "meta device), got ", device_index);
  }
  void check_stream(const Stream& s) const {
    KILN_CHECK(s.device == Device(DeviceType::Meta, 0), DeviceError,
               "meta backend: expected a stream on meta:0, got one on ", s.device);
  }

  std::atomic<int64_t> next_stream_id_{1};  // 0 is the default stream
};

}  // namespace

namespace detail {
std::unique_ptr<Backend> make_meta_backend() { return std::make_unique<MetaBackend>(); }
}  // namespace detail

}  // namespace kiln
