// fused_linear (out = act(x @ W.T + b) + residual, one rounding to the output dtype) against a
// float64 reference on the bfloat16/float32-rounded inputs: every activation, with and
// without bias and residual, float32 and bfloat16 inputs and outputs, few rows (kiln's
// streaming kernels) and tall products (oneDNN's packed-weight matmul where built with it;
// the isa_* CTest reruns switch oneDNN off and cover kiln's kernels at each ISA level), odd
// sizes, strided and 3-D inputs, broadcast residuals; the packed-weight cache (weights
// changed in place, new weights at a freed address, views at different offsets); Linear
// routed through it; argument errors.
#include <cstring>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/backends/cpu/packed_weights.h"
#include "kiln/dispatch/autocast.h"
#include "kiln/tensor/tensor_impl.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

double activation_ref(LinearActivation act, double v) {
  switch (act) {
    case LinearActivation::None: return v;
    case LinearActivation::Relu: return v > 0 ? v : 0.0;
    case LinearActivation::Gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case LinearActivation::GeluTanh:
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case LinearActivation::Silu: return v / (1.0 + std::exp(-v));
  }
  return v;
}

struct Case {
  int64_t M, N, K;
  DType in = DType::F32, out = DType::F32;
  LinearActivation act = LinearActivation::None;
  bool bias = false;
  DType residual = DType::U8;  // U8: no residual
};

std::string describe(const Case& c) {
  return "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " in " + std::string(dtype_name(c.in)) + " out " + std::string(dtype_name(c.out)) + " act " +
         linear_activation_name(c.act) + (c.bias ? " bias" : "") +
         (c.residual != DType::U8 ? " residual " + std::string(dtype_name(c.residual)) : "");
}

// Runs the case with x given by make_x (from the rounded host values) and checks it.
void check(const Case& c, uint32_t seed, Layout x_layout = Layout::Contiguous) {
  const std::string what = describe(c);
  auto xv = rounded(random_values(size_t(c.M * c.K), -1, 1, seed), c.in);
  auto wv = rounded(random_values(size_t(c.N * c.K), -1, 1, seed + 1), c.in);
  auto bv = rounded(random_values(size_t(c.N), -1, 1, seed + 2), c.in);
  const bool has_res = c.residual != DType::U8;
  auto rv = has_res ? rounded(random_values(size_t(c.M * c.N), -2, 2, seed + 3), c.residual)
                    : std::vector<double>();
  Tensor x = make_layout(xv, {c.M, c.K}, c.in, kCpu, x_layout);
  Tensor w = make(wv, {c.N, c.K}, c.in, kCpu);
  Tensor b = c.bias ? make(bv, {c.N}, c.in, kCpu) : Tensor();
  Tensor r = has_res ? make(rv, {c.M, c.N}, c.residual, kCpu) : Tensor();
  Tensor y = fused_linear(x, w, b, c.act, r, c.out);
  ASSERT_EQ(y.dtype(), c.out) << what;
  std::vector<double> ref(size_t(c.M * c.N));
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double s = c.bias ? bv[size_t(j)] : 0.0;
      for (int64_t k = 0; k < c.K; ++k) s += xv[size_t(i * c.K + k)] * wv[size_t(j * c.K + k)];
      s = activation_ref(c.act, s);
      if (has_res) s += rv[size_t(i * c.N + j)];
      ref[size_t(i * c.N + j)] = s;
    }
  // float32 sums of K products of values in [-1, 1]; bfloat16 outputs round once.
  Tol tol = c.out == DType::BF16 ? tol_for(DType::BF16)
                                 : Tol{2e-6, 1e-6 * (4.0 + 2.0 * std::sqrt(double(c.K)))};
  expect_close(y, {c.M, c.N}, ref, tol, what);
}

const LinearActivation kActivations[] = {LinearActivation::None, LinearActivation::Relu,
                                         LinearActivation::Gelu, LinearActivation::GeluTanh,
                                         LinearActivation::Silu};

