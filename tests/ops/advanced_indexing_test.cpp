// Advanced indexing (index, index_put, index_put_) against a host reference: integer and bool
// indices, broadcasting, PyTorch's placement of the index dims (adjacent vs separated by a
// slice), negative indices, out-of-range errors, on every device.
#include <cmath>
#include <optional>

#include "ops/index_test_util.h"

namespace kiln {
namespace {

using test::bools;
using test::expect_error;
using test::expect_values;
using test::exact_values;
using test::ints;
using test::Layout;
using test::make;
using test::make_layout;
using test::OnEachDevice;
using test::ravel;
using test::unravel;

class AdvancedIndexingTest : public OnEachDevice {};

// A host index: integer values of a shape (nullopt: the whole dim).
struct HostIndex {
  std::vector<int64_t> v;
  Shape s;
};
using HostIndices = std::vector<std::optional<HostIndex>>;

Shape host_broadcast(Shape a, Shape b) {
  if (a.size() < b.size()) std::swap(a, b);
  Shape out = a;
  size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i)
    if (out[off + i] == 1) out[off + i] = b[i];
  return out;
}
// The value of index hi at coordinate c of the broadcast shape b.
int64_t host_at(const HostIndex& hi, const std::vector<int64_t>& c, const Shape& b) {
  std::vector<int64_t> cc(hi.s.size());
  size_t off = b.size() - hi.s.size();
  for (size_t i = 0; i < hi.s.size(); ++i) cc[i] = hi.s[i] == 1 ? 0 : c[off + i];
  return hi.v[size_t(ravel(cc, hi.s))];
}

// For each element of x[idx...] (row-major), the flat offset into x it reads; the result
// shape in *shape. Written from PyTorch's documented rule, independently of the kernel.
std::vector<int64_t> ref_positions(const Shape& xs, const HostIndices& idx, Shape* shape) {
  std::vector<size_t> pos;
  Shape b;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k]) {
      b = pos.empty() ? idx[k]->s : host_broadcast(b, idx[k]->s);
      pos.push_back(k);
    }
  bool adjacent = pos.back() - pos.front() + 1 == pos.size();
  // Result dims: ('x', dim) or ('b', j).
  std::vector<std::pair<char, size_t>> dims;
  if (adjacent) {
    for (size_t d = 0; d < pos.front(); ++d) dims.push_back({'x', d});
    for (size_t j = 0; j < b.size(); ++j) dims.push_back({'b', j});
    for (size_t d = pos.back() + 1; d < xs.size(); ++d) dims.push_back({'x', d});
  } else {
    for (size_t j = 0; j < b.size(); ++j) dims.push_back({'b', j});
    for (size_t d = 0; d < xs.size(); ++d)
      if (d >= idx.size() || !idx[d]) dims.push_back({'x', d});
  }
  shape->clear();
  for (auto [k, i] : dims) shape->push_back(k == 'x' ? xs[i] : b[i]);
  std::vector<int64_t> out;
  for (int64_t e = 0; e < numel_of(*shape); ++e) {
    auto c = unravel(e, *shape);
    std::vector<int64_t> bc(b.size()), xc(xs.size());
    for (size_t r = 0; r < dims.size(); ++r)
      (dims[r].first == 'x' ? xc[dims[r].second] : bc[dims[r].second]) = c[r];
    for (size_t k : pos) {
      int64_t v = host_at(*idx[k], bc, b);
      xc[k] = v < 0 ? v + xs[k] : v;
    }
    out.push_back(ravel(xc, xs));
  }
  return out;
}

std::vector<double> ref_index(const std::vector<double>& x, const Shape& xs,
                              const HostIndices& idx, Shape* shape) {
  std::vector<double> out;
  for (int64_t p : ref_positions(xs, idx, shape)) out.push_back(x[size_t(p)]);
  return out;
}

std::vector<Tensor> to_tensors(const HostIndices& idx, Device dev, DType t = DType::I64) {
  std::vector<Tensor> out;
  for (const auto& i : idx) out.push_back(i ? ints(i->v, i->s, dev, t) : Tensor());
  return out;
}

