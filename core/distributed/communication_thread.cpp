#include "core/distributed/communication_thread.hpp"

#include <chrono>

namespace strata {

CommunicationThread::CommunicationThread() : thread_([this] { loop(); }) {}

CommunicationThread::~CommunicationThread() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

CommunicationThread::Ticket CommunicationThread::submit(std::function<void()> job) {
  Ticket ticket = 0;
  {
    const std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  queued_.notify_one();
  return ticket;
}

void CommunicationThread::wait(Ticket ticket) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  ran_.wait(lock, [&] { return completed_ >= ticket; });
  const std::exception_ptr failure = failure_;
  lock.unlock();
  waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failure) std::rethrow_exception(failure);
}

void CommunicationThread::run(const std::function<void()>& job) {
  if (on_thread()) {
    job();
    return;
  }
  wait(submit(job));
}

void CommunicationThread::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, with nothing left to run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    std::exception_ptr failure;
    try {
      job();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !failure_) failure_ = failure;
    ++completed_;
    ran_.notify_all();
  }
}

}  // namespace strata
