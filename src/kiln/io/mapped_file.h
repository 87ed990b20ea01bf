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
  // Writable bytes where the object allows tensors over them (a copy-on-write mapping made
  // for tensors), else nullptr (readers then copy).
  virtual uint8_t* tensor_data() const { return nullptr; }
  virtual size_t size() const = 0;
};

class MappedFile final : public FileBytes {
 public:
  // Maps the whole regular file at path read-only (an empty file maps to no bytes).
  // kiln::Error naming the path and the OS error on failure; never blocks on FIFOs.
  // for_tensors: the mapping will back tensors directly (GGUFFile): it is made writable
  // copy-on-write (MAP_PRIVATE: a write changes this process's copy, never the file, and
  // never faults) and populated up front (MAP_POPULATE: one pass in the kernel instead of a
  // page fault per 4 KiB, which costs ~30 us each in the VMs measured: 0.16 GB/s).
  explicit MappedFile(const std::string& path, bool for_tensors = false);
  ~MappedFile() override;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const override { return data_; }
  uint8_t* tensor_data() const override { return writable_ ? const_cast<uint8_t*>(data_) : nullptr; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool writable_ = false;
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
