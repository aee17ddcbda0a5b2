// Residency (core/residency/residency.hpp): the buffers of the table's rows, the moves between
// their homes, and the disk tier's loans.
#include "core/residency/residency.hpp"

#include "core/device/memory_limit_exceeded.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

Residency::~Residency() {
  // Copies still in flight must land before their buffers go back to the arenas. While unwinding
  // from a device failure the wait may throw too: the buffers are then abandoned with the device.
  try {
    for (PendingMove& move : pending_)
      if (move.ticket != 0)
        (void)(move.disk ? disk_tier_->wait(move.ticket) : backend_.copy_stream().wait(move.ticket));
  } catch (...) {
  }
}

Buffer Residency::take(const TensorRow& r, Allocator& arena) {
  try {
    return arena.allocate(r.bytes(), r.category, "core");
  } catch (const MemoryLimitExceeded& e) {
    throw e.naming(r.name, r.remedy);  // the row that did not fit, and what would make it
  }
}

void Residency::add_row() {
  buffers_.emplace_back();
  pending_.emplace_back();
  host_copy_.emplace_back();
  disk_offset_.push_back(-1);
  disk_current_.push_back(0);
  zeroed_.push_back(0);
}

void Residency::allocate_persistent() {
  for (int row = 0; row < static_cast<int>(table_.rows().size()); ++row)
    if (table_.row(row).category != MemoryCategory::activations && !allocated(row) && !on_demand_.contains(row))
      allocate(row, true);
}

void Residency::allocate(int row, bool zero) {
  const TensorRow& r = table_.row(row);
  zeroed_[static_cast<std::size_t>(row)] = 0;
  if (r.home == Home::disk) {
    // A fresh extent reads as zeros: the row starts there, never in memory.
    if (disk_tier_ == nullptr)
      throw std::invalid_argument(r.name + " is placed on disk, but the run has no disk tier: set [device] disk_path");
    const std::size_t index = static_cast<std::size_t>(row);
    if (disk_offset_[index] < 0)
      disk_offset_[index] = static_cast<std::int64_t>(disk_tier_->reserve(r.bytes(), r.name, r.element));
    disk_tier_->hold(r.category, r.bytes());
    return;
  }
  Allocator& arena = r.home == Home::device ? backend_.device_memory() : backend_.host_memory();
  Buffer& buffer = buffers_[static_cast<std::size_t>(row)];
  buffer = take(r, arena);
  if (!zero) return;
  if (r.home == Home::device)
    backend_.ops().fill(buffer.data(), 0, r.bytes());
  else
    backend_.zero_host_memory(buffer.data(), r.bytes());  // the host arena is host memory
}

void Residency::release(int row) {
  if (row_guard_) row_guard_(row);
  // A copy still reading or writing the row lands first: its buffers are about to go.
  if (pending_[static_cast<std::size_t>(row)].ticket != 0) complete_rows({row});
  buffers_[static_cast<std::size_t>(row)].reset();
  host_copy_[static_cast<std::size_t>(row)].reset();
  zeroed_[static_cast<std::size_t>(row)] = 0;
  TensorRow& r = table_.row(row);
  if (r.group == TensorGroup::activations) r.home = Home::device;  // allocated again, it is computed on
}

bool Residency::any_on_disk() const {
  return std::any_of(table_.rows().begin(), table_.rows().end(),
                     [](const TensorRow& r) { return r.home == Home::disk; });
}

void Residency::write_zeros(int row) const noexcept {
  auto timer = profiler_.scope(ProfileKind::zero_fill);
  zeroed_[static_cast<std::size_t>(row)] = 0;
  backend_.zero_host_memory(buffers_[static_cast<std::size_t>(row)].data(), table_.row(row).bytes());
}

void Residency::set_stand_in(int value_row, int code_row) {
  stand_in_.resize(table_.rows().size(), -1);
  code_row_.resize(table_.rows().size(), false);
  stand_in_.at(static_cast<std::size_t>(value_row)) = code_row;
  code_row_.at(static_cast<std::size_t>(code_row)) = true;
}

Residence Residency::residence(const std::vector<int>& rows, bool activations) const {
  if (rows.empty()) return Residence::absent;
  if (activations) {
    // On the host if any held row is there (an eviction keeps the output the next block still
    // reads); on the device when every row is held there; absent when some are not held (dropped,
    // or not computed yet).
    bool all_held = true;
    for (int row : rows) {
      const auto index = static_cast<std::size_t>(row);
      if (index < code_row_.size() && code_row_[index]) continue;  // read with its value row
      const int code = index < stand_in_.size() ? stand_in_[index] : -1;
      const int held = allocated(row) ? row : code >= 0 && allocated(code) ? code : -1;
      if (held < 0) {
        all_held = false;
        continue;
      }
      if (table_.row(held).home == Home::host) return Residence::host;
    }
    return all_held ? Residence::device : Residence::absent;
  }
  return residence_of(table_.row(rows.front()).home);
}

