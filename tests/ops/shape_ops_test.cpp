// cat, stack, split, chunk, tril/triu, repeat, repeat_interleave, flip, roll, pad and
// one_hot against host references, in several dtypes and layouts, with PyTorch's shape
// rules and errors, on every device.
#include <algorithm>
#include <cmath>

#include "ops/index_test_util.h"

namespace kiln {
namespace {

using test::bools;
using test::expect_error;
using test::expect_ints;
using test::expect_values;
using test::exact_values;
using test::ints;
using test::Layout;
using test::make;
using test::make_layout;
using test::OnEachDevice;
using test::ravel;
using test::unravel;

class ShapeOpsTest : public OnEachDevice {};

struct HostT {
  std::vector<double> v;
  Shape s;
};

HostT ref_cat(const std::vector<HostT>& xs, int64_t d) {
  HostT out{{}, xs[0].s};
  out.s[size_t(d)] = 0;
  for (const auto& x : xs) out.s[size_t(d)] += x.s[size_t(d)];
  out.v.resize(size_t(numel_of(out.s)));
  for (int64_t i = 0; i < int64_t(out.v.size()); ++i) {
    auto c = unravel(i, out.s);
    for (const auto& x : xs) {
      if (c[size_t(d)] < x.s[size_t(d)]) {
        out.v[size_t(i)] = x.v[size_t(ravel(c, x.s))];
        break;
      }
      c[size_t(d)] -= x.s[size_t(d)];
    }
  }
  return out;
}

// ---- cat / stack ----

TEST_P(ShapeOpsTest, CatEveryDtypeEachDim) {
  for (DType t : test::all_dtypes()) {
    HostT a{exact_values(6, t, 1), {2, 3}}, b{exact_values(9, t, 2), {3, 3}},
        c{exact_values(4, t, 3), {2, 2}};
    Tensor ta = make(a.v, a.s, t, device());
    HostT r = ref_cat({a, b}, 0);
    Tensor y = cat({ta, make(b.v, b.s, t, device())}, 0);
    EXPECT_EQ(y.dtype(), t);
    expect_values(y, r.s, r.v, std::string(dtype_name(t)) + " dim 0");
    r = ref_cat({a, c, a}, 1);
    expect_values(cat({ta, make(c.v, c.s, t, device()), ta}, -1), r.s, r.v,
                  std::string(dtype_name(t)) + " dim -1");
  }
}

TEST_P(ShapeOpsTest, CatNonContiguousThreeDims) {
  HostT a{exact_values(24, DType::F32, 4), {2, 3, 4}}, b{exact_values(16, DType::F32, 5), {2, 2, 4}};
  Tensor ta = make_layout(a.v, a.s, DType::F32, device(), Layout::Transposed);
  Tensor tb = make_layout(b.v, b.s, DType::F32, device(), Layout::Strided);
  HostT r = ref_cat({a, b, a}, 1);
  expect_values(cat({ta, tb, ta}, 1), r.s, r.v);
  // An empty slab along the cat dim contributes nothing.
  HostT e{{}, {2, 0, 4}};
  r = ref_cat({a, e}, 1);
  expect_values(cat({ta, make({}, e.s, DType::F32, device())}, 1), r.s, r.v, "empty slab");
}

TEST_P(ShapeOpsTest, CatPromotesTypes) {
  Tensor i32 = make({1, 2}, {2}, DType::I32, device());
  Tensor f32 = make({0.5}, {1}, DType::F32, device());
  Tensor y = cat({i32, f32});
  EXPECT_EQ(y.dtype(), DType::F32);
  expect_values(y, {3}, {1, 2, 0.5});
  EXPECT_EQ(cat({make({1}, {1}, DType::Bool, device()), make({3}, {1}, DType::I64, device())}).dtype(),
            DType::I64);
  EXPECT_EQ(cat({make({1}, {1}, DType::F16, device()), make({3}, {1}, DType::BF16, device())}).dtype(),
            DType::F32);
  Tensor u8i8 = cat({make({200}, {1}, DType::U8, device()), make({-3}, {1}, DType::I8, device())});
  EXPECT_EQ(u8i8.dtype(), DType::I16);
  expect_values(u8i8, {2}, {200, -3});
}

TEST_P(ShapeOpsTest, CatSkipsLegacyEmptyTensors) {
  Tensor a = make({1, 2, 3, 4}, {2, 2}, DType::F32, device());
  Tensor empty1d = make({}, {0}, DType::F64, device());
  Tensor y = cat({empty1d, a, empty1d, a}, 1);
  EXPECT_EQ(y.dtype(), DType::F64);  // the skipped tensors still take part in promotion
  expect_values(y, {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4});
  Tensor z = cat({make({}, {0}, DType::I32, device()), make({}, {0}, DType::I32, device())});
  EXPECT_EQ(z.dtype(), DType::I32);
  expect_values(z, {0}, {});
  expect_values(cat({make({}, {0}, DType::F32, device()), make({5, 6}, {2}, DType::F32, device())}),
                {2}, {5, 6}, "1-d");
}

TEST_P(ShapeOpsTest, CatErrors) {
  Tensor a = make(exact_values(6, DType::F32, 6), {2, 3}, DType::F32, device());
  Tensor b = make(exact_values(8, DType::F32, 7), {2, 4}, DType::F32, device());
  expect_error<ShapeError>([&] { cat({a, b}, 0); },
                           {"Sizes of tensors must match except in dimension 0",
                            "Expected size 3 but got size 4 for tensor number 1"});
  expect_error<ShapeError>([&] { cat({a, make({1, 2, 3}, {3}, DType::F32, device())}); },
                           {"same number of dimensions", "got 2 and 1"});
  expect_error<ShapeError>([&] { cat({a, make({1}, {}, DType::F32, device())}); },
                           {"zero-dimensional tensor (at position 1)"});
  expect_error<ValueError>([&] { cat({}); }, {"non-empty"});
  expect_error<IndexError>([&] { cat({a, a}, 2); }, {"2"});
}

TEST_P(ShapeOpsTest, StackEachDim) {
  HostT a{exact_values(6, DType::I64, 8), {2, 3}}, b{exact_values(6, DType::I64, 9), {2, 3}};
  Tensor ta = make_layout(a.v, a.s, DType::I64, device(), Layout::Transposed);
  Tensor tb = make(b.v, b.s, DType::I64, device());
  for (int64_t d : {0, 1, 2}) {
    HostT ua = a, ub = b;
    ua.s.insert(ua.s.begin() + d, 1);
    ub.s.insert(ub.s.begin() + d, 1);
    HostT r = ref_cat({ua, ub, ua}, d);
    expect_values(stack({ta, tb, ta}, d == 2 ? -1 : d), r.s, r.v, "dim " + std::to_string(d));
  }
  expect_values(stack({make({1}, {}, DType::F32, device()), make({2}, {}, DType::F32, device())}),
                {2}, {1, 2}, "0-d");
  expect_values(stack({make({}, {0}, DType::F32, device())}, 1), {0, 1}, {}, "empty");
}

TEST_P(ShapeOpsTest, StackErrors) {
  Tensor a = make(exact_values(6, DType::F32, 10), {2, 3}, DType::F32, device());
  Tensor b = make(exact_values(8, DType::F32, 11), {2, 4}, DType::F32, device());
  expect_error<ShapeError>([&] { stack({a, a, b}); },
                           {"stack expects each tensor to be equal size", "[2, 3] at entry 0",
                            "[2, 4] at entry 2"});
  expect_error<Error>([&] { stack({}); }, {"non-empty"});
  expect_error<IndexError>([&] { stack({a, a}, 3); }, {"3"});
}

// ---- split / chunk ----

void expect_pieces(const std::vector<Tensor>& got, const HostT& x, int64_t d,
                   const std::vector<int64_t>& sizes, const std::string& what) {
  ASSERT_EQ(got.size(), sizes.size()) << what;
  int64_t start = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    Shape s = x.s;
    s[size_t(d)] = sizes[p];
    std::vector<double> e;
    for (int64_t i = 0; i < numel_of(s); ++i) {
      auto c = unravel(i, s);
      c[size_t(d)] += start;
      e.push_back(x.v[size_t(ravel(c, x.s))]);
    }
    expect_values(got[p], s, e, what + " piece " + std::to_string(p));
    start += sizes[p];
  }
}

TEST_P(ShapeOpsTest, SplitBySizeAndSizes) {
  HostT x{exact_values(35, DType::F32, 12), {7, 5}};
  Tensor t = make_layout(x.v, x.s, DType::F32, device(), Layout::Transposed);
  expect_pieces(split(t, 3), x, 0, {3, 3, 1}, "split 3");
  expect_pieces(split(t, 5, 1), x, 1, {5}, "split 5 dim 1");
  expect_pieces(split(t, 2, -1), x, 1, {2, 2, 1}, "split 2 dim -1");
  expect_pieces(split(t, std::vector<int64_t>{1, 0, 6}), x, 0, {1, 0, 6}, "sizes");
  auto views = split(t, 4);
  EXPECT_TRUE(views[1].shares_storage_with(t));  // pieces are views
}

TEST_P(ShapeOpsTest, SplitErrorsAndEmpty) {
  Tensor t = make(exact_values(6, DType::F32, 13), {3, 2}, DType::F32, device());
  expect_error<ValueError>([&] { split(t, std::vector<int64_t>{1, 1}); },
                           {"sum exactly to 3", "[1, 1]"});
  expect_error<ValueError>([&] { split(t, 0); }, {"split_size can only be 0", "3"});
  expect_error<ValueError>([&] { split(t, -1); }, {"non-negative", "-1"});
  expect_error<ShapeError>([&] { split(make({1}, {}, DType::F32, device()), 1); }, {"1-dimensional"});
  auto e = split(make({}, {0, 2}, DType::F32, device()), 0);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].shape(), (Shape{0, 2}));
}

