// roll, flip, repeat, tril / triu and pad on tensors large enough to be split over threads,
// in several dtypes, from contiguous inputs, from views whose rows are contiguous but not
// adjacent (the row-at-a-time paths of shape_kernels.cpp) and from transposed views (the
// element loops). Each result is compared exactly (pure data movement) with a reference
// computed here from the input's values by index arithmetic.
#include <algorithm>
#include <functional>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

using Index = std::vector<int64_t>;

int64_t numel_of_shape(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// values[flat] for a row-major shape, built by f(index).
std::vector<double> build(const Shape& shape, const std::function<double(const Index&)>& f) {
  std::vector<double> out(size_t(numel_of_shape(shape)));
  Index idx(shape.size(), 0);
  for (size_t n = 0; n < out.size(); ++n) {
    out[n] = f(idx);
    for (size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

double at(const std::vector<double>& v, const Shape& shape, const Index& idx) {
  int64_t flat = 0;
  for (size_t k = 0; k < shape.size(); ++k) flat = flat * shape[k] + idx[k];
  return v[size_t(flat)];
}

// The inputs: a contiguous tensor, a view with contiguous but separated rows, a transposed view.
std::vector<Tensor> inputs(DType dt) {
  const Shape big = {4, 96, 202};
  Tensor base = remainder(arange(numel_of_shape(big), TensorOptions(DType::I64)), 251)
                    .to(dt)
                    .reshape(big);
  return {base, base.slice(2, 1, 201), base.transpose(1, 2)};
}

void expect_equal(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
  ASSERT_EQ(got.shape(), shape);
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], want[i]) << "flat index " << i;
}

const DType kDTypes[] = {DType::F32, DType::BF16, DType::I64, DType::U8, DType::F64};

TEST(ShapeRows, RollAndFlip) {
  for (DType dt : kDTypes)
    for (const Tensor& x : inputs(dt)) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " stride(-1) " + std::to_string(x.stride(2)));
      const Shape s = x.shape();
      const std::vector<double> v = x.to_vector<double>();
      auto mod = [](int64_t a, int64_t n) { return ((a % n) + n) % n; };
      expect_equal(roll(x, {3, -5}, {2, 1}), s, build(s, [&](const Index& i) {
        return at(v, s, {i[0], mod(i[1] + 5, s[1]), mod(i[2] - 3, s[2])});
      }));
      expect_equal(roll(x, {1}, {0}), s, build(s, [&](const Index& i) {
        return at(v, s, {mod(i[0] - 1, s[0]), i[1], i[2]});
      }));
      expect_equal(flip(x, {2}), s, build(s, [&](const Index& i) {
        return at(v, s, {i[0], i[1], s[2] - 1 - i[2]});
      }));
      expect_equal(flip(x, {0, 1}), s, build(s, [&](const Index& i) {
        return at(v, s, {s[0] - 1 - i[0], s[1] - 1 - i[1], i[2]});
      }));
    }
}

// Contiguous rows of up to 32 values flipped along the last dim (one typed loop over all
// rows): every element size, row counts past the threading threshold, and rows of 33 (the
// row-at-a-time path) beside them.
TEST(ShapeRows, FlipShortRows) {
  for (DType dt : {DType::U8, DType::BF16, DType::F32, DType::F64, DType::Bool})
    for (const Shape& s : {Shape{70000, 1}, Shape{9001, 7}, Shape{3, 700, 32}, Shape{500, 33}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(s.back()));
      const Tensor x = remainder(arange(numel_of_shape(s), TensorOptions(DType::I64)), 251)
                           .to(dt)
                           .reshape(s);
      const std::vector<double> v = x.to_vector<double>();
      expect_equal(flip(x, {int64_t(s.size()) - 1}), s, build(s, [&](const Index& i) {
        Index j = i;
        j.back() = s.back() - 1 - i.back();
        return at(v, s, j);
      }));
    }
}

