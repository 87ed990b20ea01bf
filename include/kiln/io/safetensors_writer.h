#pragma once
// Writing safetensors files. Tensors of every kiln dtype, on any device and in any layout,
// are written as contiguous little-endian host copies, one tensor at a time. The layout is
// the reference implementation's: the JSON header (compact, "__metadata__" first) is padded
// with spaces to a multiple of 8 bytes, and tensors are laid out by decreasing dtype
// alignment (I64, F64, F32, I32, BF16, F16, I16, I8, U8, BOOL), then by name (bytewise),
// whatever order they were given in. The same tensors and at most one metadata entry give
// the same bytes as Python's safetensors.save_file.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::io {

using SafetensorsMetadata = std::map<std::string, std::string>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes the tensors to path atomically: the data goes to a temporary file in the same
// directory, which is flushed to disk and renamed over path only when complete, so readers
// see the old file or the new one, never a partial one. Names must be unique, valid UTF-8
// and not "__metadata__"; metadata keys and values must be valid UTF-8 (ValueError
// otherwise); kiln::Error if the file can't be written.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const SafetensorsMetadata& metadata = {});
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata = {});
// save_safetensors(path, {{"w", w}, {"b", b}}) (the braces would fit both overloads above).
void save_safetensors(const std::string& path,
                      std::initializer_list<std::pair<std::string, Tensor>> tensors,
                      const SafetensorsMetadata& metadata = {});

// The same file image in memory.
std::vector<uint8_t> safetensors_bytes(const NamedTensors& tensors,
                                       const SafetensorsMetadata& metadata = {});

}  // namespace kiln::io
