// DataLoader: batching, drop_last, seeded shuffling, prefetching (on/off identical, bounded,
// exceptions at the failing batch, early destruction), collate, and the datasets.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "kiln/data/data.h"
#include "kiln/kiln.h"

namespace kiln::data {
namespace {

using namespace std::chrono_literals;

// x[i] = (2i, 2i+1) as float32, y[i] = i as int64.
std::shared_ptr<TensorDataset> pairs(int64_t n) {
  Tensor x = arange(0, 2 * n, 1, DType::F32).reshape({n, 2});
  Tensor y = arange(0, n, 1, DType::I64);
  return std::make_shared<TensorDataset>(std::vector<Tensor>{x, y});
}

// The labels of every batch of one epoch.
std::vector<std::vector<int64_t>> epoch_labels(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.size(), 2u);
    // The data rows are the labelled examples.
    std::vector<int64_t> labels = b[1].to_vector<int64_t>();
    std::vector<float> x = b[0].to_vector<float>();
    for (size_t i = 0; i < labels.size(); ++i) {
      EXPECT_EQ(x[2 * i], float(2 * labels[i]));
      EXPECT_EQ(x[2 * i + 1], float(2 * labels[i] + 1));
    }
    out.push_back(labels);
  }
  return out;
}

TEST(DataLoader, BatchesInOrderWithAPartialLastBatch) {
  for (int64_t prefetch : {0, 2}) {
    DataLoader loader(pairs(10), {.batch_size = 3, .prefetch = prefetch});
    EXPECT_EQ(loader.size(), 4);
    std::vector<std::vector<int64_t>> expected = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
    EXPECT_EQ(epoch_labels(loader), expected) << "prefetch " << prefetch;
    for (const Batch& b : loader) {
      EXPECT_EQ(b[0].shape(), (Shape{b[1].size(0), 2}));
      EXPECT_EQ(b[0].dtype(), DType::F32);
      EXPECT_EQ(b[1].dtype(), DType::I64);
    }
  }
}

