// gradcheck (float64 finite differences) for the derivatives of the indexing, shape-building,
// sorting, cumulative-product and random ops (derivatives_indexing.cpp,
// derivatives_shape.cpp), gradgradcheck for a few, and end-to-end checks against gradients
// computed by hand (repeated indices accumulate, ties split evenly, zeros in products).
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/gradcheck.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/dispatch/registry.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using V = std::vector<Tensor>;
using Fn = std::function<Tensor(const V&)>;

Tensor leaf(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator g(seed);
  Tensor t = rand(shape, TensorOptions(DType::F64), &g) * (hi - lo) + lo;
  t = t.contiguous();
  autograd::set_requires_grad(t);
  return t;
}

// A float64 leaf with the given values.
Tensor leaf_of(const std::vector<double>& v, const Shape& shape) {
  Tensor t = tensor_from<double>(v, shape, TensorOptions(DType::F64));
  autograd::set_requires_grad(t);
  return t;
}

Tensor ids(const std::vector<int64_t>& v, const Shape& shape) {
  return tensor_from<int64_t>(v, shape, TensorOptions(DType::I64));
}
Tensor ids(const std::vector<int64_t>& v) { return ids(v, {int64_t(v.size())}); }

struct Case {
  const char* name;
  Fn fn;
};