TEST(LinalgFusedLinear, EveryActivationFewAndManyRows) {
  uint32_t seed = 1;
  for (LinearActivation act : kActivations)
    for (int64_t M : {1, 3, 17, 64})
      for (bool bias : {false, true}) {
        check({M, 257, 129, DType::F32, DType::F32, act, bias}, seed);
        check({M, 130, 300, DType::BF16, DType::BF16, act, bias}, seed + 7);
        seed += 11;
      }
}

// Decision 0119: kiln's packed kernels add a float32 bias as they store the last K block's sums
// (float32 at AVX2 and AVX-512, bfloat16 on AMX), and the AMX kernel rounds a bfloat16 output
// itself. Tall products with several K blocks (K = 1100: three blocks of 512), partial panels
// (N = 300) and row tiles (M = 45), with and without activation, residual and bias.
TEST(LinalgFusedLinear, EpilogueInsideThePackedKernels) {
  uint32_t seed = 900;
  for (int64_t M : {45, 96})
    for (int64_t K : {40, 1100})
      for (bool bias : {false, true}) {
        check({M, 300, K, DType::F32, DType::F32, LinearActivation::None, bias}, seed);
        check({M, 300, K, DType::F32, DType::F32, LinearActivation::Gelu, bias, DType::F32},
              seed + 1);
        check({M, 300, K, DType::BF16, DType::BF16, LinearActivation::None, bias}, seed + 2);
        check({M, 300, K, DType::BF16, DType::F32, LinearActivation::None, bias}, seed + 3);
        check({M, 300, K, DType::BF16, DType::BF16, LinearActivation::Relu, bias, DType::BF16},
              seed + 4);
        seed += 7;
      }
}

TEST(LinalgFusedLinear, ResidualAndOutputDtypes) {
  uint32_t seed = 100;
  for (int64_t M : {2, 33, 96})
    for (DType in : {DType::F32, DType::BF16})
      for (DType out : {DType::F32, DType::BF16})
        for (DType res : {DType::U8, DType::F32, DType::BF16}) {
          check({M, 96, 200, in, out, LinearActivation::Gelu, true, res}, seed);
          check({M, 96, 200, in, out, LinearActivation::None, false, res}, seed + 5);
          seed += 13;
        }
}

TEST(LinalgFusedLinear, OddSizesAndStridedInput) {
  uint32_t seed = 300;
  for (int64_t M : {1, 7, 16, 31, 257})
    for (int64_t N : {1, 7, 33})
      for (int64_t K : {1, 17, 513}) {
        check({M, N, K, DType::F32, DType::F32, LinearActivation::Silu, true, DType::F32}, seed,
              Layout::Strided);
        check({M, N, K, DType::BF16, DType::F32, LinearActivation::Relu, true}, seed + 3,
              Layout::Transposed);
        seed += 7;
      }
}

TEST(LinalgFusedLinear, ThreeDimInputAndBroadcastResidual) {
  auto xv = random_values(2 * 24 * 64, -1, 1, 7), wv = random_values(48 * 64, -1, 1, 8);
  auto rv = random_values(48, -1, 1, 9);
  Tensor x = make(xv, {2, 24, 64}, DType::F32, kCpu), w = make(wv, {48, 64}, DType::F32, kCpu);
  Tensor r = make(rv, {48}, DType::F32, kCpu);
  Tensor y = fused_linear(x, w, Tensor(), LinearActivation::Relu, r);
  std::vector<double> ref;
  for (int64_t i = 0; i < 48; ++i)
    for (int64_t j = 0; j < 48; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 64; ++k) s += xv[size_t(i * 64 + k)] * wv[size_t(j * 64 + k)];
      ref.push_back(std::max(s, 0.0) + rv[size_t(j)]);
    }
  expect_close(y, {2, 24, 48}, ref, Tol{1e-5, 1e-5});
}

Tensor f32(const std::vector<double>& v, const Shape& s) { return make(v, s, DType::F32, kCpu); }

std::vector<double> linear_ref(const Tensor& x, const Tensor& w) {
  auto xv = values(x), wv = values(w);
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  std::vector<double> out;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += xv[size_t(i * K + k)] * wv[size_t(j * K + k)];
      out.push_back(s);
    }
  return out;
}

