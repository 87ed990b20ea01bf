#pragma once
// Options of the language-model demo and its checkpoint writer.
#include <cstdint>
#include <string>

namespace kiln::demo {

class TinyLlama;

struct LmOptions {
  int64_t steps = 600;
  int64_t dim = 96;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t context = 64;
  int64_t batch = 32;
  double lr = 3e-3;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string text;  // empty: the default corpus
  std::string out = "kiln_demo_checkpoint.safetensors";
  int64_t sample_chars = 300;
  double temperature = 0.8;
  int64_t top_k = 20;
  int64_t eval_batches = 20;
};

// Parses `kiln demo [options]`; ValueError naming an unknown option or a bad value.
LmOptions parse_lm_options(int argc, char** argv);
std::string lm_usage();
int run_lm_demo(const LmOptions& options);
void save_checkpoint(TinyLlama& model, const std::string& path);

}  // namespace kiln::demo
