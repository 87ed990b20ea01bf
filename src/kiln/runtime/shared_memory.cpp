// Shared host memory over memfd (kiln/runtime/shared_memory.h).
#include "kiln/runtime/shared_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/core/error.h"

namespace kiln {

namespace {

struct Mapping {
  size_t nbytes;
  int fd;
};

void unmap(void* ctx, void* ptr) {
  auto* m = static_cast<Mapping*>(ctx);
  if (ptr) munmap(ptr, m->nbytes);
  if (m->fd >= 0) close(m->fd);
  delete m;
}

// Maps fd; owns_fd: the mapping closes fd when freed (and on failure).
DataPtr map_fd(int fd, size_t nbytes, bool owns_fd) {
  void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    if (owns_fd) close(fd);
    KILN_THROW(Error, "shared memory: mapping ", nbytes, " bytes failed: ", std::strerror(err));
  }
  return DataPtr(p, new Mapping{nbytes, owns_fd ? fd : -1}, &unmap, Device(DeviceType::CPU, 0));
}

}  // namespace

DataPtr allocate_shared_host(size_t nbytes, int& fd) {
  fd = -1;
  if (nbytes == 0) return DataPtr(nullptr, new Mapping{0, -1}, &unmap, Device(DeviceType::CPU, 0));
  int f = memfd_create("kiln-shared", MFD_CLOEXEC);
  KILN_CHECK(f >= 0, Error, "shared memory: memfd_create failed: ", std::strerror(errno));
  if (ftruncate(f, off_t(nbytes)) != 0) {
    int err = errno;
    close(f);
    KILN_THROW(OutOfMemoryError, "shared memory: cannot size a memory file to ", nbytes,
               " bytes: ", std::strerror(err));
  }
  fd = f;
  return map_fd(f, nbytes, /*owns_fd=*/true);
}

DataPtr map_shared_host(int fd, size_t nbytes) {
  if (nbytes == 0) return DataPtr(nullptr, new Mapping{0, -1}, &unmap, Device(DeviceType::CPU, 0));
  struct stat st;
  KILN_CHECK(fstat(fd, &st) == 0, Error, "shared memory: descriptor ", fd, " is not open: ",
             std::strerror(errno));
  KILN_CHECK(size_t(st.st_size) >= nbytes, Error, "shared memory: the memory file holds ",
             st.st_size, " bytes, expected at least ", nbytes);
  return map_fd(fd, nbytes, /*owns_fd=*/false);
}

}  // namespace kiln
