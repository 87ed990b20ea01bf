// matmul (every broadcasting case), mm, bmm, addmm, baddbmm, dot, outer and linear against
// float64 host references, in every numeric dtype and in transposed, strided and expanded
// layouts, with empty dims; plus PyTorch's shape and dtype error messages.
#include <limits>

#include "ops/reduction_ref.h"

namespace kiln::test {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

class Linalg : public OnEachDevice {};

struct Ref {
  Shape shape;
  std::vector<double> v;
};

// PyTorch's matmul on host arrays: 1-D a is a row, 1-D b a column (dims dropped from the
// result), batch dims broadcast right-aligned.
Ref ref_matmul(const std::vector<double>& va, const Shape& sa, const std::vector<double>& vb,
               const Shape& sb) {
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  const int64_t M = a1 ? 1 : sa[sa.size() - 2], K = sa.back();
  const int64_t N = b1 ? 1 : sb.back();
  Shape ba(sa.begin(), sa.end() - std::min<size_t>(sa.size(), 2));
  Shape bb(sb.begin(), sb.end() - std::min<size_t>(sb.size(), 2));
  size_t nb = std::max(ba.size(), bb.size());
  Shape batch(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    int64_t x = i + ba.size() >= nb ? ba[i + ba.size() - nb] : 1;
    int64_t y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
    batch[i] = x == 1 ? y : x;
  }
  Ref r;
  r.shape = batch;
  if (!a1) r.shape.push_back(M);
  if (!b1) r.shape.push_back(N);
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;
  auto batch_offset = [&](const Shape& own, const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t i = 0; i < own.size(); ++i) {
      int64_t bi = idx[nb - own.size() + i];
      o = o * own[i] + (own[i] == 1 ? 0 : bi);
    }
    return o;
  };
  for (int64_t b = 0; b < nbatch; ++b) {
    std::vector<int64_t> idx = unravel(b, batch);
    int64_t oa = batch_offset(ba, idx) * M * K, ob = batch_offset(bb, idx) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += va[size_t(oa + i * K + k)] * vb[size_t(ob + k * N + j)];
        r.v.push_back(s);
      }
  }
  return r;
}

const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> v = {DType::U8,  DType::I8,   DType::I16, DType::I32,
                                       DType::I64, DType::F16,  DType::BF16, DType::F32,
                                       DType::F64};
  return v;
}

// Tolerance for a product of K terms computed in dtype t (inputs exact in t).
Tol product_tol(DType t) {
  Tol tol = tol_for(t);
  return Tol{tol.rtol, tol.atol * 4};
}

TEST_P(Linalg, MatmulEveryDtypeAndLayout) {
  uint32_t seed = 1;
  for (DType t : numeric_dtypes()) {
    for (InLayout la : in_layouts()) {
      for (InLayout lb : {InLayout::Contiguous, InLayout::Transposed, InLayout::Strided}) {
        std::vector<double> va = values_for(t, 4 * 6, seed++, -3, 3);
        std::vector<double> vb = values_for(t, 6 * 5, seed++, -3, 3);
        Tensor a = make_input(va, {4, 6}, t, device(), la);
        Tensor b = make_input(vb, {6, 5}, t, device(), lb);
        Ref r = ref_matmul(va, {4, 6}, vb, {6, 5});
        std::string what = std::string(dtype_name(t)) + " " + layout_name(la) + "@" + layout_name(lb);
        Tensor y = matmul(a, b);
        EXPECT_EQ(y.dtype(), t);
        if (t == DType::I8 || t == DType::U8) {
          // Narrow integers wrap, as PyTorch's integer GEMM does.
          std::vector<double> wrapped;
          for (double v : r.v) {
            int64_t w = int64_t(v);
            wrapped.push_back(t == DType::U8 ? double(uint8_t(w)) : double(int8_t(w)));
          }
          r.v = wrapped;
        }
        expect_close(y, r.shape, r.v, product_tol(t), what);
        expect_close(mm(a, b), r.shape, r.v, product_tol(t), what + " mm");
      }
    }
  }
}