TEST_P(ShapeOpsTest, Chunk) {
  HostT x{exact_values(14, DType::I32, 14), {7, 2}};
  Tensor t = make(x.v, x.s, DType::I32, device());
  expect_pieces(chunk(t, 3), x, 0, {3, 3, 1}, "7 in 3");
  expect_pieces(chunk(t, 7), x, 0, {1, 1, 1, 1, 1, 1, 1}, "7 in 7");
  expect_pieces(chunk(t, 10), x, 0, {1, 1, 1, 1, 1, 1, 1}, "7 in 10");
  HostT y{exact_values(12, DType::I32, 15), {2, 6}};
  expect_pieces(chunk(make(y.v, y.s, DType::I32, device()), 4, 1), y, 1, {2, 2, 2}, "6 in 4");
  auto e = chunk(make({}, {0}, DType::F32, device()), 3);
  EXPECT_EQ(e.size(), 3u);  // chunks of an empty dim keep their number, as PyTorch
  expect_error<ValueError>([&] { chunk(t, 0); }, {"greater than 0", "0"});
}

// ---- tril / triu ----

std::vector<double> ref_tri(const HostT& x, int64_t k, bool lower) {
  std::vector<double> out = x.v;
  size_t nd = x.s.size();
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    auto c = unravel(i, x.s);
    int64_t r = c[nd - 2], col = c[nd - 1];
    bool keep = lower ? col <= r + k : col >= r + k;
    if (!keep) out[size_t(i)] = 0;
  }
  return out;
}

