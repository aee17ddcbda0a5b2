// End-to-end runs on the sealed CPU backend (tests/sealed_backend.hpp), whose device memory the
// host cannot read or write: any host code that dereferences device memory instead of going
// through the op table crashes here, as it would misbehave on a GPU. The sealed backend runs the
// same CPU kernels, so every loss must equal the plain CPU backend's bit for bit.
#include <gtest/gtest.h>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "sealed_backend.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

// plain: the CPU backend; sealed: the sealed one; rounded and bf16_inputs: the sealed one whose bf16
// products round their input first, as a GPU's do, without and with the bf16-input matmuls.
enum class Device { plain, sealed, rounded, bf16_inputs };

BackendFactory factory(Device device) {
  if (device == Device::plain) return {};
  const test::SealedProducts products = device == Device::sealed    ? test::SealedProducts::cpu
                                        : device == Device::rounded ? test::SealedProducts::rounded
                                                                    : test::SealedProducts::bf16_inputs;
  return [products](const Manifest& manifest) {
    return test::make_sealed_cpu_backend(manifest.device.memory_limit, products);
  };
}

TrainResult train(Device device, const std::filesystem::path& manifest_path, const std::vector<std::string>& overrides,
                  std::optional<std::filesystem::path> resume = std::nullopt, std::int64_t stop_after = 0) {
  const Manifest manifest = load_manifest(manifest_path, overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  TrainOptions options;
  options.resume = std::move(resume);
  options.stop_after_step = stop_after;
  options.backend = factory(device);
  return run_training(manifest, registry, options);
}

void expect_same_losses(const TrainResult& sealed, const TrainResult& plain) {
  ASSERT_EQ(sealed.losses.size(), plain.losses.size());
  for (std::size_t i = 0; i < plain.losses.size(); ++i) EXPECT_EQ(sealed.losses[i], plain.losses[i]) << "step " << i;
  ASSERT_TRUE(sealed.summary.final_val_loss && plain.summary.final_val_loss);
  EXPECT_EQ(*sealed.summary.final_val_loss, *plain.summary.final_val_loss);
}

// Trains the tiny model with `extra` tables on both backends (two micro batches, so gradients
// accumulate and offloaded ones travel) and compares them.
void expect_sealed_equals_plain(const std::string& name, const std::string& extra,
                                std::vector<std::string> overrides = {}) {
  const auto dir = test::temporary_directory("sealed_" + name);
  test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n" + extra));
  overrides.insert(overrides.end(), {"train.steps=3", "train.micro_batches=2"});
  const TrainResult plain = train(Device::plain, dir / "m.toml", overrides);
  const TrainResult sealed = train(Device::sealed, dir / "m.toml", overrides);
  expect_same_losses(sealed, plain);
}

const std::vector<std::string> kLlama = {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"};
const std::string kBf16 = "[precision]\nplugin = \"bf16\"\n";
const std::string kBlockCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\nlogits = \"recompute\"\n";
const std::string kSelectiveCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n";
const std::string kCheapCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"cheap\"\n";
const std::string kOptimizerOffload = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
const std::string kLayerStreaming =
    "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 1\nprefetch = 0\n";

TEST(SealedDevice, Gpt2TrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("gpt2", "");
}

TEST(SealedDevice, LlamaTrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("llama", "", kLlama);
}

TEST(SealedDevice, Bf16StorageTrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("bf16", kBf16);
  expect_sealed_equals_plain("llama_bf16", kBf16, kLlama);
}

// The bf16-input matmuls (SDK 9.9) give the losses of the products on the widened input, where a
// backend rounds its bf16 products' inputs (as a GPU does): the blocks read their activations as
// bf16 storage keeps them, and the LM head its hidden state narrowed once, under checkpointing,
// offload and layer streaming too.
TEST(SealedDevice, Bf16InputMatmulsKeepTheLossesOfRoundedProducts) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {kBf16, {}},
      {kBf16, kLlama},
      {kBf16 + kBlockCheckpoint + kOptimizerOffload, {}},
      {kBf16 + kLayerStreaming + kSelectiveCheckpoint, kLlama}};
  int index = 0;
  for (const auto& [extra, family] : runs) {
    SCOPED_TRACE(extra);
    const auto dir = test::temporary_directory("sealed_bf16_inputs_" + std::to_string(index++));
    test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n" + extra));
    std::vector<std::string> overrides = family;
    overrides.insert(overrides.end(), {"train.steps=3", "train.micro_batches=2"});
    const TrainResult rounded = train(Device::rounded, dir / "m.toml", overrides);
    test::Bf16InputCalls calls;
    const Manifest manifest = load_manifest(dir / "m.toml", overrides);
    PluginRegistry registry;
    registry.scan_search_path(plugin_search_path({}));
    TrainOptions options;
    options.backend = [&calls](const Manifest& m) {
      return test::make_sealed_cpu_backend(m.device.memory_limit, test::SealedProducts::bf16_inputs, &calls);
    };
    const TrainResult bf16_inputs = run_training(manifest, registry, options);
    expect_same_losses(bf16_inputs, rounded);
    // The path ran: the blocks' products (GPT-2's in_out, LLaMA's out_in) and the LM head's (out_in).
    const auto in_out = static_cast<int>(WeightLayout::in_out), out_in = static_cast<int>(WeightLayout::out_in);
    EXPECT_GT(calls.forward[out_in], 0);
    EXPECT_GT(calls.backward[out_in], 0);
    if (family.empty()) {
      EXPECT_GT(calls.forward[in_out], 0);
      EXPECT_GT(calls.backward[in_out], 0);
    }
  }
}

