// The IDX reader: round trips of every IDX type, plain and gzip, through files written by an
// independent writer (idx_writer.h); a table of hostile files, each rejected with a
// ValueError naming the file and the problem; MnistDataset over such files.
#include <filesystem>

#include "data/idx_writer.h"

namespace kiln::test {
namespace {

using data::read_idx;

const std::vector<DType> kIdxTypes = {DType::U8, DType::I8, DType::I16,
                                      DType::I32, DType::F32, DType::F64};

Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  // Any bit pattern (NaN payloads included) must survive; compared as bytes below.
  return from_bytes(random_bytes(size_t(numel_of(shape)) * element_size(dtype), dtype, seed),
                    shape, dtype);
}

TEST(Idx, RoundTripsEveryTypeAndShapePlainAndGzip) {
  TempDir dir;
  const std::vector<Shape> shapes = {{}, {0}, {7}, {3, 4}, {2, 0, 3}, {2, 3, 4, 5}};
  uint32_t seed = 1;
  for (DType dtype : kIdxTypes) {
    for (const Shape& shape : shapes) {
      Tensor t = random_tensor(shape, dtype, seed++);
      const std::string what = std::string(dtype_name(dtype)) + " " + shape_str(shape);
      std::vector<uint8_t> image = idx_bytes(t);
      const std::string plain = dir.file("t.idx"), gz = dir.file("t.idx.gz");
      write_file(plain, image);
      write_file(gz, gzip(image));
      for (const std::string& path : {plain, gz}) {
        Tensor r = read_idx(path);
        EXPECT_EQ(r.dtype(), dtype) << what;
        EXPECT_EQ(r.shape(), shape) << what;
        EXPECT_EQ(r.device(), Device(DeviceType::CPU, 0)) << what;
        EXPECT_EQ(raw_bytes(r), raw_bytes(t)) << what << " from " << path;
      }
    }
  }
}

TEST(Idx, ValuesAreBigEndian) {
  // 0x0102 as int16 and 1.0 as float32, written out byte by byte per the format.
  std::vector<uint8_t> i16 = idx_header(0x0B, {2});
  i16.insert(i16.end(), {0x01, 0x02, 0xFF, 0xFE});
  EXPECT_EQ(read_idx(i16).to_vector<int16_t>(), (std::vector<int16_t>{0x0102, -2}));
  std::vector<uint8_t> f32 = idx_header(0x0D, {1});
  f32.insert(f32.end(), {0x3F, 0x80, 0x00, 0x00});
  EXPECT_EQ(read_idx(f32).item<float>(), 1.0f);
}

TEST(Idx, ConcatenatedGzipMembersReadAsOneStream) {
  Tensor t = random_tensor({4, 5}, DType::I32, 9);
  std::vector<uint8_t> image = idx_bytes(t);
  std::vector<uint8_t> a(image.begin(), image.begin() + 11), b(image.begin() + 11, image.end());
  std::vector<uint8_t> gz = gzip(a), gz_b = gzip(b);
  gz.insert(gz.end(), gz_b.begin(), gz_b.end());
  EXPECT_EQ(raw_bytes(read_idx(gz, "two members")), raw_bytes(t));
}

TEST(Idx, LargeGzipFileReadsAcrossChunks) {
  // Bigger than the reader's 16 MiB growth step.
  Tensor t = zeros({17, 1 << 20}, DType::U8);
  t.select(0, 16).narrow(0, 5, 1).fill_(7);
  t.select(0, 3).narrow(0, 0, 1).fill_(200);
  Tensor r = read_idx(gzip(idx_bytes(t)), "large");
  EXPECT_EQ(raw_bytes(r), raw_bytes(t));
}

struct Hostile {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string expected;  // part of the message
};

std::vector<uint8_t> cat_bytes(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Hostile> hostile_files() {
  const std::vector<uint8_t> data12(12, 0x5A);  // [2, 3] int16
  const std::vector<uint8_t> good = cat_bytes(idx_header(0x0B, {2, 3}), data12);
  const std::vector<uint8_t> good_gz = gzip(good);
  std::vector<Hostile> t;
  t.push_back({"empty file", {}, "truncated header: expected 4 bytes of magic number"});
  t.push_back({"3 bytes", {0, 0, 8}, "truncated header"});
  t.push_back({"first magic byte set", cat_bytes({1, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 3}, data12),
               "bad magic number 0x01000B02"});
  t.push_back({"second magic byte set", {0, 7, 8, 1, 0, 0, 0, 1, 42}, "bad magic number"});
  t.push_back({"text file", {'h', 'e', 'l', 'l', 'o', '\n'}, "bad magic number"});
  t.push_back({"type code 0x0A", cat_bytes(idx_header(0x0A, {2}), {1, 2}), "unknown type code 0x0A"});
  t.push_back({"type code 0x00", cat_bytes(idx_header(0x00, {1}), {1}), "unknown type code 0x00"});
  t.push_back({"type code 0xFF", cat_bytes(idx_header(0xFF, {1}), {1}), "unknown type code 0xFF"});
  t.push_back({"255 dims", std::vector<uint8_t>{0, 0, 8, 255}, "255 dimensions; at most 64"});
  t.push_back({"dims cut short", {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3},
               "truncated header: expected 12 bytes of dimension sizes"});
  t.push_back({"dims cut mid-word", {0, 0, 8, 1, 0, 0}, "truncated header"});
  t.push_back({"uint8 dims overflow int64",
               idx_header(0x08, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}), "more than 2^63 bytes"});
  t.push_back({"float64 bytes overflow", idx_header(0x0E, {1u << 31, 1u << 31}),
               "more than 2^63 bytes"});
  t.push_back({"zero dim does not hide overflow",
               idx_header(0x08, {0, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}), "more than 2^63 bytes"});
  t.push_back({"huge size, tiny file", idx_header(0x08, {65536, 65536, 65536}),
               "truncated data: the header describes 281474976710656 bytes"});
  t.push_back({"one byte short", std::vector<uint8_t>(good.begin(), good.end() - 1),
               "truncated data: the header describes 12 bytes of data (shape [2, 3], int16) but "
               "the file holds 11"});
  t.push_back({"one byte extra", cat_bytes(good, {0}), "1 bytes more than the header describes"});
  t.push_back({"gzip: one byte short",
               gzip(std::vector<uint8_t>(good.begin(), good.end() - 1)),
               "truncated data: the header describes 12 bytes of data (shape [2, 3], int16) but "
               "the data ends after 11"});
  t.push_back({"gzip: one byte extra", gzip(cat_bytes(good, {0})), "the data continues after"});
  t.push_back({"gzip: huge size, tiny file", gzip(idx_header(0x08, {65536, 65536, 65536})),
               "truncated data"});
  t.push_back({"gzip: bad magic inside", gzip({0, 1, 8, 1, 0, 0, 0, 1, 9}), "bad magic number"});
  t.push_back({"gzip: magic only", {0x1f, 0x8b}, "corrupt gzip stream"});
  t.push_back({"gzip: stream cut in half",
               std::vector<uint8_t>(good_gz.begin(), good_gz.begin() + long(good_gz.size() / 2)),
               "corrupt gzip stream"});
  t.push_back({"gzip: trailer cut", std::vector<uint8_t>(good_gz.begin(), good_gz.end() - 3),
               "corrupt gzip stream: the file ends before the end of the compressed data"});
  {
    std::vector<uint8_t> bad_crc = good_gz;
    bad_crc[bad_crc.size() - 8] ^= 0x01;  // trailer: CRC32, then ISIZE (little-endian)
    t.push_back({"gzip: CRC mismatch", bad_crc, "incorrect data check"});
    std::vector<uint8_t> bad_len = good_gz;
    bad_len[bad_len.size() - 4] ^= 0x01;
    t.push_back({"gzip: length mismatch", bad_len, "incorrect length check"});
    std::vector<uint8_t> bad_method = good_gz;
    bad_method[2] = 7;  // compression method must be 8 (deflate)
    t.push_back({"gzip: unknown method", bad_method, "corrupt gzip stream"});
    std::vector<uint8_t> bad_block = good_gz;
    bad_block[10] = 0xFF;  // first deflate block header: reserved block type 3
    t.push_back({"gzip: bad deflate block", bad_block, "corrupt gzip stream"});
  }
  t.push_back({"gzip: garbage after the stream", cat_bytes(good_gz, {'x', 'y', 'z'}),
               "corrupt gzip stream"});
  t.push_back({"gzip: zero padding after the stream", cat_bytes(good_gz, std::vector<uint8_t>(16, 0)),
               "corrupt gzip stream"});
  return t;
}

TEST(Idx, HostileFilesAreValueErrorsNamingFileAndProblem) {
  TempDir dir;
  for (const Hostile& h : hostile_files()) {
    const std::string path = dir.file("hostile.idx");
    write_file(path, h.bytes);
    try {
      read_idx(path);
      ADD_FAILURE() << h.name << ": no error";
    } catch (const ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(h.expected), std::string::npos) << h.name << ": " << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << h.name << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << h.name << ": not a ValueError: " << e.what();
    }
    // Every prefix of the file (a truncation anywhere) is a ValueError too, never a crash,
    // unless the cut leaves a valid file (a hostile file with trailing bytes).
    for (size_t n = 0; n < h.bytes.size(); ++n) {
      std::vector<uint8_t> prefix(h.bytes.begin(), h.bytes.begin() + long(n));
      try {
        read_idx(prefix, h.name);
      } catch (const ValueError&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << h.name << " cut to " << n << ": not a ValueError: " << e.what();
      }
    }
  }
}