const Tol kTol{1e-5, 1e-4};

TEST(LinalgFusedLinearCache, InPlaceChangeOfTheWeightIsSeen) {
  Tensor x = f32(random_values(64 * 96, -1, 1, 20), {64, 96});
  Tensor w = f32(random_values(80 * 96, -1, 1, 21), {80, 96});
  expect_close(fused_linear(x, w), {64, 80}, linear_ref(x, w), kTol, "first");
  w.mul_(full({1}, -3.0, TensorOptions(DType::F32, kCpu)));
  expect_close(fused_linear(x, w), {64, 80}, linear_ref(x, w), kTol, "after mul_");
  w.copy_(f32(random_values(80 * 96, -1, 1, 22), {80, 96}));
  expect_close(linear(x, w), {64, 80}, linear_ref(x, w), kTol, "linear after copy_");
}

TEST(LinalgFusedLinearCache, NewWeightsOfTheSameShapeAreNotConfused) {
  Tensor x = f32(random_values(32 * 128, -1, 1, 30), {32, 128});
  for (uint32_t seed = 31; seed < 51; ++seed) {
    Tensor w = f32(random_values(128 * 128, -1, 1, seed), {128, 128});  // freed each iteration
    expect_close(fused_linear(x, w), {32, 128}, linear_ref(x, w), kTol,
                 "seed " + std::to_string(seed));
  }
}

TEST(LinalgFusedLinearCache, WeightViewsAtDifferentOffsetsAreDistinct) {
  Tensor x = f32(random_values(48 * 64, -1, 1, 60), {48, 64});
  Tensor both = f32(random_values(2 * 96 * 64, -1, 1, 61), {2, 96, 64});
  Tensor w0 = both.select(0, 0), w1 = both.select(0, 1);
  expect_close(fused_linear(x, w0), {48, 96}, linear_ref(x, w0), kTol, "view 0");
  expect_close(fused_linear(x, w1), {48, 96}, linear_ref(x, w1), kTol, "view 1");
  // A weight given transposed-contiguous (unit column stride is needed): copied, still right.
  Tensor wt = f32(random_values(64 * 96, -1, 1, 62), {64, 96}).t();  // [96, 64]
  expect_close(fused_linear(x, wt), {48, 96}, linear_ref(x, wt.contiguous()), kTol, "W.t()");
}

// kiln's own blocked kernels keep one packed copy per weight (decision 0043) where the level
// has a packed kernel: float32 from AVX2 up, bfloat16 on AMX. oneDNN is switched off here so
// that they take the products at every level. A weight is packed from its second use with the
// same contents (decision 0120): a first use, or the first use after an in-place change, reads
// it as it is.
TEST(LinalgFusedLinearCache, OwnKernelsPackOncePerWeightAndSeeChanges) {
  const bool onednn_was = cpu::onednn_enabled();
  cpu::set_onednn_enabled(false);
  cpu::own_clear_packed_weights();
  const size_t f32_copy = cpu::isa_level() >= cpu::IsaLevel::Avx2 ? 1 : 0;
  Tensor x = f32(random_values(64 * 96, -1, 1, 80), {64, 96});
  Tensor w = f32(random_values(80 * 96, -1, 1, 81), {80, 96});
  expect_close(fused_linear(x, w), {64, 80}, linear_ref(x, w), kTol, "first use");
  EXPECT_EQ(cpu::own_packed_weight_count(), 0u);  // one use: read as it is
  for (int i = 0; i < 3; ++i)
    expect_close(fused_linear(x, w), {64, 80}, linear_ref(x, w), kTol, "call " + std::to_string(i));
  EXPECT_EQ(cpu::own_packed_weight_count(), f32_copy);
  w.mul_(full({1}, -3.0, TensorOptions(DType::F32, kCpu)));
  expect_close(fused_linear(x, w), {64, 80}, linear_ref(x, w), kTol, "after mul_");
  expect_close(fused_linear(x, w), {64, 80}, linear_ref(x, w), kTol, "after mul_, again");
  EXPECT_EQ(cpu::own_packed_weight_count(), f32_copy);  // the same weight, packed again
  Tensor w2 = f32(random_values(80 * 96, -1, 1, 82), {80, 96});
  for (int i = 0; i < 2; ++i)
    expect_close(fused_linear(x, w2), {64, 80}, linear_ref(x, w2), kTol, "a second weight");
  EXPECT_EQ(cpu::own_packed_weight_count(), 2 * f32_copy);
  // bfloat16: packed on AMX tiles only.
  Tensor xb = x.to(DType::BF16), wb = w2.to(DType::BF16);
  for (int i = 0; i < 2; ++i) {
    Tensor yb = fused_linear(xb, wb, Tensor(), LinearActivation::None, Tensor(), DType::F32);
    expect_close(yb, {64, 80}, linear_ref(xb, wb), kTol, "bfloat16");
  }
  const size_t bf16_copy = cpu::isa_level() >= cpu::IsaLevel::Amx ? 1 : 0;
  EXPECT_EQ(cpu::own_packed_weight_count(), 2 * f32_copy + bf16_copy);
  cpu::own_clear_packed_weights();
  EXPECT_EQ(cpu::own_packed_weight_count(), 0u);
  cpu::set_onednn_enabled(onednn_was);
}

