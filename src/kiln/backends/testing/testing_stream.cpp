// The worker-thread queue behind each testing stream.
#include "testing_stream.h"

#include <string>
#include <system_error>
#include <utility>

#include "kiln/core/error.h"

namespace kiln::testing_backend {

namespace {
thread_local TestingStream* t_current_worker = nullptr;

// Rethrows a task's exception with the stream named in front, keeping kiln's error class so
// that callers can still tell an OutOfMemoryError from a ShapeError.
[[noreturn]] void rethrow_with_prefix(std::exception_ptr e, const std::string& prefix) {
  try {
    std::rethrow_exception(e);
  } catch (const OutOfMemoryError& x) {
    throw OutOfMemoryError(prefix + x.what());
  } catch (const NotImplementedError& x) {
    throw NotImplementedError(prefix + x.what());
  } catch (const DeviceError& x) {
    throw DeviceError(prefix + x.what());
  } catch (const ShapeError& x) {
    throw ShapeError(prefix + x.what());
  } catch (const IndexError& x) {
    throw IndexError(prefix + x.what());
  } catch (const TypeError& x) {
    throw TypeError(prefix + x.what());
  } catch (const ValueError& x) {
    throw ValueError(prefix + x.what());
  } catch (const std::exception& x) {
    throw Error(prefix + x.what());
  } catch (...) {
    throw Error(prefix + "a launched task threw a non-standard exception");
  }
}
}  // namespace

TestingStream* TestingStream::current_worker() { return t_current_worker; }

TestingStream::TestingStream(Device device, int64_t id, bool start_worker)
    : device_(device), id_(id) {
  if (!start_worker) return;
  try {
    worker_exited_ = false;
    worker_ = std::thread([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    KILN_THROW(DeviceError, device_, ": could not start the worker thread of stream ", id_,
               ": ", e.what());
  }
}

TestingStream::~TestingStream() { shutdown(); }

void TestingStream::enqueue(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    if (!worker_exited_) {
      queue_.push_back(std::move(fn));
      work_cv_.notify_one();
      return;
    }
  }
  std::lock_guard inline_lock(inline_mutex_);
  run_task(fn);
}

bool TestingStream::query() {
  std::lock_guard lock(mutex_);
  return queue_.empty() && !busy_;
}

void TestingStream::synchronize() {
  KILN_CHECK(t_current_worker != this, Error, "synchronize() of ", device_, " stream ", id_,
             " was called from a task running on that stream; expected a call from another "
             "thread (it would wait for itself forever)");
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    idle_cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || worker_exited_; });
    error = std::exchange(error_, nullptr);
  }
  if (error) {
    rethrow_with_prefix(error, "asynchronous error on " + device_.str() + " stream " +
                                   std::to_string(id_) + ": ");
  }
}

void TestingStream::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // shut down from one of its own tasks: it exits after this task
  } else {
    worker_.join();
  }
}

void TestingStream::run_task(std::function<void()>& fn) noexcept {
  try {
    fn();
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void TestingStream::worker_loop() {
  t_current_worker = this;
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) {  // stopping and drained
      worker_exited_ = true;
      idle_cv_.notify_all();
      return;
    }
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    run_task(fn);
    fn = nullptr;  // destroy the captures (e.g. DataPtrs) before taking the lock again
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace kiln::testing_backend