TEST(ShapeRows, RepeatAndTriangles) {
  for (DType dt : kDTypes)
    for (const Tensor& x : inputs(dt)) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " stride(-1) " + std::to_string(x.stride(2)));
      const Shape s = x.shape();
      const std::vector<double> v = x.to_vector<double>();
      const Shape rs = {2, s[0], 2 * s[1], 3 * s[2]};
      expect_equal(repeat(x, {2, 1, 2, 3}), rs, build(rs, [&](const Index& i) {
        return at(v, s, {i[1] % s[0], i[2] % s[1], i[3] % s[2]});
      }));
      for (int64_t k : {-3, 0, 7, 500, -500}) {
        expect_equal(tril(x, k), s, build(s, [&](const Index& i) {
          return i[2] - i[1] <= k ? at(v, s, i) : 0.0;
        }));
        expect_equal(triu(x, k), s, build(s, [&](const Index& i) {
          return i[2] - i[1] >= k ? at(v, s, i) : 0.0;
        }));
      }
    }
}

TEST(ShapeRows, PadModes) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64})
    for (const Tensor& x : inputs(dt)) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " stride(-1) " + std::to_string(x.stride(2)));
      const Shape s = x.shape();
      const std::vector<double> v = x.to_vector<double>();
      const Shape ps = {s[0], s[1] + 5, s[2] + 3};
      expect_equal(pad(x, {1, 2, 3, 2}, "constant", 7), ps, build(ps, [&](const Index& i) {
        const int64_t r = i[1] - 3, c = i[2] - 1;
        return r < 0 || r >= s[1] || c < 0 || c >= s[2] ? 7.0 : at(v, s, {i[0], r, c});
      }));
      auto reflect = [](int64_t j, int64_t n) { return j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j; };
      expect_equal(pad(x, {1, 2, 3, 2}, "reflect"), ps, build(ps, [&](const Index& i) {
        return at(v, s, {i[0], reflect(i[1] - 3, s[1]), reflect(i[2] - 1, s[2])});
      }));
      auto clampi = [](int64_t j, int64_t n) { return std::clamp<int64_t>(j, 0, n - 1); };
      expect_equal(pad(x, {1, 2, 3, 2}, "replicate"), ps, build(ps, [&](const Index& i) {
        return at(v, s, {i[0], clampi(i[1] - 3, s[1]), clampi(i[2] - 1, s[2])});
      }));
    }
}

// Constant padding of one dim or two adjacent dims of a contiguous tensor writes each output
// row once (pad_two_dims); channels-last inputs are padded as their NHWC view in every mode and
// stay channels-last; other pads (non-adjacent dims, four dims) take the general loops. All
// against the index arithmetic of PyTorch's modes, in element sizes 1, 2, 4 and 8.
TEST(ShapeRows, PadOfChannelsLastInputsAndAdjacentDims) {
  const Shape s = {3, 5, 6, 7};
  auto source = [](int64_t j, int64_t n, const std::string& mode) -> int64_t {
    if (j >= 0 && j < n) return j;
    if (mode == "constant") return -1;
    if (mode == "reflect") return j < 0 ? -j : 2 * (n - 1) - j;
    if (mode == "replicate") return std::clamp<int64_t>(j, 0, n - 1);
    return ((j % n) + n) % n;
  };
  const std::vector<std::vector<int64_t>> pads = {
      {1, 2}, {1, 2, 3, 0}, {0, 0, 2, 1}, {1, 1, 0, 0, 2, 2}, {0, 0, 0, 0, 1, 3},
      {1, 1, 1, 1, 1, 1, 1, 1}};
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::U8, DType::I16}) {
    const Tensor base = arange(numel_of_shape(s), TensorOptions(DType::I64)).reshape(s);
    const Tensor x0 = remainder(base, Scalar(int64_t(97))).to(dt);
    const std::vector<double> v = x0.to_vector<double>();
    for (bool cl : {false, true}) {
      const Tensor x = cl ? x0.contiguous(MemoryFormat::ChannelsLast) : x0;
      for (const std::vector<int64_t>& p : pads)
        for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
          if (mode != "constant" && p.size() > 6) continue;
          SCOPED_TRACE(std::string(dtype_name(dt)) + (cl ? " channels-last " : " ") + mode +
                       " pad pairs " + std::to_string(p.size() / 2));
          Index left(4, 0);
          Shape ps = s;
          for (size_t k = 0; k < p.size() / 2; ++k) {
            left[3 - k] = p[2 * k];
            ps[3 - k] += p[2 * k] + p[2 * k + 1];
          }
          const Tensor y = pad(x, p, mode, 9);
          if (cl) EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast));
          expect_equal(y, ps, build(ps, [&](const Index& i) {
            Index j(4);
            for (size_t d = 0; d < 4; ++d) {
              j[d] = source(i[d] - left[d], s[d], mode);
              if (j[d] < 0) return 9.0;
            }
            return at(v, s, j);
          }));
        }
    }
  }
}