// A weight made anew for every call (autocast's cast, a weight computed per call) is never
// packed whole, by kiln's kernels or oneDNN; a weight used again is, once (decision 0120).
TEST(LinalgFusedLinearCache, WeightsUsedOnceAreNotPackedWhole) {
  cpu::own_clear_packed_weights();
  cpu::onednn_clear_packed_weights();
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t M : {8, 20, 64}) {
      Tensor x = f32(random_values(size_t(M) * 96, -1, 1, 90), {M, 96}).to(dt);
      Tensor base = f32(random_values(80 * 96, -1, 1, 91), {80, 96});
      for (int i = 0; i < 4; ++i) {
        Tensor w = base.to(dt).clone();  // new storage every call
        expect_close(fused_linear(x, w, Tensor(), LinearActivation::None, Tensor(), DType::F32),
                     {M, 80}, linear_ref(x, w), dt == DType::BF16 ? Tol{1e-4, 1e-4} : kTol,
                     "one-off weight, call " + std::to_string(i));
      }
    }
  EXPECT_EQ(cpu::own_packed_weight_count(), 0u);
  EXPECT_EQ(cpu::onednn_packed_weight_count(), 0u);
  Tensor x = f32(random_values(64 * 96, -1, 1, 92), {64, 96});
  Tensor w = f32(random_values(80 * 96, -1, 1, 93), {80, 96});
  for (int i = 0; i < 3; ++i) fused_linear(x, w);
  const bool packs = cpu::isa_level() >= cpu::IsaLevel::Avx2 || cpu::onednn_enabled();
  EXPECT_EQ(cpu::own_packed_weight_count() + cpu::onednn_packed_weight_count(), packs ? 1u : 0u);
}