TEST(DataLoader, DropLast) {
  DataLoader loader(pairs(10), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(loader.size(), 3);
  std::vector<std::vector<int64_t>> expected = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  EXPECT_EQ(epoch_labels(loader), expected);
  DataLoader exact(pairs(9), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(exact.size(), 3);
  DataLoader too_small(pairs(2), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(too_small.size(), 0);
  EXPECT_TRUE(epoch_labels(too_small).empty());
  DataLoader empty(pairs(0), {.batch_size = 3});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(epoch_labels(empty).empty());
  DataLoader empty_shuffled(pairs(0), {.batch_size = 3, .shuffle = true, .prefetch = 1});
  EXPECT_TRUE(epoch_labels(empty_shuffled).empty());
}

TEST(DataLoader, ShuffleIsAPermutationReproducibleFromTheSeed) {
  auto ds = pairs(50);
  DataLoaderOptions opts{.batch_size = 8, .shuffle = true, .seed = 1234};
  DataLoader a(ds, opts), b(ds, opts);
  std::vector<std::vector<std::vector<int64_t>>> epochs;
  for (int e = 0; e < 3; ++e) {
    auto ea = epoch_labels(a);
    // The global generator and the other loader's progress have no influence.
    manual_seed(uint64_t(e) + 77);
    (void)randn({100});
    EXPECT_EQ(ea, epoch_labels(b)) << "epoch " << e;
    std::vector<int64_t> seen;
    for (const auto& batch : ea) seen.insert(seen.end(), batch.begin(), batch.end());
    EXPECT_EQ(ea.size(), 7u);
    std::vector<int64_t> order = a.order(e);
    EXPECT_EQ(seen, order) << "epoch " << e;
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> identity(50);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(seen, identity) << "epoch " << e << " is not a permutation";
    EXPECT_NE(order, identity) << "epoch " << e << " was not shuffled";
    epochs.push_back(ea);
  }
  EXPECT_NE(epochs[0], epochs[1]) << "epochs must re-shuffle";
  EXPECT_NE(epochs[1], epochs[2]);
  EXPECT_EQ(a.epoch(), 3);

  // set_epoch resumes the sequence; another seed gives another order.
  DataLoader c(ds, opts);
  c.set_epoch(2);
  EXPECT_EQ(epoch_labels(c), epochs[2]);
  DataLoader d(ds, {.batch_size = 8, .shuffle = true, .seed = 1235});
  EXPECT_NE(epoch_labels(d), epochs[0]);
  EXPECT_THROW(c.set_epoch(-1), ValueError);
}

TEST(DataLoader, PrefetchOnAndOffGiveIdenticalBatches) {
  Tensor x = randn({37, 3, 4});
  Tensor y = randint(0, 5, {37});
  auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{x, y});
  auto bytes = [](const Tensor& t) {
    Tensor c = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    return std::vector<uint8_t>(p, p + c.nbytes());
  };
  std::vector<std::vector<uint8_t>> reference;
  for (int64_t prefetch : {0, 1, 3, 64}) {
    DataLoader loader(ds, {.batch_size = 5, .shuffle = true, .prefetch = prefetch, .seed = 9});
    std::vector<std::vector<uint8_t>> got;
    for (int e = 0; e < 2; ++e)
      for (const Batch& b : loader) {
        EXPECT_EQ(b[0].shape()[1], 3);
        for (const Tensor& t : b) got.push_back(bytes(t));
      }
    if (reference.empty()) reference = got;
    EXPECT_EQ(got, reference) << "prefetch " << prefetch;
  }
}

// A dataset that counts get() calls, can be slowed down, and throws at one index.
class ProbeDataset : public Dataset {
 public:
  explicit ProbeDataset(int64_t n, int64_t throw_at = -1, std::chrono::milliseconds delay = 0ms)
      : n_(n), throw_at_(throw_at), delay_(delay) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    check_index("ProbeDataset", i, n_);
    ++calls;
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (i == throw_at_) KILN_THROW(ValueError, "ProbeDataset: example ", i, " is corrupt");
    return {full({2}, double(i), DType::F32), scalar_tensor(i, DType::I64)};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, throw_at_;
  std::chrono::milliseconds delay_;
};

TEST(DataLoader, DefaultGetBatchCollatesExamples) {
  auto ds = std::make_shared<ProbeDataset>(5);
  DataLoader loader(ds, {.batch_size = 2, .prefetch = 0});
  std::vector<std::vector<int64_t>> labels;
  for (const Batch& b : loader) {
    EXPECT_EQ(b[0].shape(), (Shape{b[1].size(0), 2}));
    labels.push_back(b[1].to_vector<int64_t>());
  }
  EXPECT_EQ(labels, (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
}

TEST(DataLoader, WorkerExceptionReachesTheConsumerAtItsBatch) {
  for (int64_t prefetch : {0, 1, 3}) {
    auto ds = std::make_shared<ProbeDataset>(12, /*throw_at=*/7);
    DataLoader loader(ds, {.batch_size = 2, .prefetch = prefetch});
    for (int attempt = 0; attempt < 2; ++attempt) {  // a new epoch starts cleanly after it
      std::vector<int64_t> seen;
      try {
        for (const Batch& b : loader)
          for (int64_t l : b[1].to_vector<int64_t>()) seen.push_back(l);
        ADD_FAILURE() << "no exception, prefetch " << prefetch;
      } catch (const ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("example 7 is corrupt"), std::string::npos);
      }
      // Batches 0-2 arrived; batch 3 (examples 6, 7) failed.
      EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5})) << "prefetch " << prefetch;
    }
  }
}

TEST(DataLoader, ExceptionInTheFirstBatchComesFromBegin) {
  auto ds = std::make_shared<ProbeDataset>(4, /*throw_at=*/0);
  DataLoader loader(ds, {.batch_size = 2, .prefetch = 2});
  EXPECT_THROW(loader.begin(), ValueError);
  // The iterator is at the end after an exception from ++.
  auto ds2 = std::make_shared<ProbeDataset>(4, /*throw_at=*/3);
  DataLoader loader2(ds2, {.batch_size = 2, .prefetch = 2});
  auto it = loader2.begin();
  ASSERT_FALSE(it == loader2.end());
  EXPECT_THROW(++it, ValueError);
  EXPECT_TRUE(it == loader2.end());
}

