#include <string>

#include "kiln/core/error.h"
#include "tools/demo/lm_options.h"

namespace kiln::demo {

std::string lm_usage() {
  return "kiln demo [--steps N] [--dim N] [--layers N] [--heads N] [--context N] [--batch N]\n"
         "          [--lr X] [--seed N] [--device D] [--text FILE] [--out FILE]\n"
         "          [--sample-chars N] [--temperature X] [--top-k N]\n"
         "kiln demo logreg [--steps N] [--device D] ...   (logistic regression on the ops)";
}

LmOptions parse_lm_options(int argc, char** argv) {
  LmOptions o;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    KILN_CHECK(i + 1 < argc, ValueError, "option ", a, " needs a value\n", lm_usage());
    std::string v = argv[++i];
    auto as_int = [&]() -> int64_t {
      try {
        size_t used = 0;
        int64_t n = std::stoll(v, &used);
        if (used == v.size() && n > 0) return n;
      } catch (const std::exception&) {
      }
      KILN_THROW(ValueError, "option ", a, " expects a positive integer, got '", v, "'");
    };
    auto as_double = [&]() -> double {
      try {
        size_t used = 0;
        double x = std::stod(v, &used);
        if (used == v.size() && x > 0) return x;
      } catch (const std::exception&) {
      }
      KILN_THROW(ValueError, "option ", a, " expects a positive number, got '", v, "'");
    };
    if (a == "--steps") o.steps = as_int();
    else if (a == "--dim") o.dim = as_int();
    else if (a == "--layers") o.layers = as_int();
    else if (a == "--heads") o.heads = as_int();
    else if (a == "--context") o.context = as_int();
    else if (a == "--batch") o.batch = as_int();
    else if (a == "--lr") o.lr = as_double();
    else if (a == "--seed") o.seed = uint64_t(as_int());
    else if (a == "--device") o.device = v;
    else if (a == "--text") o.text = v;
    else if (a == "--out") o.out = v;
    else if (a == "--sample-chars") o.sample_chars = as_int();
    else if (a == "--temperature") o.temperature = as_double();
    else if (a == "--top-k") o.top_k = as_int();
    else KILN_THROW(ValueError, "unknown demo option '", a, "'\n", lm_usage());
  }
  return o;
}

}  // namespace kiln::demo
