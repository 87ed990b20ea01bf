#pragma once
// Read-only bytes of a file image: either a read-only memory map of a file (MappedFile) or
// an owned copy of a buffer (OwnedBytes). SafetensorsFile keeps one alive while it is used.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::io::detail {

class FileBytes {
 public:
  virtual ~FileBytes() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

class MappedFile final : public FileBytes {
 public:
  // Maps the whole regular file at path read-only (an empty file maps to no bytes).
  // kiln::Error naming the path and the OS error on failure; never blocks on FIFOs.
  explicit MappedFile(const std::string& path);
  ~MappedFile() override;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class OwnedBytes final : public FileBytes {
 public:
  OwnedBytes(const void* data, size_t size);
  const uint8_t* data() const override { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace kiln::io::detail
