#pragma once
// GGUFFile: read access to a GGUF file (llama.cpp's model format, versions 2 and 3): its
// metadata key/value pairs and its tensors, which may be block-quantised (kiln/quant/
// ggml_types.h). open() memory-maps the file and validates all of its structure up front
// (magic, version, every string and array length against the bytes left, type numbers,
// alignment, tensor sizes and data ranges, duplicate names), so a malformed or hostile file
// gets a kiln::ValueError (an unknown tensor type: TypeError) naming the file and what is
// wrong, and later reads never leave the file. Cheap to copy; safe from many threads.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/quant/ggml_types.h"
#include "kiln/tensor/tensor.h"

namespace kiln::io {

// GGUF metadata value types, as numbered in the file.
enum class GGUFValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8,
  Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

// One metadata value. Integers are widened (signed ones to int_value, unsigned ones to
// uint_value), floats to double; an array holds its elements (all of elem_type).
struct GGUFValue {
  GGUFValueType type = GGUFValueType::U8;
  GGUFValueType elem_type = GGUFValueType::U8;  // arrays only
  int64_t int_value = 0;
  uint64_t uint_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::string string_value;
  std::vector<GGUFValue> items;
};

struct GGUFTensorInfo {
  std::string name;
  quant::GGMLType type = quant::GGMLType::F32;
  // Sizes outermost first, as torch orders them (the file lists them innermost first):
  // a Linear weight is [out_features, in_features].
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  int64_t numel() const;
};

class GGUFFile {
 public:
  static constexpr uint64_t kMaxTensors = 1'000'000;
  static constexpr uint64_t kMaxKeys = 1'000'000;
  static constexpr uint64_t kMaxStringBytes = 1ull << 30;
  static constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

  static GGUFFile open(const std::string& path);
  // The same from bytes in memory (copied); `name` stands for the file in messages.
  static GGUFFile from_buffer(const void* data, size_t size, const std::string& name = "<memory>");

  const std::string& path() const;
  uint32_t version() const;
  uint32_t alignment() const;
  uint64_t data_offset() const;  // where the data section starts in the file
  // Keys in file order.
  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const;
  // nullptr if the key is absent.
  const GGUFValue* find(const std::string& key) const;
  // Tensor infos in file order.
  const std::vector<GGUFTensorInfo>& tensors() const;
  // ValueError naming the file if there is none called `name`.
  const GGUFTensorInfo& info(const std::string& name) const;
  bool contains(const std::string& name) const;
  // The tensor's bytes inside the file (valid while a copy of this object lives).
  std::span<const uint8_t> bytes(const std::string& name) const;
  // A CPU tensor of the data: plain types keep their dtype (F32, F16, BF16, F64, I8, I16,
  // I32, I64) and shape; quantised types come as their raw blocks, uint8 [rows, row_bytes]
  // (rows = the product of all sizes but the last). Without copy (the default for a file
  // from open()), the tensor's storage is the file's mapping, made copy-on-write: no load
  // time, and a write changes the process's copy, never the file (two calls for one name
  // share that memory). copy = true, or a buffer from from_buffer(), copies.
  Tensor tensor(const std::string& name, bool copy = false) const;
  // A new float32 CPU tensor of the tensor's shape with the values of any float or
  // quantised type (ggml's reference dequantisation); TypeError for integer types.
  Tensor dequantize(const std::string& name) const;

  struct State;

 private:
  explicit GGUFFile(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace kiln::io
