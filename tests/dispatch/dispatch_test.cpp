// The dispatcher: interceptor chain (order, exclusion), op registry listing, missing-kernel
// errors and the KILN_FALLBACK=cpu path.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "kiln/kiln.h"

namespace kiln {
namespace {

class CountingInterceptor : public Interceptor {
 public:
  explicit CountingInterceptor(std::string tag, std::vector<std::string>* order = nullptr)
      : tag_(std::move(tag)), order_(order) {}
  std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
    {
      std::lock_guard lock(mu_);
      counts_[call.op->name]++;
      if (order_) order_->push_back(tag_ + ":" + call.op->name);
    }
    return next(call);
  }
  int count(const std::string& op) {
    std::lock_guard lock(mu_);
    return counts_[op];
  }

 private:
  std::string tag_;
  std::vector<std::string>* order_;
  std::mutex mu_;
  std::map<std::string, int> counts_;
};

// Installs an interceptor for a scope and puts back whatever was there (autograd's).
struct InterceptorScope {
  InterceptorSlot slot;
  Interceptor* previous;
  InterceptorScope(InterceptorSlot s, Interceptor* i) : slot(s), previous(get_interceptor(s)) {
    set_interceptor(s, i);
  }
  ~InterceptorScope() { set_interceptor(slot, previous); }
};

TEST(Dispatch, CountingInterceptorSeesEveryOpCall) {
  Tensor a = ones({3});
  Tensor b = full({3}, 2.0);
  CountingInterceptor counter("p");
  {
    InterceptorScope scope(InterceptorSlot::Profiler, &counter);
    Tensor c = add(a, b);
    Tensor d = mul(c, c);
    Tensor e = d.view({3, 1});
    EXPECT_EQ(e.to_vector<double>(), (std::vector<double>{9, 9, 9}));
  }
  EXPECT_EQ(counter.count("add"), 1);
  EXPECT_EQ(counter.count("mul"), 1);
  EXPECT_EQ(counter.count("view"), 1);
  // Removed: no more counting.
  add(a, b);
  EXPECT_EQ(counter.count("add"), 1);
}

TEST(Dispatch, InterceptorsRunInFixedOrder) {
  std::vector<std::string> order;
  CountingInterceptor prof("profiler", &order), grad("autograd", &order),
      cast("autocast", &order);
  InterceptorScope s1(InterceptorSlot::Autograd, &grad);
  InterceptorScope s2(InterceptorSlot::Profiler, &prof);
  InterceptorScope s3(InterceptorSlot::Autocast, &cast);
  Tensor a = ones({2});
  order.clear();
  neg(a);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], "profiler:neg");
  EXPECT_EQ(order[1], "autocast:neg");
  EXPECT_EQ(order[2], "autograd:neg");
  order.clear();
  {
    InterceptorExcludeGuard guard(InterceptorSlot::Autocast);
    neg(a);
  }
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(order[0], "profiler:neg");
}

TEST(Dispatch, InterceptorCanReplaceResult) {
  struct Doubler : Interceptor {
    std::vector<Tensor> intercept(OpCall& call, const Next& next) override {
      auto out = next(call);
      if (call.op->name == "neg") {
        InterceptorExcludeGuard g(InterceptorSlot::Profiler);
        out[0] = mul(out[0], 2);
      }
      return out;
    }
  } doubler;
  InterceptorScope scope(InterceptorSlot::Profiler, &doubler);
  EXPECT_EQ(neg(full({}, 3.0)).item<double>(), -6.0);
}

TEST(Dispatch, RegistryListsOpsWithSchemasAndKernels) {
  auto ops = all_ops();
  EXPECT_GT(ops.size(), 50u);
  const OpDef& add_op = get_op("add");
  EXPECT_NE(add_op.schema.find("alpha"), std::string::npos);
  EXPECT_NE(add_op.kernels[size_t(DeviceType::CPU)].fn, nullptr);
  EXPECT_TRUE(add_op.kernels[size_t(DeviceType::CPU)].dtypes & dtype_bit(DType::BF16));
  EXPECT_NE(find_kernel(add_op, DeviceType::CPU, DType::F32), nullptr);
  EXPECT_EQ(find_kernel(get_op("exp"), DeviceType::CPU, DType::I32), nullptr);
  EXPECT_EQ(find_op("no_such_op"), nullptr);
  EXPECT_THROW(get_op("no_such_op"), NotImplementedError);
}

TEST(Dispatch, MissingDtypeKernelNamesOpAndDtype) {
  Tensor i = ones({2}, DType::I32);
  try {
    call_op(get_op("exp"), {i});
    FAIL();
  } catch (const NotImplementedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("exp"), std::string::npos);
    EXPECT_NE(m.find("int32"), std::string::npos);
  }
}

// Temporarily removes the testing device's kernels (it normally runs every CPU kernel).
struct NoTestingKernels {
  KernelFn saved = default_kernel(DeviceType::Testing);
  NoTestingKernels() { set_default_kernel(DeviceType::Testing, nullptr); }
  ~NoTestingKernels() {
    set_default_kernel(DeviceType::Testing, saved);
    set_cpu_fallback_enabled(false);
  }
};

TEST(Dispatch, MissingDeviceKernelErrorsThenFallsBackToCpu) {
  ASSERT_TRUE(is_available(DeviceType::Testing)) << "no testing backend (the testing backend is part of every build)";
  Device dev(DeviceType::Testing, 0);
  Tensor a = full({4}, 1.5, TensorOptions(DType::F32, dev));
  Tensor b = arange(4, TensorOptions(DType::F32, dev));
  NoTestingKernels scope;
  set_cpu_fallback_enabled(false);
  try {
    add(a, b);
    FAIL();
  } catch (const NotImplementedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'add'"), std::string::npos);
    EXPECT_NE(m.find("testing"), std::string::npos);
    EXPECT_NE(m.find("KILN_FALLBACK=cpu"), std::string::npos);
  }
  set_cpu_fallback_enabled(true);
  int64_t before = get_op("add").fallback_calls.load();
  ::testing::internal::CaptureStderr();
  Tensor c = add(a, b);
  Tensor d = add(c, b);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.device(), dev);
  EXPECT_EQ(d.device(), dev);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{1.5, 3.5, 5.5, 7.5}));
  EXPECT_EQ(get_op("add").fallback_calls.load(), before + 2);
  // Warned once for 'add', not twice.
  size_t first = err.find("op 'add'");
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("op 'add'", first + 1), std::string::npos) << err;
  // out= form through the fallback writes into the device tensor.
  Tensor out = empty({4}, TensorOptions(DType::F32, dev));
  mul_out(a, b, out);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{0, 1.5, 3, 4.5}));
  EXPECT_GT(total_fallback_calls(), 0);
}

}  // namespace
}  // namespace kiln
