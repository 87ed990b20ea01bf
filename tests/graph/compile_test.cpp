// Graph mode (decision 0081): capture records the dispatched ops, each pass keeps results bit
// for bit, replay equals the eager function (random draws, in-place writes, detached views,
// fresh tensors included), guards recapture, host reads keep a guard eager.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/autograd/autograd.h"
#include "kiln/graph/capture.h"
#include "kiln/graph/compile.h"
#include "kiln/graph/passes.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using graph::Capture;
using graph::Graph;
using V = std::vector<Tensor>;

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * element_size(x.dtype())) ==
         0;
}

Graph capture(const std::function<V(const V&)>& fn, const V& inputs) {
  Capture c;
  for (const Tensor& t : inputs) c.add_input(t);
  return c.finish(fn(inputs));
}

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node& node : g.nodes)
    if (node.kind == graph::NodeKind::Op && node.op->name == op) ++n;
  return n;
}

V chain(const V& in) {
  const Tensor& x = in[0];
  Tensor a = relu(x * 0.5 + 1.0) * 3.0;  // fusible over x
  Tensor b = sqrt(abs(clamp(x - 2.0, -1.0, 4.0))) / 2.0;
  return {a + b, sum(a)};
}

TEST(GraphMode, ReplayAndEveryPassKeepTheEagerBits) {
  // Odd sizes: the fused pass's vector tails.
  for (int64_t n : {1, 7, 16, 37, 1000, 4099}) {
    Generator gen{static_cast<uint64_t>(n)};
    const Tensor x = randn({n}, TensorOptions(), &gen) * 4.0;
    autograd::NoGradGuard no_grad;
    const V want = chain({x});
    Graph plain = capture(chain, {x});
    Graph fused = plain;
    graph::optimize(fused, /*fuse=*/true);
    EXPECT_GE(count(fused, "pointwise_program"), 2) << fused.to_string();
    for (const Graph* g : {&plain, &fused}) {
      const V got = graph::run(*g, {x});
      for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(bit_equal(got[i], want[i])) << n;
    }
  }
}

TEST(GraphMode, DeadCodeCommonSubexpressionsAndFolding) {
  auto fn = [](const V& in) {
    const Tensor& x = in[0];
    Tensor unused = exp(x);
    (void)unused;
    Tensor pos = arange(0, x.size(-1), 1, TensorOptions(DType::F32)) * 2.0;
    return V{sin(x * 3.0) + sin(x * 3.0) + pos};
  };
  const Tensor x = randn({3, 5});
  Graph g = capture(fn, {x});
  const graph::PassStats s = graph::optimize(g, /*fuse=*/false);
  EXPECT_EQ(count(g, "exp"), 0);
  EXPECT_EQ(count(g, "arange"), 0);
  EXPECT_EQ(count(g, "sin"), 1);
  EXPECT_GE(s.dead, 1);
  EXPECT_GE(s.common, 2);
  EXPECT_GE(s.folded, 2);
  EXPECT_TRUE(bit_equal(graph::run(g, {x})[0], fn({x})[0]));
}

TEST(GraphMode, MutationTurnsOffFusionAndCommonSubexpressions) {
  auto fn = [](const V& in) {
    Tensor x = in[0];
    Tensor a = x * 2.0;
    relu_(x);  // between a and b: b must see the new x
    Tensor b = x * 2.0 + 1.0;
    return V{a + b};
  };
  const Tensor x0 = randn({9});
  Tensor x1 = x0.clone(), x2 = x0.clone();
  Graph g = capture(fn, {x1});
  graph::optimize(g, true);
  EXPECT_EQ(count(g, "pointwise_program"), 0);
  EXPECT_EQ(count(g, "mul"), 2);
  x1 = x0.clone();
  const Tensor want = fn({x2})[0];
  EXPECT_TRUE(bit_equal(graph::run(g, {x1})[0], want));
  EXPECT_TRUE(bit_equal(x1, x2));  // the input was written as eagerly
}

TEST(GraphMode, RandomOpsDrawAgainFromTheGenerator) {
  auto fn = [](const V& in) { return V{in[0] + rand({6}), dropout(in[0], 0.5, true)}; };
  const Tensor x = ones({6});
  manual_seed(11);
  Graph g = capture(fn, {x});
  const V r1 = graph::run(g, {x}), r2 = graph::run(g, {x});
  manual_seed(11);
  fn({x});
  const V e1 = fn({x}), e2 = fn({x});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(bit_equal(r1[i], e1[i]));
    EXPECT_TRUE(bit_equal(r2[i], e2[i]));
  }
  EXPECT_FALSE(bit_equal(r1[0], r2[0]));
}