TEST_P(ShapeOpsTest, TrilTriuEveryDtypeAndDiagonal) {
  for (DType t : test::all_dtypes()) {
    HostT x{exact_values(20, t, 16), {4, 5}};
    Tensor tx = make(x.v, x.s, t, device());
    for (int64_t k : {-5, -2, 0, 1, 3, 6}) {
      std::string w = std::string(dtype_name(t)) + " k=" + std::to_string(k);
      expect_values(tril(tx, k), x.s, ref_tri(x, k, true), "tril " + w);
      expect_values(triu(tx, k), x.s, ref_tri(x, k, false), "triu " + w);
    }
  }
}

TEST_P(ShapeOpsTest, TrilTriuBatchedNonContiguousAndErrors) {
  HostT x{exact_values(36, DType::F64, 17), {3, 3, 4}};
  for (Layout l : {Layout::Transposed, Layout::Strided}) {
    Tensor tx = make_layout(x.v, x.s, DType::F64, device(), l);
    expect_values(tril(tx, -1), x.s, ref_tri(x, -1, true), "tril");
    expect_values(triu(tx, 1), x.s, ref_tri(x, 1, false), "triu");
  }
  expect_values(tril(make({}, {0, 3}, DType::F32, device())), {0, 3}, {}, "empty");
  expect_error<ShapeError>([&] { tril(make({1, 2}, {2}, DType::F32, device())); },
                           {"at least 2 dimensions", "got 1"});
  expect_error<ShapeError>([&] { triu(make({1}, {}, DType::F32, device())); }, {"got 0"});
}

// ---- repeat / repeat_interleave ----

HostT ref_repeat(const HostT& x, const std::vector<int64_t>& reps) {
  size_t lead = reps.size() - x.s.size();
  Shape xs(reps.size(), 1);
  for (size_t i = 0; i < x.s.size(); ++i) xs[lead + i] = x.s[i];
  HostT out{{}, Shape(reps.size())};
  for (size_t i = 0; i < reps.size(); ++i) out.s[i] = xs[i] * reps[i];
  for (int64_t i = 0; i < numel_of(out.s); ++i) {
    auto c = unravel(i, out.s);
    for (size_t d = 0; d < c.size(); ++d) c[d] %= xs[d];
    out.v.push_back(x.v[size_t(ravel(c, xs))]);
  }
  return out;
}

