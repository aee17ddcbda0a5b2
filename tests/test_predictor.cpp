// The phase controller seam and the rssm_predictor plugin: the RSSM's gradient against finite
// differences; predict steps that move the weights without a backward pass or an optimizer step;
// the guardrail's rollback to the phase-start weights, bitwise; a resume in the middle of a
// predict phase that continues bitwise; training that still lowers the loss; and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.hpp"
#include "core/executor/executor.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/make_model.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_memory_impl.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/training_run.hpp"
#include "plugins/rssm_predictor/rssm.hpp"
#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;

// A short schedule: warmup 6 (history 4), then predict 3, correct 1, full 1, repeated.
const std::string kPredictor =
    "[predictor]\nplugin = \"rssm_predictor\"\nwarmup_steps = 6\nhistory = 4\npredict_steps = 3\n"
    "correct_steps = 1\nfull_steps = 1\nhidden = 8\nensemble = 2\nfit_iterations = 20\n";

// The RSSM's gradient for one drawn noise is exact: central differences agree.
TEST(Rssm, GradientMatchesFiniteDifferences) {
  rssm::Shape shape;
  shape.features = 3;
  shape.hidden = 5;
  shape.categoricals = 2;
  shape.classes = 3;
  const rssm::Layout layout(shape);
  std::vector<float> storage(static_cast<std::size_t>(4 * layout.count));
  const std::span<float> all(storage);
  const auto n = static_cast<std::size_t>(layout.count);
  rssm::Member member(shape, {all.subspan(0, n), all.subspan(n, n), all.subspan(2 * n, n), all.subspan(3 * n, n)});
  member.initialize(11);
  const int rows = 5;
  std::vector<float> window(static_cast<std::size_t>(rows * shape.features));
  for (std::size_t i = 0; i < window.size(); ++i) window[i] = static_cast<float>(2.0 * rssm::uniform_open(3, i) - 1.0);
  const std::uint64_t noise = 99;
  member.loss(window, rows, noise, true);
  const std::vector<float> analytic(all.begin() + static_cast<std::ptrdiff_t>(n),
                                    all.begin() + static_cast<std::ptrdiff_t>(2 * n));
  std::span<float> params = member.storage().params;
  double worst = 0.0;
  int checked = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float saved = params[i];
    const float h = 1e-2f;
    params[i] = saved + h;
    const double plus = member.loss(window, rows, noise, false);
    params[i] = saved - h;
    const double minus = member.loss(window, rows, noise, false);
    params[i] = saved;
    const double numeric = (plus - minus) / (static_cast<double>(saved + h) - static_cast<double>(saved - h));
    worst = std::max(worst, std::abs(numeric - analytic[i]) / std::max(1e-2, std::abs(numeric)));
    ++checked;
  }
  EXPECT_EQ(checked, layout.count);
  EXPECT_LT(worst, 2e-2) << "largest relative gradient error over " << checked << " parameters";
}

// Counts the optimizer's steps and records which training steps they were.
class CountingOptimizer final : public Optimizer {
 public:
  explicit CountingOptimizer(Optimizer& inner) : inner_(inner) {}
  StateLayout state_layout(const ParamInfo& param) const noexcept override { return inner_.state_layout(param); }
  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    steps.push_back(info.step);
    return inner_.step(info, slots, report);
  }
  std::vector<std::int64_t> steps;

 private:
  Optimizer& inner_;
};

// Passes every call to the plugin, but reports an infinite loss to predict() at one step: the
// guardrail must roll back there.
class LossInjector final : public PhaseController {
 public:
  LossInjector(PhaseController& inner, std::int64_t step) : inner_(inner), step_(step) {}
  Status attach(std::span<const ControlledParameter> p, PhaseControllerMemory& m) override {
    return inner_.attach(p, m);
  }
  Status choose_phase(std::int64_t step, Phase& phase) override { return inner_.choose_phase(step, phase); }
  Status predict(const StepObservation& observed, std::span<const ControlledParameter> p,
                 PredictOutcome& outcome) override {
    StepObservation changed = observed;
    if (observed.step == step_) changed.loss = 1e30;
    return inner_.predict(changed, p, outcome);
  }
  Status observe(const StepObservation& o, std::span<const ControlledParameter> p) override {
    return inner_.observe(o, p);
  }
  Status state(std::string& out) override { return inner_.state(out); }
  Status restore_state(std::string_view saved) override { return inner_.restore_state(saved); }

