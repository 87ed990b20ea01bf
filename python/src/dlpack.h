#pragma once
// The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html, version 1.1), written
// from the specification; decision 0014 says why kiln has its own copy. Only the parts
// kiln exchanges: CPU tensors of the integer, floating, bfloat16 and bool types, the legacy
// DLManagedTensor ("dltensor" capsules) and DLManagedTensorVersioned ("dltensor_versioned").
#include <cstdint>

namespace kiln::py::dlpack {

constexpr uint32_t kMajorVersion = 1;
constexpr uint32_t kMinorVersion = 1;

// DLDeviceType values kiln uses.
enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDAHost = 3,
  kDLCUDAManaged = 13,
  kDLExtDev = 12,  // "reserved extension device": what kiln's testing device reports
};

// DLDataTypeCode values kiln uses.
enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
};

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;            // start of the data (kiln: already advanced by the storage offset)
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;        // ndim entries
  int64_t* strides;      // ndim entries, in elements; null (legacy only): compact row-major
  uint64_t byte_offset;  // added to data
};

// Legacy (pre-1.0) managed tensor: the payload of a "dltensor" capsule.
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

constexpr uint64_t kFlagReadOnly = 1ull << 0;
constexpr uint64_t kFlagIsCopied = 1ull << 1;

// DLPack >= 1.0 managed tensor: the payload of a "dltensor_versioned" capsule.
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

}  // namespace kiln::py::dlpack
