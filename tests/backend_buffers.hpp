#pragma once
// For tests that run ops on a backend: buffers filled from and read back into host vectors, and
// the skip every CUDA test starts with where no device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/device/backends.hpp"

#define STRATA_SKIP_WITHOUT_CUDA()                                                            \
  if (const std::string why = ::strata::backend_unavailable_reason("cuda:0"); !why.empty()) { \
    GTEST_SKIP() << "cuda:0 is not available here: " << why;                                  \
  }

namespace strata::test {

// Backend memory for one test, accounted as `other`; download waits for the backend's queued work.
class BackendBuffers {
 public:
  explicit BackendBuffers(Backend& backend) : backend_(backend) {}
  template <typename T>
  T* upload(const std::vector<T>& values) {
    buffers_.push_back(backend_.device_memory().allocate(std::max<std::size_t>(1, values.size()) * sizeof(T),
                                                         MemoryCategory::other, "test buffer"));
    backend_.ops().copy_from_host(buffers_.back().data(), values.data(), values.size() * sizeof(T));
    return static_cast<T*>(buffers_.back().data());
  }
  template <typename T>
  std::vector<T> download(const T* data, std::size_t count) {
    std::vector<T> values(count);
    backend_.synchronize();
    backend_.ops().copy_to_host(values.data(), data, count * sizeof(T));
    return values;
  }

 private:
  Backend& backend_;
  std::vector<Buffer> buffers_;
};

}  // namespace strata::test
