#pragma once
// SafetensorsFile: read access to a safetensors file (https://github.com/huggingface/safetensors).
// open() memory-maps the file read-only and validates the whole header up front; tensors are
// then read lazily, one at a time, by copying their bytes out of the map. A malformed file
// is rejected with a kiln::ValueError naming the file, the tensor and the problem (an
// unsupported but well-formed dtype such as F8_E4M3 with a kiln::TypeError); nothing is ever
// read outside the file. See docs/decisions/0010-safetensors.md for the validation rules.
//
// Objects are cheap to copy (they share one immutable state) and safe to use from many
// threads at once. The map lives as long as any copy (or any span from bytes()) is in use.
// Like every memory-mapped reader, it assumes the file is not truncated while open.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/shape.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln::io {

// What the header says about one tensor.
struct TensorInfo {
  DType dtype = DType::F32;
  Shape shape;
  // data_offsets of the header: [begin, end) in bytes, relative to the start of the data
  // buffer (which starts at SafetensorsFile::data_offset() in the file).
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Limits beyond which a header is rejected as hostile rather than parsed.
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation
  static constexpr size_t kMaxTensors = 1'000'000;
  static constexpr size_t kMaxRank = 64;

  // Maps the file read-only and validates its header. kiln::Error if the file can't be
  // opened or mapped; ValueError/TypeError if its content is invalid.
  static SafetensorsFile open(const std::string& path);
  // The same from bytes in memory (copied, so `data` may be freed after the call); `name`
  // stands for the file in error messages.
  static SafetensorsFile from_buffer(const void* data, size_t size,
                                     const std::string& name = "<memory>");

  // The path given to open() (or the name given to from_buffer()).
  const std::string& path() const;
  size_t size() const;  // number of tensors
  bool contains(const std::string& name) const;
  // Tensor names in the order of their data in the file.
  std::vector<std::string> names() const;
  // ValueError naming the file if there is no tensor called `name` (also for the methods
  // below).
  const TensorInfo& info(const std::string& name) const;
  // A new contiguous tensor on `device` holding a copy of the tensor's data. BOOL tensors
  // whose bytes are not all 0 or 1 are rejected with a ValueError.
  Tensor tensor(const std::string& name, Device device = Device(DeviceType::CPU, 0)) const;
  // The tensor's raw little-endian bytes inside the file, valid while this object (or a
  // copy of it) lives. Not necessarily aligned to the element size.
  std::span<const uint8_t> bytes(const std::string& name) const;
  // The "__metadata__" string map of the header (empty if there is none).
  const std::map<std::string, std::string>& metadata() const;

  uint64_t header_size() const;  // N, the length of the JSON header in bytes
  uint64_t data_offset() const;  // 8 + N: where the data buffer starts in the file
  uint64_t file_size() const;

  struct State;

 private:
  explicit SafetensorsFile(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace kiln::io
