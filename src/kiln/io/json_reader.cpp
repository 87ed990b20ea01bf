#include "kiln/io/json_reader.h"

#include "kiln/core/error.h"

namespace kiln::io::detail {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// A bounded excerpt of the text for messages.
std::string excerpt(std::string_view s, size_t max_chars = 40) {
  if (s.size() <= max_chars) return std::string(s);
  return std::string(s.substr(0, max_chars)) + "...";
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (n - i < len) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (!is_cont(p[i + k])) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string quote_for_message(std::string_view name, size_t max_chars) {
  std::string out = "'";
  size_t shown = 0;
  for (char ch : name) {
    if (shown == max_chars) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else if (c == '\'' || c == '\\') {
      out += '\\';
      out += ch;
    } else {
      out += ch;
    }
    ++shown;
  }
  out += "'";
  return out;
}

JsonReader::JsonReader(std::string_view text, std::string context)
    : text_(text), context_(std::move(context)) {}

void JsonReader::fail(std::string_view message) const { fail_at(pos_, message); }

void JsonReader::fail_at(size_t offset, std::string_view message) const {
  KILN_THROW(ValueError, context_, ": ", message, " (at byte ", offset, " of the JSON header)");
}

const char* JsonReader::kind_name(Kind k) {
  switch (k) {
    case Kind::Object: return "an object";
    case Kind::Array: return "an array";
    case Kind::String: return "a string";
    case Kind::Number: return "a number";
    case Kind::Bool: return "a boolean";
    case Kind::Null: return "null";
  }
  return "a value";
}

void JsonReader::skip_ws() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
    ++pos_;
  }
}

char JsonReader::next_char_or_fail(std::string_view expecting) {
  skip_ws();
  if (pos_ >= text_.size()) fail(std::string("unexpected end of the header, expected ") +
                                 std::string(expecting));
  return text_[pos_];
}

JsonReader::Kind JsonReader::peek() {
  char c = next_char_or_fail("a value");
  switch (c) {
    case '{': return Kind::Object;
    case '[': return Kind::Array;
    case '"': return Kind::String;
    case 't':
    case 'f': return Kind::Bool;
    case 'n': return Kind::Null;
    default:
      if (c == '-' || is_digit(c)) return Kind::Number;
  }
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) fail(std::string("unexpected character '") + c + "', expected a value");
  fail("unexpected byte " + std::to_string(u) + ", expected a value");
}

void JsonReader::begin_object() {
  Kind k = peek();
  if (k != Kind::Object) fail(std::string("expected an object, got ") + kind_name(k));
  if (first_.size() >= size_t(kMaxDepth))
    fail("JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  first_.push_back(true);
  ++pos_;
}

void JsonReader::begin_array() {
  Kind k = peek();
  if (k != Kind::Array) fail(std::string("expected an array, got ") + kind_name(k));
  if (first_.size() >= size_t(kMaxDepth))
    fail("JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  first_.push_back(true);
  ++pos_;
}

bool JsonReader::next_member(std::string& key) {
  char c = next_char_or_fail("'}' or a member of the object");
  if (c == '}') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) {
    if (c != ',') fail("expected ',' or '}' after an object member");
    ++pos_;
    c = next_char_or_fail("a member after ','");
    if (c == '}') fail("trailing comma in an object");
  }
  first_.back() = false;
  if (c != '"') fail("expected a string key in an object");
  key = read_string();
  if (next_char_or_fail("':'") != ':') fail("expected ':' after an object key");
  ++pos_;
  return true;
}

bool JsonReader::next_element() {
  char c = next_char_or_fail("']' or an array element");
  if (c == ']') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) {
    if (c != ',') fail("expected ',' or ']' after an array element");
    ++pos_;
    c = next_char_or_fail("an element after ','");
    if (c == ']') fail("trailing comma in an array");
  }
  first_.back() = false;
  return true;
}