TEST(DataLoader, PrefetchStaysBoundedAhead) {
  auto ds = std::make_shared<ProbeDataset>(100);
  DataLoader loader(ds, {.batch_size = 1, .prefetch = 3});
  auto it = loader.begin();  // consumes batch 0
  // The worker fills the queue (3 more batches) and then waits for space.
  for (int i = 0; i < 500 && ds->calls.load() < 4; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(ds->calls.load(), 4);
  ++it;  // frees one slot
  for (int i = 0; i < 500 && ds->calls.load() < 5; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(ds->calls.load(), 5);
}

TEST(DataLoader, EarlyDestructionJoinsTheWorker) {
  {
    // Destroyed while the worker waits for queue space.
    auto ds = std::make_shared<ProbeDataset>(1000);
    DataLoader loader(ds, {.batch_size = 4, .prefetch = 2});
    auto it = loader.begin();
    std::this_thread::sleep_for(10ms);
  }
  {
    // Destroyed while the worker is inside a slow get().
    auto ds = std::make_shared<ProbeDataset>(1000, -1, 20ms);
    auto start = std::chrono::steady_clock::now();
    {
      DataLoader loader(ds, {.batch_size = 2, .prefetch = 4});
      for (const Batch& b : loader) {
        (void)b;
        break;
      }
    }
    // At most the batch being made is finished: far less than the 10 s of a full epoch.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    // The dataset outlives the loader's worker safely (the worker held a reference).
    EXPECT_GE(ds.use_count(), 1);
  }
  {
    // Never iterated; begun and abandoned twice; a new epoch after a break starts at 0.
    DataLoader unused(pairs(10), {.batch_size = 3});
    DataLoader loader(pairs(10), {.batch_size = 3, .prefetch = 2});
    (void)loader.begin();
    (void)loader.begin();
    for (const Batch& b : loader) {
      EXPECT_EQ(b[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
      break;
    }
    EXPECT_EQ(epoch_labels(loader).size(), 4u);
  }
}

TEST(DataLoader, CustomCollate) {
  int64_t calls = 0;
  DataLoaderOptions opts{.batch_size = 4, .prefetch = 0};
  opts.collate = [&calls](const std::vector<Example>& examples) {
    ++calls;
    std::vector<Tensor> labels;
    for (const Example& e : examples) labels.push_back(e[1]);
    return Batch{sum(stack(labels))};  // the batch is the sum of the labels
  };
  DataLoader loader(pairs(6), opts);
  std::vector<int64_t> sums;
  for (const Batch& b : loader) sums.push_back(b[0].item<int64_t>());
  EXPECT_EQ(sums, (std::vector<int64_t>{0 + 1 + 2 + 3, 4 + 5}));
  EXPECT_EQ(calls, 2);
}

TEST(DataLoader, BatchesNeverRecordGradients) {
  Tensor x = randn({6, 2});
  autograd::set_requires_grad(x);
  auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{x});
  for (int64_t prefetch : {0, 2}) {
    DataLoader loader(ds, {.batch_size = 3, .prefetch = prefetch});
    for (const Batch& b : loader) EXPECT_FALSE(autograd::requires_grad(b[0]));
  }
}

TEST(DataLoader, BadArguments) {
  EXPECT_THROW(DataLoader(nullptr), ValueError);
  EXPECT_THROW(DataLoader(pairs(3), {.batch_size = 0}), ValueError);
  EXPECT_THROW(DataLoader(pairs(3), {.prefetch = -1}), ValueError);
}

TEST(TensorDataset, ExamplesAndErrors) {
  auto ds = pairs(4);
  EXPECT_EQ(ds->size(), 4);
  Example e = ds->get(2);
  EXPECT_EQ(e[0].to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_EQ(e[1].item<int64_t>(), 2);
  EXPECT_THROW(ds->get(4), IndexError);
  EXPECT_THROW(ds->get(-1), IndexError);
  EXPECT_THROW(ds->get_batch({0, 4}), IndexError);
  EXPECT_THROW(TensorDataset({}), ValueError);
  EXPECT_THROW(TensorDataset({zeros({3}), zeros({4})}), ValueError);
  EXPECT_THROW(TensorDataset({scalar_tensor(1.0)}), ValueError);
  EXPECT_THROW(collate({}), ValueError);
  EXPECT_THROW(collate({{zeros({2})}, {zeros({2}), zeros({2})}}), ValueError);
  EXPECT_THROW(collate({{zeros({2})}, {zeros({3})}}), Error);
}

}  // namespace
}  // namespace kiln::data