TEST_P(ShapeOpsTest, RepeatEveryDtypeAndLayouts) {
  for (DType t : test::all_dtypes()) {
    HostT x{exact_values(6, t, 18), {2, 3}};
    Tensor tx = make_layout(x.v, x.s, t, device(), Layout::Transposed);
    for (const auto& reps : std::vector<std::vector<int64_t>>{{2, 2}, {1, 3}, {2, 1, 2}, {3, 0}}) {
      HostT r = ref_repeat(x, reps);
      expect_values(repeat(tx, reps), r.s, r.v, std::string(dtype_name(t)) + " " + shape_str(reps));
    }
  }
  HostT s{{4}, {}};
  HostT r = ref_repeat(s, {2, 3});
  expect_values(repeat(make({4}, {}, DType::F32, device()), {2, 3}), r.s, r.v, "0-d");
}

TEST_P(ShapeOpsTest, RepeatErrors) {
  Tensor x = make(exact_values(6, DType::F32, 19), {2, 3}, DType::F32, device());
  expect_error<ShapeError>([&] { repeat(x, {2}); },
                           {"can not be smaller than number of dimensions", "repeat dims: 1",
                            "tensor dims: 2"});
  expect_error<ValueError>([&] { repeat(x, {2, -1}); }, {"non-negative", "[2, -1]"});
}

HostT ref_repeat_interleave(const HostT& x, int64_t d, const std::vector<int64_t>& reps) {
  HostT out{{}, x.s};
  std::vector<int64_t> src;
  for (int64_t i = 0; i < x.s[size_t(d)]; ++i)
    for (int64_t r = 0; r < reps[reps.size() == 1 ? 0 : size_t(i)]; ++r) src.push_back(i);
  out.s[size_t(d)] = int64_t(src.size());
  for (int64_t i = 0; i < numel_of(out.s); ++i) {
    auto c = unravel(i, out.s);
    c[size_t(d)] = src[size_t(c[size_t(d)])];
    out.v.push_back(x.v[size_t(ravel(c, x.s))]);
  }
  return out;
}

TEST_P(ShapeOpsTest, RepeatInterleaveInt) {
  for (DType t : {DType::F32, DType::Bool, DType::I8, DType::BF16}) {
    HostT x{exact_values(6, t, 20), {2, 3}};
    Tensor tx = make_layout(x.v, x.s, t, device(), Layout::Transposed);
    HostT r = ref_repeat_interleave(x, 1, {2});
    expect_values(repeat_interleave(tx, 2, 1), r.s, r.v, std::string(dtype_name(t)) + " dim 1");
    r = ref_repeat_interleave(x, 0, {3});
    expect_values(repeat_interleave(tx, 3, -2), r.s, r.v, "dim 0");
    HostT flat{x.v, {6}};
    r = ref_repeat_interleave(flat, 0, {2});
    expect_values(repeat_interleave(tx, 2), r.s, r.v, "flattened");
  }
  expect_values(repeat_interleave(make({1, 2}, {2}, DType::F32, device()), 0), {0}, {}, "zero");
  expect_values(repeat_interleave(make({5}, {}, DType::F32, device()), 3), {3}, {5, 5, 5}, "0-d");
  expect_error<ValueError>([&] { repeat_interleave(make({1}, {1}, DType::F32, device()), -1); },
                           {"negative"});
}

TEST_P(ShapeOpsTest, RepeatInterleaveTensor) {
  HostT x{exact_values(12, DType::F64, 21), {3, 4}};
  Tensor tx = make_layout(x.v, x.s, DType::F64, device(), Layout::Strided);
  HostT r = ref_repeat_interleave(x, 0, {2, 0, 3});
  expect_values(repeat_interleave(tx, ints({2, 0, 3}, device()), 0), r.s, r.v, "dim 0");
  r = ref_repeat_interleave(x, 1, {1, 2, 0, 1});
  expect_values(repeat_interleave(tx, ints({1, 2, 0, 1}, device(), DType::I32), 1), r.s, r.v,
                "dim 1 int32");
  r = ref_repeat_interleave(x, 1, {2});
  expect_values(repeat_interleave(tx, ints({2}, {}, device()), 1), r.s, r.v, "0-d repeats");
  HostT flat{x.v, {12}};
  std::vector<int64_t> reps(12);
  for (size_t i = 0; i < 12; ++i) reps[i] = int64_t(i % 3);
  r = ref_repeat_interleave(flat, 0, reps);
  expect_values(repeat_interleave(tx, ints(reps, device())), r.s, r.v, "flattened");
}

