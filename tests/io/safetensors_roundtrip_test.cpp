// Writing and reading back safetensors files: every dtype bit-exactly (NaN payloads, -0.0,
// subnormals), 0-d and empty tensors, non-contiguous and testing-device tensors, metadata,
// the file layout (alignment, tensor order) and atomic replacement.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "io_test_util.h"
#include "kiln/autograd/autograd.h"

namespace kiln::test {
namespace {

using io::SafetensorsFile;

const Device kCpu(DeviceType::CPU, 0);
const Device kTesting(DeviceType::Testing, 0);

// Special values of each floating type, as bit patterns, followed by random bytes.
std::vector<uint8_t> interesting_bytes(DType dtype, size_t numel, uint32_t seed) {
  std::vector<uint8_t> out = random_bytes(numel * element_size(dtype), dtype, seed);
  auto put = [&](const auto& specials) {
    for (size_t i = 0; i < specials.size() && (i + 1) * sizeof(specials[0]) <= out.size(); ++i)
      std::memcpy(out.data() + i * sizeof(specials[0]), &specials[i], sizeof(specials[0]));
  };
  switch (dtype) {
    case DType::F32:
      put(std::vector<uint32_t>{0x80000000u, 0x00000001u, 0x007FFFFFu, 0x7FC12345u, 0x7F800001u,
                                0xFFFFFFFFu, 0x7F800000u, 0xFF800000u});
      break;
    case DType::F64:
      put(std::vector<uint64_t>{0x8000000000000000ull, 0x0000000000000001ull,
                                0x7FF0000000000001ull, 0xFFF8000000000ABCull,
                                0x000FFFFFFFFFFFFFull, 0x7FF0000000000000ull});
      break;
    case DType::F16:
    case DType::BF16:
      put(std::vector<uint16_t>{0x8000, 0x0001, 0x7C01, 0x7E55, 0xFFFF, 0x7F81, 0x03FF});
      break;
    default:
      break;
  }
  return out;
}

void expect_same_tensor(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_TRUE(got.is_contiguous()) << what;
  EXPECT_EQ(raw_bytes(got), raw_bytes(want)) << what << ": bytes differ";
}

TEST(SafetensorsRoundTrip, EveryDtypeBitExact) {
  TempDir dir;
  std::map<std::string, Tensor> tensors;
  uint32_t seed = 1;
  for (DType t : all_dtypes()) {
    Shape shape{3, 5};
    tensors["t_" + std::string(dtype_name(t))] =
        from_bytes(interesting_bytes(t, 15, seed++), shape, t);
  }
  std::string path = dir.file("all.safetensors");
  io::save_safetensors(path, tensors);
  SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_EQ(f.info(name).dtype, t.dtype());
    EXPECT_EQ(f.info(name).shape, t.shape());
    EXPECT_EQ(f.info(name).nbytes(), t.nbytes());
    expect_same_tensor(f.tensor(name), t, name);
    std::span<const uint8_t> b = f.bytes(name);
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.end()), raw_bytes(t)) << name;
  }
}

TEST(SafetensorsRoundTrip, ZeroDimAndEmptyTensors) {
  TempDir dir;
  std::map<std::string, Tensor> tensors{
      {"scalar_f64", scalar_tensor(-0.0, DType::F64)},
      {"scalar_bool", scalar_tensor(true, DType::Bool)},
      {"empty_1d", empty({0}, DType::F32)},
      {"empty_mid", empty({4, 0, 3}, DType::I64)},
      {"empty_bf16", empty({0, 7}, DType::BF16)},
  };
  std::string path = dir.file("edge.safetensors");
  save(tensors, path);
  std::map<std::string, Tensor> back = load(path);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) expect_same_tensor(back.at(name), t, name);
  EXPECT_EQ(back.at("scalar_f64").dim(), 0);
  EXPECT_TRUE(std::signbit(back.at("scalar_f64").item<double>()));
  EXPECT_EQ(back.at("empty_mid").shape(), (Shape{4, 0, 3}));
}

TEST(SafetensorsRoundTrip, OnlyEmptyTensorsAndNoTensors) {
  TempDir dir;
  std::string p1 = dir.file("only_empty.safetensors");
  save({{"e", empty({0}, DType::F32)}}, p1);
  EXPECT_EQ(SafetensorsFile::open(p1).file_size(), SafetensorsFile::open(p1).data_offset());
  std::string p2 = dir.file("none.safetensors");
  save({}, p2);
  // The reference implementation writes exactly "{}" padded to 8 bytes.
  std::vector<uint8_t> want = image("{}      ");
  EXPECT_EQ(read_file(p2), want);
  EXPECT_EQ(load(p2).size(), 0u);
}