TEST(SealedDevice, SgdTrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("sgd", "", {"optimizer.plugin=\"sgd\""});
}

TEST(SealedDevice, ActivationCheckpointingTrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("checkpoint_block", kBlockCheckpoint);
  expect_sealed_equals_plain("checkpoint_selective", kSelectiveCheckpoint, kLlama);
  expect_sealed_equals_plain("checkpoint_cheap", kCheapCheckpoint);
}

TEST(SealedDevice, OptimizerOffloadTrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("offload_optimizer", kOptimizerOffload);
  expect_sealed_equals_plain("offload_optimizer_bf16", kOptimizerOffload + kBf16, kLlama);
}

// Activations leave for the host arena and come back through the copy stream only, never through
// host reads of device memory, and the run is the CPU backend's, bit for bit.
TEST(SealedDevice, ActivationOffloadTrainsAsOnTheCpuBackend) {
  const std::string activations = "[[strategy]]\nplugin = \"offload\"\nactivations = \"host\"\n";
  expect_sealed_equals_plain("offload_activations", activations);
  expect_sealed_equals_plain("offload_activations_llama_bf16", activations + kBf16 + kLayerStreaming, kLlama);
}

TEST(SealedDevice, LayerStreamingTrainsAsOnTheCpuBackend) {
  expect_sealed_equals_plain("offload_streaming", kLayerStreaming);
  expect_sealed_equals_plain("offload_streaming_llama_bf16", kLayerStreaming + kBf16 + kSelectiveCheckpoint, kLlama);
}

// The predictor reads the weights and the optimizer state and moves the weights through ops only:
// its predict steps, rollbacks and forecasts are the CPU backend's, bit for bit.
TEST(SealedDevice, PredictorTrainsAsOnTheCpuBackend) {
  const auto dir = test::temporary_directory("sealed_predictor");
  test::write_text(dir / "m.toml", test::tiny_manifest("[predictor]\nplugin = \"rssm_predictor\"\nwarmup_steps = 4\n"
                                                       "history = 3\npredict_steps = 2\ncorrect_steps = 1\n"
                                                       "full_steps = 0\nhidden = 8\nensemble = 2\n"
                                                       "fit_iterations = 10\n"));
  const std::vector<std::string> overrides = {"train.steps=10", "train.micro_batches=2"};
  const TrainResult plain = train(Device::plain, dir / "m.toml", overrides);
  const TrainResult sealed = train(Device::sealed, dir / "m.toml", overrides);
  EXPECT_GT(plain.summary.predict_steps, 0);
  expect_same_losses(sealed, plain);
}

