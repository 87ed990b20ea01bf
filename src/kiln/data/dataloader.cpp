// data::DataLoader: epoch order, batch slicing, and the range-for iterator over an EpochRun.
#include "kiln/data/dataloader.h"

#include <numeric>

#include "kiln/data/epoch_run.h"
#include "kiln/ops/random.h"

namespace kiln::data {

namespace {
// Each epoch draws its permutation from its own range of Philox counters: 2^40 blocks hold
// the draws of a randperm of up to 2^41 examples, so epochs never share counters.
constexpr int kEpochOffsetShift = 40;
}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  KILN_CHECK(dataset_ != nullptr, ValueError, "DataLoader: expected a dataset, got null");
  KILN_CHECK(options_.batch_size >= 1, ValueError,
             "DataLoader: batch_size should be a positive integer, got ", options_.batch_size);
  KILN_CHECK(options_.prefetch >= 0, ValueError,
             "DataLoader: prefetch should be 0 (off) or a positive number of batches, got ",
             options_.prefetch);
}

// Out of line: EpochRun is complete here.
DataLoader::~DataLoader() = default;

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size();
  const int64_t bs = options_.batch_size;
  return options_.drop_last ? n / bs : n / bs + (n % bs != 0);
}

void DataLoader::set_epoch(int64_t epoch) {
  KILN_CHECK(epoch >= 0, ValueError, "DataLoader: epoch should be >= 0, got ", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DataLoader::order(int64_t epoch) const {
  KILN_CHECK(epoch >= 0, ValueError, "DataLoader: epoch should be >= 0, got ", epoch);
  const int64_t n = dataset_->size();
  if (!options_.shuffle) {
    std::vector<int64_t> identity(size_t(n), 0);
    std::iota(identity.begin(), identity.end(), int64_t(0));
    return identity;
  }
  Generator gen(options_.seed);
  gen.set_offset(uint64_t(epoch) << kEpochOffsetShift);
  return randperm(n, DType::I64, &gen).to_vector<int64_t>();
}

DataLoader::Iterator DataLoader::begin() {
  run_.reset();  // stops and joins the worker of an epoch in progress
  const int64_t epoch = epoch_++;
  auto order = std::make_shared<const std::vector<int64_t>>(this->order(epoch));
  const int64_t num_batches = size();
  const int64_t bs = options_.batch_size;
  // The batch maker owns everything it reads, so the worker never touches the loader.
  auto make = [dataset = dataset_, order, bs, collate = options_.collate](int64_t b) {
    const int64_t first = b * bs;
    const int64_t last = std::min(first + bs, int64_t(order->size()));
    std::vector<int64_t> indices(order->begin() + first, order->begin() + last);
    if (!collate) return dataset->get_batch(indices);
    std::vector<Example> examples;
    examples.reserve(indices.size());
    for (int64_t i : indices) examples.push_back(dataset->get(i));
    return collate(examples);
  };
  run_ = std::make_unique<detail::EpochRun>(num_batches, options_.prefetch, std::move(make));
  return Iterator(run_.get());
}

DataLoader::Iterator::Iterator(detail::EpochRun* run) : run_(run) { ++*this; }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  detail::EpochRun* run = run_;
  run_ = nullptr;  // stays at end() if next() throws
  batch_.clear();
  if (run != nullptr && run->next(batch_)) run_ = run;
  return *this;
}

}  // namespace kiln::data
