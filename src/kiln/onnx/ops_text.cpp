// TfIdfVectorizer over integer token ids (string pools are not supported: kiln has no string
// tensors). The pool lists the n-grams to count, grouped by n (ngram_counts gives where each
// group starts); every n-gram of the input with n in [min, max] and gaps of 0..max_skip_count
// tokens between its items is looked up and counted at its ngram_indexes slot. Unigrams are
// counted once, not once per gap. Counted on the host.
#include <map>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"

namespace kiln::onnx {

namespace {

std::vector<Tensor> op_tfidf_vectorizer(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, ShapeError, "input must be [N] or [B, N], got ", shape_str(x.shape()));
  KILN_CHECK(!ctx.has_attr("pool_strings"), NotImplementedError, "string pools are not supported");
  const int64_t min_n = ctx.attr_int("min_gram_length"), max_n = ctx.attr_int("max_gram_length");
  const int64_t max_skip = ctx.attr_int("max_skip_count");
  const std::string mode = ctx.attr_string("mode");
  KILN_CHECK(mode == "TF" || mode == "IDF" || mode == "TFIDF", ValueError, "mode must be TF, IDF or TFIDF, got ",
             quoted(mode, 20));
  KILN_CHECK(min_n >= 1 && max_n >= min_n && max_skip >= 0, ValueError,
             "gram lengths must satisfy 1 <= min <= max and max_skip_count >= 0");
  const std::vector<int64_t> pool = ctx.attr_ints("pool_int64s");
  const std::vector<int64_t> starts = ctx.attr_ints("ngram_counts");
  const std::vector<int64_t> slots = ctx.attr_ints("ngram_indexes");
  const std::vector<float> weights = ctx.attr_floats("weights", std::vector<float>{});

  // n-gram (as its items) -> output slot, for every n of the pool.
  std::map<std::vector<int64_t>, int64_t> lookup;
  std::map<int64_t, double> slot_weight;  // weights are given per pool n-gram
  int64_t width = 0, next = 0;
  for (size_t g = 0; g < starts.size(); ++g) {
    const int64_t n = int64_t(g) + 1;
    const int64_t begin = starts[g], end = g + 1 < starts.size() ? starts[g + 1] : int64_t(pool.size());
    KILN_CHECK(begin >= 0 && begin <= end && end <= int64_t(pool.size()) && (end - begin) % n == 0, ValueError,
               "ngram_counts does not split pool_int64s into whole ", n, "-grams");
    for (int64_t at = begin; at < end; at += n, ++next) {
      KILN_CHECK(next < int64_t(slots.size()), ValueError, "ngram_indexes has fewer entries than the pool has n-grams");
      lookup[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)] = slots[size_t(next)];
      slot_weight[slots[size_t(next)]] = size_t(next) < weights.size() ? weights[size_t(next)] : 1.0;
      width = std::max(width, slots[size_t(next)] + 1);
    }
  }
  const int64_t rows = x.dim() == 2 ? x.size(0) : 1, len = x.size(-1);
  const std::vector<int64_t> tokens = cast(x, DType::I64).to_vector<int64_t>();
  std::vector<double> out(size_t(rows * width), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = &tokens[size_t(r * len)];
    for (int64_t n = min_n; n <= max_n; ++n) {
      for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); ++skip) {
        const int64_t stride = skip + 1;
        for (int64_t s = 0; s + (n - 1) * stride < len; ++s) {
          std::vector<int64_t> gram;
          for (int64_t k = 0; k < n; ++k) gram.push_back(row[s + k * stride]);
          auto it = lookup.find(gram);
          if (it != lookup.end()) out[size_t(r * width + it->second)] += 1;
        }
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    auto it = slot_weight.find(int64_t(i % size_t(width)));
    const double w = it == slot_weight.end() ? 1.0 : it->second;
    if (mode == "IDF") out[i] = out[i] > 0 ? w : 0;
    else if (mode == "TFIDF") out[i] *= w;
  }
  Shape shape = x.dim() == 2 ? Shape{rows, width} : Shape{width};
  return one(ctx.on_device(cast(tensor_from(out, shape), DType::F32)));
}

}  // namespace

void register_text_ops(OpTable& t) { t.add("TfIdfVectorizer", op_tfidf_vectorizer); }

}  // namespace kiln::onnx
