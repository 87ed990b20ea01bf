// dlopen of the OpenCL ICD loader. KILN_OPENCL_LIBRARY names another library to open (a
// vendor's libOpenCL, or a test's); the default is the soname every ICD loader installs.
#include "opencl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "kiln/core/error.h"

namespace kiln::xpu {

namespace {

struct Loaded {
  OpenCLApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  const char* env = std::getenv("KILN_OPENCL_LIBRARY");
  const char* name = env && *env ? env : "libOpenCL.so.1";
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    l.why = std::string("could not open the OpenCL loader ") + name + ": " +
            (err ? err : "unknown error") + " (install ocl-icd-libopencl1 and a driver)";
    return l;
  }
  // The library stays open for the life of the process (drivers dislike being unloaded).
#define KILN_CL_LOAD(fn)                                                    \
  l.api.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn));            \
  if (!l.api.fn) {                                                          \
    l.why = std::string(name) + " lacks the OpenCL 1.2 function " #fn;      \
    return l;                                                               \
  }
  KILN_CL_FUNCTIONS(KILN_CL_LOAD)
#undef KILN_CL_LOAD
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const OpenCLApi* opencl_api() noexcept { return loaded().ok ? &loaded().api : nullptr; }

std::string opencl_why_unavailable() { return loaded().ok ? std::string() : loaded().why; }

std::string cl_status_name(cl_int status) {
  const char* name = "unknown OpenCL status";
  switch (status) {
#define KILN_CL_CASE(s) case s: name = #s; break;
    KILN_CL_CASE(CL_SUCCESS)
    KILN_CL_CASE(CL_DEVICE_NOT_FOUND)
    KILN_CL_CASE(CL_DEVICE_NOT_AVAILABLE)
    KILN_CL_CASE(CL_COMPILER_NOT_AVAILABLE)
    KILN_CL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    KILN_CL_CASE(CL_OUT_OF_RESOURCES)
    KILN_CL_CASE(CL_OUT_OF_HOST_MEMORY)
    KILN_CL_CASE(CL_PROFILING_INFO_NOT_AVAILABLE)
    KILN_CL_CASE(CL_BUILD_PROGRAM_FAILURE)
    KILN_CL_CASE(CL_MAP_FAILURE)
    KILN_CL_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    KILN_CL_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    KILN_CL_CASE(CL_INVALID_VALUE)
    KILN_CL_CASE(CL_INVALID_DEVICE_TYPE)
    KILN_CL_CASE(CL_INVALID_PLATFORM)
    KILN_CL_CASE(CL_INVALID_DEVICE)
    KILN_CL_CASE(CL_INVALID_CONTEXT)
    KILN_CL_CASE(CL_INVALID_QUEUE_PROPERTIES)
    KILN_CL_CASE(CL_INVALID_COMMAND_QUEUE)
    KILN_CL_CASE(CL_INVALID_HOST_PTR)
    KILN_CL_CASE(CL_INVALID_MEM_OBJECT)
    KILN_CL_CASE(CL_INVALID_BINARY)
    KILN_CL_CASE(CL_INVALID_BUILD_OPTIONS)
    KILN_CL_CASE(CL_INVALID_PROGRAM)
    KILN_CL_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
    KILN_CL_CASE(CL_INVALID_KERNEL_NAME)
    KILN_CL_CASE(CL_INVALID_KERNEL)
    KILN_CL_CASE(CL_INVALID_ARG_INDEX)
    KILN_CL_CASE(CL_INVALID_ARG_VALUE)
    KILN_CL_CASE(CL_INVALID_ARG_SIZE)
    KILN_CL_CASE(CL_INVALID_KERNEL_ARGS)
    KILN_CL_CASE(CL_INVALID_WORK_DIMENSION)
    KILN_CL_CASE(CL_INVALID_WORK_GROUP_SIZE)
    KILN_CL_CASE(CL_INVALID_WORK_ITEM_SIZE)
    KILN_CL_CASE(CL_INVALID_GLOBAL_OFFSET)
    KILN_CL_CASE(CL_INVALID_EVENT_WAIT_LIST)
    KILN_CL_CASE(CL_INVALID_EVENT)
    KILN_CL_CASE(CL_INVALID_OPERATION)
    KILN_CL_CASE(CL_INVALID_BUFFER_SIZE)
    KILN_CL_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
#undef KILN_CL_CASE
    default: break;
  }
  return std::string(name) + " (" + std::to_string(status) + ")";
}

void check_cl(cl_int status, const char* what) {
  KILN_CHECK(status == CL_SUCCESS, DeviceError, "xpu: ", what, " failed with ",
             cl_status_name(status));
}

}  // namespace kiln::xpu
