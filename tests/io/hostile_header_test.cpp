// Malformed and hostile safetensors files: each one is rejected with the right error class and
// a message that names the file and the problem; nothing crashes, hangs or reads out of bounds
// (this suite runs under ASan in CI). Also the odd-but-valid headers that must be accepted.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>

#include "io_test_util.h"

namespace kiln::test {
namespace {

using io::SafetensorsFile;

enum class Err { Value, Type };

struct Hostile {
  const char* what;
  std::vector<uint8_t> bytes;
  Err err;
  std::string substring;
};

// One F32 tensor "a" of shape [2] over 8 bytes, with `extra` spliced into its entry.
std::string entry_a(const std::string& extra = "") {
  return R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8])" + extra + "}}";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string nested(int depth) {
  return std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
}

std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape,
                   uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

std::vector<Hostile> hostile_files() {
  const std::string s64 = std::string(64, '1');
  std::string rank65 = "[";
  for (int i = 0; i < 65; ++i) rank65 += i ? ",1" : "1";
  rank65 += "]";
  return {
      {"empty file", {}, Err::Value, "shorter than the 8-byte header length"},
      {"7 bytes", {1, 0, 0, 0, 0, 0, 0}, Err::Value, "shorter than the 8-byte"},
      {"length 2^63", with_length(uint64_t(1) << 63, "{}"), Err::Value, "exceeds the limit"},
      {"length all ones", with_length(~uint64_t(0), "{}"), Err::Value, "exceeds the limit"},
      {"length just over the cap", with_length(100'000'001, "{}"), Err::Value, "exceeds the limit"},
      {"length past the end", with_length(100, "{}"), Err::Value,
       "header length 100 is larger than the rest of the file (2 bytes"},
      {"zero length", with_length(0, ""), Err::Value, "the header is empty"},
      {"invalid UTF-8 byte", image("{\"\xFF\":1}"), Err::Value, "not valid UTF-8 (at byte 2"},
      {"overlong UTF-8", image("{\"\xC0\xAF\":1}"), Err::Value, "not valid UTF-8"},
      {"UTF-8 surrogate", image("{\"\xED\xA0\x80\":1}"), Err::Value, "not valid UTF-8"},
      {"truncated UTF-8", image("{\"\xE2\x82"), Err::Value, "not valid UTF-8"},
      {"UTF-8 above U+10FFFF", image("{\"\xF4\x90\x80\x80\":1}"), Err::Value, "not valid UTF-8"},
      {"array header", image("[]"), Err::Value, "must be a JSON object starting with '{'"},
      {"leading space", image(" {}"), Err::Value, "starting with '{'"},
      {"string header", image("\"{}\""), Err::Value, "starting with '{'"},
      {"unterminated object", image("{\"a\":"), Err::Value, "unexpected end of the header"},
      {"unclosed object", image("{"), Err::Value, "unexpected end of the header"},
      {"missing colon", image("{\"a\" 1}"), Err::Value, "expected ':'"},
      {"missing comma", image("{\"__metadata__\":null \"b\":null}"), Err::Value,
       "expected ',' or '}'"},
      {"trailing comma", image(entry_a().substr(0, entry_a().size() - 1) + ",}", 8), Err::Value,
       "trailing comma"},
      {"trailing comma in array", image(R"({"a":{"dtype":"F32","shape":[2,],"data_offsets":[0,8]}})", 8),
       Err::Value, "trailing comma in an array"},
      {"non-string key", image("{1:2}"), Err::Value, "expected a string key"},
      {"data after the object", image("{} x"), Err::Value, "unexpected data after"},
      {"two objects", image("{}{}"), Err::Value, "unexpected data after"},
      {"NUL padding", image(std::string("{}\0\0", 4)), Err::Value, "unexpected data after"},
      {"NUL byte as a value", image(std::string("{\"a\":\0}", 7)), Err::Value, "unexpected byte 0"},
      {"nesting bomb", image(entry_a(",\"x\":" + nested(100000)), 8), Err::Value,
       "nested deeper than 64 levels"},
      {"object nesting bomb", image("{\"a\":{\"x\":" + repeat("{\"x\":", 5000)), Err::Value,
       "nested deeper than 64"},
      {"entry not an object", image("{\"a\":1}"), Err::Value,
       "tensor 'a' must be an object with dtype, shape and data_offsets, got a number"},
      {"entry is null", image("{\"a\":null}"), Err::Value, "got null"},
      {"no dtype", image(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8), Err::Value,
       "tensor 'a' has no \"dtype\" field"},
      {"no shape", image(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8), Err::Value,
       "has no \"shape\" field"},
      {"no offsets", image(R"({"a":{"dtype":"F32","shape":[2]}})", 8), Err::Value,
       "has no \"data_offsets\" field"},
      {"dtype not a string", image(R"({"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", 8),
       Err::Value, "dtype must be a string, got a number"},
      {"unknown dtype", image(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8),
       Err::Value, "tensor 'a' has unknown dtype 'F33'"},
      {"lowercase dtype", image(R"({"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8),
       Err::Value, "unknown dtype 'f32'"},
      {"fp8 dtype", image(R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", 8),
       Err::Type, "tensor 'w' has dtype F8_E4M3, which kiln does not support"},
      {"u16 dtype", image(R"({"w":{"dtype":"U16","shape":[4],"data_offsets":[0,8]}})", 8),
       Err::Type, "has dtype U16"},
      {"u16 dtype", image(R"({"w":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", 2),
       Err::Type, "has dtype U16"},
      {"shape not an array", image(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8),
       Err::Value, "shape must be an array of non-negative integers, got a number"},
      {"negative dim", image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       Err::Value, "shape[0] must be a non-negative integer, got -2"},
      {"negative zero dim", image(R"({"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}})"),
       Err::Value, "must be a non-negative integer, got -0"},
      {"fractional dim", image(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
       Err::Value, "shape[0] must be an integer, got 2.0"},
      {"exponent dim", image(R"({"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}})", 8),
       Err::Value, "must be an integer, got 2e0"},
      {"string dim", image(R"({"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8),
       Err::Value, "shape[0] must be a non-negative integer, got a string"},
      {"dim over 2^64", image(R"({"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]}})", 8),
       Err::Value, "shape[0] does not fit in 64 bits"},
      {"huge number token", image("{\"a\":{\"dtype\":\"F32\",\"shape\":[" + s64 + "]}}"), Err::Value,
       "does not fit in 64 bits: 1111111111111111111111111111111111111111..."},
      {"dim 2^63", image(R"({"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})", 8),
       Err::Value, "larger than 2^63 - 1"},
      {"numel overflow", image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       Err::Value, "is too large (its size in bytes overflows"},
      {"bytes overflow", image(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", 8),
       Err::Value, "too large"},
      {"stride overflow behind a zero", image(R"({"a":{"dtype":"U8","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})"),
       Err::Value, "too large"},
      {"rank 65", image("{\"a\":{\"dtype\":\"U8\",\"shape\":" + rank65 + ",\"data_offsets\":[0,1]}}", 1),
       Err::Value, "shape has more than 64 dimensions"},
      {"leading zero", image(R"({"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}})", 8),
       Err::Value, "leading zero"},
      {"offsets not an array", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":8}})", 8),
       Err::Value, "data_offsets must be an array [begin, end], got a number"},
      {"one offset", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8),
       Err::Value, "data_offsets must have exactly 2 entries [begin, end], got 1"},
      {"three offsets", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8),
       Err::Value, "exactly 2 entries, got more"},
      {"negative offset", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
       Err::Value, "data_offsets[0] must be a non-negative integer"},
      {"begin > end", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
       Err::Value, "data_offsets [8, 0] have begin > end"},
      {"end past the buffer", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
       Err::Value, "extend past the end of the data buffer (4 bytes"},
      {"end at 2^64-1", image(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})"),
       Err::Value, "extend past the end"},
      {"wrong byte count", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
       Err::Value, "data_offsets [0, 4] span 4 bytes, but dtype F32 and shape [2] need 8 bytes"},
      {"overlap", image("{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "F32", "[2]", 4, 12) + "}", 12),
       Err::Value, "tensor 'b' (bytes [4, 12)) overlaps tensor 'a' (bytes [0, 8))"},
      {"same range twice", image("{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "I32", "[2]", 0, 8) + "}", 8),
       Err::Value, "overlaps"},
      {"empty tensor inside another", image("{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("e", "F32", "[0]", 4, 4) + "}", 8),
       Err::Value, "tensor 'e' (bytes [4, 4)) overlaps tensor 'a'"},
      {"gap", image("{" + tensor("a", "F32", "[1]", 0, 4) + "," + tensor("b", "F32", "[1]", 8, 12) + "}", 12),
       Err::Value, "bytes [4, 8) of the data buffer belong to no tensor"},
      {"gap at the start", image("{" + tensor("a", "F32", "[1]", 4, 8) + "}", 8), Err::Value,
       "bytes [0, 4) of the data buffer belong to no tensor"},
      {"trailing data", image(entry_a(), 12), Err::Value,
       "bytes [8, 12) at the end of the data buffer belong to no tensor"},
      {"data but no tensors", image("{}", 8), Err::Value, "bytes [0, 8) at the end"},
      {"duplicate tensor", image("{" + tensor("a", "F32", "[1]", 0, 4) + "," + tensor("a", "F32", "[1]", 4, 8) + "}", 8),
       Err::Value, "the tensor name 'a' appears twice in the header"},
      {"duplicate field", image(entry_a(",\"dtype\":\"F32\""), 8), Err::Value,
       "tensor 'a' has the field 'dtype' twice"},
      {"duplicate unknown field", image(entry_a(",\"x\":1,\"x\":2"), 8), Err::Value,
       "has the field 'x' twice"},
      {"duplicate __metadata__", image("{\"__metadata__\":{},\"__metadata__\":{}}"), Err::Value,
       "\"__metadata__\" appears twice"},
      {"metadata not an object", image("{\"__metadata__\":[\"a\"]}"), Err::Value,
       "__metadata__ must be an object of strings, got an array"},
      {"metadata number value", image("{\"__metadata__\":{\"k\":1}}"), Err::Value,
       "__metadata__['k'] must be a string, got a number"},
      {"metadata nested value", image("{\"__metadata__\":{\"k\":{}}}"), Err::Value,
       "must be a string, got an object"},
      {"metadata duplicate key", image("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}"), Err::Value,
       "__metadata__ has the key 'k' twice"},
      {"lone high surrogate", image(R"({"\ud800":1})"), Err::Value, "without a following low surrogate"},
      {"lone low surrogate", image(R"({"\udc00":1})"), Err::Value, "lone low surrogate"},
      {"bad hex escape", image(R"({"\u12G4":1})"), Err::Value, "invalid hex digit"},
      {"short hex escape", image(R"({"\u12)"), Err::Value, "truncated \\u escape"},
      {"invalid escape", image(R"({"\x":1})"), Err::Value, "invalid escape sequence"},
      {"raw newline in string", image("{\"a\nb\":1}"), Err::Value, "unescaped control character"},
      {"unterminated string", image("{\"abc"), Err::Value, "unterminated string"},
      {"unterminated escape", image("{\"abc\\"), Err::Value, "unterminated string"},
      {"bad literal", image(entry_a(",\"x\":tru"), 8), Err::Value, "invalid literal, expected true"},
      {"bad number", image(entry_a(",\"x\":-"), 8), Err::Value, "invalid number"},
      {"bad fraction", image(entry_a(",\"x\":1."), 8), Err::Value, "expected a digit after '.'"},
      {"bad exponent", image(entry_a(",\"x\":1e+"), 8), Err::Value, "expected a digit in the exponent"},
      {"bool bytes are checked lazily, but a BOOL entry must be well-formed",
       image(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,1]}})", 1), Err::Value,
       "need 2 bytes"},
  };
}