TEST(SafetensorsRoundTrip, NonContiguousLayouts) {
  TempDir dir;
  Tensor base = from_bytes(random_bytes(4 * 6 * 4, DType::F32, 7), {4, 6}, DType::F32);
  Tensor ints = from_bytes(random_bytes(10 * 2, DType::I16, 8), {10}, DType::I16);
  std::map<std::string, Tensor> tensors{
      {"transposed", base.t()},
      {"strided", base.slice(1, 0, 6, 2)},
      {"offset", base.narrow(0, 1, 2)},
      {"expanded", ints.slice(0, 0, 1).expand({3, 4})},
      {"permuted", base.view({2, 2, 6}).permute({2, 0, 1})},
      {"selected", base.select(1, 3)},
  };
  EXPECT_FALSE(tensors.at("transposed").is_contiguous());
  EXPECT_FALSE(tensors.at("expanded").is_contiguous());
  EXPECT_NE(tensors.at("offset").storage_offset(), 0);
  std::string path = dir.file("views.safetensors");
  save(tensors, path);
  std::map<std::string, Tensor> back = load(path);
  for (const auto& [name, t] : tensors) expect_same_tensor(back.at(name), t.contiguous(), name);
}

TEST(SafetensorsRoundTrip, TestingDeviceTensors) {
  ASSERT_TRUE(is_available(DeviceType::Testing)) << "the testing backend is part of every build";
  TempDir dir;
  std::map<std::string, Tensor> tensors;
  uint32_t seed = 100;
  for (DType t : all_dtypes()) {
    Tensor d = from_bytes(interesting_bytes(t, 12, seed++), {3, 4}, t, kTesting);
    tensors["dev_" + std::string(dtype_name(t))] = d;
    tensors["dev_t_" + std::string(dtype_name(t))] = d.t();  // non-contiguous on the device
  }
  std::string path = dir.file("device.safetensors");
  save(tensors, path);
  // Read back onto the testing device and onto the CPU.
  std::map<std::string, Tensor> on_device = load(path, kTesting);
  std::map<std::string, Tensor> on_cpu = load(path);
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(on_device.at(name).device().type, DeviceType::Testing) << name;
    EXPECT_TRUE(on_cpu.at(name).device().is_cpu()) << name;
    expect_same_tensor(on_device.at(name), t, name);
    expect_same_tensor(on_cpu.at(name), t, name);
  }
}

TEST(SafetensorsRoundTrip, TensorsThatRequireGrad) {
  TempDir dir;
  Tensor w = randn({3, 3});
  autograd::set_requires_grad(w);
  std::string path = dir.file("grad.safetensors");
  save({{"w", w.t()}}, path);
  Tensor back = load(path).at("w");
  expect_same_tensor(back, autograd::detach(w.t()), "w");
  EXPECT_FALSE(autograd::requires_grad(back));
}

TEST(SafetensorsRoundTrip, Metadata) {
  TempDir dir;
  io::SafetensorsMetadata meta{{"format", "pt"},
                               {"quote\"and\\slash", "line\nbreak\ttab\x01"},
                               {"unicode \xC3\xA9\xE2\x82\xAC\xF0\x9F\x94\xA5", ""},
                               {"", "empty key"}};
  std::string path = dir.file("meta.safetensors");
  io::save_safetensors(path, {{"x", ones({2})}}, meta);
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata(), meta);
  // Without metadata the header has no "__metadata__" key and metadata() is empty.
  io::save_safetensors(path, {{"x", ones({2})}});
  EXPECT_TRUE(SafetensorsFile::open(path).metadata().empty());
}

TEST(SafetensorsRoundTrip, UnusualNames) {
  TempDir dir;
  io::NamedTensors tensors{{"", ones({1})},
                           {"a\"b\\c/d", zeros({2})},
                           {"ctl\x01\x1f\x7f", ones({1}, DType::I8)},
                           {"\xE6\x97\xA5\xE6\x9C\xAC", ones({1}, DType::U8)}};
  std::string path = dir.file("names.safetensors");
  io::save_safetensors(path, tensors);
  SafetensorsFile f = SafetensorsFile::open(path);
  for (const auto& [name, t] : tensors) expect_same_tensor(f.tensor(name), t, name);
}