 private:
  PhaseController& inner_;
  std::int64_t step_;
};

// A run taken one step at a time, as run_training takes it, with the optimizer counted and the
// weights and optimizer state readable between steps.
struct SteppedRun {
  explicit SteppedRun(const std::string& tables, std::int64_t inject_at = 0)
      : manifest(make_manifest(tables)),
        device(backend_for(manifest)),
        host(manifest.model.info(), manifest.device.kind),
        stack(build_stack(manifest, registry(), host)),
        dataset(DataOptions{manifest.data.train, manifest.data.val, manifest.data.val_fraction, manifest.model.vocab(),
                            manifest.model.seq_len(), manifest.train.micro_batch_rows()}) {
    host.use_backend(*device);
    model =
        make_model(manifest.model, *device, stack.attention_on(*device, manifest.model.attention_shape(1)),
                   ModelOptions{manifest.train.micro_batch_rows(), state_layout_of(*stack.optimizer),
                                Allocation::deferred, stack.storage_on(*device), Purpose::training, stack.trainable});
    optimizer = std::make_unique<CountingOptimizer>(*stack.optimizer);
    if (inject_at > 0) injector = std::make_unique<LossInjector>(*stack.predictor, inject_at);
    PhaseController* controller = injector ? injector.get() : stack.predictor.get();
    executor = std::make_unique<Executor>(*model, *optimizer, *stack.precision, stack.strategy_pointers(),
                                          ExecutorOptions{manifest.train.steps,
                                                          manifest.train.warmup_steps,
                                                          manifest.train.lr,
                                                          controller,
                                                          {},
                                                          UpdateMode::full,
                                                          FusedClip::previous});
    executor->attach();
    memory = std::make_unique<PluginMemoryImpl>(*device, "rssm_predictor");
    executor->attach_controller(*memory);
    model->init_weights(manifest.train.seed);
    const auto size = static_cast<std::size_t>(manifest.train.micro_batch_rows()) * manifest.model.seq_len();
    inputs.resize(size);
    targets.resize(size);
  }

  static Manifest make_manifest(const std::string& tables) {
    const fs::path dir = test::temporary_directory("predictor_stepped");
    test::write_text(dir / "run.toml", test::tiny_manifest(tables, "warmup_steps = 2\n"));
    return load_manifest(dir / "run.toml", {"train.steps=40"});
  }
  static PluginRegistry& registry() {
    static PluginRegistry instance = [] {
      PluginRegistry r;
      r.scan_search_path(plugin_search_path({}));
      return r;
    }();
    return instance;
  }

  StepOutcome step(std::int64_t s) {
    dataset.train_batch(manifest.train.seed, s, 0, inputs.data(), targets.data());
    const MicroBatch batch{inputs, targets};
    return executor->train_step(s, std::span<const MicroBatch>(&batch, 1));
  }
  // Every trained value (or every optimizer state value) in parameter order.
  std::vector<float> read(bool optimizer_state) {
    std::vector<float> values;
    for (const ParameterRows& rows : model->parameters()) {
      if (rows.grad < 0) continue;
      const TensorView view = optimizer_state ? model->store().view(rows.state[0]) : model->store().values(rows);
      const float* data = view.f32();
      values.insert(values.end(), data, data + view.count);
      if (optimizer_state) {
        const TensorView v = model->store().view(rows.state[1]);
        values.insert(values.end(), v.f32(), v.f32() + v.count);
      }
    }
    return values;
  }

  Manifest manifest;
  std::unique_ptr<Backend> device;
  HostServicesImpl host;
  Stack stack;
  Dataset dataset;
  std::unique_ptr<Model> model;
  std::unique_ptr<CountingOptimizer> optimizer;
  std::unique_ptr<LossInjector> injector;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<PluginMemoryImpl> memory;
  std::vector<std::int32_t> inputs, targets;
};