TEST_P(Linalg, MatmulEveryBroadcastingCase) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3}, {3}},          {{2, 3}, {3}},          {{3}, {3, 4}},
      {{2, 3}, {3, 4}},    {{5, 2, 3}, {3}},       {{3}, {5, 3, 4}},
      {{5, 2, 3}, {5, 3, 4}}, {{5, 2, 3}, {3, 4}}, {{2, 3}, {5, 3, 4}},
      {{2, 1, 2, 3}, {5, 3, 4}}, {{1, 2, 3}, {4, 1, 3, 2}}, {{3, 1, 2, 3}, {1, 4, 3, 1}},
      {{2, 2, 1, 3}, {3}},  {{3}, {2, 2, 3, 1}}};
  uint32_t seed = 200;
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::BF16}) {
    for (const auto& [sa, sb] : cases) {
      std::vector<double> va = values_for(t, size_t(numel_of(sa)), seed++);
      std::vector<double> vb = values_for(t, size_t(numel_of(sb)), seed++);
      Tensor a = make_input(va, sa, t, device(), InLayout::Transposed);
      Tensor b = make_input(vb, sb, t, device(), InLayout::Contiguous);
      Ref r = ref_matmul(va, sa, vb, sb);
      Tensor y = matmul(a, b);
      expect_close(y, r.shape, r.v, product_tol(t),
                   std::string(dtype_name(t)) + " " + shape_str(sa) + " @ " + shape_str(sb));
      expect_close(a.matmul(b), r.shape, r.v, product_tol(t));
    }
  }
}

TEST_P(Linalg, MatmulWithExpandedBatchOperands) {
  std::vector<double> va = values_for(DType::F64, 2 * 3, 300);
  std::vector<double> vb = values_for(DType::F64, 4 * 3 * 2, 301);
  Tensor a = make(va, {1, 2, 3}, DType::F64, device()).expand({4, 2, 3});
  Tensor b = make(vb, {4, 3, 2}, DType::F64, device());
  std::vector<double> va4;
  for (int i = 0; i < 4; ++i) va4.insert(va4.end(), va.begin(), va.end());
  Ref r = ref_matmul(va4, {4, 2, 3}, vb, {4, 3, 2});
  expect_close(matmul(a, b), r.shape, r.v);
  expect_close(bmm(a, b), r.shape, r.v);
  // A stride-0 column: b's rows all alias one row.
  Tensor row = make({1, 2, 3}, {1, 3}, DType::F64, device()).expand({3, 3});
  Ref r2 = ref_matmul(va, {2, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3}, {3, 3});
  expect_close(mm(make(va, {2, 3}, DType::F64, device()), row), r2.shape, r2.v);
}

TEST_P(Linalg, EmptyDimensions) {
  TensorOptions o(DType::F32, device());
  expect_close(mm(zeros({2, 0}, o), zeros({0, 3}, o)), {2, 3}, std::vector<double>(6, 0.0));
  expect_close(matmul(empty({0}, o), empty({0}, o)), {}, {0});
  EXPECT_EQ(mm(zeros({0, 4}, o), zeros({4, 3}, o)).shape(), Shape({0, 3}));
  EXPECT_EQ(matmul(zeros({2, 0, 4}, o), zeros({4, 3}, o)).shape(), Shape({2, 0, 3}));
  EXPECT_EQ(bmm(zeros({0, 2, 4}, o), zeros({0, 4, 3}, o)).shape(), Shape({0, 2, 3}));
  Tensor self = full({2, 3}, 1.5, o);
  expect_close(addmm(self, zeros({2, 0}, o), zeros({0, 3}, o), 2, 3), {2, 3},
               std::vector<double>(6, 3.0));
}

TEST_P(Linalg, LowPrecisionAccumulatesInFloat) {
  const int64_t K = 2048;
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor a = ones({1, K}, TensorOptions(t, device()));
    Tensor b = ones({K, 2}, TensorOptions(t, device()));
    expect_close(mm(a, b), {1, 2}, {double(K), double(K)}, Tol{0, 0}, std::string(dtype_name(t)));
  }
  std::vector<double> va = rounded(random_values(64 * 300, -1, 1, 7), DType::F32);
  std::vector<double> vb = rounded(random_values(300 * 32, -1, 1, 8), DType::F32);
  Ref r = ref_matmul(va, {64, 300}, vb, {300, 32});
  expect_close(mm(make(va, {64, 300}, DType::F32, device()), make(vb, {300, 32}, DType::F32, device())),
               r.shape, r.v, Tol{1e-5, 1e-5});
}

