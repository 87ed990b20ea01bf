// einsum (ops/einsum.h), composed from views and one batched matrix product per pair of
// operands (also the ONNX importer's Einsum node): repeated
// labels within an operand take a diagonal, labels no one else needs are summed away early,
// then operands are folded left to right (shared labels that are still needed are batch
// dims, the others are contracted), and the result is summed and permuted to the output.
// Labels are ints: letters by character code, the dims of "..." as 256 + their position
// counted from the right (so ellipses of different ranks broadcast like numpy's).
#include <algorithm>
#include <map>
#include <set>

#include "kiln/ops/einsum.h"

#include "kiln/ops/copy.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln {

namespace {

using Labels = std::vector<int>;

struct Operand {
  Tensor t;
  Labels labels;  // one per dim
};

// The equation as error messages quote it: at most 100 characters.
std::string printable(const std::string& s, size_t max_chars) {
  return s.size() <= max_chars ? s : s.substr(0, max_chars) + "...";
}

// Parses one term ("ab...c") for a tensor of rank `rank` (-1: the output, whose ellipsis
// covers `ellipsis_rank` dims).
Labels parse_term(const std::string& term, int64_t rank, int64_t ellipsis_rank) {
  Labels letters_before, letters_after;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch == '.') {
      KILN_CHECK(!seen_ellipsis && term.compare(i, 3, "...") == 0, ValueError,
                 "einsum: malformed ellipsis in term '",
                 printable(term, 100), "'");
      seen_ellipsis = true;
      i += 2;
      continue;
    }
    KILN_CHECK(std::isalpha(static_cast<unsigned char>(ch)), ValueError, "invalid character '", ch,
               "' in einsum term '", printable(term, 100), "'");
    (seen_ellipsis ? letters_after : letters_before).push_back(ch);
  }
  const int64_t letters = int64_t(letters_before.size() + letters_after.size());
  int64_t covered = 0;
  if (rank >= 0) {
    KILN_CHECK(seen_ellipsis ? letters <= rank : letters == rank, ShapeError, "einsum: term '",
               printable(term, 100),
               "' has ", letters, " labels for an operand of rank ", rank);
    covered = seen_ellipsis ? rank - letters : 0;
  } else {
    covered = seen_ellipsis ? ellipsis_rank : 0;
  }
  Labels out = letters_before;
  for (int64_t k = covered; k > 0; --k) out.push_back(256 + int(k - 1));
  out.insert(out.end(), letters_after.begin(), letters_after.end());
  return out;
}

// Takes diagonals until no label repeats.
void take_diagonals(Operand& op) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < op.labels.size() && !again; ++i) {
      for (size_t j = i + 1; j < op.labels.size() && !again; ++j) {
        if (op.labels[i] != op.labels[j]) continue;
        KILN_CHECK(op.t.size(int64_t(i)) == op.t.size(int64_t(j)), ShapeError,
                   "einsum: a repeated label spans dims of sizes ",
                   op.t.size(int64_t(i)), " and ", op.t.size(int64_t(j)));
        op.t = diagonal(op.t, 0, int64_t(i), int64_t(j));  // the diagonal becomes the last dim
        const int label = op.labels[i];
        op.labels.erase(op.labels.begin() + std::ptrdiff_t(j));
        op.labels.erase(op.labels.begin() + std::ptrdiff_t(i));
        op.labels.push_back(label);
        again = true;
      }
    }
  }
}

// Sums away the labels of op that are not in `keep`.
void sum_unneeded(Operand& op, const std::set<int>& keep) {
  Dims dims;
  Labels rest;
  for (size_t i = 0; i < op.labels.size(); ++i) {
    if (keep.count(op.labels[i])) rest.push_back(op.labels[i]);
    else dims.push_back(int64_t(i));
  }
  if (dims.empty()) return;
  op.t = sum(op.t, dims, false);
  op.labels = rest;
}

int64_t size_of(const Operand& op, int label) {
  auto it = std::find(op.labels.begin(), op.labels.end(), label);
  return it == op.labels.end() ? 1 : op.t.size(int64_t(it - op.labels.begin()));
}

// Permutes op to `order` (every label of op, in that order) and expands size-1 dims to `sizes`.
Tensor arrange(const Operand& op, const Labels& order, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> perm;
  for (int l : order)
    perm.push_back(int64_t(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin()));
  Tensor t = permute(op.t, perm);
  return expand(t, Shape(sizes.begin(), sizes.end()));
}

