// Discovery, contexts, queues, memory and program cache of the xpu (OpenCL) backend.
#include "xpu_runtime.h"

#include <CL/cl_ext.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "kiln/core/error.h"

namespace kiln::xpu {

namespace {

// KILN_XPU_DUMP_DIR: each program's source and the driver's binary for it (PTX on NVIDIA),
// named by the source's hash, for reading what the compiler made of a kernel. Best effort.
void dump_program(const char* dir, cl_program program, const std::string& source) {
  const OpenCLApi& api = *opencl_api();
  const std::string base = std::string(dir) + "/kiln_" + std::to_string(std::hash<std::string>{}(source));
  std::ofstream(base + ".cl") << source;
  size_t size = 0;
  if (api.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0)
    return;
  std::string binary(size, '\0');
  unsigned char* where = reinterpret_cast<unsigned char*>(binary.data());
  if (api.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof where, &where, nullptr) != CL_SUCCESS) return;
  std::ofstream(base + ".bin", std::ios::binary) << binary;
}

std::string device_string(const OpenCLApi& api, cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (api.clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (api.clGetDeviceInfo(d, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T device_value(const OpenCLApi& api, cl_device_id d, cl_device_info what) {
  T v{};
  if (api.clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

// KILN_XPU_DEVICE_TYPES: which OpenCL device types count as xpu devices: "gpu" (default,
// as torch.xpu means GPUs), or a comma list of gpu, accelerator, cpu, or "all". The tests
// set "all" so that a CPU OpenCL driver (PoCL) stands in for a GPU on machines without one.
cl_device_type wanted_types() {
  const char* env = std::getenv("KILN_XPU_DEVICE_TYPES");
  if (!env || !*env) return CL_DEVICE_TYPE_GPU;
  cl_device_type mask = 0;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "gpu") mask |= CL_DEVICE_TYPE_GPU;
    else if (item == "cpu") mask |= CL_DEVICE_TYPE_CPU;
    else if (item == "accelerator") mask |= CL_DEVICE_TYPE_ACCELERATOR;
    else if (item == "all") mask |= CL_DEVICE_TYPE_ALL;
  }
  return mask ? mask : CL_DEVICE_TYPE_GPU;
}

size_t page_round(size_t n) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(n, 1) + page - 1) / page * page;
}

}  // namespace

XpuRuntime& XpuRuntime::get() {
  static XpuRuntime* runtime = new XpuRuntime();  // never destroyed: drivers outlive exit order
  return *runtime;
}

XpuRuntime::XpuRuntime() {
  cl_ = opencl_api();
  if (!cl_) {
    why_none_ = opencl_why_unavailable();
    return;
  }
  const OpenCLApi& api = *cl_;
  cl_uint np = 0;
  if (api.clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
    why_none_ = "the OpenCL loader found no platform (no driver installed)";
    return;
  }
  std::vector<cl_platform_id> platforms(np);
  api.clGetPlatformIDs(np, platforms.data(), nullptr);
  const cl_device_type wanted = wanted_types();
  // GPUs first, then accelerators, then CPUs, each in platform order.
  for (cl_device_type kind : {cl_device_type(CL_DEVICE_TYPE_GPU),
                              cl_device_type(CL_DEVICE_TYPE_ACCELERATOR),
                              cl_device_type(CL_DEVICE_TYPE_CPU)}) {
    if (!(wanted & kind)) continue;
    for (cl_platform_id p : platforms) {
      cl_uint nd = 0;
      if (api.clGetDeviceIDs(p, kind, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ids(nd);
      if (api.clGetDeviceIDs(p, kind, nd, ids.data(), nullptr) != CL_SUCCESS) continue;
      size_t pn = 0;
      std::string pname;
      if (api.clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &pn) == CL_SUCCESS && pn) {
        pname.resize(pn);
        api.clGetPlatformInfo(p, CL_PLATFORM_NAME, pn, pname.data(), nullptr);
        while (!pname.empty() && pname.back() == '\0') pname.pop_back();
      }
      for (cl_device_id id : ids) {
        if (devices_.size() >= 64) break;
        DeviceInfo d;
        d.platform = p;
        d.id = id;
        d.platform_name = pname;
        d.type = kind;
        d.name = device_string(api, id, CL_DEVICE_NAME);
        d.vendor = device_string(api, id, CL_DEVICE_VENDOR);
        d.version = device_string(api, id, CL_DEVICE_VERSION);
        d.driver = device_string(api, id, CL_DRIVER_VERSION);
        d.global_memory = int64_t(device_value<cl_ulong>(api, id, CL_DEVICE_GLOBAL_MEM_SIZE));
        d.local_memory = int64_t(device_value<cl_ulong>(api, id, CL_DEVICE_LOCAL_MEM_SIZE));
        d.compute_units = int(device_value<cl_uint>(api, id, CL_DEVICE_MAX_COMPUTE_UNITS));
        d.max_work_group = std::max<size_t>(1, device_value<size_t>(api, id, CL_DEVICE_MAX_WORK_GROUP_SIZE));
        d.fp64 = device_string(api, id, CL_DEVICE_EXTENSIONS).find("cl_khr_fp64") != std::string::npos;
        d.correctly_rounded_sqrt = (device_value<cl_device_fp_config>(api, id, CL_DEVICE_SINGLE_FP_CONFIG) &
                                    CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
        if (device_string(api, id, CL_DEVICE_EXTENSIONS).find("cl_nv_device_attribute_query") !=
            std::string::npos)
          d.nv_compute_major = int(device_value<cl_uint>(api, id, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV));
        devices_.push_back(d);
      }
    }
  }
  if (devices_.empty())
    why_none_ = "no OpenCL device of the types KILN_XPU_DEVICE_TYPES selects (default: gpu)";
  for (size_t i = 0; i < devices_.size(); ++i) states_.push_back(std::make_unique<DeviceState>());
  allocated_.assign(devices_.size(), 0);
}

void XpuRuntime::check_index(int device) const {
  KILN_CHECK(device >= 0 && device < device_count(), DeviceError, "xpu device ", device,
             " does not exist: expected an index in [0, ", device_count(), ")",
             device_count() == 0 ? " (" + why_none_ + ")" : std::string());
}

const DeviceInfo& XpuRuntime::info(int device) const {
  check_index(device);
  return devices_[size_t(device)];
}

DeviceState& XpuRuntime::state(int device) {
  check_index(device);
  DeviceState& s = *states_[size_t(device)];
  std::lock_guard lock(states_mutex_);
  if (!s.context) {
    cl_int status = CL_SUCCESS;
    cl_device_id id = devices_[size_t(device)].id;
    s.context = cl_->clCreateContext(nullptr, 1, &id, nullptr, nullptr, &status);
    check_cl(status, "clCreateContext");
    cl_command_queue q = cl_->clCreateCommandQueue(s.context, id, CL_QUEUE_PROFILING_ENABLE, &status);
    check_cl(status, "clCreateCommandQueue");
    s.queues.push_back(q);
  }
  return s;
}

cl_command_queue XpuRuntime::queue(const Stream& s) {
  KILN_CHECK(s.device.type == DeviceType::XPU, DeviceError,
             "xpu backend: expected a stream on an xpu device, got one on ", s.device);
  DeviceState& st = state(s.device.index);
  std::lock_guard lock(states_mutex_);
  KILN_CHECK(s.id >= 0 && s.id < int64_t(st.queues.size()), DeviceError, s.device,
             " has no stream ", s.id, ": expected an id in [0, ", st.queues.size(), ")");
  return st.queues[size_t(s.id)];
}

int64_t XpuRuntime::create_stream(int device) {
  DeviceState& st = state(device);
  std::lock_guard lock(states_mutex_);
  cl_int status = CL_SUCCESS;
  cl_command_queue q = cl_->clCreateCommandQueue(st.context, devices_[size_t(device)].id,
                                                 CL_QUEUE_PROFILING_ENABLE, &status);
  check_cl(status, "clCreateCommandQueue");
  st.queues.push_back(q);
  return int64_t(st.queues.size()) - 1;
}

std::vector<cl_command_queue> XpuRuntime::queues(int device) {
  DeviceState& st = state(device);
  std::lock_guard lock(states_mutex_);
  return st.queues;
}

void* XpuRuntime::allocate(int device, size_t nbytes) {
  if (device < 0 || device >= device_count()) return nullptr;
  DeviceState& st = state(device);
  cl_int status = CL_SUCCESS;
  cl_mem mem = cl_->clCreateBuffer(st.context, CL_MEM_READ_WRITE, std::max<size_t>(nbytes, 1),
                                   nullptr, &status);
  if (status != CL_SUCCESS || !mem) return nullptr;
  const size_t reserved = page_round(nbytes);
  void* address = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
  if (address == MAP_FAILED) {
    cl_->clReleaseMemObject(mem);
    return nullptr;
  }
  std::lock_guard lock(memory_mutex_);
  allocations_[reinterpret_cast<uintptr_t>(address)] = {mem, nbytes, reserved, device};
  allocated_[size_t(device)] += int64_t(nbytes);
  return address;
}

void XpuRuntime::free(int device, void* address) {
  if (!address) return;
  Allocation a{};
  {
    std::lock_guard lock(memory_mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(address));
    KILN_CHECK(it != allocations_.end() && it->second.device == device, ValueError, "xpu:", device,
               " raw_free: expected an address from raw_allocate on that device, got ", address);
    a = it->second;
    allocations_.erase(it);
    allocated_[size_t(device)] -= int64_t(a.size);
  }
  // OpenCL keeps a released buffer alive until the commands already queued on it finish.
  cl_->clReleaseMemObject(a.mem);
  munmap(address, a.reserved);
}

BufferRef XpuRuntime::resolve(const void* address) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(address);
  std::lock_guard lock(memory_mutex_);
  auto it = allocations_.upper_bound(p);
  KILN_CHECK(it != allocations_.begin(), DeviceError, "xpu: address ", address,
             " is not in memory allocated on an xpu device");
  --it;
  const Allocation& a = it->second;
  const size_t offset = p - it->first;
  // One past the end is valid for empty views at the end of a buffer.
  KILN_CHECK(offset <= a.size, DeviceError, "xpu: address ", address,
             " is not in memory allocated on an xpu device");
  return {a.mem, offset, a.size - offset, a.device};
}

int64_t XpuRuntime::allocated_bytes(int device) const {
  check_index(device);
  std::lock_guard lock(memory_mutex_);
  return allocated_[size_t(device)];
}

cl_kernel XpuRuntime::kernel_by_key(int device, const std::string& key,
                                     const std::function<std::string()>& make_source,
                                     const char* name) {
  DeviceState& st = state(device);
  {
    std::lock_guard lock(st.mutex);
    if (auto it = st.kernels_by_key.find(key); it != st.kernels_by_key.end()) return it->second;
  }
  cl_kernel k = kernel(device, make_source(), name);
  std::lock_guard lock(st.mutex);
  st.kernels_by_key.emplace(key, k);
  return k;
}

cl_kernel XpuRuntime::kernel(int device, const std::string& source, const char* name) {
  DeviceState& st = state(device);
  std::lock_guard lock(st.mutex);
  std::string key = source;
  key += '\n';
  key += name;
  if (auto it = st.kernels.find(key); it != st.kernels.end()) return it->second;
  cl_program program = nullptr;
  if (auto it = st.programs.find(source); it != st.programs.end()) {
    program = it->second;
  } else {
    const DeviceInfo& d = devices_[size_t(device)];
    const char* text = source.c_str();
    const size_t length = source.size();
    cl_int status = CL_SUCCESS;
    program = cl_->clCreateProgramWithSource(st.context, 1, &text, &length, &status);
    check_cl(status, "clCreateProgramWithSource");
    std::string options = "-cl-std=CL1.2";
    if (d.correctly_rounded_sqrt) options += " -cl-fp32-correctly-rounded-divide-sqrt";
    status = cl_->clBuildProgram(program, 1, &d.id, options.c_str(), nullptr, nullptr);
    if (status != CL_SUCCESS) {
      size_t n = 0;
      cl_->clGetProgramBuildInfo(program, d.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      if (n) cl_->clGetProgramBuildInfo(program, d.id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      cl_->clReleaseProgram(program);
      KILN_THROW(DeviceError, "xpu: building kernel '", name, "' for ", d.name, " failed with ",
                 cl_status_name(status), ":\n", log);
    }
    if (const char* dir = std::getenv("KILN_XPU_DUMP_DIR")) dump_program(dir, program, source);
    st.programs.emplace(source, program);
  }
  cl_int status = CL_SUCCESS;
  cl_kernel k = cl_->clCreateKernel(program, name, &status);
  check_cl(status, "clCreateKernel");
  st.kernels.emplace(std::move(key), k);
  return k;
}

}  // namespace kiln::xpu