TEST_P(Linalg, AddmmBetaAlphaAndBroadcastSelf) {
  uint32_t seed = 400;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I32}) {
    std::vector<double> va = values_for(t, 3 * 4, seed++);
    std::vector<double> vb = values_for(t, 4 * 5, seed++);
    Tensor a = make_input(va, {3, 4}, t, device(), InLayout::Transposed);
    Tensor b = make_input(vb, {4, 5}, t, device(), InLayout::Strided);
    Ref p = ref_matmul(va, {3, 4}, vb, {4, 5});
    for (const Shape& ss : std::vector<Shape>{{3, 5}, {5}, {1, 5}, {3, 1}, {}}) {
      std::vector<double> vs = values_for(t, size_t(numel_of(ss)), seed++);
      Tensor self = make(vs, ss, t, device());
      for (auto [beta, alpha] : std::vector<std::pair<int, int>>{{1, 1}, {2, -3}, {0, 2}}) {
        std::vector<double> ref(15);
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 5; ++j) {
            double s = ss.empty() ? vs[0]
                       : ss.size() == 1 ? vs[size_t(j)]
                       : vs[size_t((ss[0] == 1 ? 0 : i) * ss[1] + (ss[1] == 1 ? 0 : j))];
            ref[size_t(i * 5 + j)] = beta * s + alpha * p.v[size_t(i * 5 + j)];
          }
        Tol tol = product_tol(t);
        if (t == DType::F16) tol = Tol{4e-3, 2e-2};
        expect_close(addmm(self, a, b, beta, alpha), {3, 5}, ref, tol,
                     std::string(dtype_name(t)) + " self " + shape_str(ss));
      }
    }
  }
}

TEST_P(Linalg, BetaZeroIgnoresNaNInSelf) {
  Tensor self = full({2, 2}, kNaN, TensorOptions(DType::F32, device()));
  Tensor a = make({1, 2, 3, 4}, {2, 2}, DType::F32, device());
  expect_close(addmm(self, a, a, 0, 1), {2, 2}, {7, 10, 15, 22});
  Tensor bself = full({1, 2, 2}, kNaN, TensorOptions(DType::F32, device()));
  Tensor ba = make({1, 2, 3, 4}, {1, 2, 2}, DType::F32, device());
  expect_close(baddbmm(bself, ba, ba, 0, 2), {1, 2, 2}, {14, 20, 30, 44});
  expect_close(addmm(self, a, a, 1, 1), {2, 2}, {kNaN, kNaN, kNaN, kNaN});
}

TEST_P(Linalg, BaddbmmAndBmm) {
  uint32_t seed = 500;
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::BF16}) {
    std::vector<double> va = values_for(t, 3 * 2 * 4, seed++);
    std::vector<double> vb = values_for(t, 3 * 4 * 5, seed++);
    Tensor a = make_input(va, {3, 2, 4}, t, device(), InLayout::Strided);
    Tensor b = make_input(vb, {3, 4, 5}, t, device(), InLayout::Transposed);
    Ref p = ref_matmul(va, {3, 2, 4}, vb, {3, 4, 5});
    expect_close(bmm(a, b), p.shape, p.v, product_tol(t), std::string(dtype_name(t)));
    std::vector<double> vs = values_for(t, 5, seed++);
    Tensor self = make(vs, {5}, t, device());
    std::vector<double> ref(p.v.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = 2 * vs[i % 5] + 3 * p.v[i];
    Tol tol = product_tol(t);
    if (t == DType::BF16) tol = Tol{3e-2, 1e-1};
    expect_close(baddbmm(self, a, b, 2, 3), p.shape, ref, tol, std::string(dtype_name(t)));
  }
}

TEST_P(Linalg, DotAndOuter) {
  for (DType t : numeric_dtypes()) {
    std::vector<double> va = values_for(t, 7, 600, -3, 3);
    std::vector<double> vb = values_for(t, 7, 601, -3, 3);
    Tensor a = make_input(va, {7}, t, device(), InLayout::Strided);
    Tensor b = make(vb, {7}, t, device());
    double d = 0;
    for (size_t i = 0; i < 7; ++i) d += va[i] * vb[i];
    if (t == DType::U8) d = double(uint8_t(int64_t(d)));
    if (t == DType::I8) d = double(int8_t(int64_t(d)));
    expect_close(dot(a, b), {}, {d}, product_tol(t), std::string(dtype_name(t)));
    std::vector<double> o;
    for (size_t i = 0; i < 7; ++i)
      for (size_t j = 0; j < 7; ++j) {
        double v = va[i] * vb[j];
        if (t == DType::U8) v = double(uint8_t(int64_t(v)));
        if (t == DType::I8) v = double(int8_t(int64_t(v)));
        o.push_back(v);
      }
    expect_close(outer(a, b), {7, 7}, o, product_tol(t));
  }
  Tensor i = make({1, 2}, {2}, DType::I64, device());
  Tensor f = make({0.5, 1.5, 2}, {3}, DType::F32, device());
  Tensor o = outer(i, f);  // outer promotes like mul
  EXPECT_EQ(o.dtype(), DType::F32);
  expect_close(o, {2, 3}, {0.5, 1.5, 2, 1, 3, 4});
}

