// The CUDA backend end to end, through run_training with the real plugins: 20 steps of the tiny
// GPT-2 and the tiny LLaMA on cuda:0 match the CPU's losses (f32, 1e-4 relative), two CUDA runs are
// bitwise equal, the checkpoint and offload plugins (optimizer state, masters and streamed weights on disk too) and the
// fused update keep the CUDA math bitwise, bf16 storage, int8 weights and fp16 stay near the CPU's, the hard memory
// limit holds, and the driver's view of device memory covers the arena's; the flash-attention plugin runs there as on
// the CPU. Every test skips, saying why, where no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "backend_buffers.hpp"
#include "core/device/backends.hpp"
#include "core/device/memory_limit_exceeded.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

struct Family {
  std::string name;
  std::vector<std::string> overrides;
};
const std::vector<Family> kFamilies = {
    {"gpt2", {}},
    {"llama", {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"}},
    {"qwen2", {"model.arch=\"qwen2\"", "model.n_kv_head=1", "model.d_ff=48"}},
    // a window of 5 over 16 (and flash's 70) positions
    {"mistral", {"model.arch=\"mistral\"", "model.n_kv_head=1", "model.d_ff=48", "model.sliding_window=5"}},
    // heads 64 wide whatever d_model is (32, and flash's 128)
    {"gemma", {"model.arch=\"gemma\"", "model.n_kv_head=1", "model.d_ff=48", "model.head_dim=64"}}};

const std::string kCheckpoint = "[[strategy]]\nplugin = \"checkpoint\"\nevery = 1\n";
const std::string kSelective = "[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n";
const std::string kOptimizerOffload = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
const std::string kStreaming =
    "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\nmax_resident_layers = 2\nprefetch = 1\n";
const std::string kBf16 = "[precision]\nplugin = \"bf16\"\nweights = \"bf16\"\nactivations = \"bf16\"\n";

// 20 steps of AdamW with 2 micro batches on four blocks, on `device`, with `extra` tables.
TrainResult train(const Family& family, const std::string& device, const std::string& extra = "",
                  const std::vector<std::string>& more_overrides = {}) {
  const auto dir = test::temporary_directory("cuda_" + family.name);
  test::write_text(dir / "m.toml",
                   test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n" + extra, "micro_batches = 2\n"));
  std::vector<std::string> overrides = {"model.n_layer=4", "train.steps=20", "device.kind=\"" + device + "\""};
  overrides.insert(overrides.end(), family.overrides.begin(), family.overrides.end());
  overrides.insert(overrides.end(), more_overrides.begin(), more_overrides.end());
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  return run_training(manifest, registry, TrainOptions{});
}

using test::worst_relative_difference;

// `tables` and `overrides` on cuda:0 against the CPU: the losses within `bound`, falling; with
// `strategies` added, the GPU's losses are the plain GPU run's, bit for bit.
void expect_near_the_cpu(const Family& family, const std::string& label, const std::string& tables,
                         const std::vector<std::string>& overrides, double bound, const std::string& strategies) {
  const TrainResult cpu = train(family, "cpu", tables, overrides);
  const TrainResult cuda = train(family, "cuda:0", tables, overrides);
  ASSERT_EQ(cuda.losses.size(), 20u);
  const double worst = worst_relative_difference(cpu.losses, cuda.losses);
  std::printf("%s %s: worst relative loss difference cuda:0 vs cpu %.3g\n", family.name.c_str(), label.c_str(), worst);
  EXPECT_LE(worst, bound);
  EXPECT_LT(cuda.losses.back(), cuda.losses.front());
  const TrainResult with_strategies = train(family, "cuda:0", tables + strategies, overrides);
  ASSERT_EQ(with_strategies.losses.size(), cuda.losses.size());
  for (std::size_t i = 0; i < cuda.losses.size(); ++i)
    EXPECT_EQ(cuda.losses[i], with_strategies.losses[i]) << "step " << i;
}

TEST(CudaTraining, TwentyStepsMatchTheCpuLosses) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult cpu = train(family, "cpu");
    const TrainResult cuda = train(family, "cuda:0");
    ASSERT_EQ(cpu.losses.size(), 20u);
    ASSERT_EQ(cuda.losses.size(), 20u);
    const double worst = worst_relative_difference(cpu.losses, cuda.losses);
    std::printf("%s: loss %.6f -> %.6f on the CPU, %.6f -> %.6f on cuda:0, worst relative difference %.3g\n",
                family.name.c_str(), cpu.losses.front(), cpu.losses.back(), cuda.losses.front(), cuda.losses.back(),
                worst);
    EXPECT_LE(worst, 1e-6);  // the requirement is 1e-4; measured on an H100: 6.5e-8 (GPT-2), 4.1e-8 (LLaMA)
    EXPECT_LT(cuda.losses.back(), cuda.losses.front()) << "the loss falls on the GPU too";
  }
}

TEST(CudaTraining, RunsAreBitwiseReproducible) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult first = train(family, "cuda:0");
    const TrainResult second = train(family, "cuda:0");
    ASSERT_EQ(first.losses.size(), second.losses.size());
    for (std::size_t i = 0; i < first.losses.size(); ++i) EXPECT_EQ(first.losses[i], second.losses[i]) << "step " << i;
  }
}