// Half a run on the sealed backend, saved, resumed on it, and evaluated on it: the same losses as
// the plain backend's uninterrupted run, and the same evaluation loss.
void expect_resume_and_eval_on_sealed(const std::string& name, const std::string& extra,
                                      const std::vector<std::string>& family) {
  const auto dir = test::temporary_directory("sealed_resume_" + name);
  test::write_text(dir / "m.toml",
                   test::tiny_manifest(extra + "[checkpoint]\ndir = \"" + (dir / "ckpt").string() + "\"\n"));
  std::vector<std::string> to_full = family;
  to_full.push_back("checkpoint.dir=\"" + (dir / "full").string() + "\"");
  const TrainResult uninterrupted = train(Device::plain, dir / "m.toml", to_full);
  const TrainResult first_half = train(Device::sealed, dir / "m.toml", family, std::nullopt, 3);
  ASSERT_TRUE(first_half.last_checkpoint);
  const TrainResult second_half = train(Device::sealed, dir / "m.toml", family, dir / "ckpt");
  ASSERT_EQ(second_half.losses.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(first_half.losses[i], uninterrupted.losses[i]) << "step " << i + 1;
    EXPECT_EQ(second_half.losses[i], uninterrupted.losses[i + 3]) << "step " << i + 4;
  }

  const Manifest manifest = load_manifest(dir / "m.toml", family);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const double plain_eval = run_eval(manifest, registry, dir / "full", std::nullopt);
  const double sealed_eval = run_eval(manifest, registry, dir / "ckpt", std::nullopt, factory(Device::sealed));
  EXPECT_EQ(sealed_eval, plain_eval);
  ASSERT_TRUE(uninterrupted.summary.final_val_loss);
  EXPECT_EQ(sealed_eval, *uninterrupted.summary.final_val_loss);
}

TEST(SealedDevice, ResumeAndEvalMatchTheCpuBackend) {
  expect_resume_and_eval_on_sealed("gpt2", "", {});
}

TEST(SealedDevice, Bf16ResumeAndEvalMatchTheCpuBackend) {
  expect_resume_and_eval_on_sealed("llama_bf16", kBf16, kLlama);
}

TEST(SealedDevice, OffloadedResumeAndEvalMatchTheCpuBackend) {
  expect_resume_and_eval_on_sealed("offload", kOptimizerOffload + kBf16, {});
}

// The seal itself: the host reading device memory dies, through ops it does not.
// A kernel other than the backend's own (the CPU reference, a plugin) is handed raw pointers it
// would read on the host: a backend other than the CPU refuses it before anything runs.
TEST(SealedDevice, AHostKernelIsRefusedOnAnotherBackend) {
  const auto dir = test::temporary_directory("sealed_reference_kernel");
  test::write_text(dir / "m.toml", test::tiny_manifest("[kernels]\nattention = \"reference\"\n"));
  try {
    train(Device::sealed, dir / "m.toml", {"train.steps=1"});
    FAIL() << "the reference kernel ran on a sealed device";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("runs on the CPU backend only, not on cpu-sealed"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(train(Device::plain, dir / "m.toml", {"train.steps=1"})) << "the CPU backend runs it";
}

TEST(SealedDeviceDeathTest, HostReadOfDeviceMemoryCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::unique_ptr<Backend> backend = test::make_sealed_cpu_backend(0);
  Buffer buffer = backend->device_memory().allocate(sizeof(float), MemoryCategory::other);
  const float one = 1.0f;
  backend->ops().copy_from_host(buffer.data(), &one, sizeof one);
  float back = 0.0f;
  backend->ops().copy_to_host(&back, buffer.data(), sizeof back);
  EXPECT_EQ(back, 1.0f);
  EXPECT_DEATH({ std::printf("%f\n", static_cast<double>(*static_cast<volatile float*>(buffer.data()))); }, "");
  Buffer host = backend->host_memory().allocate(sizeof(float), MemoryCategory::other);
  *static_cast<float*>(host.data()) = 2.0f;  // the host arena stays host memory
  EXPECT_EQ(*static_cast<float*>(host.data()), 2.0f);
}

}  // namespace
}  // namespace strata
