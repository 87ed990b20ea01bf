#pragma once
// What every xpu kernel needs: the OpenCL C prelude (per-dtype load/store macros), tensor
// arguments as (buffer, byte offset) pairs, a launcher that sets arguments and enqueues on
// the current stream, and the generic strided elementwise kernel that most ops are.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/core/scalar.h"
#include "kiln/tensor/tensor.h"
#include "xpu_runtime.h"

namespace kiln::xpu {

// "F32", "BF16", "BOOL", ...: the suffix of the prelude's LD_/SV_/ST_/CT_ names.
const char* dtype_tag(DType t);
// The prelude (fp64 enabled where the device has it) followed by body.
std::string program_source(int device, const std::string& body);
bool device_has_fp64(int device);

// Sets a cached kernel's arguments and enqueues it on the current stream of the device.
// Holds the device's kernel mutex (recursive) for its lifetime, so other threads wait.
class Launch {
 public:
  Launch(int device, const std::string& source, const char* name);
  Launch(int device, cl_kernel kernel);  // a kernel from XpuRuntime::kernel_by_key
  ~Launch() = default;
  Launch& tensor(const Tensor& t);  // two arguments: __global char* base, ulong byte offset
  template <typename T>
  Launch& value(const T& v) { return raw(&v, sizeof(T)); }
  Launch& raw(const void* p, size_t n);
  // A scalar in the kernel's SC_<dtype> type (double, float or long).
  Launch& scalar(const Scalar& v, DType dtype);
  Launch& local_bytes(size_t n);  // a __local buffer argument
  // Enqueues global_size work items (rounded up to a multiple of local_size).
  void run(size_t global_size, size_t local_size);
  void run_2d(size_t g0, size_t g1, size_t l0, size_t l1);
  // Global sizes are work items (each rounded up to a multiple of its local size).
  void run_3d(size_t g0, size_t g1, size_t g2, size_t l0, size_t l1, size_t l2);

 private:
  int device_;
  cl_kernel kernel_;
  std::unique_lock<std::recursive_mutex> lock_;
  cl_uint next_ = 0;
};

// A scalar argument in the arithmetic type of dtype (double / float / long).
struct ScalarArg {
  Scalar value;
  DType dtype;
};

// out[i] = body over inputs broadcast to out's shape, any strides (dims merged where every
// tensor allows). In body: a, b, c, ... f (up to six inputs, in their compute types), s0, s1, ... (the
// scalars), i (the flat output index, long); it assigns r (the output's compute type). `raw`
// moves storage values unconverted (a copy between tensors of one dtype).
void elementwise(const Tensor& out, const std::vector<Tensor>& inputs, const std::string& body,
                 const std::vector<ScalarArg>& scalars = {}, bool raw = false);

// Largest work-group size worth asking for on the device (256, or less where the device's
// maximum is smaller).
size_t default_local_size(int device);
// The global size of a grid-stride loop over n items in groups of default_local_size: at most
// 65536 groups, each item striding over the rest.
size_t grid_size(int device, int64_t n);

}  // namespace kiln::xpu