void Residency::make_resident(const std::vector<int>& rows, Home to, bool wait) {
  if (to == Home::device && disk_tier_ != nullptr) (void)borrow_from_disk(rows);
  if (to == Home::disk) {
    begin_move_rows(rows, Home::host);  // from the device, if they are there
    complete_rows(rows);
  }
  begin_move_rows(rows, to);
  if (wait) complete_rows(rows);
}

void Residency::begin_move_rows(const std::vector<int>& rows, Home to) {
  for (int row : rows) {
    TensorRow& r = table_.row(row);
    if (r.home == to) continue;
    if (row_guard_) row_guard_(row);
    if (to == Home::disk || r.home == Home::disk) {
      begin_disk_move(row, to);
      continue;
    }
    // Moving on before the last move landed: let it land first, so copies never chain buffers (and a
    // row being read in from disk, which holds no buffer until then, is not taken for unallocated).
    if (pending_[static_cast<std::size_t>(row)].ticket != 0) complete_rows({row});
    if (!allocated(row)) {
      // Not allocated: a persistent row's home changes and it is allocated there later; an
      // activation not held now (dropped, or not yet computed) is computed on the device.
      if (r.group != TensorGroup::activations) r.home = to;
      continue;
    }
    if (zeroed_[static_cast<std::size_t>(row)] != 0 && to == Home::device) {
      // Zeros need no bytes from the host: filled on the device, in stream order before any op
      // that reads them; the host memory goes back to its arena.
      Buffer zeros = take(r, backend_.device_memory());
      {
        auto timer = profiler_.scope(ProfileKind::zero_fill);
        backend_.ops().fill(zeros.data(), 0, r.bytes());
      }
      buffers_[static_cast<std::size_t>(row)] = std::move(zeros);
      zeroed_[static_cast<std::size_t>(row)] = 0;
      r.home = to;
      continue;
    }
    Buffer& host_copy = host_copy_[static_cast<std::size_t>(row)];
    if (to == Home::host && host_copy) {
      buffers_[static_cast<std::size_t>(row)] = std::move(host_copy);  // frees the device copy; nothing to copy
      r.home = to;
      continue;
    }
    Allocator& arena = to == Home::device ? backend_.device_memory() : backend_.host_memory();
    PendingMove& move = pending_[static_cast<std::size_t>(row)];
    move.destination = take(r, arena);
    move.ticket = backend_.copy_stream().enqueue(move.destination.data(), data(row), r.bytes());
    r.home = to;
    ++moves_in_flight_;
    (to == Home::device ? transfers_.bytes_to_device : transfers_.bytes_to_host) += r.bytes();
  }
}

void Residency::begin_disk_move(int row, Home to) {
  TensorRow& r = table_.row(row);
  const std::size_t index = static_cast<std::size_t>(row);
  if (r.group == TensorGroup::activations || r.group == TensorGroup::grads)
    throw std::invalid_argument(r.name + ": only optimizer state and weights may live on disk");
  // A move in flight lands first: a row being read in is held nowhere until then.
  if (pending_[index].ticket != 0) complete_rows({row});
  if (!allocated(row)) {  // placed before allocation: it starts there
    r.home = to;
    return;
  }
  if (to == Home::device || r.home == Home::device)
    throw std::logic_error(r.name + ": rows move between the disk and the host only (" + home_name(r.home) + " to " +
                           home_name(to) + ")");
  if (disk_tier_ == nullptr)
    throw std::invalid_argument(r.name + " is placed on disk, but the run has no disk tier: set [device] disk_path");
  PendingMove& move = pending_[index];
  if (to == Home::disk) {
    if (disk_offset_[index] < 0)
      disk_offset_[index] = static_cast<std::int64_t>(disk_tier_->reserve(r.bytes(), r.name, r.element));
    move.ticket = disk_tier_->write(static_cast<std::uint64_t>(disk_offset_[index]), data(row), r.bytes());
    disk_tier_->hold(r.category, r.bytes());
  } else {
    move.destination = take(r, backend_.host_memory());
    move.ticket = disk_tier_->read(static_cast<std::uint64_t>(disk_offset_[index]), move.destination.data(), r.bytes());
    disk_tier_->release(r.category, r.bytes());
  }
  move.disk = true;
  r.home = to;
  ++moves_in_flight_;
  // Once this lands, memory and disk hold the same bytes (a write frees the memory, a read fills it).
  if (r.group == TensorGroup::weights) disk_current_[index] = 1;
}

std::optional<DiskTier::Linked> Residency::link_from_disk(int row, const std::filesystem::path& path,
                                                          std::string& why) {
  const std::size_t index = static_cast<std::size_t>(row);
  if (pending_[index].ticket != 0) complete_rows({row});  // a write behind lands first
  if (disk_tier_ == nullptr || table_.row(row).home != Home::disk || disk_offset_[index] < 0)
    throw std::logic_error(table_.row(row).name + ": linked from disk, but it is not on disk");
  return disk_tier_->link(static_cast<std::uint64_t>(disk_offset_[index]), path, why);
}

std::vector<int> Residency::borrow_from_disk(const std::vector<int>& rows) {
  std::vector<int> borrowed = read_from_disk(rows);
  complete_rows(borrowed);
  return borrowed;
}

