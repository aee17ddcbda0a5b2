#pragma once
// The thread a data-parallel rank talks to the other ranks on (docs/architecture.md, "Data
// parallel"): jobs run one at a time, in the order they were submitted, while the rank's own thread
// goes on computing. One thread and one order keep MPI's rule (every rank makes the same calls in
// the same order); this thread makes every MPI call but MPI_Abort.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace strata {

class CommunicationThread {
 public:
  using Ticket = std::uint64_t;

  CommunicationThread();
  // Runs every job still queued, then ends the thread.
  ~CommunicationThread();
  CommunicationThread(const CommunicationThread&) = delete;
  CommunicationThread& operator=(const CommunicationThread&) = delete;

  // Queues `job`; its ticket is larger than every ticket before it.
  Ticket submit(std::function<void()> job);
  // Returns once the job of `ticket` and every job before it have run. Rethrows the first failure
  // among them (a failed job does not stop the ones after it: they are the other ranks' calls too).
  void wait(Ticket ticket);
  // Runs `job` on the thread and waits for it; from the thread itself (a job's own calls), at once.
  void run(const std::function<void()>& job);
  bool on_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }
  // Wall time this thread spent running jobs: the communication, its arithmetic included.
  double busy_seconds() const noexcept { return busy_seconds_.load(); }
  // Wall time the other threads spent blocked in wait() and run() (from before the job was queued):
  // the part of busy_seconds() they did not hide.
  double waited_seconds() const noexcept { return waited_seconds_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  void wait_since(Ticket ticket, Clock::time_point start);
  void loop();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable ran_;
  std::deque<std::function<void()>> jobs_;
  Ticket submitted_ = 0;
  Ticket completed_ = 0;
  std::exception_ptr failure_;
  Ticket failed_ = 0;  // the first failed job's ticket
  bool stopping_ = false;
  std::atomic<double> busy_seconds_{0.0};
  std::atomic<double> waited_seconds_{0.0};
  std::thread thread_;  // last: it starts once the members it reads exist
};

}  // namespace strata
