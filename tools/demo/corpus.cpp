#include "tools/demo/corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "kiln/core/error.h"

namespace kiln::demo {

std::vector<std::string> default_corpus_files() {
  return {"/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt",
          "/usr/share/gocode/src/github.com/andybalholm/brotli/testdata/Isaac.Newton-Opticks.txt"};
}

std::string load_corpus(const std::vector<std::string>& files) {
  std::string text;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in.good(), ValueError, "cannot read the text file '", path,
               "'. The default corpus comes from the Debian packages golang-github-pierrec-lz4-dev "
               "and golang-github-andybalholm-brotli-dev (scripts/demo.sh installs them); or pass "
               "--text FILE");
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
    text += "\n\n";
  }
  KILN_CHECK(text.size() > 1000, ValueError, "the training text has only ", text.size(),
             " bytes; at least 1000 are needed");
  return text;
}

CharVocab::CharVocab(const std::string& text) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  std::fill(std::begin(index_), std::end(index_), -1);
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      index_[c] = int64_t(chars_.size());
      chars_.push_back((unsigned char)c);
    }
}

std::vector<int64_t> CharVocab::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(index_[c] >= 0 ? index_[c] : 0);
  return ids;
}

std::string CharVocab::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t i : ids) s.push_back(char(chars_[size_t(i)]));
  return s;
}

}  // namespace kiln::demo