void Residency::return_to_disk(const std::vector<int>& rows, bool changed) {
  if (rows.empty()) return;  // nothing was borrowed (the common case: no row lives on disk)
  // The device may still be running kernels on these rows (on CUDA they are mapped host memory):
  // they finish before the tier's thread reads the rows or their buffers go back to the arena.
  backend_.synchronize();
  if (changed) {
    // One return's writes in flight at a time: the earlier one's host copies go first, so a run of
    // returns (initial values, a load) never holds more than two tensors' rows in memory.
    complete_rows(returning_);
    begin_move_rows(rows, Home::disk);
    returning_ = rows;
    return;
  }
  complete_rows(rows);
  for (int row : rows)
    if (table_.row(row).home == Home::host && disk_offset_[static_cast<std::size_t>(row)] >= 0) drop_to_disk(row);
}

void Residency::drop_to_disk(int row) {
  if (row_guard_) row_guard_(row);
  TensorRow& r = table_.row(row);
  buffers_[static_cast<std::size_t>(row)].reset();  // the disk's copy is current
  r.home = Home::disk;
  disk_tier_->hold(r.category, r.bytes());
}

std::vector<int> Residency::read_from_disk(const std::vector<int>& rows) {
  std::vector<int> on_disk;
  for (int row : rows)
    if (table_.row(row).home == Home::disk && allocated(row)) on_disk.push_back(row);
  if (on_disk.empty()) return on_disk;
  collect_finished_moves();  // writes that have landed hand their memory back before more is taken
  begin_move_rows(on_disk, Home::host);
  return on_disk;
}

void Residency::write_to_disk(const std::vector<int>& rows) {
  collect_finished_moves();
  std::vector<int> written;
  for (int row : rows) {
    const std::size_t index = static_cast<std::size_t>(row);
    TensorRow& r = table_.row(row);
    if (r.home != Home::host || disk_offset_[index] < 0) continue;
    if (pending_[index].ticket != 0) complete_rows({row});  // a copy still filling it from the device
    if (r.group == TensorGroup::weights && disk_current_[index] != 0)
      drop_to_disk(row);
    else
      written.push_back(row);
  }
  if (written.empty()) return;
  backend_.synchronize();  // kernels still reading these rows finish before the tier's thread does
  begin_move_rows(written, Home::disk);
}

void Residency::bring_to_device(const std::vector<int>& rows) {
  if (moves_in_flight_ > 0) complete_rows(rows);
  const auto on_host = [&](int row) { return allocated(row) && table_.row(row).home == Home::host; };
  if (std::none_of(rows.begin(), rows.end(), on_host)) return;
  begin_move_rows(rows, Home::device);
  complete_rows(rows);
}

void Residency::complete_rows(const std::vector<int>& rows) {
  CopyTicket last = 0;
  CopyTicket last_disk = 0;
  for (int row : rows) {
    const PendingMove& move = pending_[static_cast<std::size_t>(row)];
    CopyTicket& newest = move.disk ? last_disk : last;
    newest = std::max(newest, move.ticket);
  }
  if (last == 0 && last_disk == 0) return;
  {
    // Copies complete in issue order, so waiting for the newest covers them all.
    auto timer = profiler_.scope(ProfileKind::residency_transfer);
    if (last != 0) transfers_.exposed_seconds += backend_.copy_stream().wait(last);
    // The tier counts compute's waits on it itself (DiskTierStats::waited_seconds): adding them
    // here too would report disk time as the copy stream's, unhidden.
    if (last_disk != 0) (void)disk_tier_->wait(last_disk);
  }
  for (int row : rows) {
    PendingMove& move = pending_[static_cast<std::size_t>(row)];
    if (move.ticket == 0) continue;
    Buffer& source = buffers_[static_cast<std::size_t>(row)];
    const TensorRow& r = table_.row(row);
    if (r.group == TensorGroup::weights && r.home == Home::device)
      host_copy_[static_cast<std::size_t>(row)] = std::move(source);  // kept: evicting these weights is free
    source = std::move(move.destination);  // frees the source unless kept above (a disk write: always)
    move.ticket = 0;
    move.disk = false;
    --moves_in_flight_;
  }
}

void Residency::collect_finished_moves() {
  if (moves_in_flight_ == 0) return;
  const CopyTicket landed = backend_.copy_stream().completed();
  const CopyTicket landed_on_disk = disk_tier_ != nullptr ? disk_tier_->completed() : 0;
  std::vector<int> rows;
  for (std::size_t row = 0; row < pending_.size(); ++row)
    if (pending_[row].ticket != 0 && pending_[row].ticket <= (pending_[row].disk ? landed_on_disk : landed))
      rows.push_back(static_cast<int>(row));
  complete_rows(rows);
}

void Residency::complete_all_moves() {
  if (moves_in_flight_ == 0) return;
  std::vector<int> rows;
  for (std::size_t row = 0; row < pending_.size(); ++row)
    if (pending_[row].ticket != 0) rows.push_back(static_cast<int>(row));
  complete_rows(rows);
}

}  // namespace strata
