#include "kiln/onnx/external_data.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>

#include "kiln/core/error.h"

namespace kiln::onnx {

namespace fs = std::filesystem;

namespace {

uint64_t parse_u64(const std::string& s, const std::string& key, const std::string& what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  KILN_CHECK(ec == std::errc() && end == s.data() + s.size() && !s.empty(), ValueError, what,
             ": external data ", key, " must be a non-negative integer, got ", quoted(s));
  return v;
}

// The file location names, checked to stay inside base_dir: relative, no "..", and (after
// resolving symbolic links) still under the model's folder.
fs::path checked_location(const std::string& location, const std::string& base_dir,
                          const std::string& what) {
  KILN_CHECK(!base_dir.empty(), ValueError, what,
             ": uses external data but the model was not loaded from a file (no folder to read it from)");
  KILN_CHECK(!location.empty(), ValueError, what, ": external data without a location");
  KILN_CHECK(location.find('\0') == std::string::npos, ValueError, what,
             ": external data location contains a NUL byte");
  const fs::path rel(location);
  KILN_CHECK(rel.is_relative() && !rel.has_root_name(), ValueError, what,
             ": external data location ", quoted(location),
             " must be a path relative to the model's folder");
  for (const auto& part : rel) {
    KILN_CHECK(part != "..", ValueError, what, ": external data location ", quoted(location),
               " leaves the model's folder");
  }
  std::error_code ec;
  const fs::path base = fs::canonical(base_dir, ec);
  KILN_CHECK(!ec, ValueError, what, ": the model folder ", quoted(base_dir), " cannot be resolved");
  const fs::path full = fs::canonical(base / rel, ec);
  KILN_CHECK(!ec, ValueError, what, ": external data file ", quoted(location), " not found next to the model");
  auto [b, f] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  KILN_CHECK(b == base.end(), ValueError, what, ": external data location ", quoted(location),
             " resolves outside the model's folder");
  KILN_CHECK(fs::is_regular_file(full, ec), ValueError, what, ": external data ", quoted(location),
             " is not a regular file");
  return full;
}

}  // namespace

std::vector<uint8_t> read_external_data(const pb::TensorProto& p, const std::string& base_dir,
                                        uint64_t expected_bytes, const std::string& what) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = parse_u64(kv.value(), "offset", what);
    else if (kv.key() == "length") length = parse_u64(kv.value(), "length", what);
  }
  const fs::path file = checked_location(location, base_dir, what);
  std::error_code ec;
  const uint64_t file_size = fs::file_size(file, ec);
  KILN_CHECK(!ec, ValueError, what, ": cannot read the size of external data ", quoted(location));
  KILN_CHECK(offset <= file_size, ValueError, what, ": external data offset ", offset,
             " is past the end of ", quoted(location), " (", file_size, " bytes)");
  const uint64_t available = file_size - offset;
  const uint64_t n = length.value_or(available);
  KILN_CHECK(n <= available, ValueError, what, ": external data range [", offset, ", ",
             offset, " + ", n, ") does not fit in ", quoted(location), " (", file_size, " bytes)");
  KILN_CHECK(n == expected_bytes, ValueError, what, ": external data holds ", n,
             " bytes but the tensor's shape and type need ", expected_bytes);
  std::vector<uint8_t> bytes(n);
  std::ifstream in(file, std::ios::binary);
  in.seekg(std::streamoff(offset));
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(n));
  KILN_CHECK(in.good() || n == 0, ValueError, what, ": reading external data ", quoted(location), " failed");
  return bytes;
}

}  // namespace kiln::onnx
