#include "core/device/cuda/cuda_copy_stream.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <utility>

#include "core/device/cuda/cuda_memory.hpp"

namespace strata {

namespace {

class Event {
 public:
  Event() { check_cuda(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  cudaEvent_t get() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaCopyStream final : public CopyStream {
 public:
  explicit CudaCopyStream(cudaStream_t compute) : compute_(compute) {
    check_cuda(cudaGetDevice(&device_), "cudaGetDevice");  // the backend made its device current
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  ~CudaCopyStream() override {
    cudaStreamSynchronize(stream_);
    pending_.clear();
    cudaStreamDestroy(stream_);
  }
  CudaCopyStream(const CudaCopyStream&) = delete;
  CudaCopyStream& operator=(const CudaCopyStream&) = delete;

  CopyTicket enqueue(void* destination, const void* source, std::uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");  // another backend's device may be current
    Pending copy{++issued_, Event(), Event()};
    check_cuda(cudaEventRecord(compute_done_.get(), compute_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, compute_done_.get(), 0), "cudaStreamWaitEvent");
    check_cuda(cudaEventRecord(copy.start.get(), stream_), "cudaEventRecord");
    check_cuda(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, stream_),
               "cudaMemcpyAsync (copy stream)");
    check_cuda(cudaEventRecord(copy.end.get(), stream_), "cudaEventRecord");
    pending_.push_back(std::move(copy));
    return issued_;
  }

  double wait(CopyTicket ticket) override {
    std::lock_guard lock(mutex_);
    double idle_seconds = 0.0;
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    for (const Pending& copy : pending_)
      if (copy.ticket == ticket) {
        // Marks the end of the compute queued so far: if it is still running when the copy lands,
        // the copy was hidden; otherwise compute stood idle from that mark until the copy's end.
        check_cuda(cudaEventRecord(compute_drained_.get(), compute_), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(copy.end.get()), "cudaEventSynchronize (copy stream)");
        if (cudaEventQuery(compute_drained_.get()) == cudaSuccess) {
          float milliseconds = 0.0f;
          check_cuda(cudaEventElapsedTime(&milliseconds, compute_drained_.get(), copy.end.get()),
                     "cudaEventElapsedTime");
          idle_seconds = std::max(0.0, milliseconds / 1000.0);
        } else {
          (void)cudaGetLastError();  // cudaErrorNotReady is not an error here
        }
        break;
      }
    harvest();
    return idle_seconds;
  }

  CopyTicket completed() const override {
    std::lock_guard lock(mutex_);
    harvest();
    return completed_;
  }

  double busy_seconds() const override {
    std::lock_guard lock(mutex_);
    harvest();
    return busy_seconds_;
  }

 private:
  struct Pending {
    CopyTicket ticket;
    Event start;
    Event end;
  };

  // Retires finished copies in issue order, adding the time each took on the copy engine.
  void harvest() const {
    while (!pending_.empty() && cudaEventQuery(pending_.front().end.get()) == cudaSuccess) {
      float milliseconds = 0.0f;
      check_cuda(cudaEventElapsedTime(&milliseconds, pending_.front().start.get(), pending_.front().end.get()),
                 "cudaEventElapsedTime");
      busy_seconds_ += milliseconds / 1000.0;
      completed_ = pending_.front().ticket;
      pending_.pop_front();
    }
  }

  cudaStream_t compute_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  Event compute_done_;
  Event compute_drained_;
  mutable std::mutex mutex_;
  mutable std::deque<Pending> pending_;
  CopyTicket issued_ = 0;
  mutable CopyTicket completed_ = 0;
  mutable double busy_seconds_ = 0.0;
};

}  // namespace

std::unique_ptr<CopyStream> make_cuda_copy_stream(cudaStream_t compute_stream) {
  return std::make_unique<CudaCopyStream>(compute_stream);
}

}  // namespace strata