// Constant padding whose source rows are 32 bytes to 1 KiB moves a plane's rows per call of the
// ISA's run mover: rows of every length class around those bounds, pads taller than the source
// (planes of filled rows only), and a threaded size whose pieces start and end inside planes.
TEST(ShapeRows, ConstantPadOfRowsForTheRunMover) {
  struct Case {
    Shape shape;
    std::vector<int64_t> pad;
  };
  const std::vector<Case> cases = {
      {{3, 4, 9, 56}, {1, 1, 1, 1}},    {{2, 3, 5, 8}, {3, 0, 2, 4}},
      {{2, 3, 5, 17}, {0, 2, 0, 0}},    {{2, 2, 4, 250}, {2, 1, 1, 2}},
      {{2, 2, 3, 300}, {1, 1, 1, 1}},   {{2, 3, 4, 20}, {1, 2, 9, 7}},
      {{8, 64, 28, 56}, {1, 1, 1, 1}},  {{5, 7, 31, 33}, {0, 3, 2, 0}},
      {{4, 6, 9, 12}, {0, 0, 3, 1}}};  // one padded dim: rows of a whole 9 x 12 plane
  for (DType dt : {DType::F32, DType::BF16, DType::U8, DType::I64})
    for (const Case& c : cases) {
      const Shape& s = c.shape;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " last dim " + std::to_string(s[3]) +
                   " pad " + std::to_string(c.pad[0]) + std::to_string(c.pad[1]) +
                   std::to_string(c.pad[2]) + std::to_string(c.pad[3]));
      const Tensor base = arange(numel_of_shape(s), TensorOptions(DType::I64)).reshape(s);
      const Tensor x = remainder(base, Scalar(int64_t(97))).to(dt);
      const std::vector<double> v = x.to_vector<double>();
      const Shape ps = {s[0], s[1], s[2] + c.pad[2] + c.pad[3], s[3] + c.pad[0] + c.pad[1]};
      expect_equal(pad(x, c.pad, "constant", 5), ps, build(ps, [&](const Index& i) {
        const int64_t r = i[2] - c.pad[2], col = i[3] - c.pad[0];
        return r < 0 || r >= s[2] || col < 0 || col >= s[3] ? 5.0 : at(v, s, {i[0], i[1], r, col});
      }));
    }
}

