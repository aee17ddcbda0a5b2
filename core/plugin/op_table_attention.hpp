#pragma once
// `[kernels] attention = "fast"`: the backend's own attention op (Ops::attention_forward and
// _backward) behind the SDK's Kernel interface. The op table is looked up at each call, so the
// kernel may be built before the run's backend exists (HostServicesImpl::set_ops) and always
// runs where the tensors live.
#include <memory>

#include "strata/host_services.hpp"
#include "strata/kernel.hpp"

namespace strata {

std::unique_ptr<Kernel> make_op_table_attention(HostServices& host);

}  // namespace strata
