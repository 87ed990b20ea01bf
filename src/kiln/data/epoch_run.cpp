// detail::EpochRun: on-demand or prefetched batches of one epoch (see epoch_run.h).
#include "kiln/data/epoch_run.h"

#include "kiln/autograd/autograd.h"

namespace kiln::data::detail {

namespace {
// Data loading never records autograd graphs, whichever thread makes the batch (grad mode
// is per thread, so the worker would otherwise record and the consumer might not).
Batch make_without_grad(const EpochRun::MakeBatch& make, int64_t b) {
  autograd::NoGradGuard no_grad;
  return make(b);
}
}  // namespace

EpochRun::EpochRun(int64_t num_batches, int64_t prefetch, MakeBatch make_batch)
    : num_batches_(num_batches), prefetch_(size_t(prefetch)), make_batch_(std::move(make_batch)) {
  if (prefetch_ > 0 && num_batches_ > 0) worker_ = std::thread([this] { work(); });
}

EpochRun::~EpochRun() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void EpochRun::work() {
  for (int64_t b = 0; b < num_batches_; ++b) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      not_full_.wait(lock, [&] { return stop_ || queue_.size() < prefetch_; });
      if (stop_) return;
    }
    Slot slot;
    try {
      slot.batch = make_without_grad(make_batch_, b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    const bool failed = slot.error != nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      queue_.push_back(std::move(slot));
    }
    not_empty_.notify_one();
    if (failed) return;  // nothing after a failed batch: the consumer's epoch ends there
  }
}

bool EpochRun::next(Batch& out) {
  if (consumed_ >= num_batches_) return false;
  const int64_t b = consumed_++;
  if (prefetch_ == 0) {
    try {
      out = make_without_grad(make_batch_, b);
    } catch (...) {
      consumed_ = num_batches_;
      throw;
    }
    return true;
  }
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // The worker pushes one slot per batch until its first failure, after which consumed_
    // jumps to the end, so a slot always comes.
    not_empty_.wait(lock, [&] { return !queue_.empty(); });
    slot = std::move(queue_.front());
    queue_.pop_front();
  }
  not_full_.notify_one();
  if (slot.error) {
    consumed_ = num_batches_;
    std::rethrow_exception(slot.error);
  }
  out = std::move(slot.batch);
  return true;
}

}  // namespace kiln::data::detail