TEST_P(ShapeOpsTest, RepeatInterleaveTensorErrors) {
  Tensor x = make(exact_values(6, DType::F32, 22), {2, 3}, DType::F32, device());
  expect_error<ShapeError>([&] { repeat_interleave(x, ints({1, 2}, device()), 1); },
                           {"repeats.size(0) = 2", "input.size(1) = 3"});
  expect_error<Error>([&] { repeat_interleave(x, ints({1, -2}, device()), 0).cpu(); },
                           {"negative", "-2"});
  expect_error<Error>([&] { repeat_interleave(x, make({1}, {1}, DType::F32, device()), 0); },
                          {"int64 or int32", "float32"});
}

// ---- flip / roll ----

std::vector<double> ref_flip(const HostT& x, const std::vector<int64_t>& dims) {
  std::vector<double> out(x.v.size());
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    auto c = unravel(i, x.s);
    for (int64_t d : dims) {
      size_t w = size_t(d < 0 ? d + int64_t(x.s.size()) : d);
      c[w] = x.s[w] - 1 - c[w];
    }
    out[size_t(i)] = x.v[size_t(ravel(c, x.s))];
  }
  return out;
}

TEST_P(ShapeOpsTest, FlipEveryDtypeAndLayout) {
  for (DType t : test::all_dtypes()) {
    HostT x{exact_values(24, t, 23), {2, 3, 4}};
    for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
      Tensor tx = make_layout(x.v, x.s, t, device(), l);
      for (const auto& dims : std::vector<std::vector<int64_t>>{{0}, {1}, {-1}, {0, 2}, {2, 1, 0}, {}})
        expect_values(flip(tx, dims), x.s, ref_flip(x, dims),
                      std::string(dtype_name(t)) + " dims " + shape_str(dims));
    }
  }
}

TEST_P(ShapeOpsTest, FlipZeroDimEmptyAndErrors) {
  expect_values(flip(make({3}, {}, DType::F32, device()), {0}), {}, {3}, "0-d");
  expect_values(flip(make({}, {2, 0}, DType::F32, device()), {0, 1}), {2, 0}, {}, "empty");
  Tensor x = make({1, 2, 3, 4}, {2, 2}, DType::F32, device());
  expect_error<ValueError>([&] { flip(x, {0, -2}); }, {"dim 0 appears multiple times"});
  expect_error<IndexError>([&] { flip(x, {2}); }, {"2"});
}

std::vector<double> ref_roll(const HostT& x, const std::vector<int64_t>& shifts,
                             const std::vector<int64_t>& dims) {
  std::vector<double> cur = x.v;
  for (size_t k = 0; k < dims.size(); ++k) {
    size_t d = size_t(dims[k] < 0 ? dims[k] + int64_t(x.s.size()) : dims[k]);
    std::vector<double> next(cur.size());
    for (int64_t i = 0; i < int64_t(cur.size()); ++i) {
      auto c = unravel(i, x.s);
      int64_t n = x.s[d];
      c[d] = (((c[d] + shifts[k]) % n) + n) % n;  // element i moves to c
      next[size_t(ravel(c, x.s))] = cur[size_t(i)];
    }
    cur = next;
  }
  return cur;
}

TEST_P(ShapeOpsTest, RollWithDims) {
  HostT x{exact_values(20, DType::I16, 24), {4, 5}};
  for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
    Tensor tx = make_layout(x.v, x.s, DType::I16, device(), l);
    for (auto [shifts, dims] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{1}, {0}}, {{-2}, {1}}, {{7}, {-1}}, {{-13}, {0}}, {{1, 2}, {0, 1}},
             {{2, 2}, {1, 1}}, {{0}, {0}}})
      expect_values(roll(tx, shifts, dims), x.s, ref_roll(x, shifts, dims),
                    "shifts " + shape_str(shifts) + " dims " + shape_str(dims));
  }
}

