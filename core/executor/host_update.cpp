// Where an update runs: on the backend's host op table when every row it reads or writes lives in
// host memory (the offloaded optimizer state with its gradients and masters), so that no op works
// across the bus; otherwise on the device's.
#include <algorithm>

#include "core/executor/executor.hpp"

namespace strata {

namespace {

// A row the update does not touch here (state on disk, read in per block) has no data.
bool on_host(const TensorView& row) {
  return row.data == nullptr || row.space == MemorySpace::host;
}

}  // namespace

bool Executor::updates_on_host(std::span<const ParamSlot> slots) const {
  return optimizer_.can_update_on_host() && in_host_memory(slots);
}

bool Executor::in_host_memory(std::span<const ParamSlot> slots) {
  return !slots.empty() && std::all_of(slots.begin(), slots.end(), [](const ParamSlot& slot) {
    return on_host(slot.param) && on_host(slot.grad) &&
           std::all_of(std::begin(slot.state), std::end(slot.state), on_host);
  });
}

bool Executor::in_host_memory(std::span<const TensorView> rows) {
  return !rows.empty() && std::all_of(rows.begin(), rows.end(), on_host);
}

void Executor::set_host_update(bool on_host) {
  model_.store().set_update_on_host(on_host);
  if (host_update_observer_) host_update_observer_(on_host);
}

void Executor::gather_on_host(int layer, std::initializer_list<TensorGroup> groups) {
  if (options_.data_parallel != nullptr || !optimizer_.can_update_on_host()) return;
  TensorStore& store = model_.store();
  const Residence state = store.residence(layer, TensorGroup::optimizer_state);
  if (state != Residence::host && state != Residence::disk) return;
  for (TensorGroup group : groups)
    if (store.residence(layer, group) == Residence::device)
      store.residency().begin_move_rows(store.group_rows(layer, group), Home::host);
}

Ops& Executor::ops_for(std::span<const TensorView> rows) {
  Backend& backend = model_.backend();
  return in_host_memory(rows) ? backend.host_ops() : backend.ops();
}

}  // namespace strata
