// make_strided_loop against a direct enumeration: for operands of many layouts
// (contiguous, transposed, broadcast, sliced, 0-d, empty) the runs visit exactly the byte
// offsets that the logical indices give, once each, in both dim orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <tuple>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/tensor/strided_loop.h"

namespace {

using kiln::Shape;
using kiln::Tensor;
using Offsets = std::array<int64_t, 3>;

// Byte offset of logical index idx (of shape `shape`) in t, broadcast dims contributing 0.
int64_t offset_of(const Tensor& t, const Shape& shape, const std::vector<int64_t>& idx) {
  const size_t lead = shape.size() - t.shape().size();
  int64_t off = 0;
  for (size_t d = 0; d < t.shape().size(); ++d)
    if (t.shape()[d] != 1) off += idx[lead + d] * t.strides()[d];
  return off * int64_t(t.element_size());
}

std::vector<Offsets> expected(const std::array<const Tensor*, 3>& ops, const Shape& shape) {
  std::vector<Offsets> out;
  if (kiln::numel_of(shape) == 0) return out;
  std::vector<int64_t> idx(shape.size(), 0);
  for (;;) {
    Offsets o;
    for (size_t k = 0; k < 3; ++k) o[k] = offset_of(*ops[k], shape, idx);
    out.push_back(o);
    size_t d = shape.size();
    while (d > 0 && ++idx[d - 1] == shape[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return out;
}

std::vector<Offsets> visited(const std::array<const Tensor*, 3>& ops, const Shape& shape,
                             bool memory_order) {
  auto loop = kiln::make_strided_loop<3>(ops, shape, memory_order);
  std::vector<Offsets> out;
  std::array<char*, 3> base;
  for (size_t k = 0; k < 3; ++k) base[k] = static_cast<char*>(ops[k]->raw_data());
  kiln::for_each_run(loop, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s,
                               int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      Offsets o;
      for (size_t k = 0; k < 3; ++k) o[k] = (p[k] - base[k]) + j * s[k];
      out.push_back(o);
    }
  });
  return out;
}

// A tensor that views at `shape` in one of several layouts.
Tensor operand(const Shape& shape, int kind, std::mt19937& rng) {
  switch (kind) {
    case 0:
      return kiln::zeros(shape);
    case 1: {  // reversed dims, transposed back: non-contiguous, same logical shape
      Shape rev(shape.rbegin(), shape.rend());
      std::vector<int64_t> perm(shape.size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(shape.size() - 1 - i);
      return kiln::zeros(rev).permute(perm);
    }
    case 2: {  // broadcast: some dims 1, maybe fewer dims
      Shape b = shape;
      for (auto& d : b)
        if (rng() % 2) d = 1;
      if (!b.empty() && rng() % 2) b.erase(b.begin());
      return kiln::zeros(b);
    }
    default: {  // every other element of a larger innermost dim
      if (shape.empty()) return kiln::zeros(shape);
      Shape big = shape;
      big.back() = 2 * shape.back();
      return kiln::zeros(big).slice(int64_t(shape.size()) - 1, 0, std::nullopt, 2);
    }
  }
}

TEST(StridedLoop, RunsVisitEveryOffsetOnce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    Shape shape(rng() % 5);
    for (auto& d : shape) d = int64_t(rng() % 4) + (trial % 7 == 0 ? 0 : 1);
    std::array<Tensor, 3> t;
    for (size_t k = 0; k < 3; ++k) t[k] = operand(shape, k == 0 ? int(rng() % 2) * 3 : int(rng() % 4), rng);
    if (trial % 3 == 0) t = {kiln::zeros(shape), kiln::zeros(shape), kiln::zeros(shape)};
    std::array<const Tensor*, 3> ops{&t[0], &t[1], &t[2]};
    auto want = expected(ops, shape);
    std::sort(want.begin(), want.end());
    for (bool memory_order : {false, true}) {
      auto got = visited(ops, shape, memory_order);
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, want) << "shape " << kiln::shape_str(shape) << " trial " << trial;
    }
  }
}

}  // namespace
