// A step of the training loop, and what is reported of it: its batch, the executor's step with
// its time, memory, transfers and messages, the validation loss when one is due, and the records
// the telemetry sinks receive.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/executor/hook_failed.hpp"
#include "core/training/rank_metrics.hpp"
#include "core/training/run_inputs.hpp"
#include "core/training/training_session.hpp"

namespace strata {

void TrainingSession::take_batch(std::int64_t step) {
  const TrainSpec& train = manifest_.train;
  for (int m = 0; m < train.micro_batches; ++m)  // this rank's micro batches of the step's ranks x micro_batches
    dataset_->train_batch(train.seed, step, rank_ * train.micro_batches + m, inputs_.data() + m * micro_size_,
                          targets_.data() + m * micro_size_);
}

StepRecord TrainingSession::step(std::int64_t step) {
  StepRecord record;
  record.step = step;
  Allocator& device_memory = device_->device_memory();
  device_memory.reset_window();
  const TransferTotals transfers_before = model_->store().residency().transfers();
  const double copy_seconds_before = device_->copy_stream().busy_seconds();
  record.disk_before = disk_tier_ ? disk_tier_->stats() : DiskTierStats{};
  const auto step_start = std::chrono::steady_clock::now();
  const double communicated_before = parallel_ ? parallel_->communicator().seconds() : 0.0;
  const double waited_before = parallel_ ? parallel_->communicator().waited_seconds() : 0.0;
  const std::uint64_t sent_before = parallel_ ? parallel_->communicator().bytes_sent() : 0;
  if (timeline_ && step == timeline_step_) timeline_->begin(step);
  record.outcome = executor_->train_step(step, micro_batches_);
  device_->synchronize();  // the step's time is the device's too, and an op's failure surfaces here
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start).count();
  if (timeline_ && step == timeline_step_) {  // written outside the step's time
    try {
      write_timeline(*memory_timeline_, timeline_->end());
    } catch (const std::exception& e) {  // the run goes on without it
      spdlog::warn("the memory timeline was not written: {}", e.what());
    }
    timeline_.reset();
  }
  record.device_memory = device_memory.stats();
  if (parallel_) {
    // The step's calls to the other ranks, and the part the caller did not wait for: it computed.
    const double communicated = parallel_->communicator().seconds() - communicated_before;
    const double waited = parallel_->communicator().waited_seconds() - waited_before;
    record.communication_ms = 1000.0 * communicated;
    record.hidden_ms = 1000.0 * std::max(0.0, communicated - waited);
    communication_ms_.push_back(record.communication_ms);
    hidden_ms_.push_back(record.hidden_ms);
    record.bytes_sent = parallel_->communicator().bytes_sent() - sent_before;
  }
  record.metrics = metrics_of(record, transfers_before, copy_seconds_before);
  record.metrics.ms = ms;
  record.metrics.tokens_per_s = static_cast<double>(tokens_per_step_) / (ms / 1000.0);
  return record;
}

StepMetrics TrainingSession::metrics_of(const StepRecord& record, const TransferTotals& transfers_before,
                                        double copy_seconds_before) {
  const StepOutcome& outcome = record.outcome;
  StepMetrics metrics;
  metrics.step = record.step;
  metrics.total_steps = manifest_.train.steps;
  metrics.phase = outcome.phase;
  metrics.loss = outcome.loss;
  metrics.lr = outcome.report.lr;
  metrics.grad_norm = outcome.report.grad_norm;
  metrics.skipped = outcome.skipped;
  metrics.loss_scale = outcome.loss_scale;
  metrics.backward = phase_needs_gradients(outcome.phase);
  metrics.rolled_back = outcome.rolled_back;
  metrics.predictor_ms = outcome.predictor_ms;
  metrics.device_bytes = record.device_memory.live;
  metrics.peak_device_bytes = record.device_memory.window_peak_total;
  metrics.peak_device_bytes_by_category = record.device_memory.window_peak;
  metrics.host_bytes = device_->host_memory().live_total();
  if (const auto driver = device_->driver_memory()) {
    metrics.driver_device_bytes = driver->used;
    result_.summary.peak_driver_device_bytes = std::max(result_.summary.peak_driver_device_bytes, driver->used);
  }
  const TransferTotals transfers = model_->store().residency().transfers();
  metrics.bytes_to_host = transfers.bytes_to_host - transfers_before.bytes_to_host;
  metrics.bytes_to_device = transfers.bytes_to_device - transfers_before.bytes_to_device;
  metrics.transfer_ms = 1000.0 * (device_->copy_stream().busy_seconds() - copy_seconds_before);
  metrics.exposed_transfer_ms = 1000.0 * (transfers.exposed_seconds - transfers_before.exposed_seconds);
  return metrics;
}

void TrainingSession::evaluate_if_due(StepRecord& record) {
  const TrainSpec& train = manifest_.train;
  // Rank 0 reports; at zero 3 every rank takes part (the weights are gathered as the pass goes).
  const bool due = (root_ || (parallel_ && parallel_->zero() >= 3)) &&
                   (record.step == train.steps || (train.eval_every > 0 && record.step % train.eval_every == 0));
  if (!due) return;
  record.metrics.val_loss = validation_loss(*executor_, *dataset_, global_manifest_, train.micro_batch_rows());
  device_->synchronize();  // an op's failure in the evaluation surfaces here, not as a NaN
}

void TrainingSession::report(const StepRecord& record) {
  const StepOutcome& outcome = record.outcome;
  const StepMetrics& metrics = record.metrics;
  RunSummary& summary = result_.summary;
  summary.skipped_steps += outcome.skipped ? 1 : 0;
  summary.backward_passes += metrics.backward ? 1 : 0;
  summary.predict_steps += metrics.backward ? 0 : 1;
  summary.rollbacks += outcome.rolled_back ? 1 : 0;
  summary.predictor_ms += outcome.predictor_ms;
  result_.losses.push_back(outcome.loss);
  step_ms_.push_back(metrics.ms);
  if (result_.losses.size() == 1) summary.first_loss = outcome.loss;
  summary.final_loss = outcome.loss;
  if (metrics.val_loss) summary.final_val_loss = metrics.val_loss;
  if (disk_tier_) {  // read after the evaluation, whose reads it counts
    const DiskTierStats disk = disk_tier_->stats();
    const DiskTierStats& before = record.disk_before;
    const DiskStepMetrics disk_metrics{record.step,
                                       disk.bytes_read - before.bytes_read,
                                       disk.bytes_written - before.bytes_written,
                                       1000.0 * (disk.busy_seconds - before.busy_seconds),
                                       1000.0 * (disk.waited_seconds - before.waited_seconds),
                                       total_bytes(disk.live),
                                       disk.file_bytes};
    for (const auto& sink : stack_.telemetry)
      if (Status status = sink->on_step_disk(disk_metrics); !status) throw HookFailed(status.message());
  }
  if (parallel_) {
    const std::vector<RankStepMetrics> ranks_step = gather_rank_metrics(
        *parallel_, record.step, record.communication_ms, record.hidden_ms, record.bytes_sent, record.device_memory);
    for (const RankStepMetrics& rank_step : ranks_step)
      for (const auto& sink : stack_.telemetry)
        if (Status status = sink->on_step_rank(rank_step); !status) throw HookFailed(status.message());
  }
  for (const auto& sink : stack_.telemetry)
    if (Status status = sink->on_step(metrics); !status) throw HookFailed(status.message());

  // The step's records are written before the run stops, so the log shows the blow-up.
  if (auto diverged = divergence_->observe(record.step, outcome.loss)) throw std::runtime_error(*diverged);
}

}  // namespace strata
