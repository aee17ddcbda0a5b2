// The end of a step and of the run: a greedy sample, a stop on a signal, a save, and the summary
// the sinks and the caller receive.
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>
#include <stdexcept>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_directory.hpp"
#include "core/executor/hook_failed.hpp"
#include "core/training/rank_metrics.hpp"
#include "core/training/training_session.hpp"
#include "core/util/format_bytes.hpp"
#include "core/util/median.hpp"

namespace strata {

void TrainingSession::sample_if_due(std::int64_t step) {
  if (!sampler_ || !root_ || step % manifest_.train.sample_every != 0) return;
  model_->store().residency().complete_all_moves();
  device_->synchronize();  // the weights are read as the step left them
  const auto sample_start = std::chrono::steady_clock::now();
  TrainingSample sample = sampler_->sample(*model_, step);
  spdlog::info("step {}: greedy sample of {} tokens after {} of prompt ({:.2f} s):\n{}{}", step, sample.tokens.size(),
               sample.prompt.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - sample_start).count(),
               sample.prompt_text, sample.text);
  result_.samples.push_back(std::move(sample));
}

bool TrainingSession::stop_requested() {
  // The ranks stop after the same step: the one after which any rank had a signal.
  result_.stopped_by_signal = parallel_ ? parallel_->largest(stop_signal_->received()) : stop_signal_->received();
  return result_.stopped_by_signal != 0;
}

void TrainingSession::log_stop(std::int64_t step) const {
  spdlog::warn("stopped by signal {} after step {}{}", result_.stopped_by_signal, step,
               result_.last_checkpoint ? " (checkpoint " + result_.last_checkpoint->string() + ")" : "");
}

void TrainingSession::save_if_due(const StepRecord& record) {
  const std::int64_t step = record.step;
  const auto& checkpoint = manifest_.checkpoint;
  const bool due = checkpoint.dir && (step == last_step_ || result_.stopped_by_signal != 0 ||
                                      (checkpoint.every > 0 && step % checkpoint.every == 0));
  if (!due) return;
  const StepOutcome& outcome = record.outcome;
  if (!outcome.skipped && !outcome.rolled_back && !std::isfinite(outcome.loss))
    throw std::runtime_error("the loss is " + std::to_string(outcome.loss) + " at step " + std::to_string(step) +
                             ": no checkpoint is written from non-finite training, and the earlier saves are kept");
  save(record);
}

void TrainingSession::save(const StepRecord& record) {
  model_->store().residency().complete_all_moves();
  device_->synchronize();  // a checkpoint is written only from ops that all succeeded
  std::string precision_state, predictor_state;
  if (Status status = stack_.precision->state(precision_state); !status) throw HookFailed(status.message());
  if (stack_.predictor)
    if (Status status = stack_.predictor->state(predictor_state); !status) throw HookFailed(status.message());
  TrainerState saved{record.step,
                     manifest_.train.seed,
                     manifest_.optimizer.plugin,
                     stack_.description,
                     manifest_.data.train.string(),
                     std::move(precision_state),
                     std::move(predictor_state),
                     {},
                     data_identity_,
                     record.outcome.loss,
                     executor_->fused_clip_norm()};
  for (std::size_t i = 0; i < stack_.strategies.size(); ++i) {
    std::string strategy_state;
    if (Status status = stack_.strategies[i]->state(strategy_state); !status) throw HookFailed(status.message());
    if (!strategy_state.empty())
      saved.strategies[strategy_state_key(i, manifest_.strategies[i].plugin)] = std::move(strategy_state);
  }
  // Rank 0 writes the one-process format, receiving each row it does not keep as it goes.
  if (parallel_ && !root_) parallel_->serve_save();
  if (!root_) return;
  RowBytes row_bytes;
  if (parallel_) row_bytes = [this](int row) { return parallel_->row_for_save(row); };
  result_.last_checkpoint = save_checkpoint(*manifest_.checkpoint.dir, *model_, saved, row_bytes);
  if (parallel_) parallel_->end_save();
  prune_checkpoints(*manifest_.checkpoint.dir, manifest_.checkpoint.keep_last, record.outcome.loss,
                    manifest_.train.divergence_factor);
}

TrainResult TrainingSession::finish() {
  if (timeline_)  // stopped before the step it records
    spdlog::warn("--memory-timeline: the run stopped before step {}, the step it records; nothing was written",
                 timeline_step_);
  Allocator& device_memory = device_->device_memory();
  const TransferTotals transfers = model_->store().residency().transfers();
  RunSummary& summary = result_.summary;
  summary.steps = static_cast<std::int64_t>(step_ms_.size());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
  if (!step_ms_.empty()) {
    summary.median_ms = median(step_ms_);
    summary.tokens_per_s = static_cast<double>(tokens_per_step_) / (summary.median_ms / 1000.0);
  }
  const ArenaStats stats = device_memory.stats();
  summary.peak_device_bytes = stats.peak_total;
  summary.peak_device_bytes_by_category = stats.peak;
  summary.peak_host_bytes = device_->host_memory().stats().peak_total;
  summary.bytes_to_host = transfers.bytes_to_host;
  summary.bytes_to_device = transfers.bytes_to_device;
  summary.transfer_ms = 1000.0 * device_->copy_stream().busy_seconds();
  summary.exposed_transfer_ms = 1000.0 * transfers.exposed_seconds;
  summary.predictor_host_bytes = placed_.controller_memory->host_bytes_live();
  summary.predictor_device_bytes = placed_.controller_memory->device_bytes_live();
  std::vector<PluginMemoryUse> plugin_memory;
  for (const PluginMemoryImpl* memory : host_->plugin_memory())
    plugin_memory.push_back({memory->owner(), memory->host_bytes_live(), memory->device_bytes_live(),
                             memory->bytes_to_host() + memory->bytes_to_device()});
  summary.plugin_memory = plugin_memory;  // views into this frame and `host_`: cleared below
  for (const auto& sink : stack_.telemetry)
    if (Status status = sink->on_run_end(summary); !status) throw HookFailed(status.message());
  summary.plugin_memory = {};
  if (disk_tier_) {
    model_->store().residency().complete_all_moves();  // the last step's state written back
    result_.disk = disk_tier_->stats();
    spdlog::info("disk tier: {} read, {} written, I/O busy {:.2f} s, compute waited {:.2f} s; peak on disk {}",
                 format_bytes(result_.disk->bytes_read), format_bytes(result_.disk->bytes_written),
                 result_.disk->busy_seconds, result_.disk->waited_seconds, format_bytes(result_.disk->peak_total));
  }
  if (parallel_) log_ranks(*parallel_, stats, summary.median_ms, median(communication_ms_), median(hidden_ms_));
  if (options_.profile && root_) {
    std::cout << "\nkernel time (" << summary.steps << " steps, evaluation included)\n";
    model_->profiler().print(std::cout, summary.steps);
  }
  return std::move(result_);
}

}  // namespace strata