TEST_P(Linalg, LinearWithAndWithoutBias) {
  std::vector<double> vx = values_for(DType::F32, 2 * 3 * 4, 700);
  std::vector<double> vw = values_for(DType::F32, 5 * 4, 701);
  std::vector<double> vbias = values_for(DType::F32, 5, 702);
  Tensor x = make(vx, {2, 3, 4}, DType::F32, device());
  Tensor w = make(vw, {5, 4}, DType::F32, device());
  Tensor bias = make(vbias, {5}, DType::F32, device());
  std::vector<double> ref, ref_nb;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 5; ++o) {
      double s = 0;
      for (int64_t k = 0; k < 4; ++k) s += vx[size_t(r * 4 + k)] * vw[size_t(o * 4 + k)];
      ref_nb.push_back(s);
      ref.push_back(s + vbias[size_t(o)]);
    }
  expect_close(linear(x, w, bias), {2, 3, 5}, ref);
  expect_close(linear(x, w), {2, 3, 5}, ref_nb);
  Tensor x2 = make(vx, {6, 4}, DType::F32, device());
  expect_close(linear(x2, w, bias), {6, 5}, ref);
  Tensor x1 = make(std::vector<double>(vx.begin(), vx.begin() + 4), {4}, DType::F32, device());
  expect_close(linear(x1, w, bias), {5}, std::vector<double>(ref.begin(), ref.begin() + 5));
  Tensor wv = make(std::vector<double>(vw.begin(), vw.begin() + 4), {4}, DType::F32, device());
  expect_close(linear(x2, wv), {6}, {ref_nb[0], ref_nb[5], ref_nb[10], ref_nb[15], ref_nb[20],
                                     ref_nb[25]});
  Tensor xt = make(vx, {4, 6}, DType::F32, device()).t();  // non-contiguous input
  std::vector<double> vxt = values(xt);
  Tensor xtc = make(vxt, {6, 4}, DType::F32, device());
  expect_close(linear(xt, w, bias), {6, 5}, values(linear(xtc, w, bias)));
}

TEST_P(Linalg, ShapeErrorsUsePyTorchWording) {
  TensorOptions o(DType::F32, device());
  expect_error<ShapeError>([&] { mm(zeros({2, 3}, o), zeros({4, 5}, o)); },
                           {"mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"});
  expect_error<ShapeError>([&] { matmul(zeros({2, 3}, o), zeros({4, 5}, o)); },
                           {"mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"});
  expect_error<ShapeError>([&] { matmul(zeros({3}, o), zeros({4, 5}, o)); },
                           {"(1x3 and 4x5)"});
  expect_error<ShapeError>([&] { matmul(zeros({2, 3}, o), zeros({4}, o)); },
                           {"size mismatch, got input (2), mat (2x3), vec (4)"});
  expect_error<ShapeError>([&] { matmul(zeros({3}, o), zeros({4}, o)); },
                           {"inconsistent tensor size", "3 and 4 elements"});
  expect_error<ShapeError>([&] { matmul(zeros({2, 2, 3}, o), zeros({2, 4, 5}, o)); },
                           {"[2, 2, 3]", "[2, 4, 5]", "expected size 3", "got 4"});
  expect_error<ShapeError>([&] { matmul(zeros({2, 2, 3}, o), zeros({3, 3, 5}, o)); },
                           {"batch dimensions", "[2]", "[3]"});
  expect_error<ShapeError>([&] { matmul(zeros({}, o), zeros({3}, o)); },
                           {"at least 1D", "0D and 1D"});
  expect_error<ShapeError>([&] { mm(zeros({3}, o), zeros({3, 3}, o)); },
                           {"mm", "mat1", "2-D", "1-D"});
  expect_error<ShapeError>([&] { bmm(zeros({2, 3}, o), zeros({2, 3, 3}, o)); },
                           {"batch1", "3-D", "2-D"});
  expect_error<ShapeError>([&] { bmm(zeros({2, 2, 3}, o), zeros({3, 3, 3}, o)); },
                           {"batch2", "[2, 3]", "[3, 3]"});
  expect_error<ShapeError>([&] { addmm(zeros({4, 5}, o), zeros({2, 3}, o), zeros({3, 5}, o)); },
                           {"addmm", "[4, 5]", "[2, 5]"});
  expect_error<ShapeError>([&] { baddbmm(zeros({3, 3}, o), zeros({1, 2, 3}, o), zeros({1, 3, 3}, o)); },
                           {"baddbmm", "[3, 3]", "[1, 2, 3]"});
  expect_error<ShapeError>([&] { dot(zeros({2, 2}, o), zeros({2}, o)); }, {"1D tensors expected", "2D and 1D"});
  expect_error<ShapeError>([&] { dot(zeros({2}, o), zeros({3}, o)); }, {"inconsistent tensor size"});
  expect_error<ShapeError>([&] { outer(zeros({2, 2}, o), zeros({2}, o)); }, {"outer", "1-D", "2-D"});
  expect_error<ShapeError>([&] { linear(zeros({2, 3, 3}, o), zeros({5, 4}, o)); },
                           {"mat1 and mat2 shapes cannot be multiplied (6x3 and 4x5)"});
}

