#pragma once
// The xpu backend's OpenCL state: the devices found, one context and one in-order command
// queue per stream on each, the memory kiln allocated, and compiled programs.
//
// Device memory: OpenCL 1.2 buffers are handles (cl_mem), not addresses, but kiln's tensors
// address their data as storage pointer + byte offset. Each allocation therefore reserves an
// inaccessible host address range of its size (mmap PROT_NONE) that stands for it; kernels
// and copies turn an address back into (buffer, offset) through the allocation table. The
// addresses are unique and fault if host code ever dereferences one (decision 0086).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/runtime/stream.h"
#include "opencl_api.h"

namespace kiln::xpu {

struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name, vendor, platform_name, version, driver;
  cl_device_type type = 0;
  int64_t global_memory = 0;
  int64_t local_memory = 0;
  int compute_units = 0;
  size_t max_work_group = 1;
  bool fp64 = false;
  bool correctly_rounded_sqrt = false;
  int nv_compute_major = 0;  // NVIDIA's compute capability (cl_nv_device_attribute_query), else 0
};

// One device's live state, created on first use.
struct DeviceState {
  cl_context context = nullptr;
  std::vector<cl_command_queue> queues;  // [stream id]; 0 is the default stream
  std::unordered_map<std::string, cl_program> programs;       // by full source
  std::unordered_map<std::string, cl_kernel> kernels;         // by source + kernel name
  std::unordered_map<std::string, cl_kernel> kernels_by_key;  // by a caller's short key
  // Held from a cached kernel's first clSetKernelArg to its enqueue (a cl_kernel's
  // arguments are shared state). Recursive: a kernel that launches a helper kernel (a copy)
  // while its own launch is being set up must not deadlock; the two are different kernels.
  std::recursive_mutex mutex;
};

// Where an address kiln handed out lives.
struct BufferRef {
  cl_mem mem = nullptr;
  size_t offset = 0;  // bytes from the buffer's start
  size_t size = 0;    // bytes from offset to the buffer's end
  int device = 0;
};

class XpuRuntime {
 public:
  // The process-wide runtime (devices discovered on first call; never throws).
  static XpuRuntime& get();

  int device_count() const noexcept { return int(devices_.size()); }
  const DeviceInfo& info(int device) const;
  const std::string& why_no_devices() const { return why_none_; }

  // The queue of stream s (created with the device's context on first use).
  cl_command_queue queue(const Stream& s);
  int64_t create_stream(int device);
  std::vector<cl_command_queue> queues(int device);  // every queue created so far

  // nullptr when the device is out of memory.
  void* allocate(int device, size_t nbytes);
  void free(int device, void* address);
  // DeviceError when address is not inside memory allocated here.
  BufferRef resolve(const void* address) const;
  int64_t allocated_bytes(int device) const;

  // The kernel `name` of a program built from source for the device (cached by source).
  // The returned kernel's arguments are shared: set and enqueue under device_mutex().
  cl_kernel kernel(int device, const std::string& source, const char* name);
  // The same, cached under a short key that stands for the source: make_source runs only the
  // first time (generating and hashing a kernel's whole text on every call cost microseconds
  // per op).
  cl_kernel kernel_by_key(int device, const std::string& key,
                          const std::function<std::string()>& make_source, const char* name);
  std::recursive_mutex& device_mutex(int device) { return state(device).mutex; }

 private:
  XpuRuntime();
  DeviceState& state(int device);
  void check_index(int device) const;

  const OpenCLApi* cl_ = nullptr;
  std::vector<DeviceInfo> devices_;
  std::vector<std::unique_ptr<DeviceState>> states_;
  std::string why_none_;
  std::mutex states_mutex_;  // creation of contexts and queues

  struct Allocation {
    cl_mem mem;
    size_t size;      // bytes asked for
    size_t reserved;  // bytes of address space reserved
    int device;
  };
  mutable std::mutex memory_mutex_;
  std::map<uintptr_t, Allocation> allocations_;  // by start address
  std::vector<int64_t> allocated_;               // [device] live bytes
};

// The OpenCL runtime's API table; the runtime exists only when it loaded.
inline const OpenCLApi& cl() { return *opencl_api(); }

}  // namespace kiln::xpu
