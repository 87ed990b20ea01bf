#pragma once
// GzipReader: streaming decompression of a gzip image in memory (through zlib), so a
// reader can pull exactly the bytes it expects and never inflates more than it asked for
// (a small file claiming gigabytes costs only what it really holds). Concatenated members
// (as `cat a.gz b.gz`) read as one stream, as gzip does. Corrupt or truncated streams
// (bad header, bad deflate data, CRC or length mismatch, missing trailer) are ValueErrors
// naming the file.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace kiln::data::detail {

// True if bytes start with the gzip magic (1f 8b).
bool is_gzip(std::span<const uint8_t> bytes);

class GzipReader {
 public:
  // `compressed` must outlive the reader; `name` stands for the file in messages.
  GzipReader(std::span<const uint8_t> compressed, std::string name);
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Inflates up to n bytes into dst; returns fewer only at the end of the last member (whose
  // CRC and length have then been checked).
  size_t read(uint8_t* dst, size_t n);

 private:
  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::span<const uint8_t> in_;
  size_t in_pos_ = 0;  // compressed bytes handed to zlib so far
  std::string name_;
  bool finished_ = false;
};

}  // namespace kiln::data::detail