TEST_P(ShapeOpsTest, RollWithoutDimsFlattensAndErrors) {
  HostT x{exact_values(12, DType::F32, 25), {3, 4}};
  Tensor tx = make_layout(x.v, x.s, DType::F32, device(), Layout::Transposed);
  HostT flat{x.v, {12}};
  expect_values(roll(tx, {5}), x.s, ref_roll(flat, {5}, {0}), "flat");
  expect_values(roll(tx, {-1}), x.s, ref_roll(flat, {-1}, {0}), "flat negative");
  expect_values(roll(make({}, {0, 3}, DType::F32, device()), {2}, {1}), {0, 3}, {}, "empty");
  expect_values(roll(make({2}, {}, DType::F32, device()), {3}), {}, {2}, "0-d");
  expect_error<ValueError>([&] { roll(tx, {1, 2}, {0}); }, {"shifts: 2", "dims: 1"});
  expect_error<ValueError>([&] { roll(tx, {1, 2}); }, {"shifts: 2"});
  expect_error<IndexError>([&] { roll(tx, {1}, {2}); }, {"2"});
}

// ---- pad ----

HostT ref_pad(const HostT& x, const std::vector<int64_t>& pad, const std::string& mode,
              double value) {
  size_t nd = x.s.size();
  std::vector<int64_t> lo(nd, 0), hi(nd, 0);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    lo[nd - 1 - k] = pad[2 * k];
    hi[nd - 1 - k] = pad[2 * k + 1];
  }
  HostT out{{}, x.s};
  for (size_t d = 0; d < nd; ++d) out.s[d] += lo[d] + hi[d];
  for (int64_t i = 0; i < numel_of(out.s); ++i) {
    auto c = unravel(i, out.s);
    bool outside = false;
    for (size_t d = 0; d < nd; ++d) {
      int64_t n = x.s[d], j = c[d] - lo[d];
      if (mode == "constant") {
        outside = outside || j < 0 || j >= n;
      } else if (mode == "reflect") {
        while (j < 0 || j >= n) j = j < 0 ? -j : 2 * (n - 1) - j;
      } else if (mode == "replicate") {
        j = std::min(std::max<int64_t>(j, 0), n - 1);
      } else {
        j = ((j % n) + n) % n;
      }
      c[d] = j;
    }
    out.v.push_back(outside ? value : x.v[size_t(ravel(c, x.s))]);
  }
  return out;
}

TEST_P(ShapeOpsTest, PadConstantEveryDtype) {
  for (DType t : test::all_dtypes()) {
    HostT x{exact_values(24, t, 26), {2, 3, 4}};
    Tensor tx = make(x.v, x.s, t, device());
    double v = t == DType::Bool ? 1 : 3;
    for (const auto& p : std::vector<std::vector<int64_t>>{{1, 2}, {0, 1, 2, 0}, {1, 1, 1, 1, 1, 1}, {}}) {
      HostT r = ref_pad(x, p, "constant", v);
      expect_values(pad(tx, p, "constant", v), r.s, r.v,
                    std::string(dtype_name(t)) + " pad " + shape_str(p));
    }
  }
}

// Empty inputs padded with a constant: every output element is the fill (no source row).
TEST_P(ShapeOpsTest, PadConstantOfEmptyInputIsAllFill) {
  for (const Shape& s : std::vector<Shape>{{2, 0, 3}, {2, 3, 0}}) {
    Tensor x = zeros(s, TensorOptions(DType::F32, device()));
    Tensor y = pad(x, {1, 1, 1, 1}, "constant", 3);
    const Shape want = {2, s[1] + 2, s[2] + 2};
    EXPECT_EQ(y.shape(), want);
    for (double v : y.to_vector<double>()) EXPECT_EQ(v, 3.0) << shape_str(s);
  }
}

TEST_P(ShapeOpsTest, PadNegativeCropsAndNonContiguous) {
  HostT x{exact_values(30, DType::F32, 27), {5, 6}};
  for (Layout l : {Layout::Transposed, Layout::Strided}) {
    Tensor tx = make_layout(x.v, x.s, DType::F32, device(), l);
    for (const auto& p : std::vector<std::vector<int64_t>>{{-1, 2}, {-2, -3, 1, -4}, {-6, 0}}) {
      HostT r = ref_pad(x, p, "constant", -1.5);
      expect_values(pad(tx, p, "constant", -1.5), r.s, r.v, "constant " + shape_str(p));
    }
    HostT r = ref_pad(x, {-1, 2, 3, -2}, "reflect", 0);
    expect_values(pad(tx, {-1, 2, 3, -2}, "reflect"), r.s, r.v, "reflect negative");
    r = ref_pad(x, {2, -3}, "replicate", 0);
    expect_values(pad(tx, {2, -3}, "replicate"), r.s, r.v, "replicate negative");
  }
}

