#include "kiln/io/safetensors_header.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "kiln/core/error.h"
#include "kiln/io/json_reader.h"
#include "kiln/io/safetensors_dtype.h"

namespace kiln::io::detail {

static_assert(std::endian::native == std::endian::little,
              "kiln's safetensors reader assumes a little-endian host, as the format is");

namespace {

constexpr uint64_t kInt64Max = uint64_t(std::numeric_limits<int64_t>::max());

std::string supported_list() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (DType(i) == DType::C128) continue;  // no safetensors name
    if (i) s += ", ";
    s += safetensors_dtype_name(DType(i));
  }
  return s;
}

// Parses the fields of one tensor entry; the reader stands at the entry's value.
class EntryParser {
 public:
  EntryParser(JsonReader& r, const std::string& file, const std::string& name, uint64_t buffer_size)
      : r_(r), file_(file), name_(name), buffer_size_(buffer_size) {}

  TensorInfo parse() {
    JsonReader::Kind k = r_.peek();
    if (k != JsonReader::Kind::Object)
      r_.fail(tensor() + " must be an object with dtype, shape and data_offsets, got " +
              JsonReader::kind_name(k));
    r_.begin_object();
    std::string key;
    std::vector<std::string> unknown;  // (only to detect duplicates)
    bool has_dtype = false, has_shape = false, has_offsets = false;
    auto first_time = [&](bool& seen) {
      if (seen) r_.fail(tensor() + " has the field " + quote_for_message(key) + " twice");
      seen = true;
    };
    while (r_.next_member(key)) {
      if (key == "dtype") {
        first_time(has_dtype);
        parse_dtype();
      } else if (key == "shape") {
        first_time(has_shape);
        parse_shape();
      } else if (key == "data_offsets") {
        first_time(has_offsets);
        parse_offsets();
      } else {
        if (std::find(unknown.begin(), unknown.end(), key) != unknown.end())
          r_.fail(tensor() + " has the field " + quote_for_message(key) + " twice");
        unknown.push_back(key);
        r_.skip_value();  // unknown fields are ignored, as the reference implementation does
      }
    }
    if (!has_dtype) fail(tensor() + " has no \"dtype\" field");
    if (!has_shape) fail(tensor() + " has no \"shape\" field");
    if (!has_offsets) fail(tensor() + " has no \"data_offsets\" field");
    check_sizes();
    return info_;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { KILN_THROW(ValueError, file_, ": ", msg); }
  // "tensor 'name'" for messages (built only when one is needed).
  std::string tensor() const { return "tensor " + quote_for_message(name_); }

  void parse_dtype() {
    JsonReader::Kind k = r_.peek();
    if (k != JsonReader::Kind::String)
      r_.fail(tensor() + ": dtype must be a string, got " + JsonReader::kind_name(k));
    std::string d = r_.read_string();
    if (auto t = dtype_from_safetensors(d)) {
      info_.dtype = *t;
      return;
    }
    if (is_foreign_safetensors_dtype(d))
      KILN_THROW(TypeError, file_, ": ", tensor(), " has dtype ", d,
                 ", which kiln does not support (supported: ", supported_list(), ")");
    fail(tensor() + " has unknown dtype " + quote_for_message(d) + " (kiln reads " +
         supported_list() + ")");
  }

  void parse_shape() {
    JsonReader::Kind k = r_.peek();
    if (k != JsonReader::Kind::Array)
      r_.fail(tensor() + ": shape must be an array of non-negative integers, got " +
              JsonReader::kind_name(k));
    r_.begin_array();
    while (r_.next_element()) {
      if (info_.shape.size() == SafetensorsFile::kMaxRank)
        r_.fail(tensor() + ": shape has more than " + std::to_string(SafetensorsFile::kMaxRank) +
                " dimensions");
      auto what = [&] { return tensor() + ": shape[" + std::to_string(info_.shape.size()) + "]"; };
      uint64_t d = r_.read_uint64(what);
      if (d > kInt64Max) r_.fail(what() + " = " + std::to_string(d) + " is larger than 2^63 - 1");
      info_.shape.push_back(int64_t(d));
    }
  }

  void parse_offsets() {
    JsonReader::Kind k = r_.peek();
    if (k != JsonReader::Kind::Array)
      r_.fail(tensor() + ": data_offsets must be an array [begin, end], got " +
              JsonReader::kind_name(k));
    r_.begin_array();
    uint64_t v[2];
    int n = 0;
    while (r_.next_element()) {
      if (n == 2) r_.fail(tensor() + ": data_offsets must have exactly 2 entries, got more");
      v[n] = r_.read_uint64([&] { return tensor() + ": data_offsets[" + std::to_string(n) + "]"; });
      ++n;
    }
    if (n != 2)
      fail(tensor() + ": data_offsets must have exactly 2 entries [begin, end], got " +
           std::to_string(n));
    info_.begin = v[0];
    info_.end = v[1];
  }

  // The shape, dtype and offsets must agree, without any size computation overflowing.
  void check_sizes() const {
    const uint64_t esize = element_size(info_.dtype);
    // Strides are products of the non-zero sizes: they must fit in int64 even when
    // another dimension is 0 (then numel is 0 but the strides are still computed).
    uint64_t span = esize, numel = 1;
    for (int64_t d : info_.shape) {
      if (d == 0) {
        numel = 0;
        continue;
      }
      if (__builtin_mul_overflow(span, uint64_t(d), &span) || span > kInt64Max)
        fail(tensor() + ": shape " + shape_str(info_.shape) + " of dtype " +
             std::string(safetensors_dtype_name(info_.dtype)) +
             " is too large (its size in bytes overflows 64-bit integers)");
    }
    const uint64_t nbytes = numel == 0 ? 0 : span;
    const std::string offsets =
        "data_offsets [" + std::to_string(info_.begin) + ", " + std::to_string(info_.end) + "]";
    if (info_.begin > info_.end) fail(tensor() + ": " + offsets + " have begin > end");
    if (info_.end > buffer_size_)
      fail(tensor() + ": " + offsets + " extend past the end of the data buffer (" +
           std::to_string(buffer_size_) + " bytes; is the file truncated?)");
    if (info_.end - info_.begin != nbytes)
      fail(tensor() + ": " + offsets + " span " + std::to_string(info_.end - info_.begin) +
           " bytes, but dtype " + std::string(safetensors_dtype_name(info_.dtype)) +
           " and shape " + shape_str(info_.shape) + " need " + std::to_string(nbytes) +
           " bytes");
  }

  JsonReader& r_;
  const std::string& file_;
  const std::string& name_;
  uint64_t buffer_size_;
  TensorInfo info_;
};

void parse_metadata(JsonReader& r, std::map<std::string, std::string>& out) {
  JsonReader::Kind k = r.peek();
  if (k == JsonReader::Kind::Null) {  // serde's Option reads null as "no metadata"
    r.skip_value();
    return;
  }
  if (k != JsonReader::Kind::Object)
    r.fail(std::string("__metadata__ must be an object of strings, got ") + JsonReader::kind_name(k));
  r.begin_object();
  std::string key;
  while (r.next_member(key)) {
    if (out.count(key)) r.fail("__metadata__ has the key " + quote_for_message(key) + " twice");
    JsonReader::Kind vk = r.peek();
    if (vk != JsonReader::Kind::String)
      r.fail("__metadata__[" + quote_for_message(key) + "] must be a string, got " +
             JsonReader::kind_name(vk));
    out.emplace(key, r.read_string());
  }
}

}  // namespace

