#pragma once
// Test helpers for the IDX reader: an IDX writer (big-endian, from the definition of the
// format, independent of the reader) and gzip compression through zlib.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "kiln/data/data.h"

namespace kiln::test {

inline uint8_t idx_type_code(DType t) {
  switch (t) {
    case DType::U8: return 0x08;
    case DType::I8: return 0x09;
    case DType::I16: return 0x0B;
    case DType::I32: return 0x0C;
    case DType::F32: return 0x0D;
    case DType::F64: return 0x0E;
    default: ADD_FAILURE() << "no IDX type code for " << dtype_name(t); return 0;
  }
}

inline void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
}

// The IDX header: two zero bytes, the type code, the rank, then big-endian dims.
inline std::vector<uint8_t> idx_header(uint8_t type_code, const std::vector<uint32_t>& dims) {
  std::vector<uint8_t> out{0, 0, type_code, uint8_t(dims.size())};
  for (uint32_t d : dims) put_be32(out, d);
  return out;
}

// An IDX image of t (CPU, any dtype IDX has): header, then each element big-endian.
inline std::vector<uint8_t> idx_bytes(const Tensor& t) {
  std::vector<uint32_t> dims(t.shape().begin(), t.shape().end());
  std::vector<uint8_t> out = idx_header(idx_type_code(t.dtype()), dims);
  std::vector<uint8_t> le = raw_bytes(t);  // host order (little-endian)
  const size_t elem = t.element_size();
  for (size_t i = 0; i < le.size(); i += elem)
    for (size_t b = elem; b-- > 0;) out.push_back(le[i + b]);
  return out;
}

// gzip (one member, level 6) of bytes.
inline std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&z, uLong(bytes.size())) + 64);
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = uInt(bytes.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace kiln::test
