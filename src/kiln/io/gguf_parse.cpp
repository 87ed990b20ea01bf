#include "gguf_parse.h"

#include <cstring>

#include "kiln/core/error.h"
#include "kiln/io/json_reader.h"

namespace kiln::io::detail {

namespace {

// A bounds-checked little-endian cursor over the file image. Every read names what it was
// reading, so a truncated file says where it ended.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& source)
      : data_(data), size_(size), source_(source) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw ValueError("GGUF file " + quote_for_message(source_, 1024) + ": " + what);
  }

  void need(uint64_t n, const char* what) const {
    if (n > left())
      fail(std::string("truncated while reading ") + what + " at byte " + std::to_string(pos_) +
           " (" + std::to_string(n) + " bytes needed, " + std::to_string(left()) + " left)");
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > GGUFFile::kMaxStringBytes)
      fail(std::string(what) + " claims " + std::to_string(n) + " bytes (more than the limit of " +
           std::to_string(GGUFFile::kMaxStringBytes) + ")");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& source_;
};

// Smallest number of bytes one value of a type takes in the file (for the array check).
uint64_t min_value_bytes(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::U8: case GGUFValueType::I8: case GGUFValueType::Bool: return 1;
    case GGUFValueType::U16: case GGUFValueType::I16: return 2;
    case GGUFValueType::U32: case GGUFValueType::I32: case GGUFValueType::F32: return 4;
    case GGUFValueType::U64: case GGUFValueType::I64: case GGUFValueType::F64: return 8;
    case GGUFValueType::String: return 8;   // the length
    case GGUFValueType::Array: return 12;   // element type + count
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= uint32_t(GGUFValueType::F64); }

GGUFValue read_value(Cursor& c, GGUFValueType type, const std::string& key, int depth) {
  GGUFValue v;
  v.type = type;
  switch (type) {
    case GGUFValueType::U8: v.uint_value = c.read<uint8_t>("a u8 value"); break;
    case GGUFValueType::I8: v.int_value = c.read<int8_t>("an i8 value"); break;
    case GGUFValueType::U16: v.uint_value = c.read<uint16_t>("a u16 value"); break;
    case GGUFValueType::I16: v.int_value = c.read<int16_t>("an i16 value"); break;
    case GGUFValueType::U32: v.uint_value = c.read<uint32_t>("a u32 value"); break;
    case GGUFValueType::I32: v.int_value = c.read<int32_t>("an i32 value"); break;
    case GGUFValueType::U64: v.uint_value = c.read<uint64_t>("a u64 value"); break;
    case GGUFValueType::I64: v.int_value = c.read<int64_t>("an i64 value"); break;
    case GGUFValueType::F32: v.float_value = c.read<float>("an f32 value"); break;
    case GGUFValueType::F64: v.float_value = c.read<double>("an f64 value"); break;
    case GGUFValueType::Bool: {
      const uint8_t b = c.read<uint8_t>("a bool value");
      if (b > 1)
        c.fail("metadata " + quote_for_message(key) + ": a bool must be stored as 0 or 1, got " +
               std::to_string(b));
      v.bool_value = b == 1;
      break;
    }
    case GGUFValueType::String: v.string_value = c.string("a string value"); break;
    case GGUFValueType::Array: {
      if (depth >= 2) c.fail("metadata " + quote_for_message(key) + ": arrays nested deeper than 2");
      const uint32_t et = c.read<uint32_t>("an array's element type");
      if (!known_value_type(et))
        c.fail("metadata " + quote_for_message(key) + ": unknown array element type " +
               std::to_string(et) + " (expected 0-12)");
      v.elem_type = GGUFValueType(et);
      const uint64_t n = c.read<uint64_t>("an array's length");
      // Each element takes at least min_value_bytes: a count the rest of the file cannot
      // hold is rejected before anything is allocated for it.
      if (n > c.left() / min_value_bytes(v.elem_type))
        c.fail("metadata " + quote_for_message(key) + ": an array of " + std::to_string(n) +
               " elements cannot fit in the " + std::to_string(c.left()) + " bytes left");
      v.items.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) v.items.push_back(read_value(c, v.elem_type, key, depth + 1));
      break;
    }
  }
  return v;
}

uint64_t checked_mul(uint64_t a, uint64_t b, Cursor& c, const std::string& what) {
  if (a != 0 && b > UINT64_MAX / a) c.fail(what + ": size overflows 64 bits");
  return a * b;
}

}  // namespace