TEST(CudaTraining, CheckpointAndOffloadKeepTheMathBitwise) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult plain = train(family, "cuda:0");
    for (const std::string& stack :
         {kCheckpoint, kSelective, kOptimizerOffload, kStreaming, kCheckpoint + kStreaming}) {
      SCOPED_TRACE(stack);
      const TrainResult with = train(family, "cuda:0", stack);
      ASSERT_EQ(plain.losses.size(), with.losses.size());
      for (std::size_t i = 0; i < plain.losses.size(); ++i) EXPECT_EQ(plain.losses[i], with.losses[i]) << "step " << i;
      if (stack != kCheckpoint && stack != kSelective) {
        EXPECT_GT(with.summary.bytes_to_host, 0u) << "the offload moved nothing";
      }
    }
  }
}

// Optimizer state in the disk tier on the GPU: each block's moments and f32 masters come from the
// tier's file into pinned host rows, are stepped there, and the bf16 weights narrowed from the masters
// reach the device, all as the host offload does. So the losses are the plain run's, bit for bit: with
// the whole state on disk, with the masters alone there (the moments in host memory), and with the
// streamed block weights on disk too (each block read into host memory ahead of its fetch, sent back
// as it leaves the device).
TEST(CudaTraining, OptimizerStateOnDiskKeepsTheMathBitwise) {
  STRATA_SKIP_WITHOUT_CUDA();
  const auto tier_dir = test::temporary_directory("cuda_disk_tier");
  const std::string offload = "[[strategy]]\nplugin = \"offload\"\n";
  const std::vector<std::pair<std::string, std::string>> stacks = {
      {"state on disk", offload + "optimizer_state = \"disk\"\n"},
      {"masters on disk", offload + "optimizer_state = \"host\"\nmasters = \"disk\"\n"},
      {"weights on disk", offload + "optimizer_state = \"disk\"\nmax_resident_layers = 2\nprefetch = 1\n"
                                    "weights = \"disk\"\n"}};
  for (const Family& family : {kFamilies[0], kFamilies[1]}) {
    for (const std::string& precision : {std::string{}, kBf16}) {
      const TrainResult plain = train(family, "cuda:0", precision);
      for (const auto& [label, stack] : stacks) {
        // The masters exist only for bf16 weights.
        if (label == "masters on disk" && precision.empty()) continue;
        SCOPED_TRACE(family.name + (precision.empty() ? " f32, " : " bf16, ") + label);
        const TrainResult disk =
            train(family, "cuda:0", precision + stack, {"device.disk_path=\"" + tier_dir.string() + "\""});
        ASSERT_EQ(plain.losses.size(), disk.losses.size());
        for (std::size_t i = 0; i < plain.losses.size(); ++i)
          EXPECT_EQ(plain.losses[i], disk.losses[i]) << "step " << i;
        ASSERT_TRUE(disk.disk.has_value());
        EXPECT_GT(disk.disk->bytes_read, 0u);
        EXPECT_GT(disk.disk->bytes_written, 0u);
      }
    }
  }
}

