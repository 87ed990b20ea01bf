#pragma once
// Parsing and validating the header of a safetensors file held in memory. Everything about
// the file's structure is checked here, before any tensor is read, so that afterwards every
// [begin, end) range lies inside the data buffer and matches its tensor's dtype and shape.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/io/safetensors_file.h"

namespace kiln::io::detail {

struct HeaderEntry {
  std::string name;
  TensorInfo info;
};

struct ParsedHeader {
  uint64_t header_size = 0;  // N
  std::vector<HeaderEntry> entries;  // sorted by data offsets
  std::vector<uint32_t> by_name;     // positions in entries, ordered by name
  std::map<std::string, std::string> metadata;

  // The entry called name, or nullptr (binary search over by_name).
  const HeaderEntry* find(const std::string& name) const;
};

// Parses the whole file image [data, data + size). `source` names the file in messages.
ParsedHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& source);

}  // namespace kiln::io::detail
