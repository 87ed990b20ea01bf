#pragma once
// JsonReader: a small pull parser for strict JSON (RFC 8259) over untrusted text, used by
// the safetensors header reader. It builds no document tree: the caller walks the text
// value by value, so memory stays proportional to what the caller keeps. Nesting depth is
// capped, numbers are read as exact unsigned integers, duplicate keys are the caller's to
// detect, and every failure is a ValueError naming the context and the byte offset.
// The input must be valid UTF-8 (validate_utf8 checks it); strings are returned decoded.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::io::detail {

// Offset of the first invalid UTF-8 byte in text (overlong forms, surrogates and code
// points above U+10FFFF are invalid), or npos if text is valid.
size_t find_invalid_utf8(std::string_view text);

// A printable, bounded rendering of a name for error messages: quoted, control bytes and
// quotes escaped, cut after max_chars with "...".
std::string quote_for_message(std::string_view name, size_t max_chars = 120);

class JsonReader {
 public:
  enum class Kind { Object, Array, String, Number, Bool, Null };
  static constexpr int kMaxDepth = 64;

  // context prefixes every error message ("safetensors file 'a.st': header").
  JsonReader(std::string_view text, std::string context);

  // The kind of the next value (whitespace skipped); fails at the end of the text or on a
  // byte that starts no value.
  Kind peek();
  static const char* kind_name(Kind k);

  // Objects: begin_object(), then while (next_member(key)) { read the value }.
  void begin_object();
  bool next_member(std::string& key);
  // Arrays: begin_array(), then while (next_element()) { read the value }.
  void begin_array();
  bool next_element();

  std::string read_string();
  // A non-negative integer without fraction or exponent that fits in uint64; `what()` names
  // the value in the error message (called only on failure).
  uint64_t read_uint64(const std::function<std::string()>& what);
  // Any value (checked for syntax, depth-limited), discarded.
  void skip_value();
  // Only whitespace may follow the top-level value.
  void expect_end();

  size_t offset() const { return pos_; }
  [[noreturn]] void fail(std::string_view message) const;
  [[noreturn]] void fail_at(size_t offset, std::string_view message) const;

 private:
  void skip_ws();
  char next_char_or_fail(std::string_view expecting);
  void expect_literal(std::string_view word);
  void scan_number(bool* is_integer);
  void append_utf8(std::string& out, uint32_t cp);
  uint32_t read_hex4();

  std::string_view text_;
  std::string context_;
  size_t pos_ = 0;
  // One entry per open container: true until its first member/element was read.
  std::vector<bool> first_;
};

}  // namespace kiln::io::detail