void check_index(const std::vector<double>& xv, const Tensor& x, const HostIndices& idx,
                 Device dev, const std::string& what, DType it = DType::I64) {
  Shape s;
  auto e = ref_index(xv, x.shape(), idx, &s);
  expect_values(index(x, to_tensors(idx, dev, it)), s, e, what);
}

TEST_P(AdvancedIndexingTest, OneIndexTensorWithNegatives) {
  auto xv = exact_values(20, DType::F32, 1);
  Tensor x = make(xv, {4, 5}, DType::F32, device());
  check_index(xv, x, {HostIndex{{3, -1, 0, -4}, {4}}}, device(), "dim 0");
  check_index(xv, x, {std::nullopt, HostIndex{{4, -5, 2}, {3}}}, device(), "dim 1", DType::I32);
  check_index(xv, x, {HostIndex{{1, 2, 3, 0, 1, 1}, {2, 3}}}, device(), "2-d index");
}

TEST_P(AdvancedIndexingTest, EveryDtype) {
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(24, t, 2);
    Tensor x = make(xv, {2, 3, 4}, t, device());
    check_index(xv, x, {std::nullopt, HostIndex{{2, 0}, {2}}, HostIndex{{3, 1}, {2}}}, device(),
                std::string(dtype_name(t)));
  }
}

TEST_P(AdvancedIndexingTest, AdjacentIndicesStayInPlace) {
  auto xv = exact_values(210, DType::I64, 3);
  Tensor x = make(xv, {5, 6, 7}, DType::I64, device());
  // x[:, i1, i2] with i1 [2, 1] and i2 [3] broadcast to [2, 3]: result [5, 2, 3].
  HostIndices idx = {std::nullopt, HostIndex{{1, 5}, {2, 1}}, HostIndex{{0, 6, 3}, {3}}};
  Tensor y = index(x, to_tensors(idx, device()));
  EXPECT_EQ(y.shape(), (Shape{5, 2, 3}));
  check_index(xv, x, idx, device(), "adjacent middle");
  // x[i0, i1] with i0, i1 [2, 3]: result [2, 3, 7].
  HostIndices lead = {HostIndex{{0, 1, 2, 3, 4, 4}, {2, 3}}, HostIndex{{5, 4, 3, 2, 1, 0}, {2, 3}}};
  EXPECT_EQ(index(x, to_tensors(lead, device())).shape(), (Shape{2, 3, 7}));
  check_index(xv, x, lead, device(), "adjacent leading");
}

TEST_P(AdvancedIndexingTest, SeparatedIndicesGoFirst) {
  auto xv = exact_values(210, DType::F64, 4);
  Tensor x = make(xv, {5, 6, 7}, DType::F64, device());
  // x[i0, :, i2] with i0, i2 broadcast to [2, 3]: result [2, 3, 6].
  HostIndices idx = {HostIndex{{4, 0}, {2, 1}}, std::nullopt, HostIndex{{6, 0, -1}, {1, 3}}};
  Tensor y = index(x, to_tensors(idx, device()));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 6}));
  check_index(xv, x, idx, device(), "separated");
  Tensor x4 = make(exact_values(120, DType::F64, 5), {2, 3, 4, 5}, DType::F64, device());
  HostIndices idx4 = {std::nullopt, HostIndex{{2, 1}, {2}}, std::nullopt, HostIndex{{4, 0}, {2}}};
  EXPECT_EQ(index(x4, to_tensors(idx4, device())).shape(), (Shape{2, 2, 4}));
  check_index(exact_values(120, DType::F64, 5), x4, idx4, device(), "separated 4-d");
}

TEST_P(AdvancedIndexingTest, NonContiguousTensorAndIndex) {
  auto xv = exact_values(60, DType::BF16, 6);
  for (Layout l : {Layout::Transposed, Layout::Strided}) {
    Tensor x = make_layout(xv, {3, 4, 5}, DType::BF16, device(), l);
    Tensor i0 = ints({2, 7, 0, 7, 1, 7}, device()).slice(0, 0, std::nullopt, 2);  // [2, 0, 1]
    Tensor i2 = ints({4, 3, 0, 1, 2, 4}, {3, 2}, device()).transpose(0, 1);     // [2, 3]
    Shape s;
    HostIndices h = {HostIndex{{2, 0, 1}, {3}}, std::nullopt,
                     HostIndex{{4, 0, 2, 3, 1, 4}, {2, 3}}};
    auto e = ref_index(xv, {3, 4, 5}, h, &s);
    expect_values(index(x, {i0, Tensor(), i2}), s, e);
  }
}