TEST(SafetensorsLayout, HeaderPaddedAndTensorsInReferenceOrder) {
  io::NamedTensors tensors{{"b", ones({1}, DType::Bool)},  {"u", ones({3}, DType::U8)},
                           {"z", ones({2}, DType::F32)},   {"a", ones({2}, DType::F32)},
                           {"h", ones({1}, DType::F16)},   {"bf", ones({1}, DType::BF16)},
                           {"l", ones({1}, DType::I64)},   {"d", ones({1}, DType::F64)},
                           {"i", ones({1}, DType::I32)},   {"s", ones({1}, DType::I16)},
                           {"c", ones({1}, DType::I8)}};
  std::vector<uint8_t> bytes = io::safetensors_bytes(tensors);
  SafetensorsFile f = SafetensorsFile::from_buffer(bytes.data(), bytes.size());
  EXPECT_EQ(f.header_size() % 8, 0u);
  EXPECT_EQ(f.data_offset() % 8, 0u);
  std::vector<std::string> want{"l", "d", "a", "z", "i", "bf", "h", "s", "c", "u", "b"};
  EXPECT_EQ(f.names(), want);
  // Every tensor starts at a multiple of its element size.
  for (const auto& name : f.names())
    EXPECT_EQ((f.data_offset() + f.info(name).begin) % element_size(f.info(name).dtype), 0u) << name;
  // Padding is spaces after the JSON object.
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + long(f.header_size()));
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
}

TEST(SafetensorsLayout, InputOrderDoesNotMatter) {
  Tensor a = ones({2}), b = zeros({3});
  EXPECT_EQ(io::safetensors_bytes({{"a", a}, {"b", b}}), io::safetensors_bytes({{"b", b}, {"a", a}}));
}

TEST(SafetensorsWriter, AtomicReplaceLeavesNoTemporaryFiles) {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  save({{"x", ones({4})}}, path);
  save({{"y", zeros({2}, DType::I32)}}, path);  // replaces the old file
  std::map<std::string, Tensor> back = load(path);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back.count("y"), 1u);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST(SafetensorsWriter, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  std::string path = dir.file("keep.safetensors");
  save({{"x", ones({4})}}, path);
  std::vector<uint8_t> before = read_file(path);
  EXPECT_THROW(io::save_safetensors(path, io::NamedTensors{{"x", ones({1})}, {"x", ones({1})}}),
               ValueError);
  EXPECT_THROW(save({{"x", ones({1})}}, dir.file("no_such_dir/f.safetensors")), Error);
  EXPECT_EQ(read_file(path), before);
}

TEST(SafetensorsWriter, RejectsBadInput) {
  auto expect_error = [](const io::NamedTensors& t, const io::SafetensorsMetadata& m,
                         const std::string& substring) {
    try {
      io::safetensors_bytes(t, m);
      ADD_FAILURE() << "expected a ValueError containing: " << substring;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what();
    }
  };
  expect_error({{"x", ones({1})}, {"x", ones({1}, DType::I32)}}, {}, "appears twice");
  expect_error({{"__metadata__", ones({1})}}, {}, "reserved");
  expect_error({{"bad\xFF", ones({1})}}, {}, "not valid UTF-8");
  expect_error({{"x", Tensor()}}, {}, "undefined");
  expect_error({{"x", ones({1})}}, {{"k", "\xC0\x80"}}, "not valid UTF-8");
}

TEST(SafetensorsReader, MissingTensorAndMissingFile) {
  std::vector<uint8_t> bytes = io::safetensors_bytes({{"x", ones({1})}});
  SafetensorsFile f = SafetensorsFile::from_buffer(bytes.data(), bytes.size(), "mem.st");
  try {
    f.tensor("y");
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'mem.st' has no tensor 'y'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.info("y"), ValueError);
  EXPECT_THROW(SafetensorsFile::open("/nonexistent/dir/x.safetensors"), Error);
  TempDir dir;
  EXPECT_THROW(SafetensorsFile::open(dir.path().string()), Error);  // a directory
}

TEST(SafetensorsReader, CopiesOutliveTheFileObject) {
  std::vector<uint8_t> bytes = io::safetensors_bytes({{"x", arange(6, DType::I64)}});
  Tensor t;
  {
    SafetensorsFile f = SafetensorsFile::from_buffer(bytes.data(), bytes.size());
    SafetensorsFile copy = f;  // shares the state
    t = copy.tensor("x");
  }
  bytes.assign(bytes.size(), 0);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(SafetensorsReader, BoolBytesMustBeZeroOrOne) {
  std::vector<uint8_t> bytes = image(
      R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", 0);
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(2);
  SafetensorsFile f = SafetensorsFile::from_buffer(bytes.data(), bytes.size());
  try {
    f.tensor("m");
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("element 2 is the byte 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.bytes("m").size(), 3u);  // the raw bytes stay readable
}

}  // namespace
}  // namespace kiln::test