TEST(SafetensorsHostile, EachMalformedFileIsRejected) {
  for (const Hostile& h : hostile_files()) {
    SCOPED_TRACE(h.what);
    try {
      SafetensorsFile f = SafetensorsFile::from_buffer(h.bytes.data(), h.bytes.size(), "hostile.st");
      ADD_FAILURE() << "accepted a malformed file: " << h.what;
    } catch (const TypeError& e) {
      EXPECT_EQ(h.err, Err::Type) << e.what();
      EXPECT_NE(std::string(e.what()).find(h.substring), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("safetensors file 'hostile.st'"), std::string::npos) << e.what();
    } catch (const ValueError& e) {
      EXPECT_EQ(h.err, Err::Value) << e.what();
      EXPECT_NE(std::string(e.what()).find(h.substring), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("safetensors file 'hostile.st'"), std::string::npos) << e.what();
    }
  }
}

TEST(SafetensorsHostile, SameErrorsThroughTheFilePath) {
  TempDir dir;
  int i = 0;
  for (const Hostile& h : hostile_files()) {
    SCOPED_TRACE(h.what);
    std::string path = dir.file("h" + std::to_string(i++) + ".safetensors");
    write_file(path, h.bytes);
    EXPECT_THROW(SafetensorsFile::open(path), Error);
  }
}