// a x b over the labels still needed (keep): batch = shared and kept, contracted = shared and
// not kept, then the labels of a alone and of b alone.
Operand combine(const Operand& a, const Operand& b, const std::set<int>& keep) {
  Labels batch, contracted, a_only, b_only;
  for (int l : a.labels) {
    const bool in_b = std::count(b.labels.begin(), b.labels.end(), l) > 0;
    if (in_b) (keep.count(l) ? batch : contracted).push_back(l);
    else a_only.push_back(l);
  }
  for (int l : b.labels) {
    if (!std::count(a.labels.begin(), a.labels.end(), l)) b_only.push_back(l);
  }
  auto sizes = [&](const Labels& ls) {
    std::vector<int64_t> s;
    for (int l : ls) s.push_back(std::max(size_of(a, l), size_of(b, l)));
    return s;
  };
  auto product = [](const std::vector<int64_t>& s) {
    int64_t p = 1;
    for (int64_t v : s) p *= v;
    return p;
  };
  const auto sb = sizes(batch), sk = sizes(contracted), sa = sizes(a_only), sbo = sizes(b_only);
  for (int l : contracted) {
    KILN_CHECK(size_of(a, l) == size_of(b, l), ShapeError, "einsum: contracted label '",
               char(l < 256 ? l : '.'),
               "' has sizes ", size_of(a, l), " and ", size_of(b, l));
  }
  Labels ao = batch, bo = batch;
  ao.insert(ao.end(), a_only.begin(), a_only.end());
  ao.insert(ao.end(), contracted.begin(), contracted.end());
  bo.insert(bo.end(), contracted.begin(), contracted.end());
  bo.insert(bo.end(), b_only.begin(), b_only.end());
  std::vector<int64_t> as = sb, bs = sb;
  as.insert(as.end(), sa.begin(), sa.end());
  as.insert(as.end(), sk.begin(), sk.end());
  bs.insert(bs.end(), sk.begin(), sk.end());
  bs.insert(bs.end(), sbo.begin(), sbo.end());
  const int64_t nb = product(sb), m = product(sa), k = product(sk), n = product(sbo);
  Tensor am = reshape(arrange(a, ao, as), Shape{nb, m, k});
  Tensor bm = reshape(arrange(b, bo, bs), Shape{nb, k, n});
  Tensor r = matmul(am, bm);
  std::vector<int64_t> rs = sb;
  rs.insert(rs.end(), sa.begin(), sa.end());
  rs.insert(rs.end(), sbo.begin(), sbo.end());
  Labels rl = batch;
  rl.insert(rl.end(), a_only.begin(), a_only.end());
  rl.insert(rl.end(), b_only.begin(), b_only.end());
  return {reshape(r, Shape(rs.begin(), rs.end())), rl};
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char ch : equation) {
    if (ch != ' ') eq += ch;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    const size_t length = comma == std::string::npos ? std::string::npos : comma - start;
    terms.push_back(lhs.substr(start, length));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(terms.size() == operands.size(), ValueError, "einsum: the equation has ",
             terms.size(), " operand terms but ", operands.size(), " operands were given");
  std::vector<Operand> ops;
  int64_t ellipsis_rank = 0;
  std::map<int, int> counts;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& t = operands[i];
    KILN_CHECK(t.defined(), ValueError, "einsum: operand ", i, " is undefined");
    Operand op{t, parse_term(terms[i], t.dim(), 0)};
    for (int l : op.labels) {
      if (l >= 256) ellipsis_rank = std::max<int64_t>(ellipsis_rank, l - 255);
    }
    for (int l : op.labels) counts[l]++;  // "ii" uses i twice: no output label (numpy)
    ops.push_back(std::move(op));
  }
  Labels out;
  if (arrow != std::string::npos) {
    out = parse_term(eq.substr(arrow + 2), -1, ellipsis_rank);
  } else {  // implicit: the ellipsis, then the labels used once, alphabetically
    for (int64_t k = ellipsis_rank; k > 0; --k) out.push_back(256 + int(k - 1));
    for (const auto& [l, c] : counts) {
      if (l < 256 && c == 1) out.push_back(l);
    }
  }
  std::set<int> out_set(out.begin(), out.end());
  KILN_CHECK(out_set.size() == out.size(), ValueError, "the output repeats a label");
  for (int l : out) {
    KILN_CHECK(counts.count(l), ValueError, "einsum: output label '", char(l < 256 ? l : '.'),
               "' is in no operand");
  }
  // Labels still needed after operand i: the output's and those of operands after i.
  auto needed_after = [&](size_t i) {
    std::set<int> keep = out_set;
    for (size_t j = i + 1; j < ops.size(); ++j)
      keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    take_diagonals(ops[i]);
    std::set<int> keep = needed_after(i);
    for (size_t j = 0; j < i; ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    sum_unneeded(ops[i], keep);
  }
  Operand acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) acc = combine(acc, ops[i], needed_after(i));
  sum_unneeded(acc, out_set);
  std::vector<int64_t> sizes;
  for (int l : out) sizes.push_back(size_of(acc, l));
  // Labels of the output that no remaining dim carries (broadcast ellipsis dims) are size 1.
  Operand full = acc;
  for (int l : out) {
    if (!std::count(full.labels.begin(), full.labels.end(), l)) {
      full.t = unsqueeze(full.t, full.t.dim());
      full.labels.push_back(l);
    }
  }
  return contiguous(arrange(full, out, sizes));
}

}  // namespace kiln
