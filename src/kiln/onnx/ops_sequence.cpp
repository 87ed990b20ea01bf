// Sequence operators: ONNX's list-of-tensors values (Value::sequence), built, indexed,
// edited, split from and concatenated into tensors; SequenceMap runs its body per element.
// Optionals: an empty one is Value::none, a full one is simply the value it holds.
#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

std::vector<Tensor> sequence_out(OpContext& ctx, std::vector<Tensor> items) {
  ctx.set_value_output(0, Value::make_sequence(std::move(items)));
  return {};
}

// A position into a sequence of n elements (negative counts from the end); `end_ok` allows n
// (insertion at the back).
size_t position(int64_t pos, size_t n, bool end_ok) {
  const int64_t size = int64_t(n);
  const int64_t p = pos < 0 ? pos + size : pos;
  KILN_CHECK(p >= 0 && (p < size || (end_ok && p == size)), IndexError, "position ", pos,
             " is out of range for a sequence of ", n, " tensors");
  return size_t(p);
}

std::vector<Tensor> op_sequence_construct(OpContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) items.push_back(ctx.input(i));
  for (size_t i = 1; i < items.size(); ++i) {
    KILN_CHECK(items[i].dtype() == items[0].dtype(), TypeError, "input ", i, " is ", items[i].dtype(),
               " but input 0 is ", items[0].dtype(), " (a sequence holds one element type)");
  }
  return sequence_out(ctx, std::move(items));
}

std::vector<Tensor> op_sequence_empty(OpContext& ctx) { return sequence_out(ctx, {}); }

std::vector<Tensor> op_sequence_at(OpContext& ctx) {
  const auto& seq = ctx.sequence_input(0);
  return one(seq[position(int64_t(ctx.input_scalar(1)), seq.size(), false)]);
}

std::vector<Tensor> op_sequence_insert(OpContext& ctx) {
  std::vector<Tensor> seq = ctx.sequence_input(0);
  const Tensor& t = ctx.input(1);
  KILN_CHECK(seq.empty() || seq[0].dtype() == t.dtype(), TypeError, "cannot insert a ", t.dtype(),
             " tensor into a sequence of ", seq[0].dtype());
  const size_t at = ctx.has_input(2) ? position(int64_t(ctx.input_scalar(2)), seq.size(), true) : seq.size();
  seq.insert(seq.begin() + std::ptrdiff_t(at), t);
  return sequence_out(ctx, std::move(seq));
}

std::vector<Tensor> op_sequence_erase(OpContext& ctx) {
  std::vector<Tensor> seq = ctx.sequence_input(0);
  KILN_CHECK(!seq.empty(), IndexError, "cannot erase from an empty sequence");
  const size_t at = ctx.has_input(1) ? position(int64_t(ctx.input_scalar(1)), seq.size(), false) : seq.size() - 1;
  seq.erase(seq.begin() + std::ptrdiff_t(at));
  return sequence_out(ctx, std::move(seq));
}

std::vector<Tensor> op_sequence_length(OpContext& ctx) {
  const int64_t n = int64_t(ctx.sequence_input(0).size());
  return one(ctx.on_device(scalar_tensor(n, TensorOptions(DType::I64))));
}

// split: absent (pieces of 1, squeezed unless keepdims), a scalar (pieces of that size, the
// last one shorter) or 1-d sizes.
std::vector<Tensor> op_split_to_sequence(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.dim());
  if (!ctx.has_input(1)) {
    std::vector<Tensor> parts = split(x, int64_t(1), axis);
    if (ctx.attr_int("keepdims", 1) == 0) {
      for (auto& p : parts) p = squeeze(p, {axis});
    }
    return sequence_out(ctx, std::move(parts));
  }
  const Tensor& s = ctx.input(1);
  if (s.dim() == 0) {
    const int64_t size = int64_t(ctx.input_scalar(1));
    KILN_CHECK(size > 0, ValueError, "split size must be positive, got ", size);
    return sequence_out(ctx, split(x, size, axis));
  }
  std::vector<int64_t> sizes = ctx.input_ints(1);
  int64_t total = 0;
  for (int64_t v : sizes) total += v;
  KILN_CHECK(total == x.size(axis), ShapeError, "split sizes add up to ", total, " but axis ", axis,
             " has size ", x.size(axis));
  return sequence_out(ctx, split(x, sizes, axis));
}

std::vector<Tensor> op_concat_from_sequence(OpContext& ctx) {
  const auto& seq = ctx.sequence_input(0);
  KILN_CHECK(!seq.empty(), ValueError, "cannot concatenate an empty sequence");
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  const int64_t rank = seq[0].dim() + (new_axis ? 1 : 0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), rank);
  return one(new_axis ? stack(seq, axis) : cat(seq, axis));
}

// Inputs: a sequence, then sequences (same length) or tensors (given to every call).
std::vector<Tensor> op_sequence_map(OpContext& ctx) {
  const pb::GraphProto& body = ctx.attr_graph("body");
  const size_t n = ctx.sequence_input(0).size();
  for (size_t j = 1; j < ctx.num_inputs(); ++j) {
    const Value& v = ctx.value_input(j);
    KILN_CHECK(!v.is_sequence() || v.sequence->size() == n, ShapeError, "input ", j, " is a sequence of ",
               v.is_sequence() ? v.sequence->size() : 0, " tensors; input 0 has ", n);
  }
  std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value> in;
    for (size_t j = 0; j < ctx.num_inputs(); ++j) {
      const Value& v = ctx.value_input(j);
      in.emplace_back(v.is_sequence() ? (*v.sequence)[i] : v.tensor);
    }
    std::vector<Value> r = ctx.run_graph(body, std::move(in));
    KILN_CHECK(r.size() == outs.size(), ValueError, "the body has ", r.size(), " outputs but the node has ",
               outs.size());
    for (size_t k = 0; k < r.size(); ++k) {
      KILN_CHECK(!r[k].is_sequence(), TypeError, "body output ", k, " must be a tensor");
      outs[k].push_back(r[k].tensor);
    }
  }
  for (size_t k = 0; k < outs.size(); ++k) ctx.set_value_output(k, Value::make_sequence(std::move(outs[k])));
  return {};
}

std::vector<Tensor> op_optional(OpContext& ctx) {
  ctx.set_value_output(0, ctx.has_input(0) ? ctx.value_input(0) : Value::make_none());
  return {};
}

std::vector<Tensor> op_optional_has_element(OpContext& ctx) {
  const bool has = ctx.has_input(0) && !ctx.value_input(0).none;
  return one(ctx.on_device(scalar_tensor(has, TensorOptions(DType::Bool))));
}

std::vector<Tensor> op_optional_get_element(OpContext& ctx) {
  const Value& v = ctx.value_input(0);
  KILN_CHECK(!v.none, ValueError, "the optional is empty");
  ctx.set_value_output(0, v);
  return {};
}

}  // namespace

void register_sequence_ops(OpTable& t) {
  t.add("SequenceConstruct", op_sequence_construct);
  t.add("SequenceEmpty", op_sequence_empty);
  t.add("SequenceAt", op_sequence_at);
  t.add("SequenceInsert", op_sequence_insert);
  t.add("SequenceErase", op_sequence_erase);
  t.add("SequenceLength", op_sequence_length);
  t.add("SplitToSequence", op_split_to_sequence);
  t.add("ConcatFromSequence", op_concat_from_sequence);
  t.add("SequenceMap", op_sequence_map);
  t.add("Optional", op_optional);
  t.add("OptionalHasElement", op_optional_has_element);
  t.add("OptionalGetElement", op_optional_get_element);
}

}  // namespace kiln::onnx
