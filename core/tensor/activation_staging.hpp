#pragma once
// Storage staging: activations a model keeps for backward may be stored as bf16 while every
// kernel computes in f32. A stored kind is computed into an f32 staging row, rounded into its
// bf16 row (store), and widened back into staging just before a kernel reads it (load). Staging
// rows are shared between kinds whose lifetimes do not overlap; the model family says which
// kinds share (it knows the order of its kernels), this class does the bookkeeping and the
// conversions, through the backend's ops.
#include <vector>

#include "core/tensor/tensor_store.hpp"

namespace strata {

class ActivationStaging {
 public:
  ActivationStaging(TensorStore& store, int kinds)
      : store_(store), staging_rows_(static_cast<std::size_t>(kinds), -1) {}

  // Kind `kind` is stored as bf16 and computed in `staging_row` (an f32 workspace row).
  void assign(int kind, int staging_row) { staging_rows_.at(static_cast<std::size_t>(kind)) = staging_row; }
  bool staged(int kind) const { return staging_rows_.at(static_cast<std::size_t>(kind)) >= 0; }

  // Where kernels read and write kind `kind`, whose row is `row`: its staging row, or the row.
  float* buffer(int kind, int row) const {
    const int staging = staging_rows_.at(static_cast<std::size_t>(kind));
    return store_.f32(staging >= 0 ? staging : row);
  }
  // Rounds the freshly computed staging values into the bf16 row, and the staging to the same
  // values, so what later kernels of this pass read equals what backward will widen. No-op for f32.
  void store(int kind, int row) {
    const int staging = staging_rows_.at(static_cast<std::size_t>(kind));
    if (staging < 0) return;
    auto timer = store_.profiler().scope(ProfileKind::bf16_convert);
    store_.ops().narrow_and_round(store_.bf16(row), store_.f32(staging), store_.table().row(row).elements());
  }
  // Widens the bf16 row into staging. No-op for f32.
  void load(int kind, int row) {
    const int staging = staging_rows_.at(static_cast<std::size_t>(kind));
    if (staging < 0) return;
    auto timer = store_.profiler().scope(ProfileKind::bf16_convert);
    store_.ops().widen(store_.f32(staging), store_.bf16(row), store_.table().row(row).elements());
  }

 private:
  TensorStore& store_;
  std::vector<int> staging_rows_;  // per kind; -1: stored as f32
};

}  // namespace strata