uint32_t JsonReader::read_hex4() {
  if (text_.size() - pos_ < 4) fail("truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = text_[pos_ + size_t(i)];
    uint32_t d;
    if (c >= '0' && c <= '9') d = uint32_t(c - '0');
    else if (c >= 'a' && c <= 'f') d = uint32_t(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = uint32_t(c - 'A' + 10);
    else fail("invalid hex digit in a \\u escape");
    v = v * 16 + d;
  }
  pos_ += 4;
  return v;
}

void JsonReader::append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string JsonReader::read_string() {
  Kind k = peek();
  if (k != Kind::String) fail(std::string("expected a string, got ") + kind_name(k));
  size_t start = pos_++;
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) fail_at(start, "unterminated string");
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (static_cast<unsigned char>(c) < 0x20) fail("unescaped control character in a string");
    if (c != '\\') {
      // Copy the run of plain bytes at once.
      size_t end = pos_ + 1;
      while (end < text_.size() && text_[end] != '"' && text_[end] != '\\' &&
             static_cast<unsigned char>(text_[end]) >= 0x20)
        ++end;
      out.append(text_.substr(pos_, end - pos_));
      pos_ = end;
      continue;
    }
    if (++pos_ >= text_.size()) fail_at(start, "unterminated string");
    char e = text_[pos_++];
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = read_hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (text_.size() - pos_ < 2 || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
            fail("high surrogate in a \\u escape without a following low surrogate");
          pos_ += 2;
          uint32_t lo = read_hex4();
          if (lo < 0xDC00 || lo > 0xDFFF)
            fail("high surrogate in a \\u escape without a following low surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        append_utf8(out, cp);
        break;
      }
      default:
        fail_at(pos_ - 1, "invalid escape sequence in a string");
    }
  }
}

void JsonReader::scan_number(bool* is_integer) {
  *is_integer = true;
  if (text_[pos_] == '-') ++pos_;
  if (pos_ >= text_.size() || !is_digit(text_[pos_])) fail("invalid number: expected a digit");
  if (text_[pos_] == '0') {
    ++pos_;
    if (pos_ < text_.size() && is_digit(text_[pos_])) fail("invalid number: leading zero");
  } else {
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  }
  if (pos_ < text_.size() && text_[pos_] == '.') {
    *is_integer = false;
    ++pos_;
    if (pos_ >= text_.size() || !is_digit(text_[pos_]))
      fail("invalid number: expected a digit after '.'");
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    *is_integer = false;
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (pos_ >= text_.size() || !is_digit(text_[pos_]))
      fail("invalid number: expected a digit in the exponent");
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  }
}

uint64_t JsonReader::read_uint64(const std::function<std::string()>& what) {
  Kind k = peek();
  if (k != Kind::Number) fail(what() + " must be a non-negative integer, got " + kind_name(k));
  size_t start = pos_;
  bool is_integer = false;
  scan_number(&is_integer);
  std::string_view token = text_.substr(start, pos_ - start);
  if (token[0] == '-')
    fail_at(start, what() + " must be a non-negative integer, got " + excerpt(token));
  if (!is_integer) fail_at(start, what() + " must be an integer, got " + excerpt(token));
  uint64_t v = 0;
  for (char c : token) {
    if (__builtin_mul_overflow(v, uint64_t(10), &v) ||
        __builtin_add_overflow(v, uint64_t(c - '0'), &v))
      fail_at(start, what() + " does not fit in 64 bits: " + excerpt(token));
  }
  return v;
}

void JsonReader::expect_literal(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail("invalid literal, expected " + std::string(word));
  pos_ += word.size();
}

void JsonReader::skip_value() {
  switch (peek()) {
    case Kind::Object: {
      begin_object();
      std::string key;
      while (next_member(key)) skip_value();
      return;
    }
    case Kind::Array:
      begin_array();
      while (next_element()) skip_value();
      return;
    case Kind::String:
      read_string();
      return;
    case Kind::Number: {
      bool is_integer;
      scan_number(&is_integer);
      return;
    }
    case Kind::Bool:
      expect_literal(text_[pos_] == 't' ? "true" : "false");
      return;
    case Kind::Null:
      expect_literal("null");
      return;
  }
}

void JsonReader::expect_end() {
  skip_ws();
  if (pos_ != text_.size()) fail("unexpected data after the header's JSON object");
}

}  // namespace kiln::io::detail
