#pragma once
// A device's copy stream: copies issued here run in order, concurrently with compute, until
// someone waits for them. On the CPU backend it is one worker thread doing memcpy; on CUDA it is
// a cudaStream_t with pinned host buffers. Only the thread that issues copies may wait for them.
#include <cstdint>

namespace strata {

using CopyTicket = std::uint64_t;  // 1, 2, 3, ... in issue order; 0 means "nothing"

class CopyStream {
 public:
  virtual ~CopyStream() = default;
  // The source must stay valid and unchanged, and the destination untouched, until the copy is
  // waited for.
  virtual CopyTicket enqueue(void* destination, const void* source, std::uint64_t bytes) = 0;
  // Blocks until the copy with this ticket, and every one issued before it, has completed, and
  // returns how long compute stood idle waiting for it, in seconds: on the CPU, whose compute is
  // the calling thread, the whole wait; on a GPU, only the time the compute stream ran dry before
  // the copy landed (waiting while queued kernels still run hides the copy).
  virtual double wait(CopyTicket ticket) = 0;
  // The newest ticket whose copy has completed (copies complete in issue order). Never blocks.
  virtual CopyTicket completed() const = 0;
  // Seconds the stream has spent copying since it was created (its own clock, not the caller's).
  virtual double busy_seconds() const = 0;
};

}  // namespace strata