const HeaderEntry* ParsedHeader::find(const std::string& name) const {
  auto it = std::lower_bound(by_name.begin(), by_name.end(), name,
                             [&](uint32_t i, const std::string& n) { return entries[i].name < n; });
  if (it == by_name.end() || entries[*it].name != name) return nullptr;
  return &entries[*it];
}

ParsedHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& source) {
  const std::string file = "safetensors file " + quote_for_message(source, 1024);
  KILN_CHECK(size >= 8, ValueError, file, ": the file is ", size,
             " bytes long, shorter than the 8-byte header length that starts every "
             "safetensors file");
  uint64_t n;
  std::memcpy(&n, data, 8);  // little-endian (static_assert above)
  KILN_CHECK(n <= SafetensorsFile::kMaxHeaderBytes, ValueError, file, ": header length ", n,
             " exceeds the limit of ", SafetensorsFile::kMaxHeaderBytes,
             " bytes (not a safetensors file, or a hostile one)");
  KILN_CHECK(n <= size - 8, ValueError, file, ": header length ", n,
             " is larger than the rest of the file (", size - 8, " bytes; is it truncated?)");
  KILN_CHECK(n > 0, ValueError, file, ": the header is empty (expected a JSON object)");

  std::string_view text(reinterpret_cast<const char*>(data) + 8, size_t(n));
  size_t bad = find_invalid_utf8(text);
  KILN_CHECK(bad == std::string_view::npos, ValueError, file,
             ": the header is not valid UTF-8 (at byte ", bad, " of the JSON header)");
  KILN_CHECK(text[0] == '{', ValueError, file,
             ": the header must be a JSON object starting with '{'");

  ParsedHeader out;
  out.header_size = n;
  const uint64_t buffer_size = uint64_t(size) - 8 - n;

  JsonReader r(text, file + ": header");
  r.begin_object();
  std::string key;
  bool seen_metadata = false;
  while (r.next_member(key)) {
    if (key == "__metadata__") {
      if (seen_metadata) r.fail("the key \"__metadata__\" appears twice");
      seen_metadata = true;
      parse_metadata(r, out.metadata);
      continue;
    }
    if (out.entries.size() == SafetensorsFile::kMaxTensors)
      r.fail("more than " + std::to_string(SafetensorsFile::kMaxTensors) + " tensors");
    TensorInfo info = EntryParser(r, file, key, buffer_size).parse();
    out.entries.push_back({key, std::move(info)});
  }
  r.expect_end();
  static_assert(SafetensorsFile::kMaxTensors <= UINT32_MAX);

  // Names must be unique (checked by sorting rather than hashing: about twice as fast for
  // headers with a million tensors, and the sorted order serves lookups afterwards).
  auto by_name = [&](uint32_t a, uint32_t b) { return out.entries[a].name < out.entries[b].name; };
  std::vector<uint32_t> order(out.entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
  std::sort(order.begin(), order.end(), by_name);
  for (size_t i = 1; i < order.size(); ++i) {
    const std::string& name = out.entries[order[i]].name;
    KILN_CHECK(name != out.entries[order[i - 1]].name, ValueError, file, ": the tensor name ",
               quote_for_message(name), " appears twice in the header");
  }

  // The ranges, ordered, must tile the data buffer exactly: no overlap, no gap, no tail.
  // (Sorted through a permutation so that by_name can be carried over.)
  std::vector<uint32_t> by_offset(order.size());
  for (size_t i = 0; i < by_offset.size(); ++i) by_offset[i] = uint32_t(i);
  std::stable_sort(by_offset.begin(), by_offset.end(), [&](uint32_t a, uint32_t b) {
    const TensorInfo& x = out.entries[a].info;
    const TensorInfo& y = out.entries[b].info;
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  std::vector<uint32_t> new_position(order.size());
  std::vector<HeaderEntry> sorted;
  sorted.reserve(order.size());
  for (uint32_t old : by_offset) {
    new_position[old] = uint32_t(sorted.size());
    sorted.push_back(std::move(out.entries[old]));
  }
  out.entries = std::move(sorted);
  out.by_name.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) out.by_name[i] = new_position[order[i]];

  uint64_t pos = 0;
  for (size_t i = 0; i < out.entries.size(); ++i) {
    const HeaderEntry& e = out.entries[i];
    if (e.info.begin < pos)
      KILN_THROW(ValueError, file, ": tensor ", quote_for_message(e.name), " (bytes [",
                 e.info.begin, ", ", e.info.end, ")) overlaps tensor ",
                 quote_for_message(out.entries[i - 1].name), " (bytes [",
                 out.entries[i - 1].info.begin, ", ", out.entries[i - 1].info.end,
                 ")) in the data buffer");
    if (e.info.begin > pos)
      KILN_THROW(ValueError, file, ": bytes [", pos, ", ", e.info.begin,
                 ") of the data buffer belong to no tensor (safetensors requires the tensors "
                 "to cover the buffer without gaps); the next tensor is ",
                 quote_for_message(e.name));
    pos = e.info.end;
  }
  KILN_CHECK(pos == buffer_size, ValueError, file, ": bytes [", pos, ", ", buffer_size,
             ") at the end of the data buffer belong to no tensor (trailing data after the "
             "last tensor)");
  return out;
}

}  // namespace kiln::io::detail