TEST_P(ShapeOpsTest, PadReflectReplicateCircular) {
  HostT x{exact_values(2 * 3 * 4 * 5, DType::F64, 28), {2, 3, 4, 5}};
  Tensor tx = make(x.v, x.s, DType::F64, device());
  for (const char* mode : {"reflect", "replicate", "circular"})
    for (const auto& p : std::vector<std::vector<int64_t>>{{2, 3}, {1, 0, 2, 3}, {1, 2, 2, 1, 0, 2}}) {
      HostT r = ref_pad(x, p, mode, 0);
      expect_values(pad(tx, p, mode), r.s, r.v, std::string(mode) + " " + shape_str(p));
    }
  HostT big{exact_values(6, DType::I32, 29), {1, 6}};
  HostT r = ref_pad(big, {5, 5}, "reflect", 0);
  expect_values(pad(make(big.v, big.s, DType::I32, device()), {5, 5}, "reflect"), r.s, r.v,
                "reflect size - 1");
  r = ref_pad(big, {9, 4}, "replicate", 0);
  expect_values(pad(make(big.v, big.s, DType::I32, device()), {9, 4}, "replicate"), r.s, r.v,
                "replicate wide");
}

TEST_P(ShapeOpsTest, PadErrors) {
  Tensor x = make(exact_values(6, DType::F32, 30), {2, 3}, DType::F32, device());
  expect_error<Error>([&] { pad(x, {3, 0}, "reflect"); },
                           {"Padding size should be less than the corresponding input dimension",
                            "padding (3, 0) at dimension 1 of input [2, 3]"});
  expect_error<Error>([&] { pad(x, {0, 0, 0, 2}, "reflect"); }, {"padding (0, 2) at dimension 0"});
  expect_error<ValueError>([&] { pad(x, {1, 2, 3}); }, {"divisible by 2"});
  expect_error<ValueError>([&] { pad(x, {1, 1, 1, 1, 1, 1}); }, {"input of dimension 2"});
  expect_error<ValueError>([&] { pad(x, {1, 1}, "wrap"); }, {"'wrap'"});
  expect_error<Error>([&] { pad(x, {4, 0}, "circular"); }, {"wrapping around more than once"});
  expect_error<ShapeError>([&] { pad(x, {-2, -2}); }, {"negative output size", "dimension 1"});
}

// ---- one_hot ----

TEST_P(ShapeOpsTest, OneHot) {
  Tensor x = ints({2, 0, 1, 2, 4, 0}, {2, 3}, device());
  std::vector<int64_t> e;
  for (int64_t v : {2, 0, 1, 2, 4, 0})
    for (int64_t c = 0; c < 6; ++c) e.push_back(c == v ? 1 : 0);
  expect_ints(one_hot(x, 6), {2, 3, 6}, e, "num_classes 6");
  e.clear();
  for (int64_t v : {2, 0, 1, 2, 4, 0})
    for (int64_t c = 0; c < 5; ++c) e.push_back(c == v ? 1 : 0);
  expect_ints(one_hot(x), {2, 3, 5}, e, "inferred");
  Tensor strided = ints({3, 9, 1, 9}, device()).slice(0, 0, std::nullopt, 2);  // [3, 1]
  expect_ints(one_hot(strided, 4), {2, 4}, {0, 0, 0, 1, 0, 1, 0, 0}, "strided");
  expect_ints(one_hot(ints({1}, {}, device())), {2}, {0, 1}, "0-d");
  expect_ints(one_hot(ints({}, device()), 3), {0, 3}, {}, "empty with classes");
}

TEST_P(ShapeOpsTest, OneHotErrors) {
  expect_error<Error>([&] { one_hot(ints({0, 3}, device()), 3).cpu(); },
                           {"smaller than num_classes", "3"});
  expect_error<Error>([&] { one_hot(ints({0, -1}, device())).cpu(); }, {"non-negative", "-1"});
  expect_error<Error>([&] { one_hot(ints({}, device())); }, {"empty tensor"});
  expect_error<Error>([&] { one_hot(ints({0}, device(), DType::I32)); }, {"int64", "int32"});
}


// ---- more combinations ----

TEST_P(ShapeOpsTest, CatManyRandomInputsHalf) {
  std::vector<HostT> hs;
  std::vector<Tensor> ts;
  for (int64_t i = 0; i < 6; ++i) {
    HostT h{exact_values(size_t(2 * (i % 3) * 4), DType::F16, uint32_t(40 + i)), {2, i % 3, 4}};
    ts.push_back(make_layout(h.v, h.s, DType::F16, device(), i % 2 ? Layout::Transposed : Layout::Contiguous));
    hs.push_back(h);
  }
  HostT r = ref_cat(hs, 1);
  expect_values(cat(ts, 1), r.s, r.v);
}

