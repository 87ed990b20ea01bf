// lstm_cell (decision 0070): one row is bit for bit the step written as ops (sigmoid / tanh on
// the contiguous gate blocks, then mul and add), several rows within float32 rounding of a
// float64 evaluation; bad inputs are refused with the expected and given shapes. CTest reruns
// it at every ISA level (the vector functions, and the scalar formulas at the baseline).
#include <cmath>
#include <cstring>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/lstm_cell.h"
#include "kiln/ops/views.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

Tensor values(const Shape& shape, uint32_t seed, double spread) {
  return make(random_values(size_t(numel_of(shape)), -spread, spread, seed), shape, DType::F32,
              kCpu);
}

TEST(LstmCell, OneRowIsTheStepWrittenAsOps) {
  for (int64_t H : {1, 7, 16, 33, 128, 300}) {
    const Tensor g = values({1, 4 * H}, uint32_t(H), 6.0), c = values({1, H}, uint32_t(H + 1), 3.0);
    const std::vector<Tensor> got = lstm_cell(g, c);
    auto block = [&](int64_t k) { return narrow(g, 1, k * H, H).contiguous(); };
    const Tensor i = sigmoid(block(0)), o = sigmoid(block(1)), f = sigmoid(block(2));
    const Tensor c_new = add(mul(f, c), mul(i, tanh(block(3))));
    const Tensor h_new = mul(o, tanh(c_new));
    const std::vector<float> gh = got[0].to_vector<float>(), gc = got[1].to_vector<float>();
    const std::vector<float> wh = h_new.to_vector<float>(), wc = c_new.to_vector<float>();
    for (size_t j = 0; j < size_t(H); ++j) {
      EXPECT_EQ(std::memcmp(&gc[j], &wc[j], 4), 0) << "H " << H << " c' " << j;
      EXPECT_EQ(std::memcmp(&gh[j], &wh[j], 4), 0) << "H " << H << " h' " << j;
    }
  }
}

TEST(LstmCell, RowsAgainstFloat64) {
  const int64_t B = 5, H = 40;
  const Tensor g = values({B, 4 * H}, 3, 8.0), c = values({B, H}, 4, 4.0);
  const std::vector<Tensor> got = lstm_cell(g, c);
  const std::vector<double> gv = g.to_vector<double>(), cv = c.to_vector<double>();
  const std::vector<double> h = got[0].to_vector<double>(), cn = got[1].to_vector<double>();
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) {
      const double* row = &gv[size_t(b * 4 * H)];
      const double cref = sig(row[2 * H + j]) * cv[size_t(b * H + j)] +
                          sig(row[j]) * std::tanh(row[3 * H + j]);
      const double href = sig(row[H + j]) * std::tanh(cref);
      EXPECT_NEAR(cn[size_t(b * H + j)], cref, 1e-6 * (1 + std::fabs(cref))) << b << "," << j;
      EXPECT_NEAR(h[size_t(b * H + j)], href, 1e-6) << b << "," << j;
    }
  // A strided (transposed) cell state is read as its values.
  const Tensor ct = values({H, B}, 5, 4.0).t();
  const std::vector<Tensor> strided = lstm_cell(g, ct);
  const std::vector<Tensor> dense = lstm_cell(g, ct.contiguous());
  EXPECT_EQ(strided[1].to_vector<float>(), dense[1].to_vector<float>());
}

TEST(LstmCell, BadInputsAreRefused) {
  const Tensor g = values({2, 8}, 1, 1.0), c = values({2, 2}, 2, 1.0);
  EXPECT_THROW(lstm_cell(g, values({2, 3}, 3, 1.0)), ShapeError);
  EXPECT_THROW(lstm_cell(values({8}, 4, 1.0), c), ShapeError);
  EXPECT_THROW(lstm_cell(g, values({3, 2}, 5, 1.0)), ShapeError);
  EXPECT_THROW(lstm_cell(g.to(DType::F64), c), TypeError);
  try {
    lstm_cell(g, values({2, 3}, 6, 1.0));
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 8] and [2, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::test