// The fused update on the GPU (each block updated right after its backward, its gradients freed):
// without clipping, the full update's bits, under bf16 storage and with the state offloaded too.
TEST(CudaTraining, FusedUpdateIsBitwiseTheFullUpdate) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::vector<std::string> full = {"train.micro_batches=1", "optimizer.grad_clip=0.0"};
  std::vector<std::string> fused = full;
  fused.push_back("train.update=\"fused\"");
  for (const Family& family : {kFamilies[0], kFamilies[1]}) {
    for (const std::string& stack : {std::string{}, kBf16, kBf16 + kOptimizerOffload}) {
      SCOPED_TRACE(family.name + ": " + stack);
      const TrainResult expected = train(family, "cuda:0", stack, full);
      const TrainResult actual = train(family, "cuda:0", stack, fused);
      ASSERT_EQ(expected.losses.size(), actual.losses.size());
      for (std::size_t i = 0; i < expected.losses.size(); ++i)
        EXPECT_EQ(expected.losses[i], actual.losses[i]) << "step " << i;
      const auto grads = [](const TrainResult& result) {
        return result.summary.peak_device_bytes_by_category[category_index(MemoryCategory::grads)];
      };
      EXPECT_LT(grads(actual), grads(expected)) << "the fused update held every block's gradients";
    }
  }
}

// The flash tests' shape: head dim 64, 70 positions (two query tiles, one partial). At the tests'
// usual lr (3e-3) GPT-2's loss at this shape spikes at step 8 (3.49 -> 4.31), and there two correct
// kernels differ far beyond their rounding: the CPU's built-in and flash kernels by 2.8e-4, the CPU
// and an H100 by 7.6e-5 (built-in) and 3.6e-4 (flash), while every other step stays within 3e-6. At
// 1e-3 the loss falls smoothly and the CPU's two kernels stay within 1.7e-6 over 20 steps.
const std::vector<std::string> kFlashShape = {"model.d_model=128", "model.seq_len=70", "train.lr=1e-3"};

// The flash kernel plugin on the GPU matches the same plugin on the CPU, and checkpointing stays
// bitwise neutral on top of it.
TEST(CudaTraining, FlashAttentionPluginMatchesTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::string flash = "[kernels]\nattention = \"flash\"\n";
  const std::vector<std::string>& shape = kFlashShape;
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult cpu = train(family, "cpu", flash, shape);
    const TrainResult cuda = train(family, "cuda:0", flash, shape);
    const double worst = worst_relative_difference(cpu.losses, cuda.losses);
    std::printf("%s flash: worst relative loss difference cuda:0 vs cpu %.3g\n", family.name.c_str(), worst);
    EXPECT_LE(worst, 1e-5);
    for (const std::string& stack : {kCheckpoint, kSelective}) {
      const TrainResult with = train(family, "cuda:0", flash + stack, shape);
      ASSERT_EQ(cuda.losses.size(), with.losses.size());
      for (std::size_t i = 0; i < cuda.losses.size(); ++i) EXPECT_EQ(cuda.losses[i], with.losses[i]) << "step " << i;
    }
    // bf16 activations: the kernel reads the bf16-rounded output in backward, with and without
    // selective recomputation alike.
    const TrainResult bf16 = train(family, "cuda:0", flash + kBf16, shape);
    const TrainResult bf16_selective = train(family, "cuda:0", flash + kBf16 + kSelective, shape);
    for (std::size_t i = 0; i < bf16.losses.size(); ++i)
      EXPECT_EQ(bf16.losses[i], bf16_selective.losses[i]) << "bf16, step " << i;
    EXPECT_LT(bf16.losses.back(), bf16.losses.front());
  }
}

// flash_bf16 runs the flash algorithm's products on the tensor cores in bf16: 20 steps stay near
// the f32 flash kernel on the CPU, the loss falls, two runs are bitwise equal, and checkpointing
// stays bitwise neutral on top of it.
TEST(CudaTraining, FlashBf16TrainsNearTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::string flash = "[kernels]\nattention = \"flash\"\n";
  const std::string flash_bf16 = "[kernels]\nattention = \"flash_bf16\"\n";
  const std::vector<std::string>& shape = kFlashShape;
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult cpu = train(family, "cpu", flash, shape);
    const TrainResult cuda = train(family, "cuda:0", flash_bf16, shape);
    ASSERT_EQ(cuda.losses.size(), cpu.losses.size());
    const double worst = worst_relative_difference(cpu.losses, cuda.losses);
    std::printf("%s flash_bf16: worst relative loss difference cuda:0 vs cpu flash %.3g\n", family.name.c_str(), worst);
    EXPECT_LE(worst, 5e-3);  // bf16 attention products against f32 ones
    EXPECT_LT(cuda.losses.back(), cuda.losses.front());
    const TrainResult again = train(family, "cuda:0", flash_bf16, shape);
    const TrainResult checkpointed = train(family, "cuda:0", flash_bf16 + kCheckpoint, shape);
    for (std::size_t i = 0; i < cuda.losses.size(); ++i) {
      EXPECT_EQ(cuda.losses[i], again.losses[i]) << "rerun, step " << i;
      EXPECT_EQ(cuda.losses[i], checkpointed.losses[i]) << "checkpointed, step " << i;
    }
  }
}