void check_all(const std::vector<Case>& cases, const V& inputs) {
  for (const auto& c : cases) {
    auto r = gradcheck(c.fn, inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

// The gradient of sum(fn(x) * w) w.r.t. x.
std::vector<double> grad_of(const Fn& fn, const Tensor& x, const Tensor& w) {
  auto g = autograd::grad({fn({x})}, {x}, {w});
  return g[0].to_vector<double>();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << what << " [" << i << "]";
}

TEST(GradcheckIndexing, IndexSelectAndGather) {
  Tensor x = leaf({3, 4}, -2, 2, 1);
  Tensor rep = ids({2, 0, 2, 2});  // repeated indices accumulate
  Tensor rep32 = rep.to(DType::I32);
  Tensor gi = ids({0, 2, 2, 1, 1, 1}, {2, 3});  // smaller than x along dim 1
  check_all(
      {
          {"index_select dim 0", [&](const V& v) { return index_select(v[0], 0, rep.narrow(0, 0, 3)); }},
          {"index_select dim -1 repeated", [&](const V& v) { return index_select(v[0], -1, rep); }},
          {"index_select int32 index", [&](const V& v) { return index_select(v[0], 1, rep32); }},
          {"index_select 0-d index", [&](const V& v) { return index_select(v[0], 1, ids({3}, {})); }},
          {"index_select 0-d input",
           [&](const V& v) { return index_select(v[0].select(0, 1).select(0, 2), 0, ids({0})); }},
          {"gather dim 0 repeated", [&](const V& v) { return gather(v[0], 0, gi); }},
          {"gather dim -1", [&](const V& v) { return gather(v[0], -1, gi); }},
          {"gather 0-d", [&](const V& v) { return gather(v[0].select(0, 0).select(0, 1), 0, ids({0}, {})); }},
      },
      {x});
}

TEST(GradcheckIndexing, ScatterFamily) {
  Tensor x = leaf({3, 4}, -2, 2, 2);
  Tensor src = leaf({2, 5}, -2, 2, 3);  // larger than the index: the rest gets no gradient
  Tensor uniq = ids({0, 2, 1, 3, 1, 0, 3, 2}, {2, 4});  // each row a permutation (dim 1)
  Tensor rep = ids({2, 0, 2, 1, 2, 2, 0, 0}, {2, 4});
  check_all(
      {
          {"scatter src dim 1", [&](const V& v) { return scatter(v[0], 1, uniq, v[1]); }},
          {"scatter src dim -1", [&](const V& v) { return scatter(v[0], -1, uniq, v[1]); }},
          {"scatter value", [&](const V& v) { return scatter(v[0], 0, rep, Scalar(1.5)); }},
          {"scatter_add repeated", [&](const V& v) { return scatter_add(v[0], 0, rep, v[1]); }},
          {"scatter_add dim -1", [&](const V& v) { return scatter_add(v[0], -1, rep, v[1]); }},
      },
      {x, src});
  for (bool include_self : {true, false}) {
    for (const char* red : {"sum", "mean", "amax", "amin", "prod"}) {
      auto fn = [&](const V& v) { return scatter_reduce(v[0], 0, rep, v[1], red, include_self); };
      auto r = gradcheck(fn, {x, src});
      EXPECT_TRUE(r.ok) << "scatter_reduce " << red << " include_self " << include_self << ": "
                        << r.message;
    }
  }
  // A 0-d index with 1-d self and src: only src[0] is used.
  Tensor x1 = leaf({4}, -2, 2, 23), s1 = leaf({3}, -2, 2, 24);
  check_all(
      {
          {"scatter 0-d index", [&](const V& v) { return scatter(v[0], 0, ids({2}, {}), v[1]); }},
          {"scatter_add 0-d index", [&](const V& v) { return scatter_add(v[0], 0, ids({1}, {}), v[1]); }},
          {"scatter_reduce amax 0-d index",
           [&](const V& v) { return scatter_reduce(v[0], 0, ids({3}, {}), v[1], "amax", false); }},
          {"scatter_reduce prod 0-d index",
           [&](const V& v) { return scatter_reduce(v[0], 0, ids({0}, {}), v[1], "prod"); }},
      },
      {x1, s1});
  // prod with zeros (the derivative is exact: prod is linear in each element).
  Tensor xz = leaf_of({0, 2, 3, 0.5, -1, 4}, {6});
  Tensor sz = leaf_of({0, 1.5, 0, 2, -2, 0.5, 3}, {7});
  Tensor zi = ids({0, 0, 1, 1, 3, 4, 4});
  for (bool include_self : {true, false}) {
    auto fn = [&](const V& v) { return scatter_reduce(v[0], 0, zi, v[1], "prod", include_self); };
    auto r = gradcheck(fn, {xz, sz});
    EXPECT_TRUE(r.ok) << "scatter_reduce prod with zeros, include_self " << include_self << ": "
                      << r.message;
  }
}

TEST(GradcheckIndexing, AdvancedIndexing) {
  Tensor x = leaf({3, 4, 2}, -2, 2, 4);
  Tensor mask = tensor_from<bool>({true, false, true, true, false, false, true, false}, {2, 4});
  check_all(
      {
          {"one index, repeated", [&](const V& v) { return index(v[0], {ids({2, 0, 2, 2})}); }},
          {"two broadcast indices",
           [&](const V& v) { return index(v[0], {ids({0, 2}, {2, 1}), ids({1, 1, 3})}); }},
          {"non-adjacent (None between)",
           [&](const V& v) { return index(v[0], {ids({2, 0, 2}), Tensor(), ids({1, 1, 0})}); }},
          {"middle dim, negative indices",
           [&](const V& v) { return index(v[0], {Tensor(), ids({-1, 0, 3, -4})}); }},
          {"bool mask", [&](const V& v) { return index(v[0].select(2, 1).narrow(0, 0, 2), {mask}); }},
          {"mask on a 3-d tensor", [&](const V& v) { return index(v[0].narrow(0, 0, 2), {mask}); }},
      },
      {x});
}

TEST(GradcheckIndexing, IndexPut) {
  Tensor x = leaf({3, 4}, -2, 2, 5);
  Tensor vals = leaf({3}, -2, 2, 6);
  Tensor vrow = leaf({4}, -2, 2, 7);  // broadcast over the indexed rows
  Tensor r_rep = ids({0, 2, 0}), c_rep = ids({1, 3, 1});
  Tensor r_u = ids({0, 2, 1}), c_u = ids({1, 3, 0});
  check_all(
      {
          {"accumulate, repeated", [&](const V& v) { return index_put(v[0], {r_rep, c_rep}, v[1], true); }},
          {"overwrite, unique", [&](const V& v) { return index_put(v[0], {r_u, c_u}, v[1], false); }},
          {"in place on a non-leaf",
           [&](const V& v) {
             Tensor y = v[0] * 1.0;
             index_put_(y, {r_rep, c_rep}, v[1] * v[1], true);
             return y;
           }},
      },
      {x, vals});
  check_all(
      {
          {"broadcast values, accumulate",
           [&](const V& v) { return index_put(v[0], {ids({2, 2})}, v[1], true); }},
          {"broadcast values, overwrite",
           [&](const V& v) { return index_put(v[0], {ids({2, 0})}, v[1], false); }},
      },
      {x, vrow});
}

TEST(GradcheckIndexing, MaskOps) {
  Tensor x = leaf({3, 4}, -2, 2, 8);
  Tensor row = leaf({4}, -2, 2, 9);
  Tensor m_row = tensor_from<bool>({true, false, false, true}, {4});
  Tensor m_full = tensor_from<bool>({true, false, true, true, false, false, true, false, false,
                                     true, true, false},
                                    {3, 4});
  check_all(
      {
          {"masked_fill broadcast mask", [&](const V& v) { return masked_fill(v[0], m_row, 2.5); }},
          {"masked_fill broadcast self", [&](const V& v) { return masked_fill(v[1], m_full, -1.0); }},
          {"masked_fill_ in place",
           [&](const V& v) {
             Tensor y = v[0] + v[1];
             masked_fill_(y, m_row, 0.0);
             return y;
           }},
          {"masked_select", [&](const V& v) { return masked_select(v[0], m_full); }},
          {"masked_select broadcast self", [&](const V& v) { return masked_select(v[1], m_full); }},
      },
      {x, row});
}

TEST(GradcheckIndexing, CatStackSplit) {
  Tensor a = leaf({2, 3}, -2, 2, 10), b = leaf({2, 1}, -2, 2, 11), c = leaf({2, 3}, -2, 2, 12);
  Tensor fixed = ones({2, 2}, TensorOptions(DType::F64));  // no grad
  Tensor empty1d = zeros({0}, TensorOptions(DType::F64));   // skipped by cat
  check_all(
      {
          {"cat dim -1", [&](const V& v) { return cat({v[0], v[1], fixed, v[2]}, -1); }},
          {"cat dim 0", [&](const V& v) { return cat({v[0], v[2], v[0]}, 0); }},
          {"cat skipping empty", [&](const V& v) { return cat({empty1d, v[0].flatten(), empty1d}); }},
          {"stack dim 1", [&](const V& v) { return stack({v[0], v[2]}, 1); }},
          {"stack dim -1", [&](const V& v) { return stack({v[0], v[2] * v[2]}, -1); }},
          {"split", [&](const V& v) { return split(v[0], 2, -1)[1] * split(v[2], {1, 2}, 1)[0]; }},
          {"chunk", [&](const V& v) { return chunk(v[0], 3, 1)[2] + chunk(v[2], 2, 0)[1]; }},
      },
      {a, b, c});
}

TEST(GradcheckIndexing, TriRepeatFlipRoll) {
  Tensor x = leaf({2, 3, 4}, -2, 2, 13);
  Tensor y = leaf({3}, -2, 2, 14);
  check_all(
      {
          {"tril", [&](const V& v) { return tril(v[0]); }},
          {"tril -1", [&](const V& v) { return tril(v[0], -1); }},
          {"triu 1", [&](const V& v) { return triu(v[0], 1); }},
          {"repeat", [&](const V& v) { return repeat(v[0], {1, 2, 2}); }},
          {"repeat with new dims", [&](const V& v) { return repeat(v[1], {2, 1, 3}); }},
          {"repeat zero", [&](const V& v) { return repeat(v[1], {0}).sum() + v[1]; }},
          {"repeat_interleave tensor", [&](const V& v) { return repeat_interleave(v[1], ids({2, 0, 3})); }},
          {"repeat_interleave tensor dim -2",
           [&](const V& v) { return repeat_interleave(v[0], ids({1, 3, 2}), -2); }},
          {"repeat_interleave one count", [&](const V& v) { return repeat_interleave(v[0], ids({2}, {}), 0); }},
          {"repeat_interleave int", [&](const V& v) { return repeat_interleave(v[0], 2, 1); }},
          {"repeat_interleave flat", [&](const V& v) { return repeat_interleave(v[1], 2); }},
          {"flip", [&](const V& v) { return flip(v[0], {0, -1}); }},
          {"roll", [&](const V& v) { return roll(v[0], {1, -3}, {2, 1}); }},
          {"roll same dim twice", [&](const V& v) { return roll(v[0], {1, 2}, {-1, -1}); }},
          {"roll flat", [&](const V& v) { return roll(v[0], {5}); }},
      },
      {x, y});
}

TEST(GradcheckIndexing, Pad) {
  Tensor x = leaf({2, 3, 4}, -2, 2, 15);
  check_all(
      {
          {"constant", [&](const V& v) { return pad(v[0], {1, 2}, "constant", 0.5); }},
          {"constant 3 dims", [&](const V& v) { return pad(v[0], {0, 1, 2, 0, 1, 1}); }},
          {"constant negative (crop)", [&](const V& v) { return pad(v[0], {-1, 2, 1, -2}); }},
          {"reflect", [&](const V& v) { return pad(v[0], {2, 3}, "reflect"); }},
          {"reflect 2 dims", [&](const V& v) { return pad(v[0], {1, 1, 2, 1}, "reflect"); }},
          {"replicate", [&](const V& v) { return pad(v[0], {3, 1, 0, 2}, "replicate"); }},
          {"replicate 3 dims", [&](const V& v) { return pad(v[0], {1, 0, 0, 1, 1, 1}, "replicate"); }},
          {"circular", [&](const V& v) { return pad(v[0], {2, 4}, "circular"); }},
      },
      {x});
}

TEST(GradcheckIndexing, SortTopk) {
  Tensor x = leaf({3, 5}, -2, 2, 16);
  check_all(
      {
          {"sort", [&](const V& v) { return std::get<0>(sort(v[0])); }},
          {"sort descending dim 0", [&](const V& v) { return std::get<0>(sort(v[0], 0, true)); }},
          {"sort 0-d", [&](const V& v) { return std::get<0>(sort(v[0].select(0, 1).select(0, 2))); }},
          {"topk", [&](const V& v) { return std::get<0>(topk(v[0], 2)); }},
          {"topk smallest dim 0", [&](const V& v) { return std::get<0>(topk(v[0], 2, 0, false)); }},
          {"topk unsorted dim -2", [&](const V& v) { return std::get<0>(topk(v[0], 3, -2, true, false)); }},
      },
      {x});
}

TEST(GradcheckIndexing, CumprodAndProd) {
  Tensor x = leaf({3, 4}, 0.5, 1.5, 17);
  // Rows with no zero, one zero, two zeros, a leading zero.
  Tensor z = leaf_of({1.5, 0.5, -2, 1.2, 0.7, 0, 1.3, -0.8, 2, 0, 1.1, 0, 0, 1.4, -0.6, 0.9},
                     {4, 4});
  check_all(
      {
          {"cumprod dim 1", [&](const V& v) { return cumprod(v[0], 1); }},
          {"cumprod dim -2", [&](const V& v) { return cumprod(v[0], -2); }},
          {"cumprod 0-d", [&](const V& v) { return cumprod(v[0].select(0, 0).select(0, 0), 0); }},
          {"prod all", [&](const V& v) { return prod(v[0]); }},
          {"prod dim", [&](const V& v) { return prod(v[0], -1); }},
          {"prod dim keepdim", [&](const V& v) { return prod(v[0], 0, true); }},
      },
      {x});
  check_all(
      {
          {"cumprod with zeros", [&](const V& v) { return cumprod(v[0], 1); }},
          {"cumprod with zeros dim 0", [&](const V& v) { return cumprod(v[0], 0); }},
          {"prod with zeros dim 1", [&](const V& v) { return prod(v[0], 1); }},
          {"prod with zeros dim 0", [&](const V& v) { return prod(v[0], 0); }},
          {"prod all, two zeros", [&](const V& v) { return prod(v[0]); }},
          {"prod all, one zero", [&](const V& v) { return prod(v[0].narrow(0, 0, 2)); }},
          // The op also takes several dims (the public functions pass none or one).
          {"prod over dims {0, 2}",
           [&](const V& v) {
             Tensor t = v[0].view({2, 2, 4});
             return call_op(get_op("prod"), {t}, {std::vector<int64_t>{0, -1}, false});
           }},
      },
      {z});
}

TEST(GradcheckIndexing, Dropout) {
  Tensor x = leaf({4, 5}, -2, 2, 18);
  auto fn = [](const V& v) {
    Generator gen(7);  // the same draws on every evaluation
    return dropout(v[0], 0.4, true, &gen);
  };
  auto r = gradcheck(fn, {x});
  EXPECT_TRUE(r.ok) << r.message;
  // The gradient is the mask times 1/(1-p), also for kept elements that are 0 (the mask is
  // not read off the output).
  Tensor zero = zeros({4, 5}, TensorOptions(DType::F64));
  autograd::set_requires_grad(zero);
  Generator g1(7), g2(7);
  Tensor mask = dropout(ones({4, 5}, TensorOptions(DType::F64)), 0.4, true, &g1);
  Tensor out = dropout(zero, 0.4, true, &g2);
  auto g = autograd::grad({out}, {zero}, {ones({4, 5}, TensorOptions(DType::F64))});
  std::vector<double> m = mask.to_vector<double>();
  int kept = 0;
  for (double e : m) kept += e != 0;
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 20);
  expect_near(g[0].to_vector<double>(), m, "dropout of zeros");
  for (double e : m) EXPECT_TRUE(e == 0 || std::fabs(e - 1 / 0.6) < 1e-12);
}

TEST(GradcheckIndexing, RandomOps) {
  // bernoulli: zero gradient for the probabilities.
  Tensor p = leaf({6}, 0.2, 0.8, 19);
  auto g = autograd::grad({bernoulli(p) * 3}, {p}, {ones({6}, TensorOptions(DType::F64))});
  expect_near(g[0].to_vector<double>(), std::vector<double>(6, 0.0), "bernoulli");
  // An in-place fill cuts the overwritten history: only the later product reaches x.
  for (int which = 0; which < 3; ++which) {
    Tensor x = leaf({5}, 0.5, 1.5, 20);
    Tensor y = x * 2;
    Generator gen(3);
    if (which == 0) uniform_(y, 0, 1, &gen);
    if (which == 1) normal_(y, 0, 1, &gen);
    if (which == 2) bernoulli_(y, 0.5, &gen);
    Tensor out = y * x;
    backward(out.sum());
    expect_near(autograd::grad(x).to_vector<double>(), autograd::detach(y).to_vector<double>(),
                "in-place fill");
  }
}

TEST(GradcheckIndexing, SecondOrder) {
  Tensor x = leaf({3, 4}, -2, 2, 21), y = leaf({3, 2}, -2, 2, 22);
  Tensor rep = ids({2, 0, 2, 3, 3});
  Tensor gi = ids({0, 2, 2, 1, 1, 1, 0, 0}, {2, 4});
  // Squares make the first-order gradients depend on the inputs, so the derivatives' own
  // derivatives are exercised.
  std::vector<Case> cases = {
      {"cat", [&](const V& v) { return pow(cat({v[0], v[1] * v[1]}, -1), 2); }},
      {"index_select", [&](const V& v) { return pow(index_select(v[0], 1, rep), 2); }},
      {"gather", [&](const V& v) { return pow(gather(v[0], 0, gi), 2) * 0.5; }},
      {"scatter_add", [&](const V& v) { return pow(scatter_add(v[0], 1, ids({0, 0, 1, 1, 3, 3}, {3, 2}), v[1]), 2); }},
      {"index", [&](const V& v) { return pow(index(v[0], {ids({1, 1, 0})}), 2); }},
      {"pad reflect", [&](const V& v) { return pow(pad(v[0], {2, 1}, "reflect"), 2); }},
      {"cumprod", [&](const V& v) { return cumprod(v[0] * 0.5 + 1.5, 1); }},
      {"sort", [&](const V& v) { return pow(std::get<0>(sort(v[0], 0)), 2); }},
  };
  for (const auto& c : cases) {
    auto r = gradgradcheck(c.fn, {x, y});
    EXPECT_TRUE(r.ok) << c.name << " (double backward): " << r.message;
  }
}

// End-to-end gradients computed by hand.
TEST(GradcheckIndexing, HandComputed) {
  Tensor x = leaf_of({1, 2, 3, 4}, {4});
  Tensor w = tensor_from<double>({10, 20, 30, 40, 50}, {5}, TensorOptions(DType::F64));
  // index_select with repeats: x[3] read twice, x[1] never.
  expect_near(grad_of([](const V& v) { return index_select(v[0], 0, ids({3, 0, 3, 2, 0})); }, x, w),
              {20 + 50, 0, 40, 10 + 30}, "index_select");
  // advanced indexing accumulates the same way.
  expect_near(grad_of([](const V& v) { return index(v[0], {ids({3, 0, 3, 2, 0})}); }, x, w),
              {20 + 50, 0, 40, 10 + 30}, "index");
  // index_put accumulate: values get the gradient of their target, self all of it.
  {
    Tensor vals = leaf_of({5, 6, 7}, {3});
    Tensor g = tensor_from<double>({1, 2, 3, 4}, {4}, TensorOptions(DType::F64));
    Tensor out = index_put(x, {ids({1, 1, 3})}, vals, true);
    auto gr = autograd::grad({out}, {x, vals}, {g});
    expect_near(gr[0].to_vector<double>(), {1, 2, 3, 4}, "index_put self");
    expect_near(gr[1].to_vector<double>(), {2, 2, 4}, "index_put values");
    // Overwriting: the written positions' old values get nothing.
    out = index_put(x, {ids({1, 3})}, vals.narrow(0, 0, 2), false);
    gr = autograd::grad({out}, {x, vals}, {g});
    expect_near(gr[0].to_vector<double>(), {1, 0, 3, 0}, "index_put overwrite self");
    expect_near(gr[1].to_vector<double>(), {2, 4, 0}, "index_put overwrite values");
  }
  // scatter_reduce amax: ties between src elements (and self) split the gradient evenly.
  {
    Tensor self = leaf_of({5, 1, 0}, {3});
    Tensor src = leaf_of({5, 2, 2, 3}, {4});
    Tensor g = tensor_from<double>({6, 4, 9}, {3}, TensorOptions(DType::F64));
    Tensor out = scatter_reduce(self, 0, ids({0, 1, 1, 2}), src, "amax", true);
    expect_near(autograd::detach(out).to_vector<double>(), {5, 2, 3}, "amax value");
    auto gr = autograd::grad({out}, {self, src}, {g});
    expect_near(gr[0].to_vector<double>(), {3, 0, 0}, "amax self");
    expect_near(gr[1].to_vector<double>(), {3, 2, 2, 9}, "amax src");
    // mean: each of the n contributors gets g / n.
    out = scatter_reduce(self, 0, ids({0, 1, 1, 2}), src, "mean", true);
    gr = autograd::grad({out}, {self, src}, {g});
    expect_near(gr[0].to_vector<double>(), {3, 4.0 / 3, 4.5}, "mean self");
    expect_near(gr[1].to_vector<double>(), {3, 4.0 / 3, 4.0 / 3, 4.5}, "mean src");
  }
  // prod with one zero: the zero gets the product of the others, the others 0.
  {
    Tensor z = leaf_of({2, 0, 3, 4}, {4});
    auto gr = autograd::grad({prod(z)}, {z});
    expect_near(gr[0].to_vector<double>(), {0, 24, 0, 0}, "prod one zero");
    Tensor z2 = leaf_of({2, 0, 3, 0}, {4});
    gr = autograd::grad({prod(z2)}, {z2});
    expect_near(gr[0].to_vector<double>(), {0, 0, 0, 0}, "prod two zeros");
    // cumprod [2, 0, 3, 4] -> [2, 0, 0, 0]; d sum / dx = [1 + 0, 2 + 2*3 + 2*3*4, 0, 0].
    gr = autograd::grad({cumprod(z, 0).sum()}, {z});
    expect_near(gr[0].to_vector<double>(), {1, 32, 0, 0}, "cumprod one zero");
  }
  // sort / topk route the gradient to where each value came from.
  {
    Tensor s = leaf_of({3, 1, 2}, {3});
    Tensor g = tensor_from<double>({10, 20, 30}, {3}, TensorOptions(DType::F64));
    auto gr = autograd::grad({std::get<0>(sort(s))}, {s}, {g});
    expect_near(gr[0].to_vector<double>(), {30, 10, 20}, "sort");
    gr = autograd::grad({std::get<0>(topk(s, 2))}, {s}, {g.narrow(0, 0, 2)});
    expect_near(gr[0].to_vector<double>(), {10, 0, 20}, "topk");
  }
  // pad replicate: the border element collects the copies' gradients.
  expect_near(grad_of([](const V& v) { return pad(v[0].view({1, 4}), {2, 1}, "replicate"); }, x,
                      tensor_from<double>({1, 2, 3, 4, 5, 6, 7}, {1, 7}, TensorOptions(DType::F64))),
              {1 + 2 + 3, 4, 5, 6 + 7}, "pad replicate");
  // pad reflect [x0 x1 x2 x3] by (2, 1) -> [x2 x1 x0 x1 x2 x3 x2].
  expect_near(grad_of([](const V& v) { return pad(v[0].view({1, 4}), {2, 1}, "reflect"); }, x,
                      tensor_from<double>({1, 2, 3, 4, 5, 6, 7}, {1, 7}, TensorOptions(DType::F64))),
              {3, 2 + 4, 1 + 5 + 7, 6}, "pad reflect");
  // repeat: each element gets the sum over its copies.
  expect_near(grad_of([](const V& v) { return repeat(v[0], {2}); }, x,
                      tensor_from<double>({1, 2, 3, 4, 5, 6, 7, 8}, {8}, TensorOptions(DType::F64))),
              {6, 8, 10, 12}, "repeat");
}

TEST(GradcheckIndexing, OpsWithoutDerivative) {
  // unique's values have no derivative (as in PyTorch); integer outputs record nothing.
  Tensor x = leaf_of({3, 1, 3, 2}, {4});
  Tensor u = std::get<0>(unique(x));
  EXPECT_THROW(autograd::grad({u.sum()}, {x}), NotImplementedError);
  EXPECT_FALSE(autograd::requires_grad(argmax(x)));
  EXPECT_FALSE(autograd::requires_grad(nonzero(x)));
}

}  // namespace
}  // namespace kiln