// Warmup, then predict steps that move every group's weights with no optimizer step and no
// change to its state; full steps in between run the optimizer.
TEST(Predictor, PredictStepsMoveTheWeightsWithoutTheOptimizer) {
  SteppedRun run(kPredictor);
  std::vector<Phase> phases;
  int predict_steps = 0, moved = 0;
  for (std::int64_t s = 1; s <= 16; ++s) {
    const std::vector<float> weights_before = run.read(false);
    const std::vector<float> state_before = run.read(true);
    const std::size_t optimizer_steps_before = run.optimizer->steps.size();
    const StepOutcome outcome = run.step(s);
    phases.push_back(outcome.phase);
    const std::vector<float> weights_after = run.read(false);
    if (outcome.phase == Phase::predict) {
      ++predict_steps;
      EXPECT_EQ(run.optimizer->steps.size(), optimizer_steps_before) << "the optimizer ran in predict step " << s;
      EXPECT_EQ(run.read(true), state_before) << "optimizer state changed in predict step " << s;
      if (!outcome.rolled_back) {
        std::size_t changed = 0;
        for (std::size_t i = 0; i < weights_after.size(); ++i) changed += weights_after[i] != weights_before[i];
        EXPECT_GT(changed, weights_after.size() / 2) << "predict step " << s << " left the weights as they were";
        ++moved;
      }
      EXPECT_GT(outcome.predictor_ms, 0.0);
    } else {
      EXPECT_EQ(run.optimizer->steps.size(), optimizer_steps_before + 1) << "step " << s;
      EXPECT_NE(weights_after, weights_before);
    }
  }
  // warmup x6, then predict x3, correct, full, predict x3, ...
  for (int s = 0; s < 6; ++s) EXPECT_EQ(phases[static_cast<std::size_t>(s)], Phase::warmup) << s + 1;
  EXPECT_EQ(phases[6], Phase::predict);
  EXPECT_GE(predict_steps, 3);
  EXPECT_GE(moved, 1) << "every predict step rolled back: nothing shows that they move the weights";
}

// An out-of-band loss ends the phase and puts back the phase-start weights, bit for bit, though
// the phase's earlier predict steps had moved them.
TEST(Predictor, RollbackRestoresThePhaseStartWeightsBitwise) {
  SteppedRun run(kPredictor, 9);  // warmup 1..6, predict 7, 8, then 9 is out of the band
  std::vector<float> phase_start;
  for (std::int64_t s = 1; s <= 10; ++s) {
    const StepOutcome outcome = run.step(s);
    if (s == 6) phase_start = run.read(false);
    if (s == 8) {
      ASSERT_EQ(outcome.phase, Phase::predict);
      EXPECT_NE(run.read(false), phase_start) << "the predict steps before the rollback moved nothing";
    }
    if (s == 9) {
      ASSERT_EQ(outcome.phase, Phase::predict);
      EXPECT_TRUE(outcome.rolled_back);
      EXPECT_EQ(run.read(false), phase_start);
    }
    if (s == 10) {
      EXPECT_EQ(outcome.phase, Phase::correct) << "a rollback is followed by correct steps";
    }
  }
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Stopping in the middle of a predict phase and resuming gives the uninterrupted run's losses,
// weights, optimizer state and predictor state, bitwise.
TEST(Predictor, ResumeInThePredictPhaseIsBitwise) {
  for (const char* magnitude : {"rssm", "last"}) {
    SCOPED_TRACE(magnitude);
    const fs::path dir = test::temporary_directory(std::string("predictor_resume_") + magnitude);
    test::write_text(dir / "run.toml",
                     test::tiny_manifest(kPredictor + "magnitude = \"" + magnitude + "\"\n[checkpoint]\ndir = \"" +
                                         (dir / "part").string() + "\"\n"));
    PluginRegistry registry;
    registry.scan_search_path(plugin_search_path({}));
    const std::vector<std::string> steps = {"train.steps=14"};
    std::vector<std::string> whole_overrides = steps;
    whole_overrides.push_back("checkpoint.dir=\"" + (dir / "whole").string() + "\"");
    const TrainResult whole = run_training(load_manifest(dir / "run.toml", whole_overrides), registry, {});
    TrainOptions first;
    first.stop_after_step = 8;  // predict steps are 7, 8, 9
    const TrainResult part = run_training(load_manifest(dir / "run.toml", steps), registry, first);
    ASSERT_TRUE(part.last_checkpoint);
    EXPECT_FALSE(file_bytes(*part.last_checkpoint / "predictor.bin").empty());
    TrainOptions resume;
    resume.resume = *part.last_checkpoint;
    const TrainResult rest = run_training(load_manifest(dir / "run.toml", steps), registry, resume);
    std::vector<double> joined = part.losses;
    joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
    EXPECT_EQ(joined, whole.losses);
    EXPECT_GT(whole.summary.predict_steps, 0);
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "predictor.bin"})
      EXPECT_EQ(file_bytes(*rest.last_checkpoint / file), file_bytes(*whole.last_checkpoint / file)) << file;
  }
}

