#pragma once
// One stream of the testing device: a FIFO queue served by its own worker thread, which is
// what makes the device asynchronous (launch returns before the work has run).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "kiln/runtime/device.h"

namespace kiln::testing_backend {

class TestingStream {
 public:
  // Without a worker (start_worker false, used after shutdown) work runs on the caller.
  TestingStream(Device device, int64_t id, bool start_worker);
  ~TestingStream();
  TestingStream(const TestingStream&) = delete;
  TestingStream& operator=(const TestingStream&) = delete;

  void enqueue(std::function<void()> fn);
  bool query();        // true when the queue is empty and no task runs
  void synchronize();  // waits, then rethrows (once) the first error of a launched task
  // Lets queued work finish and joins the worker; later work runs on the caller.
  void shutdown();

  // The stream whose worker runs the calling thread, or nullptr on other threads.
  static TestingStream* current_worker();

 private:
  void worker_loop();
  void run_task(std::function<void()>& fn) noexcept;

  const Device device_;
  const int64_t id_;
  std::mutex mutex_;
  std::condition_variable work_cv_;  // queue gained work, or stop requested
  std::condition_variable idle_cv_;  // queue drained
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;          // the worker is running a task
  bool stopping_ = false;      // shutdown requested: drain, then exit
  bool worker_exited_ = true;  // no worker will take more work: run it on the caller
  std::exception_ptr error_;   // first error since the last synchronize()
  std::mutex inline_mutex_;    // keeps caller-run work in order once the worker is gone
  std::thread worker_;
};

}  // namespace kiln::testing_backend
