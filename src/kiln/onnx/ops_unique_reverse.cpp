// Data-dependent rearrangements: Unique (values or slices along an axis, sorted or in order
// of first occurrence, with first indices, inverse indices and counts; decided on the host,
// gathered on the device) and ReverseSequence (the first len[b] steps of each batch entry
// reversed, as one gather).
#include <algorithm>
#include <map>
#include <numeric>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

Tensor int64_tensor(const OpContext& ctx, const std::vector<int64_t>& v) {
  return ctx.on_device(tensor_from(v, Shape{int64_t(v.size())}));
}

std::vector<Tensor> op_unique(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.has_attr("axis");
  const int64_t axis = has_axis ? normalize_axis(ctx.attr_int("axis"), x.dim()) : 0;
  Tensor flat = has_axis ? movedim(x, axis, 0) : reshape(x, Shape{x.numel()});
  const int64_t n = flat.dim() == 0 ? 1 : flat.size(0);
  const int64_t width = n == 0 ? 0 : flat.numel() / n;
  // Rows as doubles: exact for every kiln type but int64 values beyond 2^53 (compared
  // approximately there).
  const std::vector<double> v = cast(contiguous(flat), DType::F64).to_vector<double>();
  auto row_less = [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(v.begin() + a * width, v.begin() + (a + 1) * width, v.begin() + b * width,
                                        v.begin() + (b + 1) * width);
  };
  std::map<int64_t, int64_t, decltype(row_less)> first(row_less);  // representative row -> unique id
  std::vector<int64_t> firsts, inverse(static_cast<size_t>(n)), counts;
  for (int64_t i = 0; i < n; ++i) {
    auto [it, fresh] = first.emplace(i, int64_t(firsts.size()));
    if (fresh) {
      firsts.push_back(i);
      counts.push_back(0);
    }
    inverse[size_t(i)] = it->second;
    counts[size_t(it->second)]++;
  }
  // Unique ids are in order of first occurrence; sorted renumbers them by value.
  std::vector<int64_t> order(firsts.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted) std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row_less(firsts[a], firsts[b]); });
  std::vector<int64_t> rank(order.size());
  for (size_t r = 0; r < order.size(); ++r) rank[size_t(order[r])] = int64_t(r);
  std::vector<int64_t> indices, sorted_counts;
  for (int64_t id : order) {
    indices.push_back(firsts[size_t(id)]);
    sorted_counts.push_back(counts[size_t(id)]);
  }
  for (auto& id : inverse) id = rank[size_t(id)];
  Tensor idx = int64_tensor(ctx, indices);
  Tensor y = has_axis ? index_select(x, axis, idx) : index_select(reshape(x, Shape{x.numel()}), 0, idx);
  return {y, idx, int64_tensor(ctx, inverse), int64_tensor(ctx, sorted_counts)};
}

std::vector<Tensor> op_reverse_sequence(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t time_axis = ctx.attr_int("time_axis", 0), batch_axis = ctx.attr_int("batch_axis", 1);
  KILN_CHECK(x.dim() >= 2 && ((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0)),
             ValueError, "time_axis and batch_axis must be 0 and 1 in either order, got ", time_axis, " and ",
             batch_axis);
  const int64_t steps = x.size(time_axis), batch = x.size(batch_axis);
  const std::vector<int64_t> lens = cast(ctx.input(1), DType::I64).to_vector<int64_t>();
  KILN_CHECK(int64_t(lens.size()) == batch, ShapeError, "sequence_lens has ", lens.size(), " entries for a batch of ",
             batch);
  // source[t, b] (laid out along time_axis, batch_axis) = where step t of entry b comes from.
  std::vector<int64_t> source(size_t(steps * batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[size_t(b)];
    KILN_CHECK(len >= 0 && len <= steps, ValueError, "sequence length ", len, " of entry ", b,
               " is outside 0..", steps);
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t from = t < len ? len - 1 - t : t;
      source[size_t(time_axis == 0 ? t * batch + b : b * steps + t)] = from;
    }
  }
  Shape s(size_t(x.dim()), 1);
  s[size_t(time_axis)] = steps;
  s[size_t(batch_axis)] = batch;
  Tensor index = contiguous(expand(reshape(ctx.on_device(tensor_from(source, Shape{int64_t(source.size())})), s), x.shape()));
  return one(gather(x, time_axis, index));
}

}  // namespace

void register_unique_reverse_ops(OpTable& t) {
  t.add("Unique", op_unique);
  t.add("ReverseSequence", op_reverse_sequence);
}

}  // namespace kiln::onnx