ParsedGGUF parse_gguf(const uint8_t* data, size_t size, const std::string& source) {
  Cursor c(data, size, source);
  ParsedGGUF out;
  const uint32_t magic = c.read<uint32_t>("the magic number");
  if (magic != 0x46554747u)  // "GGUF"
    c.fail("not a GGUF file (expected the magic bytes \"GGUF\" at the start)");
  out.version = c.read<uint32_t>("the version");
  if (out.version != 2 && out.version != 3)
    c.fail("unsupported GGUF version " + std::to_string(out.version) + " (kiln reads versions 2 and 3)");
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_keys = c.read<uint64_t>("the metadata count");
  if (n_tensors > GGUFFile::kMaxTensors)
    c.fail("claims " + std::to_string(n_tensors) + " tensors (limit " +
           std::to_string(GGUFFile::kMaxTensors) + ")");
  if (n_keys > GGUFFile::kMaxKeys)
    c.fail("claims " + std::to_string(n_keys) + " metadata keys (limit " +
           std::to_string(GGUFFile::kMaxKeys) + ")");

  for (uint64_t i = 0; i < n_keys; ++i) {
    std::string key = c.string("a metadata key");
    const uint32_t t = c.read<uint32_t>("a metadata value type");
    if (!known_value_type(t))
      c.fail("metadata " + quote_for_message(key) + ": unknown value type " + std::to_string(t) +
             " (expected 0-12)");
    GGUFValue v = read_value(c, GGUFValueType(t), key, 0);
    if (!out.key_index.emplace(key, out.metadata.size()).second)
      c.fail("metadata key " + quote_for_message(key) + " appears twice");
    out.metadata.emplace_back(std::move(key), std::move(v));
  }

  if (auto it = out.key_index.find("general.alignment"); it != out.key_index.end()) {
    const GGUFValue& a = out.metadata[it->second].second;
    if (a.type != GGUFValueType::U32)
      c.fail("general.alignment must be a u32");
    if (a.uint_value == 0 || (a.uint_value & (a.uint_value - 1)) != 0)
      c.fail("general.alignment must be a power of two, got " + std::to_string(a.uint_value));
    out.alignment = uint32_t(a.uint_value);
  }

  out.tensors.reserve(size_t(std::min<uint64_t>(n_tensors, c.left() / 24 + 1)));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GGUFTensorInfo t;
    t.name = c.string("a tensor name");
    const std::string what = "tensor " + quote_for_message(t.name);
    const uint32_t n_dims = c.read<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > GGUFFile::kMaxDims)
      c.fail(what + " has " + std::to_string(n_dims) + " dimensions (expected 1-" +
             std::to_string(GGUFFile::kMaxDims) + ")");
    std::vector<uint64_t> ne(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ne[d] = c.read<uint64_t>("a tensor size");
      if (ne[d] > uint64_t(INT64_MAX)) c.fail(what + " has a negative size");
      numel = checked_mul(numel, ne[d], c, what);
    }
    const uint32_t type = c.read<uint32_t>("a tensor type");
    const quant::GGMLTypeInfo* ti = quant::ggml_type_info(type);
    if (ti == nullptr)
      throw TypeError("GGUF file " + quote_for_message(source, 1024) + ": " + what +
                      " has ggml type " + std::to_string(type) + ", which kiln does not read "
                      "(F32, F16, BF16, F64, I8-I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, "
                      "Q2_K-Q8_K)");
    t.type = ti->type;
    if (ne[0] % uint64_t(ti->block_elems) != 0)
      c.fail(what + " of type " + ti->name + " has rows of " + std::to_string(ne[0]) +
             " values, not a multiple of its block size " + std::to_string(ti->block_elems));
    t.nbytes = checked_mul(numel / uint64_t(ti->block_elems), uint64_t(ti->block_bytes), c, what);
    t.offset = c.read<uint64_t>("a tensor offset");
    if (t.offset % out.alignment != 0)
      c.fail(what + " starts at offset " + std::to_string(t.offset) +
             ", not a multiple of the alignment " + std::to_string(out.alignment));
    if (numel > uint64_t(INT64_MAX)) c.fail(what + " has too many values");
    for (uint32_t d = n_dims; d-- > 0;) t.shape.push_back(int64_t(ne[d]));
    if (!out.tensor_index.emplace(t.name, out.tensors.size()).second)
      c.fail(what + " appears twice");
    out.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end = c.pos();
  out.data_offset = (end + out.alignment - 1) / out.alignment * out.alignment;
  const uint64_t data_bytes = out.data_offset <= size ? size - out.data_offset : 0;
  for (const GGUFTensorInfo& t : out.tensors) {
    if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset)
      c.fail("tensor " + quote_for_message(t.name) + " needs bytes [" + std::to_string(t.offset) +
             ", " + std::to_string(t.offset + t.nbytes) + ") of the data section, which holds " +
             std::to_string(data_bytes) + " bytes (file truncated?)");
  }
  return out;
}

}  // namespace kiln::io::detail
