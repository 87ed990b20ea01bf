#pragma once
// The OpenCL entry points kiln uses, loaded at run time from the system's ICD loader
// (libOpenCL.so.1) with dlopen. libkiln never links OpenCL: a machine without it (or with no
// OpenCL device) simply has no xpu devices. Only the Khronos headers are needed to build.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <string>

namespace kiln::xpu {

struct OpenCLApi {
#define KILN_CL_FUNCTIONS(X)                                                                 \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo)               \
  X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue)     \
  X(clCreateBuffer) X(clReleaseMemObject) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer)      \
  X(clEnqueueCopyBuffer) X(clEnqueueFillBuffer) X(clCreateProgramWithSource)                  \
  X(clBuildProgram) X(clGetProgramBuildInfo) X(clGetProgramInfo) X(clReleaseProgram)         \
  X(clCreateKernel)                                                                           \
  X(clReleaseKernel) X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clFinish) X(clFlush)       \
  X(clEnqueueMarkerWithWaitList) X(clEnqueueBarrierWithWaitList) X(clWaitForEvents)           \
  X(clGetEventInfo) X(clGetEventProfilingInfo) X(clReleaseEvent) X(clGetKernelWorkGroupInfo)
#define KILN_CL_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CL_FUNCTIONS(KILN_CL_MEMBER)
#undef KILN_CL_MEMBER
};

// The loaded API, or nullptr when no OpenCL loader could be opened (or it lacks a 1.2
// function); why_unavailable() then says what was missing. Loaded once, thread-safe.
const OpenCLApi* opencl_api() noexcept;
std::string opencl_why_unavailable();

// "CL_OUT_OF_RESOURCES (-5)" for an OpenCL status code.
std::string cl_status_name(cl_int status);

// Throws DeviceError naming the call when status is not CL_SUCCESS.
void check_cl(cl_int status, const char* what);

}  // namespace kiln::xpu
