#pragma once
// The IDX file format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/):
//   magic: two zero bytes, a type code, the number of dimensions n
//   n dimension sizes, each a big-endian uint32
//   the elements in row-major order, big-endian
// Type codes: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64.
#include <cstdint>
#include <span>
#include <string>

#include "kiln/tensor/tensor.h"

namespace kiln::data {

// At most this many dimensions (the format allows 255; real files have 1 to 4).
constexpr int kIdxMaxDims = 64;

// Reads the IDX file at path into a new CPU tensor of the file's type and shape. Files
// starting with the gzip magic (as the .gz files that MNIST is distributed in) are inflated
// on the fly. kiln::Error if the file can't be opened; ValueError naming the file and the
// problem for a bad magic number, an unknown type code, too many dimensions, a byte size
// that overflows int64, data shorter or longer than the dimensions say, or a corrupt
// gzip stream. Nothing is read outside the file, and a gzip file is never inflated further
// than the data its header describes plus one byte.
Tensor read_idx(const std::string& path);

// The same over an IDX image (plain or gzip) in memory; `name` stands for the file in
// messages.
Tensor read_idx(std::span<const uint8_t> bytes, const std::string& name = "<memory>");

}  // namespace kiln::data
