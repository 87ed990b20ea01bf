// data::read_idx: the IDX (MNIST) reader, plain or gzip (see include/kiln/data/idx.h).
#include "kiln/data/idx.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "kiln/data/gzip_reader.h"
#include "kiln/io/mapped_file.h"
#include "kiln/ops/factory.h"

namespace kiln::data {

namespace {

std::optional<DType> idx_dtype(uint8_t code) {
  switch (code) {
    case 0x08: return DType::U8;
    case 0x09: return DType::I8;
    case 0x0B: return DType::I16;
    case 0x0C: return DType::I32;
    case 0x0D: return DType::F32;
    case 0x0E: return DType::F64;
    default: return std::nullopt;
  }
}

std::string hex(uint64_t v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llX", digits, static_cast<unsigned long long>(v));
  return buf;
}

// Pulls bytes from the decoded stream: read(dst, n) returns fewer than n only at its end.
using Read = std::function<size_t(uint8_t*, size_t)>;

// Reads exactly n header bytes or throws naming `what`.
void read_header(const Read& read, uint8_t* dst, size_t n, size_t at, const char* what,
                 const std::string& name) {
  const size_t got = read(dst, n);
  KILN_CHECK(got == n, ValueError, "read_idx: ", name, ": truncated header: expected ", n,
             " bytes of ", what, " at byte ", at, ", the data ends after ", got);
}

// Big-endian elements to host (little-endian) order, in place.
void to_host_order(uint8_t* p, size_t nbytes, size_t elem) {
  if (elem == 1) return;
  for (size_t i = 0; i + elem <= nbytes; i += elem) std::reverse(p + i, p + i + elem);
}

// decoded_size: the total size of the decoded data when known up front (plain files), so
// lies about the size are caught before anything is allocated.
Tensor parse(const Read& read, std::optional<uint64_t> decoded_size, const std::string& name) {
  uint8_t magic[4];
  read_header(read, magic, 4, 0, "magic number", name);
  const uint32_t magic_value = uint32_t(magic[0]) << 24 | uint32_t(magic[1]) << 16 |
                               uint32_t(magic[2]) << 8 | magic[3];
  KILN_CHECK(magic[0] == 0 && magic[1] == 0, ValueError, "read_idx: ", name,
             ": bad magic number ", hex(magic_value, 8), "; an IDX file starts with two zero "
             "bytes, a type code and the number of dimensions (e.g. 0x00000803)");
  const std::optional<DType> dtype = idx_dtype(magic[2]);
  KILN_CHECK(dtype.has_value(), ValueError, "read_idx: ", name, ": unknown type code ",
             hex(magic[2], 2), " in magic number ", hex(magic_value, 8), "; expected 0x08 "
             "(uint8), 0x09 (int8), 0x0B (int16), 0x0C (int32), 0x0D (float32) or 0x0E (float64)");
  const int ndims = magic[3];
  KILN_CHECK(ndims <= kIdxMaxDims, ValueError, "read_idx: ", name, ": ", ndims,
             " dimensions; at most ", kIdxMaxDims, " are supported");

  std::vector<uint8_t> dim_bytes(size_t(ndims) * 4);
  if (ndims > 0) read_header(read, dim_bytes.data(), dim_bytes.size(), 4, "dimension sizes", name);
  Shape shape(size_t(ndims), 0);
  const uint64_t elem = element_size(*dtype);
  // The product of the non-zero dimensions times the element size must fit in int64, so no
  // size or stride computed from the shape can overflow (even when a dimension is 0).
  uint64_t nonzero_bytes = elem;
  bool empty = false;
  for (int d = 0; d < ndims; ++d) {
    const uint8_t* b = &dim_bytes[size_t(d) * 4];
    const uint32_t size = uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
    shape[size_t(d)] = int64_t(size);
    if (size == 0) {
      empty = true;
      continue;
    }
    KILN_CHECK(!__builtin_mul_overflow(nonzero_bytes, uint64_t(size), &nonzero_bytes) &&
                   nonzero_bytes <= uint64_t(std::numeric_limits<int64_t>::max()),
               ValueError, "read_idx: ", name, ": dimensions ", shape_str(shape),
               " (so far) of ", dtype_name(*dtype), " describe more than 2^63 bytes");
  }
  const uint64_t nbytes = empty ? 0 : nonzero_bytes;
  const uint64_t header = 4 + dim_bytes.size();
  const auto describe = [&] {
    return ::kiln::detail::str_cat(nbytes, " bytes of data (shape ", shape_str(shape), ", ",
                           dtype_name(*dtype), ")");
  };
  if (decoded_size) {
    const uint64_t have = *decoded_size - header;
    KILN_CHECK(have >= nbytes, ValueError, "read_idx: ", name, ": truncated data: the header "
               "describes ", describe(), " but the file holds ", have, " after the header");
    KILN_CHECK(have == nbytes, ValueError, "read_idx: ", name, ": the file holds ",
               have - nbytes, " bytes more than the header describes (", describe(), ")");
  }

  // Grow the buffer as data arrives, so a gzip file whose header lies costs only what it
  // really decodes to.
  std::vector<uint8_t> data;
  constexpr size_t kChunk = size_t(16) << 20;
  while (data.size() < nbytes) {
    const size_t want = size_t(std::min<uint64_t>(kChunk, nbytes - data.size()));
    const size_t old = data.size();
    data.resize(old + want);
    const size_t got = read(data.data() + old, want);
    KILN_CHECK(got == want, ValueError, "read_idx: ", name, ": truncated data: the header "
               "describes ", describe(), " but the data ends after ", old + got);
  }
  uint8_t extra;
  KILN_CHECK(read(&extra, 1) == 0, ValueError, "read_idx: ", name, ": the data continues "
             "after the ", describe(), " that the header describes");
  to_host_order(data.data(), data.size(), size_t(elem));
  return from_blob_copy(data.data(), shape, *dtype, Device(DeviceType::CPU, 0));
}

}  // namespace

Tensor read_idx(std::span<const uint8_t> bytes, const std::string& name) {
  if (detail::is_gzip(bytes)) {
    detail::GzipReader gz(bytes, name);
    return parse([&](uint8_t* dst, size_t n) { return gz.read(dst, n); }, std::nullopt, name);
  }
  size_t pos = 0;
  auto read = [&](uint8_t* dst, size_t n) {
    const size_t k = std::min(n, bytes.size() - pos);
    if (k) std::copy_n(bytes.data() + pos, k, dst);
    pos += k;
    return k;
  };
  return parse(read, uint64_t(bytes.size()), name);
}

Tensor read_idx(const std::string& path) {
  io::detail::MappedFile file(path);
  return read_idx(std::span<const uint8_t>(file.data(), file.size()), path);
}

}  // namespace kiln::data
