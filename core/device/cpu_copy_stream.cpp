#include "core/device/cpu_copy_stream.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace strata {

namespace {

class CpuCopyStream final : public CopyStream {
 public:
  CpuCopyStream() : worker_([this](std::stop_token stop) { run(stop); }) {}

  CopyTicket enqueue(void* destination, const void* source, std::uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    const CopyTicket ticket = ++issued_;
    jobs_.push_back(Job{destination, source, bytes});
    work_ready_.notify_one();
    return ticket;
  }

  double wait(CopyTicket ticket) override {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    job_done_.wait(lock, [&] { return completed_ >= ticket; });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  CopyTicket completed() const override {
    std::lock_guard lock(mutex_);
    return completed_;
  }

  double busy_seconds() const override {
    std::lock_guard lock(mutex_);
    return busy_seconds_;
  }

 private:
  struct Job {
    void* destination;
    const void* source;
    std::uint64_t bytes;
  };

  void run(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (true) {
      // Returns false only when stop is requested with nothing left to copy.
      if (!work_ready_.wait(lock, stop, [&] { return !jobs_.empty(); })) return;
      const Job job = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(job.destination, job.source, job.bytes);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      lock.lock();
      busy_seconds_ += seconds;
      ++completed_;
      job_done_.notify_all();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable_any work_ready_;
  std::condition_variable job_done_;
  std::deque<Job> jobs_;
  CopyTicket issued_ = 0;
  CopyTicket completed_ = 0;
  double busy_seconds_ = 0.0;
  std::jthread worker_;  // last: it starts after, and stops (draining its queue) before, the state it uses
};

}  // namespace

std::unique_ptr<CopyStream> make_cpu_copy_stream() {
  return std::make_unique<CpuCopyStream>();
}

}  // namespace strata
