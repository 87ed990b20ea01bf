#pragma once
// Parsing and validating a whole GGUF file image (header, metadata, tensor infos, data
// ranges). Everything about the file's structure is checked here, so that afterwards every
// tensor's [offset, offset + nbytes) lies inside the data section.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/io/gguf_file.h"

namespace kiln::io::detail {

struct ParsedGGUF {
  uint32_t version = 0;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, GGUFValue>> metadata;
  std::map<std::string, size_t> key_index;
  std::vector<GGUFTensorInfo> tensors;
  std::map<std::string, size_t> tensor_index;
};

ParsedGGUF parse_gguf(const uint8_t* data, size_t size, const std::string& source);

}  // namespace kiln::io::detail