// Training with the predictor still lowers the loss, with fewer backward passes than steps, and the
// run's summary shows what the predictor held.
TEST(Predictor, TrainingLowersTheLossWithFewerBackwardPasses) {
  const fs::path dir = test::temporary_directory("predictor_trains");
  test::write_text(dir / "run.toml", test::tiny_manifest(kPredictor));
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const TrainResult result = run_training(load_manifest(dir / "run.toml", {"train.steps=40"}), registry, {});
  EXPECT_LT(result.summary.final_loss, result.summary.first_loss - 1.0);
  EXPECT_GT(result.summary.predict_steps, 10);
  EXPECT_EQ(result.summary.backward_passes + result.summary.predict_steps, 40);
  // The host copy of the weights at least, and the direction on the device.
  EXPECT_GT(result.summary.predictor_host_bytes, 0u);
  EXPECT_GT(result.summary.predictor_device_bytes, 0u);
  EXPECT_GT(result.summary.predictor_ms, 0.0);
}

// The seam with the smallest out-of-tree controller (tests/fixtures/plugins/phase_controller.cpp):
// its phases are run as chosen, its state is saved, and an exception names it, the hook and the step.
TrainResult train_with_fixture(const std::string& keys, const fs::path& dir) {
  test::write_text(dir / "run.toml", test::tiny_manifest("[predictor]\nplugin = \"fixture_phase\"\n" + keys +
                                                         "[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\n"));
  PluginRegistry registry;
  registry.scan({STRATA_FIXTURE_PLUGIN_DIR, STRATA_BUILD_PLUGIN_DIR_FOR_TESTS});
  return run_training(load_manifest(dir / "run.toml", {"train.steps=6"}), registry, {});
}

TEST(PhaseControllerSeam, AControllerPluginChoosesPhasesAndSavesItsState) {
  const fs::path dir = test::temporary_directory("fixture_phase");
  const TrainResult result = train_with_fixture("every = 2\n", dir);
  EXPECT_EQ(result.summary.predict_steps, 3);
  EXPECT_EQ(result.summary.backward_passes, 3);
  ASSERT_TRUE(result.last_checkpoint);
  EXPECT_EQ(file_bytes(*result.last_checkpoint / "predictor.bin"), "3");
}

TEST(PhaseControllerSeam, AnExceptionNamesThePredictorTheHookAndTheStep) {
  const fs::path dir = test::temporary_directory("fixture_phase_throws");
  std::string error;
  try {
    train_with_fixture("throw_at = 4\n", dir);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("[predictor] 'fixture_phase' threw in predict (step 4): fixture predictor exploded"),
            std::string::npos)
      << error;
}

TEST(Predictor, BadSettingsAndConflictingStacksAreRefused) {
  const std::string base = "[predictor]\nplugin = \"rssm_predictor\"\n";
  EXPECT_NE(test::stack_refusal(base + "predict_steps = 0\n").find("a predict phase of 0 steps never predicts"),
            std::string::npos);
  const std::string short_warmup = test::stack_refusal(base + "warmup_steps = 8\nhistory = 16\n");
  EXPECT_NE(short_warmup.find("warmup_steps = 8 is shorter than the RSSM's history window plus one (history = 16)"),
            std::string::npos)
      << short_warmup;
  EXPECT_NE(test::stack_refusal(base + "warmup_steps = 16\nhistory = 16\n").find("plus one"), std::string::npos);
  EXPECT_NE(test::stack_refusal(base + "correct_steps = 0\n").find("correct_steps"), std::string::npos);
  const std::string conflict = test::stack_refusal(base + "[optimizer]\nplugin = \"adamw8bit\"\n");
  EXPECT_NE(conflict.find("conflicts with [optimizer] 'adamw8bit'"), std::string::npos) << conflict;
  EXPECT_NE(test::stack_refusal(base + "magnitude = \"median\"\n").find("magnitude"), std::string::npos);
  EXPECT_EQ(test::stack_refusal(base), "");
}

}  // namespace
}  // namespace strata
