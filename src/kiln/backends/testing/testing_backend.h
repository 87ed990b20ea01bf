#pragma once
// The testing backend: a fake asynchronous device that proves the runtime contract. Its
// memory is ordinary host memory (so kernels can be host code and tests can read it), but
// it is allocated separately from CPU memory, and all work runs on per-stream worker
// threads, so any code that forgets to synchronise shows up as a wrong result or a race.
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/runtime/backend.h"
#include "testing_stream.h"

namespace kiln::testing_backend {

class TestingBackend final : public Backend {
 public:
  static constexpr int64_t kTotalMemory = int64_t(8) << 30;  // 8 GiB per device

  explicit TestingBackend(int device_count);
  ~TestingBackend() override;

  DeviceType type() const override { return DeviceType::Testing; }
  int device_count() const noexcept override { return device_count_; }
  DeviceProperties properties(int device_index) const override;

  int64_t create_stream(int device_index) override;
  bool stream_query(const Stream& s) override;
  void stream_synchronize(const Stream& s) override;
  void launch(const Stream& s, std::function<void()> fn) override;

  std::unique_ptr<EventImpl> create_event(int device_index, bool enable_timing) override;

  void* raw_allocate(int device_index, size_t nbytes) override;
  void raw_free(int device_index, void* ptr) override;

  void copy_async(void* dst, const void* src, size_t nbytes, CopyKind kind,
                  const Stream& s) override;
  bool host_accessible() const override { return true; }

  // The queue behind s; DeviceError when s is not a stream of this backend.
  TestingStream& stream(const Stream& s);
  // Drains and joins every worker (at process exit); later work runs on the caller.
  void shutdown();

 private:
  void check_index(int device_index) const;
  std::vector<TestingStream*> streams_of(int device_index);

  const int device_count_;
  std::mutex streams_mutex_;
  std::vector<std::deque<std::unique_ptr<TestingStream>>> streams_;  // [device][id]
  bool shut_down_ = false;

  std::mutex memory_mutex_;
  std::vector<int64_t> used_bytes_;                     // [device]
  std::unordered_map<void*, size_t> allocation_sizes_;  // live raw allocations
};

// The device count from KILN_TESTING_DEVICES (default 2).
int testing_device_count_from_env();

}  // namespace kiln::testing_backend
