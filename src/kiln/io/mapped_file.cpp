#include "kiln/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "kiln/core/error.h"

namespace kiln::io::detail {

namespace {

std::string os_error(int err) { return std::error_code(err, std::system_category()).message(); }

}  // namespace

MappedFile::MappedFile(const std::string& path, bool for_tensors) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) KILN_THROW(Error, "can't open '", path, "': ", os_error(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    KILN_THROW(Error, "can't stat '", path, "': ", os_error(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    KILN_THROW(Error, "can't read '", path, "': not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    const int prot = for_tensors ? PROT_READ | PROT_WRITE : PROT_READ;
    void* p = ::mmap(nullptr, size_, prot, MAP_PRIVATE | (for_tensors ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      KILN_THROW(Error, "can't memory-map '", path, "' (", size_, " bytes): ", os_error(err));
    }
    data_ = static_cast<const uint8_t*>(p);
    writable_ = for_tensors;
  }
  ::close(fd);  // the mapping stays valid without the descriptor
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

OwnedBytes::OwnedBytes(const void* data, size_t size) {
  if (size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.assign(p, p + size);
  }
}

}  // namespace kiln::io::detail