TEST(GraphMode, FreshTensorsAndDetachedViewsPerRun) {
  auto fn = [](const V& in) {
    Tensor buf = zeros({4});              // made outside the dispatcher, filled by an op
    Tensor lit = tensor_from(std::vector<float>{1, 2, 3, 4});  // a literal array
    Tensor d = autograd::detach(in[0]);   // a view made outside the dispatcher
    return V{buf + d * lit, buf};
  };
  const Tensor x = randn({4}), y = randn({4});
  Graph g = capture(fn, {x});
  graph::optimize(g, true);
  const V a = graph::run(g, {y});
  EXPECT_TRUE(bit_equal(a[0], fn({y})[0]));
  Tensor returned = a[1];
  returned.fill_(5.0);  // must not leak into the next call's buffer
  EXPECT_TRUE(bit_equal(graph::run(g, {y})[1], zeros({4})));

  // A literal read, then written in place, starts from its captured contents on every run.
  auto bump = [](const V& in) {
    Tensor lit = tensor_from(std::vector<float>{1, 2, 3});
    add_(lit, in[0]);
    return V{lit};
  };
  Graph h = capture(bump, {ones({3})});
  graph::run(h, {ones({3})});
  EXPECT_TRUE(bit_equal(graph::run(h, {ones({3})})[0], bump({ones({3})})[0]));
}

TEST(GraphMode, CompiledFunctionGuardsAndHostReads) {
  int calls = 0;
  graph::CompiledFunction f = compile([&](const V& in) {
    ++calls;
    return V{relu(in[0] * 2.0)};
  });
  for (int i = 0; i < 3; ++i) f({randn({4})});
  f({randn({5})});
  f({randn({4}).to(DType::F64)});
  EXPECT_EQ(f.captures(), 3);
  EXPECT_EQ(f.replays(), 2);
  EXPECT_EQ(calls, 3);  // replays do not run the function

  graph::CompiledFunction branchy = compile([](const V& in) {
    const Tensor s = sum(in[0]);
    graph::note_host_read(s);  // as item() in the bindings
    return V{s.item<float>() > 0 ? in[0] * 2.0 : in[0] * 3.0};
  });
  EXPECT_TRUE(bit_equal(branchy({ones({3})})[0], full({3}, 2.0)));
  EXPECT_TRUE(bit_equal(branchy({-ones({3})})[0], full({3}, -3.0)));
  EXPECT_EQ(branchy.replays(), 0);
  EXPECT_NE(branchy.last_graph().find("data-dependent"), std::string::npos);
}

TEST(GraphMode, GradientsThroughTheReplay) {
  Tensor w = randn({5, 5});
  autograd::set_requires_grad(w);
  graph::CompiledFunction f = compile([&](const V& in) {
    return V{sum(relu(matmul(in[0], w) * 0.5 + 1.0))};
  });
  const Tensor x = randn({3, 5});
  Tensor grads[2];
  for (int i = 0; i < 2; ++i) {
    autograd::backward({f({x})[0]});
    grads[i] = autograd::grad(w).clone();
    autograd::set_grad(w, Tensor());
  }
  autograd::backward({sum(relu(matmul(x, w) * 0.5 + 1.0))});
  EXPECT_TRUE(bit_equal(grads[0], autograd::grad(w)));
  EXPECT_TRUE(bit_equal(grads[1], autograd::grad(w)));
  EXPECT_EQ(f.replays(), 1);
}

TEST(GraphMode, CaptureRefusesNestingAndEndsOnError) {
  {
    Capture outer;
    EXPECT_THROW(Capture inner, Error);
  }
  EXPECT_FALSE(graph::is_capturing());
  graph::CompiledFunction f = compile([](const V& in) { return V{matmul(in[0], ones({5, 2}))}; });
  EXPECT_THROW(f({ones({2, 3})}), Error);
  EXPECT_FALSE(graph::is_capturing());
  EXPECT_TRUE(bit_equal(f({ones({2, 5})})[0], full({2, 2}, 5.0)));
}

}  // namespace
}  // namespace kiln
