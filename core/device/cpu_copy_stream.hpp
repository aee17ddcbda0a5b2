#pragma once
#include <memory>

#include "core/device/copy_stream.hpp"

namespace strata {

// A worker thread that runs memcpy jobs in order.
std::unique_ptr<CopyStream> make_cpu_copy_stream();

}  // namespace strata