// adamw8bit on the GPU: its update is bit for bit the CPU's (test_cuda_plugin_kernels.cpp), so
// the runs differ only by the model's own arithmetic; offloading its state to pinned host memory
// keeps the GPU's math bitwise.
TEST(CudaTraining, AdamW8bitTrainsAsOnTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::vector<std::string> eight_bit = {"optimizer.plugin=\"adamw8bit\"", "optimizer.block_size=256",
                                              "optimizer.min_8bit_size=256"};
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    expect_near_the_cpu(family, "adamw8bit", "", eight_bit, 1e-4, kOptimizerOffload);
  }
}

// LoRA with dropout on the GPU draws the CPU's masks (test_cuda_plugin_kernels.cpp), so the runs
// differ only by the model's own arithmetic; checkpointing recomputes the same masks.
TEST(CudaTraining, LoraDropoutTrainsAsOnTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::string lora = "[[strategy]]\nplugin = \"lora\"\nrank = 4\ndropout = 0.1\n";
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult cpu = train(family, "cpu", lora);
    const TrainResult cuda = train(family, "cuda:0", lora);
    ASSERT_EQ(cuda.losses.size(), 20u);
    const double worst = worst_relative_difference(cpu.losses, cuda.losses);
    std::printf("%s lora dropout: worst relative loss difference cuda:0 vs cpu %.3g\n", family.name.c_str(), worst);
    EXPECT_LE(worst, 1e-5);
    const TrainResult checkpointed = train(family, "cuda:0", lora + kCheckpoint);
    ASSERT_EQ(checkpointed.losses.size(), cuda.losses.size());
    for (std::size_t i = 0; i < cuda.losses.size(); ++i)
      EXPECT_EQ(cuda.losses[i], checkpointed.losses[i]) << "step " << i;
  }
}

// int8 weights on the GPU: quantization is bit for bit the CPU's (test_cuda_plugin_kernels.cpp),
// the matmuls run on the weights dequantized to bf16 with bf16 inputs (the CPU computes in f32), so
// the losses are bounded, not equal. Checkpointing with the masters offloaded to pinned host memory
// (quantized from there across the bus) keeps the GPU's math bitwise.
TEST(CudaTraining, Int8WeightsTrainNearTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const std::string& int8 : {std::string("[precision]\nplugin = \"int8\"\n"),
                                  std::string("[precision]\nplugin = \"int8\"\nblock_size = 16\n")}) {
    for (const Family& family : kFamilies) {
      SCOPED_TRACE(family.name + (int8.find("block_size") != std::string::npos ? ", block size 16" : ", per channel"));
      // The bound of bf16 storage's test below.
      expect_near_the_cpu(family, "int8", int8, {}, 2e-3, kOptimizerOffload + kCheckpoint);
    }
  }
}

// fp16 on the GPU: the conversions are the CPU's (test_cuda_plugin_kernels.cpp) and the products
// take the same binary16 operands with f32 accumulation, so the runs differ by summation order
// (and the loss scaler decides alike); offload and checkpointing keep the GPU's math bitwise.
TEST(CudaTraining, Fp16TrainsNearTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    expect_near_the_cpu(family, "fp16", "[precision]\nplugin = \"fp16\"\n", {}, 1e-3, kOptimizerOffload + kCheckpoint);
  }
}

// bf16 storage on the GPU runs its matmuls on bf16 operands (f32 accumulation); the CPU widens the
// weights and computes in f32. The difference is bf16 rounding of the activations entering each
// matmul, so it is bounded, not zero.
TEST(CudaTraining, Bf16StorageStaysNearTheCpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult cpu = train(family, "cpu", kBf16);
    const TrainResult cuda = train(family, "cuda:0", kBf16);
    const double worst = worst_relative_difference(cpu.losses, cuda.losses);
    std::printf("%s bf16: worst relative loss difference cpu vs cuda:0 %.3g\n", family.name.c_str(), worst);
    EXPECT_LE(worst, 2e-3);  // measured on an H100: 2.2e-5 (GPT-2), 2.4e-4 (LLaMA)
  }
}