// cat of views (column chunks, transposes, channels-last tensors) copies each input into its
// slice of the output with the strided copies, threaded at these sizes: every element size,
// against index arithmetic on the inputs' values.
TEST(ShapeRows, CatOfViewsAlongEachDim) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::U8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor base =
        remainder(arange(int64_t(96 * 520), TensorOptions(DType::I64)), Scalar(int64_t(89)))
            .reshape({96, 520})
            .to(dt);
    const std::vector<double> bv = base.to_vector<double>();
    const Shape bs = base.shape();
    // Four column chunks of 130 stacked along dim 0, and the same chunks side by side along
    // dim 1 with a transposed [130, 96] view in between.
    std::vector<Tensor> chunks;
    for (int64_t c = 0; c < 4; ++c) chunks.push_back(base.slice(1, c * 130, (c + 1) * 130));
    const Shape s0 = {384, 130};
    expect_equal(cat(chunks, 0), s0, build(s0, [&](const Index& i) {
      return at(bv, bs, {i[0] % 96, (i[0] / 96) * 130 + i[1]});
    }));
    const Tensor tr = base.slice(1, 0, 130).t().contiguous().t();  // [96, 130], column-major
    const Shape s1 = {96, 390};
    expect_equal(cat({chunks[1], tr, chunks[3]}, 1), s1, build(s1, [&](const Index& i) {
      const int64_t k = i[1] / 130, j = i[1] % 130;
      return at(bv, bs, {i[0], (k == 0 ? 130 : k == 1 ? 0 : 390) + j});
    }));
    // Channels-last [2, C, 12, 20] tensors along the channels and along the height.
    const Tensor img = base.flatten().slice(0, 0, 2 * 12 * 12 * 20).reshape({2, 12, 12, 20});
    const Tensor cl = img.contiguous(MemoryFormat::ChannelsLast);
    const std::vector<double> iv = img.to_vector<double>();
    const Shape is = img.shape();
    const Shape sc = {2, 24, 12, 20}, sh = {2, 12, 24, 20};
    expect_equal(cat({cl, img}, 1), sc, build(sc, [&](const Index& i) {
      return at(iv, is, {i[0], i[1] % 12, i[2], i[3]});
    }));
    expect_equal(cat({cl, cl}, 2), sh, build(sh, [&](const Index& i) {
      return at(iv, is, {i[0], i[1], i[2] % 12, i[3]});
    }));
  }
}

// Contiguous inputs along dim 0 (one block each; the output copied in threaded pieces from 512
// KiB, a piece taking bytes from every input it overlaps): a large input, a small one and an
// empty one, in four element sizes.
TEST(ShapeRows, CatOfWholeBlocksAlongDimZero) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::U8}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t cols = 301;
    const Tensor all =
        remainder(arange(int64_t(2100 * cols), TensorOptions(DType::I64)), Scalar(int64_t(97)))
            .reshape({2100, cols})
            .to(dt);
    const Tensor big = all.slice(0, 0, 2000).contiguous();
    const Tensor small = all.slice(0, 2000, 2100).contiguous();
    const Tensor none = all.slice(0, 0, 0).contiguous();
    const Shape shape = {2100, cols};
    expect_equal(cat({big, none, small}, 0), shape, all.to_vector<double>());
  }
}

// An output past the streaming-store size (24 MiB) from inputs of odd byte lengths, so that
// the threads' pieces start and end inside inputs and at unaligned addresses.
TEST(ShapeRows, CatAlongDimZeroWithStreamingStores) {
  std::vector<Tensor> parts;
  int64_t total = 0;
  for (int64_t n : {int64_t(9000001), int64_t(3), int64_t(8000003), int64_t(8200000)}) {
    parts.push_back(remainder(arange(Scalar(total), Scalar(total + n), 1, TensorOptions(DType::I64)),
                              Scalar(int64_t(251)))
                        .to(DType::U8));
    total += n;
  }
  const Tensor out = cat(parts, 0);
  ASSERT_EQ(out.shape(), Shape{total});
  const Tensor want =
      remainder(arange(Scalar(int64_t(0)), Scalar(total), 1, TensorOptions(DType::I64)), Scalar(int64_t(251)))
          .to(DType::U8);
  EXPECT_TRUE(all(out == want).item<bool>());
}

}  // namespace
}  // namespace kiln::test