TEST(SafetensorsHostile, TooManyTensors) {
  // kMaxTensors + 1 empty U8 tensors (about 45 MB of header).
  std::string h = "{";
  h.reserve(46'000'000);
  for (size_t i = 0; i <= SafetensorsFile::kMaxTensors; ++i) {
    if (i) h += ',';
    h += "\"" + std::to_string(i) + R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  }
  h += "}";
  std::vector<uint8_t> bytes = image(h);
  try {
    SafetensorsFile::from_buffer(bytes.data(), bytes.size());
    ADD_FAILURE() << "accepted " << SafetensorsFile::kMaxTensors + 1 << " tensors";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1000000 tensors"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsHostile, MessagesShowLongAndControlNamesSafely) {
  std::string name(10000, 'n');
  std::vector<uint8_t> bytes = image("{\"" + name + "\\u0001\":1}");
  try {
    SafetensorsFile::from_buffer(bytes.data(), bytes.size());
    ADD_FAILURE();
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_LT(msg.size(), 600u) << msg;
    EXPECT_NE(msg.find("nnn..."), std::string::npos) << msg;
  }
}

TEST(SafetensorsHostile, FifoIsRejectedWithoutBlocking) {
  TempDir dir;
  std::string path = dir.file("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_THROW(SafetensorsFile::open(path), Error);
}

// Odd but valid headers that must be accepted.
TEST(SafetensorsAccepted, OddButValidHeaders) {
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    std::vector<std::string> names;
  };
  std::vector<Case> cases{
      {"no tensors", image("{}"), {}},
      {"space padding", image("{}      "), {}},
      {"whitespace everywhere",
       image("{ \"a\" :\r\n{ \"dtype\" : \"F32\" , \"shape\" : [ 2 ] ,\t\"data_offsets\" : [ 0 , 8 ] } } \n", 8),
       {"a"}},
      {"unaligned header length", image(entry_a() + " ", 8), {"a"}},
      {"unknown fields ignored", image(entry_a(",\"x\":{\"y\":[1,2.5e-3,true,false,null,\"s\"]}"), 8), {"a"}},
      {"null metadata", image(R"({"__metadata__":null})"), {}},
      {"metadata after tensors", image(entry_a().substr(0, entry_a().size() - 1) + R"(,"__metadata__":{"k":"v"}})", 8), {"a"}},
      {"escaped names", image(R"({"\u00e9\ud83d\udd25\n\/":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})", 1),
       {"\xC3\xA9\xF0\x9F\x94\xA5\n/"}},
      {"empty tensors share offsets", image("{" + tensor("e1", "F32", "[0]", 4, 4) + "," + tensor("a", "F32", "[1]", 0, 4) + "," +
                                            tensor("e2", "I64", "[3,0]", 4, 4) + "," + tensor("e0", "U8", "[0]", 0, 0) + "}", 4),
       {"e0", "a", "e1", "e2"}},
      {"any order of offsets", image("{" + tensor("b", "I16", "[2]", 4, 8) + "," + tensor("a", "I16", "[2]", 0, 4) + "}", 8),
       {"a", "b"}},
      {"zero dims with huge others", image(R"({"a":{"dtype":"U8","shape":[0,4611686018427387903],"data_offsets":[0,0]}})"), {"a"}},
      {"empty name", image(R"({"":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 1), {""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      SafetensorsFile f = SafetensorsFile::from_buffer(c.bytes.data(), c.bytes.size());
      EXPECT_EQ(f.names(), c.names);
      for (const std::string& n : f.names()) {
        Tensor t = f.tensor(n);
        EXPECT_EQ(t.shape(), f.info(n).shape);
      }
    } catch (const Error& e) {
      ADD_FAILURE() << "rejected a valid file: " << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln::test
