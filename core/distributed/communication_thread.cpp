#include "core/distributed/communication_thread.hpp"

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
  wait_since(ticket, Clock::now());
}

void CommunicationThread::wait_since(Ticket ticket, Clock::time_point start) {
  std::unique_lock lock(mutex_);
  ran_.wait(lock, [&] { return completed_ >= ticket; });
  const std::exception_ptr failure = failed_ != 0 && failed_ <= ticket ? failure_ : nullptr;
  lock.unlock();
  waited_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  if (failure) std::rethrow_exception(failure);
}

void CommunicationThread::run(const std::function<void()>& job) {
  if (on_thread()) {
    job();
    return;
  }
  // From before the job is queued: the thread may start it before this thread gets to wait.
  const Clock::time_point start = Clock::now();
  wait_since(submit(job), start);
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
    const Clock::time_point start = Clock::now();
    try {
      job();
    } catch (...) {
      failure = std::current_exception();
    }
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    lock.lock();
    ++completed_;
    if (failure && !failure_) {
      failure_ = failure;
      failed_ = completed_;
    }
    ran_.notify_all();
  }
}

}  // namespace strata
