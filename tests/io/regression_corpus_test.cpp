// Every file in tests/io/regressions/ (inputs the fuzzer found or that are kept as
// interesting corpus) and tests/io/data/ (the seed corpus) goes through the parser, both from
// memory and through the memory-mapped path, and every tensor of the files that parse is
// read. Each must either succeed or throw a kiln::Error: never crash or read out of bounds
// (CI runs this under ASan/UBSan). scripts/fuzz_safetensors.sh adds files here.
#include <gtest/gtest.h>

#include <algorithm>

#include "io_test_util.h"

namespace kiln::test {
namespace {

using io::SafetensorsFile;

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> out;
  for (const char* sub : {"regressions", "data"}) {
    fs::path dir = io_test_dir() / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      std::string ext = e.path().extension().string();
      if (ext == ".py" || ext == ".md") continue;
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Reads everything the file offers; returns whether it parsed.
bool exercise(const SafetensorsFile& f) {
  size_t total = 0;
  for (const std::string& name : f.names()) {
    const io::TensorInfo& info = f.info(name);
    EXPECT_EQ(f.bytes(name).size(), info.nbytes());
    EXPECT_LE(f.data_offset() + info.end, f.file_size());
    try {
      Tensor t = f.tensor(name);
      EXPECT_EQ(t.shape(), info.shape);
      EXPECT_EQ(t.nbytes(), info.nbytes());
      total += t.nbytes();
    } catch (const ValueError&) {
      EXPECT_EQ(info.dtype, DType::Bool) << name;  // only bool bytes are checked lazily
    }
  }
  (void)f.metadata();
  EXPECT_LE(total, f.file_size());
  return true;
}

TEST(SafetensorsCorpus, EveryFileParsesOrFailsCleanly) {
  std::vector<fs::path> files = corpus_files();
  ASSERT_GE(files.size(), 5u) << "the corpus folders tests/io/regressions and tests/io/data are missing";
  size_t parsed = 0, rejected = 0;
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    std::vector<uint8_t> bytes = read_file(p.string());
    bool ok_memory = false, ok_mapped = false;
    try {
      ok_memory = exercise(SafetensorsFile::from_buffer(bytes.data(), bytes.size(), p.filename()));
    } catch (const Error&) {
    }
    try {
      ok_mapped = exercise(SafetensorsFile::open(p.string()));
    } catch (const Error&) {
    }
    EXPECT_EQ(ok_memory, ok_mapped) << "memory and file paths disagree";
    (ok_memory ? parsed : rejected)++;
  }
  // The seed corpus holds valid files: some inputs must get through.
  EXPECT_GT(parsed, 0u);
  RecordProperty("parsed", int(parsed));
  RecordProperty("rejected", int(rejected));
}

}  // namespace
}  // namespace kiln::test
