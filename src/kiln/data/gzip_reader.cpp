// GzipReader: zlib's inflate over an in-memory gzip image (see gzip_reader.h).
#include "kiln/data/gzip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "kiln/core/error.h"

namespace kiln::data::detail {

bool is_gzip(std::span<const uint8_t> bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

struct GzipReader::Stream {
  z_stream z{};
};

namespace {
// 16 + MAX_WBITS: a gzip wrapper (not zlib or raw deflate) around a full-size window.
constexpr int kGzipWindowBits = 16 + MAX_WBITS;
// zlib counts in uInt (32 bits): feed input and output in pieces of at most this.
constexpr size_t kMaxChunk = size_t(1) << 30;
}  // namespace

GzipReader::GzipReader(std::span<const uint8_t> compressed, std::string name)
    : stream_(std::make_unique<Stream>()), in_(compressed), name_(std::move(name)) {
  if (inflateInit2(&stream_->z, kGzipWindowBits) != Z_OK)
    KILN_THROW(Error, name_, ": can't initialise zlib's inflate");
}

GzipReader::~GzipReader() { inflateEnd(&stream_->z); }

size_t GzipReader::read(uint8_t* dst, size_t n) {
  z_stream& z = stream_->z;
  size_t produced = 0;
  while (produced < n && !finished_) {
    if (z.avail_in == 0 && in_pos_ < in_.size()) {
      const size_t chunk = std::min(kMaxChunk, in_.size() - in_pos_);
      // zlib's next_in is not const-qualified in every build configuration; it only reads.
      z.next_in = const_cast<Bytef*>(in_.data() + in_pos_);
      z.avail_in = uInt(chunk);
      in_pos_ += chunk;
    }
    const size_t want = std::min(kMaxChunk, n - produced);
    z.next_out = dst + produced;
    z.avail_out = uInt(want);
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced += want - z.avail_out;
    if (rc == Z_STREAM_END) {
      // Another member may follow; anything else after it is reported by the next inflate
      // as a bad header.
      if (z.avail_in == 0 && in_pos_ == in_.size()) {
        finished_ = true;
      } else if (inflateReset(&z) != Z_OK) {
        KILN_THROW(Error, name_, ": can't reset zlib's inflate");
      }
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && in_pos_ == in_.size())
      KILN_THROW(ValueError, name_, ": corrupt gzip stream: the file ends before the end of "
                 "the compressed data (truncated file?)");
    if (rc == Z_MEM_ERROR) KILN_THROW(OutOfMemoryError, name_, ": zlib ran out of memory");
    KILN_THROW(ValueError, name_, ": corrupt gzip stream at compressed byte ",
               in_pos_ - z.avail_in, ": ",
               z.msg != nullptr ? z.msg : (rc == Z_NEED_DICT ? "needs a preset dictionary"
                                                             : "inflate failed"));
  }
  return produced;
}

}  // namespace kiln::data::detail