TEST_P(Linalg, DtypeErrors) {
  Tensor f = zeros({2, 2}, TensorOptions(DType::F32, device()));
  Tensor d = zeros({2, 2}, TensorOptions(DType::F64, device()));
  Tensor h = zeros({2, 2}, TensorOptions(DType::F16, device()));
  expect_error<Error>([&] { mm(f, d); },
                          {"expected m1 and m2 to have the same dtype, but got: float != double"});
  expect_error<Error>([&] { matmul(h, f); }, {"c10::Half != float"});
  expect_error<Error>([&] { bmm(f.unsqueeze(0), d.unsqueeze(0)); }, {"float != double"});
  expect_error<Error>([&] { addmm(d, f, f); }, {"self and mat2 must have the same dtype",
                                                    "Double and Float"});
  expect_error<Error>([&] { dot(f[0], d[0]); }, {"dot", "Float and Double"});
  Tensor b = zeros({2, 2}, TensorOptions(DType::Bool, device()));
  expect_error<Error>([&] { matmul(b, b); }, {"matmul", "bool"});
  Tensor i = zeros({2, 2}, TensorOptions(DType::I32, device()));
  expect_error<Error>([&] { addmm(i, i, i, 1, 0.5); }, {"integral", "alpha"});
}


TEST_P(Linalg, Int64ProductsAreExact) {
  // 3037000499^2 and the sum below are not representable in double.
  const int64_t a = 3037000499;
  Tensor x = tensor_from(std::vector<int64_t>{a, 1, 2, a}, Shape{2, 2},
                         TensorOptions(DType::I64, device()));
  Tensor y = tensor_from(std::vector<int64_t>{a, 3, 5, a}, Shape{2, 2},
                         TensorOptions(DType::I64, device()));
  std::vector<int64_t> want = {a * a + 5, 3 * a + a, 2 * a + 5 * a, 6 + a * a};
  EXPECT_EQ(mm(x, y).to_vector<int64_t>(), want);
  EXPECT_EQ(dot(x[0], y.t()[0]).item<int64_t>(), a * a + 5);
  // int8 products wrap modulo 256 as in PyTorch.
  Tensor s = tensor_from(std::vector<int8_t>{100, 100}, TensorOptions(DType::I8, device()));
  EXPECT_EQ(dot(s, s).item<int64_t>(), int64_t(int8_t(uint8_t(20000 % 256))));
}

TEST_P(Linalg, ResultsAreFreshContiguousTensors) {
  Tensor a = ones({3, 4}, TensorOptions(DType::F32, device()));
  Tensor v = ones({4}, TensorOptions(DType::F32, device()));
  for (const Tensor& r : {matmul(a, v), matmul(v, a.t()), mm(a, a.t()), dot(v, v),
                          matmul(a.unsqueeze(0).expand({2, 3, 4}), v)}) {
    EXPECT_TRUE(r.is_contiguous());
    EXPECT_FALSE(r.is_view());
    EXPECT_EQ(r.device(), device());
  }
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(Linalg);

}  // namespace kiln::test