// Foreign memory (a NumPy array, a DLPack import) may be written without kiln seeing it, so no
// packed copy of a foreign weight is kept; it takes kernels that read it as it is (decision
// 0120): oneDNN with the plain layout, kiln's plain blocked kernels (each packs a block as it
// goes), the AMX kernel that rounds to bfloat16 itself. A write that bypasses the version
// counter (as NumPy's would) is seen by the next call; no packed copy is cached.
TEST(LinalgFusedLinearCache, ForeignWeightsAreReadAsTheyAre) {
  const bool onednn_was = cpu::onednn_enabled();
  uint32_t seed = 500;
  for (bool onednn : {true, false}) {
    cpu::set_onednn_enabled(onednn);
    cpu::own_clear_packed_weights();
    cpu::onednn_clear_packed_weights();
    for (DType in : {DType::F32, DType::BF16})
      for (int64_t M : {3, 20, 45, 96})
        for (int64_t K : {40, 1100})
          for (bool bias : {false, true}) {
            const int64_t N = 300;
            const std::string what = std::string(dtype_name(in)) + " M=" + std::to_string(M) +
                                     " K=" + std::to_string(K) + (bias ? " bias" : "") +
                                     (onednn ? " oneDNN" : " kiln");
            auto xv = rounded(random_values(size_t(M * K), -1, 1, seed), in);
            auto bv = rounded(random_values(size_t(N), -1, 1, seed + 1), in);
            Tensor x = make(xv, {M, K}, in, kCpu);
            Tensor b = bias ? make(bv, {N}, in, kCpu) : Tensor();
            Tensor w = make(rounded(random_values(size_t(N * K), -1, 1, seed + 2), in), {N, K},
                            in, kCpu);
            w.impl()->storage()->mark_foreign();
            for (int round = 0; round < 2; ++round) {
              // The second round rewrites the weight behind kiln's back.
              auto wv = rounded(random_values(size_t(N * K), -1, 1, seed + 3 + round), in);
              const Tensor fresh = make(wv, {N, K}, in, kCpu);
              std::memcpy(w.raw_data(), fresh.raw_data(), size_t(N * K) * element_size(in));
              std::vector<double> ref(size_t(M * N));
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                  double s = bias ? bv[size_t(j)] : 0.0;
                  for (int64_t k = 0; k < K; ++k)
                    s += xv[size_t(i * K + k)] * wv[size_t(j * K + k)];
                  ref[size_t(i * N + j)] = s;
                }
              const Tol tol = in == DType::BF16 ? tol_for(DType::BF16)
                                                : Tol{2e-6, 1e-6 * (4.0 + 2.0 * std::sqrt(double(K)))};
              expect_close(fused_linear(x, w, b, LinearActivation::None, Tensor(), in), {M, N},
                           ref, tol, what + " round " + std::to_string(round));
            }
            seed += 5;
          }
    EXPECT_EQ(cpu::own_packed_weight_count(), 0u);
    EXPECT_EQ(cpu::onednn_packed_weight_count(), 0u);
  }
  cpu::set_onednn_enabled(onednn_was);
}

// Under autocast(bfloat16) fused_linear keeps a float32 weight and its CPU kernel computes the
// product with the weight rounded to bfloat16, as the cast would, keeping the rounded weight
// packed (on AMX, from the float32 weight's second use) until the float32 weight changes
// (decision 0121). Every path: few rows, tiles, oneDNN, activation, residual, bias.
TEST(LinalgFusedLinearAutocast, Float32WeightComputedAsItsBfloat16Rounding) {
  const bool onednn_was = cpu::onednn_enabled();
  uint32_t seed = 700;
  for (bool onednn : {true, false}) {
    cpu::set_onednn_enabled(onednn);
    for (int64_t M : {3, 8, 45})
      for (int64_t K : {40, 600})  // one and two K blocks of the tiles
        for (int variant = 0; variant < 3; ++variant) {
          const int64_t N = 300;
          const LinearActivation act =
              variant == 1 ? LinearActivation::Gelu : LinearActivation::None;
          const bool bias = variant != 0, res = variant == 2;
          const std::string what = "M=" + std::to_string(M) + " K=" + std::to_string(K) +
                                   " variant " + std::to_string(variant) +
                                   (onednn ? " oneDNN" : " kiln");
          // float32 values; the reference rounds x, w and bias to bfloat16 as the cast does.
          auto xv = random_values(size_t(M * K), -1, 1, seed);
          auto bv = random_values(size_t(N), -1, 1, seed + 1);
          auto rv = random_values(size_t(M * N), -1, 1, seed + 2);
          Tensor x = make(xv, {M, K}, DType::F32, kCpu);
          Tensor b = bias ? make(bv, {N}, DType::F32, kCpu) : Tensor();
          Tensor r = res ? make(rv, {M, N}, DType::F32, kCpu) : Tensor();
          Tensor w = make(random_values(size_t(N * K), -1, 1, seed + 3), {N, K}, DType::F32, kCpu);
          cpu::own_clear_packed_weights();
          for (int round = 0; round < 4; ++round) {
            if (round == 3) w.mul_(full({1}, -3.0, TensorOptions(DType::F32, kCpu)));
            const auto xr = rounded(xv, DType::BF16), br = rounded(bv, DType::BF16);
            const auto wr = rounded(values(w), DType::BF16);
            std::vector<double> ref(size_t(M * N));
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                double sum = bias ? br[size_t(j)] : 0.0;
                for (int64_t k = 0; k < K; ++k)
                  sum += xr[size_t(i * K + k)] * wr[size_t(j * K + k)];
                sum = activation_ref(act, sum);
                if (res) sum += rv[size_t(i * N + j)];
                ref[size_t(i * N + j)] = sum;
              }
            set_autocast_enabled(DeviceType::CPU, true);
            increment_autocast_nesting();
            Tensor y = fused_linear(x, w, b, act, r);
            decrement_autocast_nesting();
            set_autocast_enabled(DeviceType::CPU, false);
            ASSERT_EQ(y.dtype(), DType::BF16) << what;
            expect_close(y, {M, N}, ref, tol_for(DType::BF16),
                         what + " round " + std::to_string(round));
          }
          // The tiles keep the rounded weight packed: one copy for the weight as it was, one
          // after mul_ (the stale one stays until the weight is freed).
          const bool tiles = !onednn || cpu::isa_level() >= cpu::IsaLevel::Amx;
          if (cpu::isa_level() >= cpu::IsaLevel::Amx && M >= 8 && tiles)
            EXPECT_GE(cpu::own_packed_weight_count(), 1u) << what;
          seed += 7;
        }
  }
  cpu::own_clear_packed_weights();
  cpu::set_onednn_enabled(onednn_was);
}