TEST_P(ShapeOpsTest, SplitThenCatRoundTrip) {
  HostT x{exact_values(60, DType::I32, 47), {3, 4, 5}};
  Tensor t = make_layout(x.v, x.s, DType::I32, device(), Layout::Transposed);
  for (int64_t d = 0; d < 3; ++d) {
    expect_values(cat(split(t, 2, d), d), x.s, x.v, "split dim " + std::to_string(d));
    expect_values(cat(chunk(t, 3, d), d), x.s, x.v, "chunk dim " + std::to_string(d));
  }
}

TEST_P(ShapeOpsTest, TrilPlusStrictTriuIsInput) {
  HostT x{exact_values(42, DType::F64, 48), {2, 3, 7}};
  Tensor t = make_layout(x.v, x.s, DType::F64, device(), Layout::Transposed);
  for (int64_t k : {-1, 0, 2})
    expect_values(tril(t, k) + triu(t, k + 1), x.s, x.v, "k=" + std::to_string(k));
}

TEST_P(ShapeOpsTest, RepeatEmptyAndOnes) {
  HostT e{{}, {0, 3}};
  HostT r = ref_repeat(e, {2, 2});
  expect_values(repeat(make({}, e.s, DType::F32, device()), {2, 2}), r.s, r.v, "empty");
  HostT x{exact_values(6, DType::U8, 49), {2, 3}};
  expect_values(repeat(make(x.v, x.s, DType::U8, device()), {1, 1}), x.s, x.v, "ones");
  expect_values(repeat(make(x.v, x.s, DType::U8, device()), {1, 1, 1}), {1, 2, 3}, x.v, "new dim");
}

TEST_P(ShapeOpsTest, FlipTwiceIsIdentity4d) {
  HostT x{exact_values(120, DType::BF16, 50), {2, 3, 4, 5}};
  Tensor t = make_layout(x.v, x.s, DType::BF16, device(), Layout::Strided);
  expect_values(flip(flip(t, {0, 3}), {3, 0}), x.s, x.v);
  expect_values(flip(t, {1, 2}), x.s, ref_flip(x, {1, 2}), "dims 1, 2");
}

TEST_P(ShapeOpsTest, RollEqualsCatOfSlices) {
  HostT x{exact_values(35, DType::F32, 51), {7, 5}};
  Tensor t = make_layout(x.v, x.s, DType::F32, device(), Layout::Strided);
  for (int64_t k : {1, 3, 6}) {
    Tensor expected = cat({t.slice(0, 7 - k, 7), t.slice(0, 0, 7 - k)}, 0);
    expect_values(roll(t, {k}, {0}), x.s, expected.to_vector<double>(), "k=" + std::to_string(k));
  }
}

TEST_P(ShapeOpsTest, PadHalfTypesAndEmptyInputs) {
  for (DType t : {DType::F16, DType::BF16}) {
    HostT x{exact_values(12, t, 52), {3, 4}};
    Tensor tx = make(x.v, x.s, t, device());
    HostT r = ref_pad(x, {2, 1, 1, 2}, "reflect", 0);
    expect_values(pad(tx, {2, 1, 1, 2}, "reflect"), r.s, r.v, std::string(dtype_name(t)));
    r = ref_pad(x, {1, 1}, "constant", 0.25);
    expect_values(pad(tx, {1, 1}, "constant", 0.25), r.s, r.v, "constant 0.25");
  }
  // Constant padding of an empty tensor: along the empty dim the result is all fill.
  expect_values(pad(make({}, {0, 2}, DType::F32, device()), {0, 0, 1, 1}, "constant", 4), {2, 2},
                {4, 4, 4, 4}, "fill empty");
  expect_values(pad(make({}, {0, 2}, DType::F32, device()), {1, 1}), {0, 4}, {}, "still empty");
}

TEST_P(ShapeOpsTest, OneHotRandomAgainstReference) {
  auto r = test::random_values(40, 0, 9, 53, true);
  std::vector<int64_t> v(r.begin(), r.end());
  Tensor x = ints(v, {5, 8}, device()).transpose(0, 1);  // [8, 5], non-contiguous
  std::vector<int64_t> e;
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t c = 0; c < 9; ++c) e.push_back(v[size_t(j * 8 + i)] == c ? 1 : 0);
  expect_ints(one_hot(x, 9), {8, 5, 9}, e);
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(ShapeOpsTest);

}  // namespace kiln