TEST_P(AdvancedIndexingTest, BoolMasks) {
  auto xv = exact_values(12, DType::F32, 7);
  Tensor x = make(xv, {3, 4}, DType::F32, device());
  std::vector<bool> m = {true, false, true, true, false, false, true, false, false, true, true, true};
  std::vector<double> e;
  for (size_t i = 0; i < 12; ++i)
    if (m[i]) e.push_back(xv[i]);
  expect_values(index(x, {bools(m, {3, 4}, device())}), {int64_t(e.size())}, e, "full mask");
  // A row mask, and a column mask after a full slice.
  check_index(xv, x, {HostIndex{{0, 2}, {2}}}, device(), "ref");
  Shape s;
  auto rows = ref_index(xv, {3, 4}, {HostIndex{{0, 2}, {2}}}, &s);
  expect_values(index(x, {bools({true, false, true}, {3}, device())}), s, rows, "row mask");
  auto cols = ref_index(xv, {3, 4}, {std::nullopt, HostIndex{{1, 3}, {2}}}, &s);
  expect_values(index(x, {Tensor(), bools({false, true, false, true}, {4}, device())}), s, cols,
                "column mask");
  // A mask together with an integer index: the mask's coordinates broadcast with it.
  auto mixed = ref_index(xv, {3, 4}, {HostIndex{{0, 2}, {2}}, HostIndex{{3, 1}, {2}}}, &s);
  expect_values(index(x, {bools({true, false, true}, {3}, device()), ints({3, 1}, device())}), s,
                mixed, "mask + int");
  expect_values(index(x, {bools({false, false, false}, {3}, device())}), {0, 4}, {}, "all false");
}

TEST_P(AdvancedIndexingTest, ZeroDimIndices) {
  auto xv = exact_values(12, DType::I32, 8);
  Tensor x = make(xv, {3, 4}, DType::I32, device());
  // A 0-d integer index removes the dim (like select, but a copy).
  check_index(xv, x, {HostIndex{{2}, {}}}, device(), "0-d int");
  check_index(xv, x, {HostIndex{{1}, {}}, HostIndex{{-1}, {}}}, device(), "two 0-d ints");
  // x[True] adds a dim of size 1, x[False] one of size 0.
  expect_values(index(x, {bools({true}, {}, device())}), {1, 3, 4}, xv, "true");
  expect_values(index(x, {bools({false}, {}, device())}), {0, 3, 4}, {}, "false");
  Tensor s = make({5}, {}, DType::F32, device());
  expect_values(index(s, {bools({true}, {}, device())}), {1}, {5}, "0-d tensor[True]");
}

TEST_P(AdvancedIndexingTest, EmptyIndexAndEmptyTensor) {
  Tensor x = make(exact_values(12, DType::F32, 9), {3, 4}, DType::F32, device());
  expect_values(index(x, {ints({}, device())}), {0, 4}, {});
  expect_values(index(x, {Tensor(), ints({}, {0, 2}, device())}), {3, 0, 2}, {});
  Tensor e = make({}, {0, 4}, DType::F32, device());
  expect_values(index(e, {Tensor(), ints({1, 3}, device())}), {0, 2}, {});
}

TEST_P(AdvancedIndexingTest, OutOfRangeIndices) {
  Tensor x = make(exact_values(12, DType::F32, 10), {3, 4}, DType::F32, device());
  expect_error<IndexError>([&] { index(x, {ints({0, 3}, device())}).cpu(); },
                           {"index 3 is out of bounds for dimension 0 with size 3"}, "too large");
  expect_error<IndexError>([&] { index(x, {Tensor(), ints({-5}, device())}).cpu(); },
                           {"index -5 is out of bounds for dimension 1 with size 4"}, "negative");
  expect_error<IndexError>([&] { index(x, {ints({0}, device()), ints({4}, device(), DType::I32)}).cpu(); },
                           {"index 4 is out of bounds for dimension 1"}, "int32 too large");
}

