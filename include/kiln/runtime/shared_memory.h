#pragma once
// Host memory that other processes can map (Tensor.share_memory_, tensors sent between
// processes): an anonymous memory file (memfd), mapped shared. Its descriptor goes to another
// process (SCM_RIGHTS, through Python's multiprocessing), which maps the same pages: no copy.
#include <cstddef>

#include "kiln/runtime/allocator.h"

namespace kiln {

// nbytes of zeroed shared host memory. fd receives the memory file's descriptor, which stays
// open as long as the returned DataPtr lives (closed by its deleter); -1 when nbytes is 0.
DataPtr allocate_shared_host(size_t nbytes, int& fd);

// Maps nbytes of a memory file received from another process. The descriptor stays the
// caller's (close it once mapped: the mapping does not need it). Error naming the size when
// the file is smaller than nbytes or the mapping fails.
DataPtr map_shared_host(int fd, size_t nbytes);

}  // namespace kiln
