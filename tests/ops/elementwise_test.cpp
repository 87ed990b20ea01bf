// Elementwise ops against float64 references on random inputs, in every dtype each op
// accepts, in contiguous / transposed / strided / broadcast / 0-d / empty layouts, on every
// device.
#include <cmath>

#include "ops/test_util.h"

namespace kiln {
namespace {

using test::Layout;
using test::OnEachDevice;

const std::vector<Shape> kShapes = {{}, {0}, {7}, {3, 5}, {2, 3, 4}, {4, 0, 3}};
const std::vector<Layout> kLayouts = {Layout::Contiguous, Layout::Transposed, Layout::Strided};

struct UnaryCase {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double (*ref)(double);
  double lo, hi;        // input domain
  bool float_only;      // integer inputs promote to float32
  bool ints_allowed;    // accepts integer dtypes at all
};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double silu_ref(double x) { return x * sigmoid_ref(x); }
double relu_ref(double x) { return x > 0 ? x : 0; }
double sign_ref(double x) { return (x > 0) - (x < 0); }
double rsqrt_ref(double x) { return 1 / std::sqrt(x); }
double recip_ref(double x) { return 1 / x; }
double neg_ref(double x) { return -x; }
double round_ref(double x) { return std::nearbyint(x); }

const UnaryCase kUnary[] = {
    {"neg", neg, neg_ref, -10, 10, false, true},
    {"abs", abs, [](double x) { return std::fabs(x); }, -10, 10, false, true},
    {"exp", exp, [](double x) { return std::exp(x); }, -5, 5, true, true},
    {"exp2", exp2, [](double x) { return std::exp2(x); }, -5, 5, true, true},
    {"log", log, [](double x) { return std::log(x); }, 0.1, 10, true, true},
    {"log2", log2, [](double x) { return std::log2(x); }, 0.1, 10, true, true},
    {"log1p", log1p, [](double x) { return std::log1p(x); }, -0.5, 10, true, true},
    {"expm1", expm1, [](double x) { return std::expm1(x); }, -3, 3, true, true},
    {"sqrt", sqrt, [](double x) { return std::sqrt(x); }, 0, 20, true, true},
    {"rsqrt", rsqrt, rsqrt_ref, 0.5, 20, true, true},
    {"sin", sin, [](double x) { return std::sin(x); }, -4, 4, true, true},
    {"cos", cos, [](double x) { return std::cos(x); }, -4, 4, true, true},
    {"tan", tan, [](double x) { return std::tan(x); }, -1.2, 1.2, true, true},
    {"tanh", tanh, [](double x) { return std::tanh(x); }, -4, 4, true, true},
    {"sigmoid", sigmoid, sigmoid_ref, -8, 8, true, true},
    {"relu", relu, relu_ref, -5, 5, false, true},
    {"silu", silu, silu_ref, -6, 6, true, true},
    {"erf", erf, [](double x) { return std::erf(x); }, -3, 3, true, true},
    {"floor", floor, [](double x) { return std::floor(x); }, -10, 10, false, true},
    {"ceil", ceil, [](double x) { return std::ceil(x); }, -10, 10, false, true},
    {"round", round, round_ref, -10, 10, false, true},
    {"trunc", trunc, [](double x) { return std::trunc(x); }, -10, 10, false, true},
    {"sign", sign, sign_ref, -5, 5, false, true},
    {"reciprocal", reciprocal, recip_ref, 0.5, 5, true, true},
};

class Unary : public OnEachDevice {};

TEST_P(Unary, MatchesFloat64ReferenceInEveryDtypeAndLayout) {
  int checked = 0;
  for (const auto& c : kUnary) {
    for (DType dt : test::all_dtypes()) {
      if (dt == DType::Bool) continue;
      bool is_int = !is_floating(dt);
      if (is_int && !c.ints_allowed) continue;
      double lo = c.lo, hi = c.hi;
      if (dt == DType::U8) lo = std::max(lo, 0.0);
      if (is_int && lo < 1 && (std::string(c.name) == "log" || std::string(c.name) == "log2" ||
                               std::string(c.name) == "rsqrt" || std::string(c.name) == "reciprocal"))
        lo = 1;
      for (const Shape& shape : kShapes) {
        for (Layout layout : kLayouts) {
          auto vals = test::rounded(
              test::random_values(size_t(numel_of(shape)), lo, hi, 11 + checked, is_int), dt);
          Tensor x = test::make_layout(vals, shape, dt, device(), layout);
          Tensor y = c.fn(x);
          DType out_dt = (c.float_only && is_int) ? DType::F32 : dt;
          ASSERT_EQ(y.dtype(), out_dt) << c.name << " " << dtype_name(dt);
          std::vector<double> want;
          for (double v : vals) want.push_back(test::round_to(c.ref(v), out_dt));
          test::Tol tol = test::tol_for(out_dt);
          if (!is_floating(out_dt)) tol = {0, 0};
          test::expect_close(y, shape, want, tol,
                             std::string(c.name) + " " + std::string(dtype_name(dt)) +
                                 " shape " + shape_str(shape) + " layout " +
                                 std::to_string(int(layout)));
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST_P(Unary, InPlaceAndOutForms) {
  auto vals = test::random_values(12, 0.5, 3, 5);
  Tensor x = test::make(vals, {3, 4}, DType::F32, device());
  Tensor view = x.t();
  exp_(view);
  std::vector<double> want;
  for (double v : vals) want.push_back(std::exp(double(float(v))));
  test::expect_close(x, {3, 4}, want);
  Tensor out = empty({3, 4}, TensorOptions(DType::F64, device()));
  log_out(x, out);  // computed in f32, written to f64
  std::vector<double> want_log;
  for (double v : want) want_log.push_back(std::log(v));
  test::expect_close(out, {3, 4}, want_log, test::Tol{1e-5, 1e-6});
  Tensor ints = arange(4, TensorOptions(DType::I64, device()));
  EXPECT_THROW(exp_(ints), Error);  // float result can't be written to int64
  Tensor wrong = empty({5}, TensorOptions(DType::F32, device()));
  EXPECT_THROW(exp_out(x, wrong), ShapeError);
  EXPECT_THROW(neg(ones({2}, TensorOptions(DType::Bool, device()))), Error);
}

TEST_P(Unary, SpecialValues) {
  Device d = device();
  Tensor x = tensor_from(std::vector<float>{NAN, INFINITY, -INFINITY, -0.0f, 0.5f, -2.5f, 2.5f},
                         TensorOptions(d));
  test::expect_close(relu(x), {7}, {NAN, INFINITY, 0, 0, 0.5, 0, 2.5});
  test::expect_close(round(x), {7}, {NAN, INFINITY, -INFINITY, 0, 0, -2, 2});
  test::expect_close(isnan(x), {7}, {1, 0, 0, 0, 0, 0, 0});
  test::expect_close(isinf(x), {7}, {0, 1, 1, 0, 0, 0, 0});
  test::expect_close(isfinite(x), {7}, {0, 0, 0, 1, 1, 1, 1});
  test::expect_close(sigmoid(x), {7}, {NAN, 1, 0, 0.5, sigmoid_ref(0.5), sigmoid_ref(-2.5), sigmoid_ref(2.5)});
  test::expect_close(nan_to_num(x), {7},
                     {0, double(std::numeric_limits<float>::max()),
                      -double(std::numeric_limits<float>::max()), 0, 0.5, -2.5, 2.5});
  test::expect_close(nan_to_num(x, 1.0, 2.0, -3.0), {7}, {1, 2, -3, 0, 0.5, -2.5, 2.5});
  test::expect_close(logical_not(x), {7}, {0, 0, 0, 1, 0, 0, 0});
  test::expect_close(isnan(arange(3, TensorOptions(d))), {3}, {0, 0, 0});
  // Integer abs/neg wrap at the minimum, as two's complement.
  Tensor i8 = tensor_from(std::vector<int8_t>{-128, -5, 7}, TensorOptions(d));
  test::expect_close(abs(i8), {3}, {-128, 5, 7});
  test::expect_close(neg(i8), {3}, {-128, 5, -7});
}

TEST_P(Unary, GeluSoftplusClamp) {
  Device d = device();
  auto vals = test::random_values(20, -6, 6, 3);
  for (DType dt : test::float_dtypes()) {
    auto v = test::rounded(vals, dt);
    Tensor x = test::make(v, {4, 5}, dt, d);
    std::vector<double> g, gt, sp, cl;
    for (double a : v) {
      g.push_back(0.5 * a * (1 + std::erf(a / std::sqrt(2.0))));
      gt.push_back(0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))));
      sp.push_back(2 * a > 20 ? a : std::log1p(std::exp(2 * a)) / 2);
      cl.push_back(std::min(std::max(a, -1.0), 2.0));
    }
    test::expect_close(gelu(x), {4, 5}, g);
    test::expect_close(gelu(x, "tanh"), {4, 5}, gt);
    test::expect_close(softplus(x, 2, 20), {4, 5}, sp);
    test::expect_close(clamp(x, -1.0, 2.0), {4, 5}, test::rounded(cl, dt));
  }
  EXPECT_THROW(gelu(ones({2}, TensorOptions(d)), "fast"), ValueError);
  Tensor ints = arange(-3, 4, 1, TensorOptions(d));
  test::expect_close(clamp(ints, 0, std::nullopt), {7}, {0, 0, 0, 0, 1, 2, 3});
  EXPECT_EQ(clamp(ints, 0.5, std::nullopt).dtype(), DType::F32);  // float bound promotes
  test::expect_close(clamp(ints, 2, 1), {7}, {1, 1, 1, 1, 1, 1, 1});  // min > max gives max
  EXPECT_THROW(clamp(ints, std::nullopt, std::nullopt), ValueError);
  Tensor lo = full({1}, -1, TensorOptions(d)), hi = arange(7, TensorOptions(d));
  test::expect_close(clamp(ints, lo, hi), {7}, {-1, -1, -1, 0, 1, 2, 3});
  Tensor f = tensor_from(std::vector<float>{-2, 0.5, 9}, TensorOptions(d));
  clamp_(f, 0, 1);
  test::expect_close(f, {3}, {0, 0.5, 1});
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Unary);

// ---- binary ----

struct BinaryCase {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  double (*ref)(double, double);
  double lo, hi;
  bool ints, floats, nonzero_rhs, bool_out;
};

Tensor add2(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub2(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor div2(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor div_trunc(const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); }
Tensor div_floor(const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }
Tensor mul2(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor pow2(const Tensor& a, const Tensor& b) { return pow(a, b); }
Tensor max2(const Tensor& a, const Tensor& b) { return maximum(a, b); }
Tensor min2(const Tensor& a, const Tensor& b) { return minimum(a, b); }
Tensor fmod2(const Tensor& a, const Tensor& b) { return fmod(a, b); }
Tensor rem2(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor atan22(const Tensor& a, const Tensor& b) { return atan2(a, b); }
Tensor eq2(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor ne2(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor lt2(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor le2(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor gt2(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor ge2(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor land2(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor lor2(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor lxor2(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }
Tensor band2(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor bor2(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor bxor2(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }

double py_floor_div(double a, double b) { return std::floor(a / b); }
double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

const BinaryCase kBinary[] = {
    {"add", add2, [](double a, double b) { return a + b; }, -50, 50, true, true, false, false},
    {"sub", sub2, [](double a, double b) { return a - b; }, -50, 50, true, true, false, false},
    {"mul", mul2, [](double a, double b) { return a * b; }, -10, 10, true, true, false, false},
    {"div", div2, [](double a, double b) { return a / b; }, -10, 10, true, true, true, false},
    {"div_trunc", div_trunc, [](double a, double b) { return std::trunc(a / b); }, -20, 20, true, true, true, false},
    {"div_floor", div_floor, py_floor_div, -20, 20, true, true, true, false},
    {"pow", pow2, [](double a, double b) { return std::pow(a, b); }, 0.5, 3, false, true, false, false},
    {"maximum", max2, [](double a, double b) { return std::max(a, b); }, -9, 9, true, true, false, false},
    {"minimum", min2, [](double a, double b) { return std::min(a, b); }, -9, 9, true, true, false, false},
    {"fmod", fmod2, [](double a, double b) { return std::fmod(a, b); }, -20, 20, true, true, true, false},
    {"remainder", rem2, py_mod, -20, 20, true, true, true, false},
    {"atan2", atan22, [](double a, double b) { return std::atan2(a, b); }, -5, 5, false, true, false, false},
    {"eq", eq2, [](double a, double b) { return double(a == b); }, -2, 2, true, true, false, true},
    {"ne", ne2, [](double a, double b) { return double(a != b); }, -2, 2, true, true, false, true},
    {"lt", lt2, [](double a, double b) { return double(a < b); }, -2, 2, true, true, false, true},
    {"le", le2, [](double a, double b) { return double(a <= b); }, -2, 2, true, true, false, true},
    {"gt", gt2, [](double a, double b) { return double(a > b); }, -2, 2, true, true, false, true},
    {"ge", ge2, [](double a, double b) { return double(a >= b); }, -2, 2, true, true, false, true},
    {"logical_and", land2, [](double a, double b) { return double(a != 0 && b != 0); }, -2, 2, true, true, false, true},
    {"logical_or", lor2, [](double a, double b) { return double(a != 0 || b != 0); }, -2, 2, true, true, false, true},
    {"logical_xor", lxor2, [](double a, double b) { return double((a != 0) != (b != 0)); }, -2, 2, true, true, false, true},
    {"bitwise_and", band2, [](double a, double b) { return double(int64_t(a) & int64_t(b)); }, -60, 60, true, false, false, false},
    {"bitwise_or", bor2, [](double a, double b) { return double(int64_t(a) | int64_t(b)); }, -60, 60, true, false, false, false},
    {"bitwise_xor", bxor2, [](double a, double b) { return double(int64_t(a) ^ int64_t(b)); }, -60, 60, true, false, false, false},
};

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 1, 3}, {4, 1}}, {{}, {5}}, {{5}, {}},
    {{0, 3}, {1, 3}}, {{2, 3}, {2, 1}}, {{}, {}}};

class Binary : public OnEachDevice {};

TEST_P(Binary, MatchesFloat64ReferenceWithBroadcasting) {
  int checked = 0;
  std::vector<DType> dtypes = {DType::U8, DType::I8, DType::I32, DType::I64,
                               DType::F16, DType::BF16, DType::F32, DType::F64};
  for (const auto& c : kBinary) {
    for (DType dt : dtypes) {
      bool is_int = !is_floating(dt);
      if ((is_int && !c.ints) || (!is_int && !c.floats)) continue;
      double lo = c.lo, hi = c.hi;
      if (dt == DType::U8) lo = std::max(lo, 0.0);
      if (dt == DType::I8 || dt == DType::U8) hi = std::min(hi, 11.0), lo = std::max(lo, dt == DType::U8 ? 0.0 : -11.0);
      for (const auto& [sa, sb] : kBroadcastPairs) {
        for (Layout layout : {Layout::Contiguous, Layout::Transposed}) {
          auto va = test::rounded(test::random_values(size_t(numel_of(sa)), lo, hi, 100 + checked, is_int), dt);
          auto vb = test::rounded(test::random_values(size_t(numel_of(sb)), lo, hi, 200 + checked, is_int), dt);
          if (c.nonzero_rhs)
            for (auto& v : vb)
              if (v == 0) v = 1;
          Tensor a = test::make_layout(va, sa, dt, device(), layout);
          Tensor b = test::make_layout(vb, sb, dt, device(), Layout::Contiguous);
          Tensor y = c.fn(a, b);
          Shape out_shape = broadcast_shapes(sa, sb);
          DType out_dt = c.bool_out ? DType::Bool
                         : (std::string(c.name) == "div" || std::string(c.name) == "atan2") && is_int
                             ? DType::F32
                             : dt;
          ASSERT_EQ(y.dtype(), out_dt) << c.name;
          // Reference on the broadcast index.
          Tensor ia = arange(numel_of(sa), TensorOptions(DType::F64)).view(sa).expand(out_shape).contiguous();
          Tensor ib = arange(numel_of(sb), TensorOptions(DType::F64)).view(sb).expand(out_shape).contiguous();
          auto idx_a = ia.to_vector<int64_t>(), idx_b = ib.to_vector<int64_t>();
          std::vector<double> want;
          for (size_t i = 0; i < idx_a.size(); ++i)
            want.push_back(test::round_to(c.ref(va[size_t(idx_a[i])], vb[size_t(idx_b[i])]), out_dt));
          test::Tol tol = is_floating(out_dt) ? test::tol_for(out_dt) : test::Tol{0, 0};
          test::expect_close(y, out_shape, want, tol,
                             std::string(c.name) + " " + std::string(dtype_name(dt)) + " " +
                                 shape_str(sa) + " op " + shape_str(sb));
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 400);
}

TEST_P(Binary, AlphaScalarsInPlaceAndOut) {
  Device d = device();
  Tensor a = tensor_from(std::vector<float>{1, 2, 3}, TensorOptions(d));
  Tensor b = tensor_from(std::vector<float>{10, 20, 30}, TensorOptions(d));
  test::expect_close(add(a, b, 2), {3}, {21, 42, 63});
  test::expect_close(sub(a, b, 0.5), {3}, {-4, -8, -12});
  test::expect_close(a + 1, {3}, {2, 3, 4});
  test::expect_close(2 - a, {3}, {1, 0, -1});
  test::expect_close(6 / a, {3}, {6, 3, 2});
  test::expect_close(a * 2.5, {3}, {2.5, 5, 7.5});
  test::expect_close(pow(a, 2), {3}, {1, 4, 9});
  test::expect_close(pow(2, a), {3}, {2, 4, 8});
  Tensor c = a.clone();
  c += b;
  c *= a;
  test::expect_close(c, {3}, {11, 44, 99});
  Tensor out = empty({3}, TensorOptions(DType::F64, d));
  add_out(a, b, out);
  test::expect_close(out, {3}, {11, 22, 33});
  Tensor ints = arange(3, TensorOptions(DType::I32, d));
  EXPECT_THROW(add(ints, ints, 0.5), Error);
  EXPECT_THROW(add_(ints, a), Error);  // float result into int tensor
  Tensor small = ones({3}, TensorOptions(d));
  EXPECT_THROW(add_(small, ones({2, 3}, TensorOptions(d))), ShapeError);
  EXPECT_THROW(sub(ones({2}, TensorOptions(DType::Bool, d)), ones({2}, TensorOptions(DType::Bool, d))),
               Error);
  EXPECT_THROW(bitwise_and(a, b), NotImplementedError);
  EXPECT_THROW(div(a, b, "round"), ValueError);
  // In-place with an overlapping transposed operand reads before writing.
  Tensor m = arange(4, TensorOptions(DType::F32, d)).view({2, 2});
  m.add_(m.t());
  test::expect_close(m, {2, 2}, {0, 3, 3, 6});
}

TEST_P(Binary, IntegerSemantics) {
  Device d = device();
  Tensor a = tensor_from(std::vector<int64_t>{7, -7, 7, -7}, TensorOptions(d));
  Tensor b = tensor_from(std::vector<int64_t>{2, 2, -2, -2}, TensorOptions(d));
  test::expect_close(div(a, b, "trunc"), {4}, {3, -3, -3, 3});
  test::expect_close(div(a, b, "floor"), {4}, {3, -4, -4, 3});
  test::expect_close(remainder(a, b), {4}, {1, 1, -1, -1});
  test::expect_close(fmod(a, b), {4}, {1, -1, 1, -1});
  test::expect_close(pow(b, tensor_from(std::vector<int64_t>{3, 2, 1, 0}, TensorOptions(d))), {4}, {8, 4, -2, 1});
  Tensor zero = zeros({4}, TensorOptions(DType::I64, d));
  EXPECT_THROW(div(a, zero, "trunc").to_vector<double>(), Error);
  // Overflow wraps.
  Tensor big = tensor_from(std::vector<int32_t>{INT32_MAX}, TensorOptions(d));
  test::expect_close(add(big, 1), {1}, {double(INT32_MIN)});
  // Bool arithmetic: add is or, mul is and.
  Tensor t = tensor_from(std::vector<bool>{true, true, false}, TensorOptions(d));
  Tensor f = tensor_from(std::vector<bool>{true, false, false}, TensorOptions(d));
  test::expect_close(add(t, f), {3}, {1, 1, 0});
  test::expect_close(mul(t, f), {3}, {1, 0, 0});
  EXPECT_EQ(add(t, f).dtype(), DType::Bool);
  // Float floor division and remainder with signs.
  Tensor x = tensor_from(std::vector<double>{7.5, -7.5, 7.5, -7.5}, TensorOptions(d));
  Tensor y = tensor_from(std::vector<double>{2, 2, -2, -2}, TensorOptions(d));
  test::expect_close(div(x, y, "floor"), {4}, {3, -4, -4, 3});
  test::expect_close(remainder(x, y), {4}, {1.5, 0.5, -0.5, -1.5});
  // NaN propagates through maximum/minimum.
  Tensor n = tensor_from(std::vector<float>{NAN, 1}, TensorOptions(d));
  Tensor m = tensor_from(std::vector<float>{0, NAN}, TensorOptions(d));
  test::expect_close(maximum(n, m), {2}, {NAN, NAN});
  test::expect_close(minimum(n, ones({2}, TensorOptions(d))), {2}, {NAN, 1});
}

TEST_P(Binary, TernaryOps) {
  Device d = device();
  auto va = test::random_values(12, -3, 3, 1), vb = test::random_values(12, -3, 3, 2),
       vc = test::random_values(12, 0.5, 3, 3);
  for (DType dt : test::float_dtypes()) {
    auto a = test::rounded(va, dt), b = test::rounded(vb, dt), cc = test::rounded(vc, dt);
    Tensor ta = test::make(a, {3, 4}, dt, d), tb = test::make(b, {3, 4}, dt, d),
           tc = test::make(cc, {3, 4}, dt, d);
    Tensor cond = gt(ta, tb);
    std::vector<double> w, l, am, ad;
    for (size_t i = 0; i < 12; ++i) {
      w.push_back(a[i] > b[i] ? a[i] : b[i]);
      l.push_back(a[i] + 0.25 * (b[i] - a[i]));
      am.push_back(a[i] + 0.5 * b[i] * cc[i]);
      ad.push_back(a[i] + 0.5 * b[i] / cc[i]);
    }
    test::expect_close(where(cond, ta, tb), {3, 4}, w);
    test::expect_close(lerp(ta, tb, 0.25), {3, 4}, l);
    test::expect_close(addcmul(ta, tb, tc, 0.5), {3, 4}, am);
    test::expect_close(addcdiv(ta, tb, tc, 0.5), {3, 4}, ad);
  }
  // where broadcasts its condition and promotes branches; scalar branches.
  Tensor cond = tensor_from(std::vector<bool>{true, false}, TensorOptions(d)).view({2, 1});
  Tensor r = where(cond, arange(3, TensorOptions(DType::I32, d)), 0.5);
  EXPECT_EQ(r.dtype(), DType::F32);
  test::expect_close(r, {2, 3}, {0, 1, 2, 0.5, 0.5, 0.5});
  EXPECT_THROW(where(ones({2}, TensorOptions(d)), ones({2}, TensorOptions(d)), ones({2}, TensorOptions(d))),
               Error);
  test::expect_close(lerp(zeros({2}, TensorOptions(d)), full({2}, 4.0, TensorOptions(d)),
                          tensor_from(std::vector<float>{0.5f, 1.0f}, TensorOptions(d))),
                     {2}, {2, 4});
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Binary);

}  // namespace
}  // namespace kiln