TEST_P(AdvancedIndexingTest, BadIndices) {
  Tensor x = make(exact_values(12, DType::F32, 11), {3, 4}, DType::F32, device());
  expect_error<IndexError>(
      [&] { index(x, {ints({0}, device()), ints({0}, device()), ints({0}, device())}); },
      {"too many indices for tensor of dimension 2 (got 3)"});
  expect_error<IndexError>([&] { index(x, {bools({true, false}, {2}, device())}); },
                           {"shape of the mask [2]", "[3, 4]", "index 0"});
  expect_error<IndexError>([&] { index(x, {ints({0, 1}, device()), ints({0, 1, 2}, device())}); },
                           {"could not be broadcast", "[2], [3]"});
  expect_error<IndexError>([&] { index(x, {make({0}, {1}, DType::F32, device())}); },
                           {"long, int or bool", "float32"});
}

// ---- index_put ----

std::vector<double> ref_put(std::vector<double> x, const Shape& xs, const HostIndices& idx,
                            const std::vector<double>& values, bool accumulate) {
  Shape s;
  auto pos = ref_positions(xs, idx, &s);
  for (size_t i = 0; i < pos.size(); ++i) {
    double v = values.size() == 1 ? values[0] : values[i];
    x[size_t(pos[i])] = accumulate ? x[size_t(pos[i])] + v : v;
  }
  return x;
}

TEST_P(AdvancedIndexingTest, IndexPutEveryDtype) {
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(12, t, 12), vv = exact_values(3, t, 13);
    Tensor x = make(xv, {3, 4}, t, device());
    HostIndices idx = {HostIndex{{2, 0, -1}, {3}}, HostIndex{{1, 3, 0}, {3}}};
    Tensor y = index_put(x, to_tensors(idx, device()), make(vv, {3}, t, device()));
    expect_values(y, {3, 4}, ref_put(xv, {3, 4}, idx, vv, false), std::string(dtype_name(t)));
    expect_values(x, {3, 4}, xv, "input unchanged");
  }
}

TEST_P(AdvancedIndexingTest, IndexPutBroadcastValuesAndSeparatedDims) {
  auto xv = exact_values(60, DType::F32, 14);
  Tensor x = make(xv, {3, 4, 5}, DType::F32, device());
  // x[i0, :, i2] = v: result dims [2, 4]; values [4] broadcast over the index dim.
  HostIndices idx = {HostIndex{{0, 2}, {2}}, std::nullopt, HostIndex{{4, 1}, {2}}};
  auto vv = exact_values(4, DType::F32, 15);
  std::vector<double> full;
  for (int i = 0; i < 2; ++i) full.insert(full.end(), vv.begin(), vv.end());
  expect_values(index_put(x, to_tensors(idx, device()), make(vv, {4}, DType::F32, device())),
                {3, 4, 5}, ref_put(xv, {3, 4, 5}, idx, full, false), "separated");
  // A single value everywhere, given as a 0-d tensor and as [1, 1].
  HostIndices rows = {HostIndex{{1}, {1}}};
  expect_values(index_put(x, to_tensors(rows, device()), make({-1}, {}, DType::F32, device())),
                {3, 4, 5}, ref_put(xv, {3, 4, 5}, rows, {-1}, false), "0-d value");
  expect_values(index_put(x, to_tensors(rows, device()), make({-1}, {1, 1}, DType::F32, device())),
                {3, 4, 5}, ref_put(xv, {3, 4, 5}, rows, {-1}, false), "[1, 1] value");
}