// device.tf32 puts the f32 products on TF32 tensor cores (10-bit mantissa inputs): bounded, not
// equal, and still bitwise reproducible.
TEST(CudaTraining, Tf32ProductsStayNearTheCpuAndReproduce) {
  STRATA_SKIP_WITHOUT_CUDA();
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const TrainResult cpu = train(family, "cpu");
    const TrainResult first = train(family, "cuda:0", "", {"device.tf32=true"});
    const TrainResult second = train(family, "cuda:0", "", {"device.tf32=true"});
    const double worst = worst_relative_difference(cpu.losses, first.losses);
    std::printf("%s tf32: worst relative loss difference cpu vs cuda:0 %.3g\n", family.name.c_str(), worst);
    EXPECT_LE(worst, 2e-3);  // measured on an H100: 6.6e-6 (GPT-2), 1.6e-4 (LLaMA)
    EXPECT_GT(worst, 0.0) << "TF32 rounds the products' inputs: the losses cannot all be equal";
    for (std::size_t i = 0; i < first.losses.size(); ++i) EXPECT_EQ(first.losses[i], second.losses[i]) << "step " << i;
  }
}

// The limit leaves room for the ops' fixed cuBLAS workspace (32 MiB), so the run starts and the
// model's own rows are what it refuses.
TEST(CudaTraining, TheDeviceMemoryLimitHoldsOnTheGpu) {
  STRATA_SKIP_WITHOUT_CUDA();
  try {
    train(kFamilies[0], "cuda:0", "", {"device.memory_limit=\"33MiB\""});
    FAIL() << "a run over the limit finished";
  } catch (const MemoryLimitExceeded& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 device memory: memory limit exceeded: "), std::string::npos)
        << e.what();
  }
}

// Save at step 10, resume to step 20 on the GPU: the same losses as the uninterrupted run, and
// strata eval of the saved weights gives the run's final validation loss.
TEST(CudaTraining, ResumeAndEvalMatchTheUninterruptedRun) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Family& family = kFamilies[1];  // LLaMA: grouped-query heads and RoPE too
  const auto dir = test::temporary_directory("cuda_resume");
  test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n[checkpoint]\ndir = \"" +
                                                           (dir / "ckpt").string() + "\"\nevery = 10\n",
                                                       "micro_batches = 2\n"));
  std::vector<std::string> overrides = {"model.n_layer=4", "train.steps=20", "device.kind=\"cuda:0\""};
  overrides.insert(overrides.end(), family.overrides.begin(), family.overrides.end());
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const TrainResult whole = run_training(manifest, registry, TrainOptions{});
  TrainOptions first_half;
  first_half.stop_after_step = 10;
  std::filesystem::remove_all(dir / "ckpt");
  (void)run_training(manifest, registry, first_half);
  TrainOptions second_half;
  second_half.resume = dir / "ckpt";
  const TrainResult resumed = run_training(manifest, registry, second_half);
  ASSERT_EQ(resumed.losses.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(resumed.losses[i], whole.losses[10 + i]) << "step " << 11 + i;
  ASSERT_TRUE(whole.summary.final_val_loss && resumed.last_checkpoint);
  EXPECT_EQ(run_eval(manifest, registry, *resumed.last_checkpoint, std::nullopt), *whole.summary.final_val_loss);
}

TEST(CudaTraining, TheDriverSeesAtLeastWhatTheArenaCounts) {
  STRATA_SKIP_WITHOUT_CUDA();
  const TrainResult cuda = train(kFamilies[0], "cuda:0");
  std::printf("arena peak %llu bytes, driver peak in use %llu bytes\n",
              static_cast<unsigned long long>(cuda.summary.peak_device_bytes),
              static_cast<unsigned long long>(cuda.summary.peak_driver_device_bytes));
  EXPECT_GT(cuda.summary.peak_device_bytes, 0u);
  EXPECT_GE(cuda.summary.peak_driver_device_bytes, cuda.summary.peak_device_bytes);
}

TEST(CudaBackend, AKindThatCannotRunHereIsRefusedWithTheReason) {
  const std::string why = backend_unavailable_reason("cuda:0");
  if (why.empty()) {
    EXPECT_NE(backend_unavailable_reason("cuda:4096").find("no CUDA device 4096"), std::string::npos);
    return;
  }
  std::printf("cuda:0 here: %s\n", why.c_str());
  EXPECT_TRUE(why.find("no CUDA device visible") != std::string::npos ||
              why.find("this build has no CUDA backend") != std::string::npos)
      << why;
  EXPECT_THROW((void)make_backend("cuda:0", 0), std::invalid_argument);
}

}  // namespace
}  // namespace strata
