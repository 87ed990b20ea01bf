#include "testing_backend.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "kiln/core/error.h"
#include "kiln/runtime/internal.h"
#include "testing_event.h"

namespace kiln::testing_backend {

namespace {
constexpr std::align_val_t kAlignment{64};

// Registered backends are never destroyed, so their workers are joined here instead, when
// the library's static objects are torn down at exit (after the program's own statics).
std::atomic<TestingBackend*> g_instance{nullptr};
struct JoinWorkersAtExit {
  ~JoinWorkersAtExit() {
    if (TestingBackend* b = g_instance.load()) b->shutdown();
  }
} g_join_workers_at_exit;
}  // namespace

int testing_device_count_from_env() {
  constexpr int kDefault = 2;
  const char* env = std::getenv("KILN_TESTING_DEVICES");
  if (env == nullptr || *env == '\0') return kDefault;
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  if (*end != '\0' || n < 0 || n > detail::kMaxDevicesPerType) {
    // A probe must not throw; say what was wrong and carry on with the default.
    std::fprintf(stderr,
                 "kiln: ignoring KILN_TESTING_DEVICES='%s': expected an integer in [0, %d]; "
                 "using %d testing devices\n",
                 env, detail::kMaxDevicesPerType, kDefault);
    return kDefault;
  }
  return int(n);
}

TestingBackend::TestingBackend(int device_count)
    : device_count_(device_count), streams_(size_t(device_count)),
      used_bytes_(size_t(device_count), 0) {
  TestingBackend* expected = nullptr;
  g_instance.compare_exchange_strong(expected, this);
}

TestingBackend::~TestingBackend() {
  TestingBackend* self = this;
  g_instance.compare_exchange_strong(self, nullptr);
  shutdown();
}

void TestingBackend::check_index(int device_index) const {
  KILN_CHECK(device_index >= 0 && device_index < device_count_, DeviceError,
             "testing device ", device_index, " does not exist: expected an index in [0, ",
             device_count_, ") (set KILN_TESTING_DEVICES for more)");
}

DeviceProperties TestingBackend::properties(int device_index) const {
  check_index(device_index);
  DeviceProperties p;
  p.name = "kiln testing device " + std::to_string(device_index);
  p.total_memory = kTotalMemory;
  p.capabilities = "asynchronous (one worker thread per stream), host-addressable memory";
  return p;
}

TestingStream& TestingBackend::stream(const Stream& s) {
  KILN_CHECK(s.device.type == DeviceType::Testing, DeviceError,
             "testing backend: expected a stream on a testing device, got one on ", s.device);
  check_index(s.device.index);
  std::lock_guard lock(streams_mutex_);
  auto& streams = streams_[size_t(s.device.index)];
  if (streams.empty()) {  // the default stream starts on first use
    streams.push_back(std::make_unique<TestingStream>(s.device, 0, !shut_down_));
  }
  KILN_CHECK(s.id >= 0 && s.id < int64_t(streams.size()), DeviceError, s.device,
             " has no stream ", s.id, ": expected an id in [0, ", streams.size(),
             ") from new_stream()");
  return *streams[size_t(s.id)];
}

std::vector<TestingStream*> TestingBackend::streams_of(int device_index) {
  std::lock_guard lock(streams_mutex_);
  std::vector<TestingStream*> out;
  for (auto& s : streams_[size_t(device_index)]) out.push_back(s.get());
  return out;
}

int64_t TestingBackend::create_stream(int device_index) {
  check_index(device_index);
  Device device(DeviceType::Testing, device_index);
  stream(Stream(device, 0));  // ids are dense: make sure the default stream is id 0
  std::lock_guard lock(streams_mutex_);
  auto& streams = streams_[size_t(device_index)];
  int64_t id = int64_t(streams.size());
  streams.push_back(std::make_unique<TestingStream>(device, id, !shut_down_));
  return id;
}

bool TestingBackend::stream_query(const Stream& s) { return stream(s).query(); }

void TestingBackend::stream_synchronize(const Stream& s) { stream(s).synchronize(); }

void TestingBackend::launch(const Stream& s, std::function<void()> fn) {
  stream(s).enqueue(std::move(fn));
}

std::unique_ptr<EventImpl> TestingBackend::create_event(int device_index, bool enable_timing) {
  check_index(device_index);
  return std::make_unique<TestingEvent>(*this, device_index, enable_timing);
}

void* TestingBackend::raw_allocate(int device_index, size_t nbytes) {
  if (device_index < 0 || device_index >= device_count_) return nullptr;
  std::lock_guard lock(memory_mutex_);
  int64_t& used = used_bytes_[size_t(device_index)];
  if (nbytes > size_t(kTotalMemory - used)) return nullptr;  // the fake device is full
  void* p = ::operator new(nbytes == 0 ? 1 : nbytes, kAlignment, std::nothrow);
  if (p == nullptr) return nullptr;
  try {
    allocation_sizes_.emplace(p, nbytes);
  } catch (...) {
    ::operator delete(p, kAlignment);
    return nullptr;
  }
  used += int64_t(nbytes);
  return p;
}

void TestingBackend::raw_free(int device_index, void* ptr) {
  if (ptr == nullptr) return;
  check_index(device_index);
  {
    std::lock_guard lock(memory_mutex_);
    auto it = allocation_sizes_.find(ptr);
    KILN_CHECK(it != allocation_sizes_.end(), ValueError, "testing:", device_index,
               " raw_free: expected a pointer from raw_allocate, got ", ptr);
    used_bytes_[size_t(device_index)] -= int64_t(it->second);
    allocation_sizes_.erase(it);
  }
  // Work already queued on any stream of the device may still use the memory (as with
  // cudaFree, which synchronises). Rather than block the host, free it once every stream
  // has passed this point: each gets a task, and the last one to run frees.
  std::vector<TestingStream*> streams = streams_of(device_index);
  if (streams.empty()) {
    ::operator delete(ptr, kAlignment);
    return;
  }
  auto remaining = std::make_shared<std::atomic<size_t>>(streams.size());
  for (TestingStream* s : streams) {
    s->enqueue([remaining, ptr] {
      if (remaining->fetch_sub(1) == 1) ::operator delete(ptr, kAlignment);
    });
  }
}

void TestingBackend::copy_async(void* dst, const void* src, size_t nbytes, CopyKind,
                                const Stream& s) {
  TestingStream& target = stream(s);
  if (nbytes == 0) return;
  KILN_CHECK(dst != nullptr && src != nullptr, ValueError, "testing copy_async: expected "
             "non-null pointers for ", nbytes, " bytes, got dst=", dst, " src=", src);
  target.enqueue([dst, src, nbytes] { std::memcpy(dst, src, nbytes); });
}

void TestingBackend::shutdown() {
  std::vector<TestingStream*> all;
  {
    std::lock_guard lock(streams_mutex_);
    shut_down_ = true;
    for (auto& per_device : streams_) {
      for (auto& s : per_device) all.push_back(s.get());
    }
  }
  // Without the lock: draining tasks may still look up streams.
  for (TestingStream* s : all) s->shutdown();
}

}  // namespace kiln::testing_backend

namespace kiln::detail {
std::unique_ptr<Backend> make_testing_backend() {
  return std::make_unique<testing_backend::TestingBackend>(
      testing_backend::testing_device_count_from_env());
}
}  // namespace kiln::detail