TEST_P(AdvancedIndexingTest, IndexPutAccumulateDuplicates) {
  for (DType t : {DType::F64, DType::F32, DType::I64, DType::I16, DType::F16}) {
    auto xv = exact_values(10, t, 16), vv = exact_values(6, t, 17);
    // f16 adds round at every step (as PyTorch); integers keep every partial sum exact.
    if (t == DType::F16)
      for (auto* v : {&xv, &vv})
        for (auto& e : *v) e = std::round(e);
    HostIndices idx = {HostIndex{{1, 1, 7, -9, 0, 1}, {6}}};
    Tensor y = index_put(make(xv, {10}, t, device()), to_tensors(idx, device()),
                         make(vv, {6}, t, device()), true);
    expect_close(y, {10}, ref_put(xv, {10}, idx, vv, true), test::tol_for(t),
                 std::string(dtype_name(t)));
  }
  // bool accumulate is a logical or.
  Tensor b = make({0, 1, 0}, {3}, DType::Bool, device());
  expect_values(index_put(b, {ints({0, 0, 1}, device())}, make({1, 0, 0}, {3}, DType::Bool, device()), true),
                {3}, {1, 1, 0}, "bool");
}

TEST_P(AdvancedIndexingTest, IndexPutInPlaceOnNonContiguous) {
  auto xv = exact_values(12, DType::I32, 18);
  Tensor x = make_layout(xv, {3, 4}, DType::I32, device(), Layout::Transposed);
  uint64_t v0 = x.version();
  HostIndices idx = {std::nullopt, HostIndex{{3, 0}, {2}}};
  auto vv = exact_values(6, DType::I32, 19);
  Tensor& r = index_put_(x, to_tensors(idx, device()), make(vv, {3, 2}, DType::I32, device()), true);
  EXPECT_TRUE(r.is_same(x));
  EXPECT_GT(x.version(), v0);
  expect_values(x, {3, 4}, ref_put(xv, {3, 4}, idx, vv, true));
}

TEST_P(AdvancedIndexingTest, IndexPutBoolMask) {
  auto xv = exact_values(12, DType::F64, 20);
  Tensor x = make(xv, {3, 4}, DType::F64, device());
  std::vector<bool> m(12);
  std::vector<double> e = xv;
  for (size_t i = 0; i < 12; ++i) {
    m[i] = xv[i] > 0;
    if (m[i]) e[i] = 0;
  }
  index_put_(x, {bools(m, {3, 4}, device())}, make({0}, {}, DType::F64, device()));
  expect_values(x, {3, 4}, e, "x[x > 0] = 0");
  Tensor y = make(xv, {3, 4}, DType::F64, device());
  e = xv;
  for (size_t i = 0; i < 4; ++i) e[4 + i] = 7;
  expect_values(index_put(y, {bools({false, true, false}, {3}, device())},
                          make({7}, {1}, DType::F64, device())),
                {3, 4}, e, "row mask");
}

TEST_P(AdvancedIndexingTest, IndexPutErrorsLeaveInputUntouched) {
  auto xv = exact_values(6, DType::F32, 21);
  Tensor x = make(xv, {2, 3}, DType::F32, device());
  Tensor v = make({1, 2}, {2}, DType::F32, device());
  Tensor v3 = make({1, 2, 3}, {3}, DType::F32, device());
  expect_error<IndexError>([&] { index_put_(x, {ints({0, 2}, device())}, v3); x.cpu(); },
                           {"index 2 is out of bounds for dimension 0 with size 2"}, "too large");
  expect_error<IndexError>([&] { index_put_(x, {Tensor(), ints({-4, 0}, device())}, v, true); x.cpu(); },
                           {"index -4 is out of bounds for dimension 1 with size 3"}, "negative");
  expect_values(x, {2, 3}, xv, "unchanged after errors");
  expect_error<ShapeError>([&] { index_put(x, {ints({0, 1}, device())}, make({1, 2}, {2}, DType::F32, device())); },
                           {"value tensor of shape [2]", "indexing result of shape [2, 3]"});
  expect_error<IndexError>([&] { index_put(x, {ints({0}, device()), ints({0}, device()), ints({0}, device())}, v); },
                           {"too many indices"});
}


TEST_P(AdvancedIndexingTest, IndexPutValuesAliasingSelf) {
  // x[1:4] = x[0:3] through index_put_: the values are read before anything is written.
  Tensor x = make({0, 1, 2, 3, 4, 5}, {6}, DType::I64, device());
  index_put_(x, {ints({1, 2, 3}, device())}, x.slice(0, 0, 3));
  expect_values(x, {6}, {0, 0, 1, 2, 4, 5});
  // An index tensor that is a view of x itself.
  Tensor y = make({2, 0, 1}, {3}, DType::I64, device());
  index_put_(y, {y.slice(0, 0, 2)}, make({7, 8}, {2}, DType::I64, device()));
  expect_values(y, {3}, {8, 0, 7});
}

