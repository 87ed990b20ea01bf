#pragma once
// Backend: what a device type implements for the runtime. Keep the required surface small;
// optional methods throw NotImplementedError naming the backend and method by default.
// Nothing above backends/ names a concrete backend; it asks the registry by DeviceType.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/device.h"
#include "kiln/runtime/event.h"
#include "kiln/runtime/stream.h"

namespace kiln {

struct DeviceProperties {
  std::string name;
  int64_t total_memory = 0;  // bytes; 0 if unknown
  std::string capabilities;  // free text: ISA level, extensions
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  std::string name() const { return std::string(device_type_name(type())); }

  // Devices. Probes: never throw, never initialise hardware beyond discovery.
  virtual int device_count() const noexcept = 0;
  virtual DeviceProperties properties(int device_index) const = 0;

  // Streams. Stream ids are per device; 0 is the default stream.
  virtual int64_t create_stream(int device_index) = 0;
  virtual bool stream_query(const Stream& s) = 0;
  virtual void stream_synchronize(const Stream& s) = 0;
  // Runs fn on stream s in order with other work on s. A synchronous backend (CPU) runs it
  // at once; an asynchronous one queues it. Host-side kernels of fake/host devices use this.
  virtual void launch(const Stream& s, std::function<void()> fn) = 0;

  // Events.
  virtual std::unique_ptr<EventImpl> create_event(int device_index, bool enable_timing) = 0;

  // Memory, raw (the CachingAllocator wraps these). raw_allocate returns nullptr when out
  // of memory; it must not throw for that case.
  virtual void* raw_allocate(int device_index, size_t nbytes) = 0;
  virtual void raw_free(int device_index, void* ptr) = 0;

  // Copies nbytes between host memory and this backend's memory, or within this backend,
  // ordered on stream s (which belongs to this backend's device). A host pointer's memory
  // must stay valid until the stream has passed the copy (callers keep storages alive).
  enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
  virtual void copy_async(void* dst, const void* src, size_t nbytes, CopyKind kind,
                          const Stream& s) = 0;

  // Optional: make device memory addressable by host code (testing and cpu: identity).
  virtual bool host_accessible() const { return false; }
};

// The registry: a fixed table indexed by DeviceType. Backends register at load time.
void register_backend(std::unique_ptr<Backend> backend);
Backend* find_backend(DeviceType type) noexcept;  // nullptr when not registered
Backend& get_backend(DeviceType type);             // DeviceError when not registered
bool is_available(DeviceType type) noexcept;       // registered and device_count() > 0
std::vector<DeviceType> registered_device_types();

// Makes sure the built-in backends (cpu, testing, xpu when built) are registered.
void ensure_builtin_backends();

}  // namespace kiln