TEST(LinalgFusedLinear, UnderAutogradRecordsThePlainOps) {
  Tensor x = f32(random_values(20 * 8, -1, 1, 70), {20, 8});
  Tensor w = f32(random_values(6 * 8, -1, 1, 71), {6, 8});
  autograd::set_requires_grad(w);
  Tensor y = fused_linear(x, w, Tensor(), LinearActivation::None);
  ASSERT_TRUE(autograd::requires_grad(y));
  autograd::backward(std::vector<Tensor>{sum(y)});
  // d sum(x @ W.T) / dW[j, k] = sum_i x[i, k]
  auto xv = values(x);
  std::vector<double> ref;
  for (int64_t j = 0; j < 6; ++j)
    for (int64_t k = 0; k < 8; ++k) {
      double s = 0;
      for (int64_t i = 0; i < 20; ++i) s += xv[size_t(i * 8 + k)];
      ref.push_back(s);
    }
  expect_close(autograd::grad(w), {6, 8}, ref, Tol{1e-5, 1e-5});
}

template <typename E>
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    expect_python_class_of<E>(e);
  }
}

TEST(LinalgFusedLinear, BadArgumentsRaiseClearErrors) {
  Tensor x = f32(random_values(4 * 8, -1, 1, 80), {4, 8});
  Tensor w = f32(random_values(6 * 8, -1, 1, 81), {6, 8});
  expect_error<ShapeError>([&] { fused_linear(x, w.reshape({48})); }, "2-D");
  expect_error<ShapeError>([&] { fused_linear(x, w.t()); }, "in_features");
  expect_error<Error>([&] { fused_linear(x.to(DType::F64), w); }, "dtype");
  expect_error<ShapeError>([&] { fused_linear(x, w, f32({1, 2}, {2})); }, "bias of shape [6]");
  expect_error<Error>(
      [&] { fused_linear(x, w, Tensor(), LinearActivation::None, f32({1, 2, 3}, {3})); }, "");
  expect_error<Error>([&] { fused_linear(x, w, Tensor(), LinearActivation::None, Tensor(), DType::I32); },
                      "floating out_dtype");
  expect_error<ValueError>([&] { parse_linear_activation("tanhh"); }, "gelu_tanh");
}

}  // namespace
}  // namespace kiln::test