TEST(Idx, EveryTruncationOfAValidFileIsAnError) {
  Tensor t = random_tensor({3, 5}, DType::F32, 3);
  for (const std::vector<uint8_t>& image : {idx_bytes(t), gzip(idx_bytes(t))})
    for (size_t n = 0; n < image.size(); ++n)
      EXPECT_THROW(read_idx(std::vector<uint8_t>(image.begin(), image.begin() + long(n))),
                   ValueError)
          << "cut to " << n << " of " << image.size();
}

TEST(Idx, EverySingleByteCorruptionOfAGzipFileIsHandled) {
  // A flipped byte may leave a valid file (e.g. in the gzip header's mtime) but must never
  // crash or read out of bounds: either a tensor or a kiln::Error.
  std::vector<uint8_t> gz = gzip(idx_bytes(random_tensor({4, 4}, DType::I16, 5)));
  for (size_t i = 0; i < gz.size(); ++i) {
    std::vector<uint8_t> bad = gz;
    bad[i] ^= 0xA5;
    try {
      read_idx(bad, "flipped");
    } catch (const Error&) {
    }
  }
}

TEST(Idx, FileErrors) {
  TempDir dir;
  EXPECT_THROW(read_idx(dir.file("missing.idx")), Error);
  try {
    read_idx(dir.path().string());
    ADD_FAILURE() << "a directory was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

// ---- MnistDataset ----

TEST(MnistDataset, ScalesImagesAndWidensLabels) {
  TempDir dir;
  Tensor images = random_tensor({5, 4, 3}, DType::U8, 11);
  Tensor labels = tensor_from(std::vector<uint8_t>{3, 0, 9, 1, 9}, {5}, DType::U8);
  write_file(dir.file("img.gz"), gzip(idx_bytes(images)));  // one gzip, one plain
  write_file(dir.file("lbl"), idx_bytes(labels));
  data::MnistDataset ds(dir.file("img.gz"), dir.file("lbl"));
  ASSERT_EQ(ds.size(), 5);
  std::vector<uint8_t> pixels = raw_bytes(images);
  for (int64_t i = 0; i < 5; ++i) {
    data::Example ex = ds.get(i);
    ASSERT_EQ(ex.size(), 2u);
    EXPECT_EQ(ex[0].shape(), (Shape{1, 4, 3}));
    EXPECT_EQ(ex[0].dtype(), DType::F32);
    std::vector<float> v = ex[0].to_vector<float>();
    for (size_t k = 0; k < 12; ++k) EXPECT_EQ(v[k], float(pixels[size_t(i) * 12 + k]) / 255.0f);
    EXPECT_EQ(ex[1].dtype(), DType::I64);
    EXPECT_EQ(ex[1].dim(), 0);
    EXPECT_EQ(ex[1].item<int64_t>(), labels.to_vector<int64_t>()[size_t(i)]);
  }
  data::Batch b = ds.get_batch({4, 0, 2});
  EXPECT_EQ(b[0].shape(), (Shape{3, 1, 4, 3}));
  EXPECT_EQ(b[1].to_vector<int64_t>(), (std::vector<int64_t>{9, 3, 9}));
  EXPECT_EQ(raw_bytes(b[0].select(0, 1)), raw_bytes(ds.get(0)[0]));
  EXPECT_THROW(ds.get(5), IndexError);
  EXPECT_THROW(ds.get_batch({1, -1}), IndexError);
}

TEST(MnistDataset, RejectsMismatchedFiles) {
  TempDir dir;
  write_file(dir.file("img"), idx_bytes(zeros({5, 2, 2}, DType::U8)));
  write_file(dir.file("img_i16"), idx_bytes(zeros({5, 2, 2}, DType::I16)));
  write_file(dir.file("img_rank2"), idx_bytes(zeros({5, 4}, DType::U8)));
  write_file(dir.file("lbl4"), idx_bytes(zeros({4}, DType::U8)));
  write_file(dir.file("lbl5"), idx_bytes(zeros({5}, DType::U8)));
  write_file(dir.file("lbl_rank2"), idx_bytes(zeros({5, 1}, DType::U8)));
  EXPECT_THROW(data::MnistDataset(dir.file("img"), dir.file("lbl4")), ValueError);
  EXPECT_THROW(data::MnistDataset(dir.file("img_i16"), dir.file("lbl5")), ValueError);
  EXPECT_THROW(data::MnistDataset(dir.file("img_rank2"), dir.file("lbl5")), ValueError);
  EXPECT_THROW(data::MnistDataset(dir.file("img"), dir.file("lbl_rank2")), ValueError);
  EXPECT_NO_THROW(data::MnistDataset(dir.file("img"), dir.file("lbl5")));
}

TEST(MnistDataset, RealFashionMnist) {
  // The dataset-fashion-mnist package (scripts/test.sh installs it, as the demo does).
  const std::string root = data::MnistDataset::kFashionMnistDir;
  const std::string images = root + "/t10k-images-idx3-ubyte.gz";
  const std::string labels = root + "/t10k-labels-idx1-ubyte.gz";
  ASSERT_TRUE(std::filesystem::exists(images) && std::filesystem::exists(labels))
      << "dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)";
  data::MnistDataset ds(images, labels);
  EXPECT_EQ(ds.size(), 10000);
  EXPECT_EQ(ds.images().shape(), (Shape{10000, 28, 28}));
  std::vector<int64_t> counts(10, 0);
  for (int64_t l : ds.labels().to_vector<int64_t>()) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++counts[size_t(l)];
  }
  for (int64_t c : counts) EXPECT_EQ(c, 1000);  // the test split is balanced
}

}  // namespace
}  // namespace kiln::test
