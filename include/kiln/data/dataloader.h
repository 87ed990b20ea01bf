#pragma once
// data::DataLoader: batches of a Dataset in (optionally shuffled) order, as
// torch.utils.data.DataLoader, iterated with range-for:
//
//   data::DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const data::Batch& b : loader) train(b[0], b[1]);
//
// Each begin() starts a new epoch. With shuffle, epoch e visits the examples in the order
// randperm(size) drawn from a Generator seeded with `seed` at a counter offset set by e, so
// the order is a function of (seed, e) only: reproducible, independent of the global
// generator and of how many batches earlier epochs consumed; set_epoch() resumes a run at a
// given epoch. Batches are made by Dataset::get_batch (or `collate` over get() when given)
// with gradients off.
//
// With prefetch > 0 a worker thread prepares up to `prefetch` batches ahead of the consumer
// (docs/decisions/0012-data-loader-thread-and-optimizer-state-files.md). An exception
// thrown while making a batch is rethrown to the consumer at that batch (from begin() or
// ++), after which the epoch is over. Starting a new epoch or destroying the loader
// mid-epoch stops the worker and joins it; iterators of an abandoned epoch must not be used
// again.
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "kiln/data/dataset.h"

namespace kiln::data {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;  // skip a last batch smaller than batch_size
  int64_t prefetch = 2;    // batches made ahead on a worker thread; 0: made in next()
  uint64_t seed = 0;       // the shuffle order's seed
  // Turns the examples of a batch into the batch; empty: Dataset::get_batch.
  std::function<Batch(const std::vector<Example>&)> collate{};
};

namespace detail {
class EpochRun;
}

class DataLoader {
 public:
  // An input iterator over the batches of one epoch; compares equal to end() after the last.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    Iterator() = default;
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return run_ == nullptr; }

   private:
    friend class DataLoader;
    explicit Iterator(detail::EpochRun* run);
    detail::EpochRun* run_ = nullptr;
    Batch batch_;
  };

  // ValueError for a null dataset, batch_size < 1 or prefetch < 0.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts the next epoch (stopping one in progress) and returns its first batch.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  // Batches per epoch.
  int64_t size() const;
  // The epoch the next begin() starts (0 at first); each begin() then advances it.
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t epoch);
  // The order in which epoch `epoch` visits the examples (0..n-1 without shuffle).
  std::vector<int64_t> order(int64_t epoch) const;

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  std::unique_ptr<detail::EpochRun> run_;
};

}  // namespace kiln::data
