#pragma once
// detail::EpochRun: the batches of one DataLoader epoch, made in order either on demand
// (prefetch 0) or by a worker thread that runs up to `prefetch` batches ahead through a
// bounded queue. The queue carries a batch or the exception that making it threw, so the
// consumer sees the failure at that batch's position. Destruction stops and joins the
// worker; the worker only ever waits for queue space or for the consumer, both of which the
// stop flag ends, so destruction never blocks longer than the batch being made.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "kiln/data/dataset.h"

namespace kiln::data::detail {

class EpochRun {
 public:
  using MakeBatch = std::function<Batch(int64_t batch_index)>;

  EpochRun(int64_t num_batches, int64_t prefetch, MakeBatch make_batch);
  ~EpochRun();
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  // Moves the next batch into out; false when the epoch is over. Rethrows the exception
  // making that batch threw; the epoch is then over.
  bool next(Batch& out);

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  void work();

  const int64_t num_batches_;
  const size_t prefetch_;
  const MakeBatch make_batch_;
  int64_t consumed_ = 0;  // consumer side only

  std::mutex mutex_;
  std::condition_variable not_full_;   // the worker waits for queue space (or stop)
  std::condition_variable not_empty_;  // the consumer waits for a slot
  std::deque<Slot> queue_;
  bool stop_ = false;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace kiln::data::detail