TEST_P(AdvancedIndexingTest, MixedInt32AndInt64Indices) {
  auto xv = exact_values(30, DType::F64, 30);
  Tensor x = make(xv, {5, 6}, DType::F64, device());
  Shape s;
  auto e = ref_index(xv, {5, 6}, {HostIndex{{4, 0, 2}, {3, 1}}, HostIndex{{5, -6}, {2}}}, &s);
  expect_values(index(x, {ints({4, 0, 2}, {3, 1}, device(), DType::I32), ints({5, -6}, device())}),
                s, e);
}

TEST_P(AdvancedIndexingTest, BoolMaskOverTrailingDimsOfTransposed) {
  auto xv = exact_values(24, DType::I16, 31);
  Tensor x = make_layout(xv, {2, 3, 4}, DType::I16, device(), Layout::Transposed);
  std::vector<bool> m = {true, false, false, true, false, true, true, false, false, false, true, true};
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < 12; ++i)
    if (m[size_t(i)]) {
      r.push_back(i / 4);
      c.push_back(i % 4);
    }
  Shape s;
  auto e = ref_index(xv, {2, 3, 4},
                     {std::nullopt, HostIndex{r, {int64_t(r.size())}}, HostIndex{c, {int64_t(c.size())}}},
                     &s);
  Tensor y = index(x, {Tensor(), bools(m, {3, 4}, device())});
  EXPECT_EQ(y.shape(), (Shape{2, int64_t(r.size())}));
  expect_values(y, s, e);
}

TEST_P(AdvancedIndexingTest, IndexPutAccumulateSeparatedWithDuplicates) {
  auto xv = exact_values(24, DType::F64, 32);
  Tensor x = make(xv, {2, 3, 4}, DType::F64, device());
  HostIndices idx = {HostIndex{{1, 1, 0}, {3}}, std::nullopt, HostIndex{{3, 3, -4}, {3}}};
  auto vv = exact_values(9, DType::F64, 33);  // result shape [3, 3]
  Tensor y = index_put(x, to_tensors(idx, device()), make(vv, {3, 3}, DType::F64, device()), true);
  expect_close(y, {2, 3, 4}, ref_put(xv, {2, 3, 4}, idx, vv, true), test::tol_for(DType::F64));
}

TEST_P(AdvancedIndexingTest, IndexPutBroadcastIndexShapes) {
  auto xv = exact_values(20, DType::BF16, 34);
  Tensor x = make(xv, {4, 5}, DType::BF16, device());
  HostIndices idx = {HostIndex{{3, 0}, {2, 1}}, HostIndex{{4, 1, 2}, {3}}};
  auto vv = exact_values(6, DType::BF16, 35);
  Tensor y = index_put(x, to_tensors(idx, device(), DType::I32), make(vv, {2, 3}, DType::BF16, device()));
  expect_values(y, {4, 5}, ref_put(xv, {4, 5}, idx, vv, false));
}

TEST_P(AdvancedIndexingTest, RandomIndexingAgainstReference) {
  Shape xs{4, 5, 6};
  auto xv = exact_values(120, DType::F32, 36);
  Tensor x = make_layout(xv, xs, DType::F32, device(), Layout::Strided);
  const std::vector<std::vector<bool>> patterns = {{true, false, true}, {false, true, true},
                                                   {true, true, true}, {true, true, false}};
  uint32_t seed = 37;
  for (const auto& pat : patterns) {
    HostIndices h;
    Shape b{2, 3};
    for (size_t d = 0; d < 3; ++d) {
      if (!pat[d]) {
        h.push_back(std::nullopt);
        continue;
      }
      auto r = test::random_values(6, -double(xs[d]), double(xs[d]), seed++, true);
      h.push_back(HostIndex{std::vector<int64_t>(r.begin(), r.end()), b});
    }
    check_index(xv, x, h, device(), "pattern");
  }
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(AdvancedIndexingTest);

}  // namespace kiln
