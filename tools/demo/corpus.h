#pragma once
// The demo's training text: public-domain books shipped by Debian packages (installed by
// scripts/demo.sh), or a file the user names. Character level: one token per byte.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::demo {

// Default corpus files: The Adventures of Sherlock Holmes (golang-github-pierrec-lz4-dev)
// and Newton's Opticks (golang-github-andybalholm-brotli-dev).
std::vector<std::string> default_corpus_files();
// Reads and concatenates the files; Error naming a missing file and the package to install.
std::string load_corpus(const std::vector<std::string>& files);

// Byte-level vocabulary of the characters present in a text.
class CharVocab {
 public:
  explicit CharVocab(const std::string& text);
  int64_t size() const { return int64_t(chars_.size()); }
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::vector<unsigned char> chars_;
  int64_t index_[256];
};

}  // namespace kiln::demo
