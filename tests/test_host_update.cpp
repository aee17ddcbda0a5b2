// The update on the host (core/executor/host_update.cpp): when every row an update reads or writes
// lives in host memory (offloaded optimizer state with its gradients and masters), it runs on the
// backend's host op table (Backend::host_ops) instead of across the bus.
// - The CUDA backend's host table sums in the CUDA kernels' order (kernels/reduction_order.hpp):
//   checked here against a thread-by-thread model of the kernels, and on a GPU against the kernels
//   themselves, with AdamW, SGD, scale, the bf16 conversions and all_finite bit for bit.
// - On the sealed backend, whose host table opens no device mapping, offloaded runs (full and fused
//   updates, the disk tier, bf16 masters, 8-bit AdamW) update through the host table and give the
//   CPU backend's losses bit for bit; a run without offload never calls it.
// - Under the fused update an offloaded block's step waits for the next block's backward to be
//   issued, so the host's update overlaps the device's backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "backend_buffers.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/memory_timeline.hpp"
#include "core/training/training_run.hpp"
#include "counting_ops.hpp"
#include "kernels/cpu/cuda_order_reductions.hpp"
#include "kernels/reduction_order.hpp"
#include "plugins/adamw/cpu/adamw_cpu.hpp"
#include "plugins/sgd/cpu/sgd_cpu.hpp"
#include "sealed_backend.hpp"
#include "test_support.hpp"

#if STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "plugins/adamw/cuda/adamw_cuda.hpp"
#include "plugins/sgd/cuda/sgd_cuda.hpp"
#endif

namespace strata {
namespace {

// The reduction kernels as the GPU runs them, one thread at a time: each thread's strided loop,
// then every lane's own butterfly (lane i adds lane i ^ offset's value as it was before the step),
// warp 0 over the warp sums, and the one-block second launch.
struct KernelModel {
  static constexpr int kThreads = 256, kPartials = 1024, kWarp = 32;

  template <typename Term>
  static double run(const std::vector<float>& values, Term term) {
    const auto count = static_cast<std::int64_t>(values.size());
    const int blocks =
        count == 0 ? 0 : static_cast<int>(std::min<std::int64_t>((count + kThreads - 1) / kThreads, kPartials));
    std::vector<double> partials(kPartials, 0.0);
    for (int block = 0; block < blocks; ++block) {
      const std::int64_t span = (count + blocks - 1) / blocks;
      const std::int64_t begin = std::min<std::int64_t>(block * span, count), end = std::min(begin + span, count);
      std::vector<double> thread_values(kThreads);
      for (int t = 0; t < kThreads; ++t) {
        double sum = 0.0;
        for (std::int64_t i = begin + t; i < end; i += kThreads) sum += term(values[static_cast<std::size_t>(i)]);
        thread_values[static_cast<std::size_t>(t)] = sum;
      }
      partials[static_cast<std::size_t>(block)] = block_sum(thread_values);
    }
    return block_sum(partials);
  }

  static double block_sum(std::vector<double> values) {
    const int threads = static_cast<int>(values.size()), warps = threads / kWarp;
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const std::vector<double> before = values;
      for (int t = 0; t < threads; ++t) {
        const int lane = t % kWarp, warp = t / kWarp;
        values[static_cast<std::size_t>(t)] =
            before[static_cast<std::size_t>(t)] + before[static_cast<std::size_t>(warp * kWarp + (lane ^ offset))];
      }
    }
    std::vector<double> warp_zero(kWarp, 0.0);
    for (int lane = 0; lane < warps; ++lane)
      warp_zero[static_cast<std::size_t>(lane)] = values[static_cast<std::size_t>(lane * kWarp)];
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const std::vector<double> before = warp_zero;
      for (int lane = 0; lane < kWarp; ++lane)
        warp_zero[static_cast<std::size_t>(lane)] =
            before[static_cast<std::size_t>(lane)] + before[static_cast<std::size_t>(lane ^ offset)];
    }
    return warp_zero[0];
  }
};

// Values over twelve orders of magnitude, so that a sum taken in another order rounds differently.
std::vector<float> spread_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-6.0f, 6.0f);
  std::vector<float> values(count);
  for (float& v : values) v = value(generator) * std::pow(10.0f, exponent(generator));
  return values;
}

const std::vector<std::size_t> kCounts = {0, 1, 31, 255, 256, 257, 1000, 262144, 262145, 3 * 262144 + 17, 1050000};

TEST(CudaOrderReductions, SumOfSquaresFollowsTheKernelsThreadsAndWarps) {
  static_assert(kernels::kReductionThreads == KernelModel::kThreads);
  static_assert(kernels::kReductionPartials == KernelModel::kPartials);
  for (std::size_t count : kCounts) {
    SCOPED_TRACE("count " + std::to_string(count));
    const std::vector<float> values = spread_values(count, static_cast<std::uint32_t>(count) + 1);
    const double model = KernelModel::run(values, [](float v) { return static_cast<double>(v) * v; });
    const double host = cpu::sum_of_squares_in_cuda_order(values.data(), static_cast<std::int64_t>(count));
    EXPECT_EQ(std::memcmp(&model, &host, sizeof(double)), 0) << model << " against " << host;
    const double model_sum = KernelModel::run(values, [](float v) { return static_cast<double>(v); });
    const double host_sum = cpu::sum_in_cuda_order(values.data(), static_cast<std::int64_t>(count));
    EXPECT_EQ(std::memcmp(&model_sum, &host_sum, sizeof(double)), 0) << model_sum << " against " << host_sum;
    double plain = 0.0;  // a sanity bound: the same sum in plain order
    for (float v : values) plain += static_cast<double>(v) * v;
    EXPECT_NEAR(host, plain, 1e-12 * plain);
  }
}

// Bit patterns that differ (floats compared as bits).
template <typename T>
std::size_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0 ? 1 : 0;
  return count;
}

// The CUDA backend's host table on pinned host memory against its kernels on device memory.
TEST(CudaHostOps, GiveTheKernelsBits) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::unique_ptr<Backend> gpu = make_backend("cuda:0", 0);
  Ops& device = gpu->ops();
  Ops& host = gpu->host_ops();
  for (std::size_t count : kCounts) {
    SCOPED_TRACE("count " + std::to_string(count));
    const std::vector<float> values = spread_values(count, static_cast<std::uint32_t>(count) + 7);
    test::BackendBuffers on_gpu(*gpu);
    const float* values_gpu = on_gpu.upload(values);
    const double device_squares = device.sum_of_squares(values_gpu, static_cast<std::int64_t>(count));
    const double host_squares = host.sum_of_squares(values.data(), static_cast<std::int64_t>(count));
    EXPECT_EQ(std::memcmp(&device_squares, &host_squares, sizeof(double)), 0)
        << device_squares << " against " << host_squares;
    const double device_sum = device.sum(values_gpu, static_cast<std::int64_t>(count));
    const double host_sum = host.sum(values.data(), static_cast<std::int64_t>(count));
    EXPECT_EQ(std::memcmp(&device_sum, &host_sum, sizeof(double)), 0) << device_sum << " against " << host_sum;
  }
  // The update's element-wise ops, in pinned host memory (the offloaded rows' arena).
  const std::int64_t count = 100003;
  std::vector<float> param = spread_values(count, 1), grad = spread_values(count, 2), m = spread_values(count, 3),
                     v = spread_values(count, 4);
  for (float& value : v) value = std::abs(value);
  grad[5] = std::nanf("");
  Buffer pinned = gpu->host_memory().allocate(4 * count * sizeof(float), MemoryCategory::other, "test");
  float* const rows = static_cast<float*>(pinned.data());
  float *p_host = rows, *g_host = rows + count, *m_host = rows + 2 * count, *v_host = rows + 3 * count;
  std::copy(param.begin(), param.end(), p_host);
  std::copy(grad.begin(), grad.end(), g_host);
  std::copy(m.begin(), m.end(), m_host);
  std::copy(v.begin(), v.end(), v_host);
  test::BackendBuffers on_gpu(*gpu);
  float *p_gpu = on_gpu.upload(param), *g_gpu = on_gpu.upload(grad), *m_gpu = on_gpu.upload(m),
        *v_gpu = on_gpu.upload(v);
  EXPECT_EQ(device.all_finite(g_gpu, count), host.all_finite(g_host, count));
  grad[5] = 0.5f;
  g_host[5] = 0.5f;
  g_gpu = on_gpu.upload(grad);
  EXPECT_EQ(device.all_finite(g_gpu, count), host.all_finite(g_host, count));
  device.scale(g_gpu, 0.37f, count);
  host.scale(g_host, 0.37f, count);
#if STRATA_HAVE_CUDA
  // The optimizers' own kernels: the CUDA one on the device rows, the host one through the host
  // table's host code (the plugins run them so).
  const auto stream = static_cast<cudaStream_t>(gpu->kernel_target().stream);
  for (std::int64_t step = 1; step <= 3; ++step) {
    const AdamWHyper hyper{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.75f};
    adamw::cuda::update(stream, p_gpu, g_gpu, m_gpu, v_gpu, count, hyper);
    host.host_kernel("adamw_update", 0.0,
                     [&]() noexcept { adamw::cpu::update(p_host, g_host, m_host, v_host, count, hyper); });
  }
  const SgdHyper sgd{1e-2f, 0.9f, 0.01f, 0.5f};
  sgd::cuda::update(stream, p_gpu, g_gpu, m_gpu, count, sgd);
  host.host_kernel("sgd_update", 0.0, [&]() noexcept { sgd::cpu::update(p_host, g_host, m_host, count, sgd); });
#endif
  std::vector<std::uint16_t> narrowed(static_cast<std::size_t>(count));
  std::uint16_t* narrowed_gpu = on_gpu.upload(narrowed);
  device.narrow(narrowed_gpu, p_gpu, count);
  host.narrow(narrowed.data(), p_host, count);
  const std::vector<float> p_back = on_gpu.download(p_gpu, static_cast<std::size_t>(count));
  EXPECT_EQ(differing(p_back, std::vector<float>(p_host, p_host + count)), 0u) << "parameters";
  EXPECT_EQ(
      differing(on_gpu.download(m_gpu, static_cast<std::size_t>(count)), std::vector<float>(m_host, m_host + count)),
      0u)
      << "moments";
  EXPECT_EQ(
      differing(on_gpu.download(v_gpu, static_cast<std::size_t>(count)), std::vector<float>(v_host, v_host + count)),
      0u)
      << "second moments";
  EXPECT_EQ(differing(on_gpu.download(narrowed_gpu, static_cast<std::size_t>(count)), narrowed), 0u) << "bf16";
}

// The run's own backend, its host table's calls counted.
class CountingHostOps final : public Backend {
 public:
  CountingHostOps(std::unique_ptr<Backend> backend, test::HostOpCalls* calls)
      : backend_(std::move(backend)), host_ops_(backend_->host_ops(), calls) {}
  std::string name() const override { return backend_->name(); }
  KernelTarget kernel_target() const noexcept override { return backend_->kernel_target(); }
  Ops& ops() noexcept override { return backend_->ops(); }
  Ops& host_ops() noexcept override { return host_ops_; }
  Allocator& device_memory() noexcept override { return backend_->device_memory(); }
  Allocator& host_memory() noexcept override { return backend_->host_memory(); }
  CopyStream& copy_stream() noexcept override { return backend_->copy_stream(); }
  void synchronize() override { backend_->synchronize(); }
  void wait_for_compute() noexcept override { backend_->wait_for_compute(); }
  std::optional<DriverMemory> driver_memory() const override { return backend_->driver_memory(); }
  void zero_host_memory(void* data, std::uint64_t bytes) noexcept override { backend_->zero_host_memory(data, bytes); }

 private:
  std::unique_ptr<Backend> backend_;
  test::CountingOps host_ops_;
};

struct HostRun {
  TrainResult result;
  test::HostOpCalls calls;
  MemoryTimeline timeline;  // the third step's
};

// Four blocks of the tiny model, 4 steps, on the sealed backend (or the plain CPU one).
HostRun train(const std::string& name, const std::string& extra, std::vector<std::string> overrides, bool sealed,
              const std::string& optimizer = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 0.5\n") {
  const auto dir = test::temporary_directory("host_update_" + name + (sealed ? "_sealed" : "_plain"));
  test::write_text(dir / "m.toml", test::tiny_manifest(optimizer + extra));
  overrides.insert(overrides.begin(), {"model.n_layer=4", "train.steps=4", "train.eval_batches=1"});
  const Manifest manifest = load_manifest(dir / "m.toml", overrides);
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({STRATA_FIXTURE_PLUGIN_DIR}));  // fixture_device_sgd
  HostRun run;
  TrainOptions options;
  options.memory_timeline = dir / "timeline.json";
  if (sealed)
    options.backend = [&run](const Manifest& m) {
      return test::make_sealed_cpu_backend(m.device.memory_limit, test::SealedProducts::cpu, nullptr, &run.calls);
    };
  else
    options.backend = [&run](const Manifest& m) {
      return std::make_unique<CountingHostOps>(backend_for(m), &run.calls);
    };
  run.result = run_training(manifest, registry, options);
  run.timeline = read_timeline(dir / "timeline.json");
  return run;
}

const std::string kAdamW = "[optimizer]\nplugin = \"adamw\"\ngrad_clip = 0.5\n";
const std::string kHost = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
const std::string kBf16 = "[precision]\nplugin = \"bf16\"\n";
const std::string kFused = "train.update=\"fused\"";

void expect_same_losses(const HostRun& a, const HostRun& b) {
  ASSERT_EQ(a.result.losses.size(), b.result.losses.size());
  for (std::size_t i = 0; i < a.result.losses.size(); ++i)
    EXPECT_EQ(a.result.losses[i], b.result.losses[i]) << "step " << i + 1;
}

TEST(HostUpdate, OffloadedRowsAreUpdatedByTheHostOpTableWithTheSameBits) {
  const std::string disk = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"disk\"\n";
  const std::string adamw8bit =
      "[optimizer]\nplugin = \"adamw8bit\"\ngrad_clip = 0.5\nmin_8bit_size = 64\nblock_size = 256\n";
  const std::vector<std::string> llama = {"model.arch=\"llama\"", "model.n_kv_head=1", "model.d_ff=48"};
  std::vector<std::string> llama_fused = llama;
  llama_fused.push_back(kFused);
  const int gpt2_updates = 4 * (4 * 12 + 4);  // 4 steps; GPT-2: twelve per block, wte, wpe, the final norm's two
  struct Case {
    std::string name, extra;
    std::vector<std::string> overrides;
    std::string optimizer = kAdamW;
    int updates = 0;  // AdamW calls expected, where counted exactly
  };
  const std::vector<Case> cases = {
      {"full", kHost, {}, kAdamW, gpt2_updates},
      {"full_bf16", kHost + kBf16, {}, kAdamW, gpt2_updates},
      {"fused_bf16", kHost + kBf16, {kFused}, kAdamW, gpt2_updates},
      {"llama_full_bf16", kHost + kBf16, llama},
      {"llama_fused_bf16", kHost + kBf16, llama_fused},
      {"disk", disk + kBf16, {"device.disk_path=\"" + test::temporary_directory("host_update_tier").string() + "\""}},
      {"adamw8bit", kHost, {}, adamw8bit},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const HostRun plain = train(c.name, c.extra, c.overrides, false, c.optimizer);
    const HostRun sealed = train(c.name, c.extra, c.overrides, true, c.optimizer);
    expect_same_losses(sealed, plain);
    EXPECT_GT(sealed.calls.sum_of_squares, 0) << "the norms";
    // The optimizers' kernels run on the host table as its host code (Ops::host_kernel), one call
    // per parameter updated.
    if (c.updates > 0) {
      EXPECT_EQ(sealed.calls.host_kernels, c.updates) << "every update";
    } else {
      EXPECT_GT(sealed.calls.host_kernels, 0) << "the updates";
    }
    if (c.extra.find("bf16") != std::string::npos) {
      EXPECT_GT(sealed.calls.narrow, 0) << "the masters";
      EXPECT_GT(sealed.calls.all_finite, 0) << "the precision check";
    }
  }
  // Without offload nothing lives in host memory: the host table is never asked.
  const HostRun device = train("device", kBf16, {kFused}, true);
  EXPECT_EQ(device.calls.host_kernels + device.calls.sum_of_squares + device.calls.narrow + device.calls.all_finite, 0);
}

// An optimizer that does not say it can update on the host (SDK 9.10) keeps its update on the
// device, offloaded rows read across the bus as before: the fixture (tests/fixtures/plugins/
// device_sgd.cpp) computes what `sgd` does, which says it can, and the losses agree bit for bit.
TEST(HostUpdate, AnOptimizerThatDoesNotSaySoStaysOnTheDevice) {
  const std::string fixture = "[optimizer]\nplugin = \"fixture_device_sgd\"\n";
  const std::string sgd = "[optimizer]\nplugin = \"sgd\"\nmomentum = 0.0\nschedule = \"constant\"\n";
  for (const std::vector<std::string>& overrides : {std::vector<std::string>{}, {kFused}}) {
    SCOPED_TRACE(overrides.empty() ? "full" : "fused");
    const HostRun on_device = train("fixture", kHost + kBf16, overrides, true, fixture);
    EXPECT_EQ(on_device.calls.sum_of_squares + on_device.calls.narrow, 0) << "the host table was used";
    const HostRun on_host = train("sgd", kHost + kBf16, overrides, true, sgd);
    EXPECT_GT(on_host.calls.sum_of_squares, 0);
    EXPECT_GT(on_host.calls.narrow, 0);
    expect_same_losses(on_device, on_host);
    EXPECT_LT(on_host.result.losses.back(), on_host.result.losses.front());
  }
}

// Where each block's update happens among the backward marks of the timeline's step.
std::vector<std::string> order(const MemoryTimeline& timeline) {
  std::vector<std::string> marks;
  for (const MemoryTimeline::Mark& mark : timeline.marks)
    if (mark.pass == "backward" || mark.pass == "update") marks.push_back(mark.pass + " " + std::to_string(mark.layer));
  return marks;
}

TEST(HostUpdate, AnOffloadedBlockStepsOnceTheNextBlocksBackwardIsIssued) {
  const HostRun on_device = train("order_device", "", {kFused}, false);
  const HostRun on_host = train("order_host", kHost, {kFused}, false);
  const std::vector<std::string> device_order = {"backward 3", "update 3",   "backward 2", "update 2",    "backward 1",
                                                 "update 1",   "backward 0", "update 0",   "backward -1", "update -1"};
  const std::vector<std::string> host_order = {"backward 3", "backward 2", "update 3",    "backward 1", "update 2",
                                               "backward 0", "update 1",   "backward -1", "update 0",   "update -1"};
  EXPECT_EQ(order(on_device.timeline), device_order);
  EXPECT_EQ(order(on_host.timeline), host_order);
  expect_same_losses(on_host, on_device);
}

// On a GPU: the offloaded update runs on the host's cores (the host table's calls are counted), and
// the runs keep the device update's bits, norms included (clipped by the global norm, or block by
// block by the previous step's): AdamW with bf16 storage, and 8-bit AdamW over int8 weights (its
// CPU kernel on the host, the int8 quantization on the device).
TEST(CudaHostOps, OffloadedUpdatesKeepTheDevicesBits) {
  STRATA_SKIP_WITHOUT_CUDA();
  const std::string cuda = "device.kind=\"cuda:0\"";
  const std::string adamw8bit =
      "[optimizer]\nplugin = \"adamw8bit\"\ngrad_clip = 0.5\nmin_8bit_size = 64\nblock_size = 256\n";
  struct Case {
    std::string precision, optimizer;
  };
  for (const Case& c : {Case{kBf16, kAdamW}, Case{"[precision]\nplugin = \"int8\"\n", adamw8bit}})
    for (const std::vector<std::string>& overrides : {std::vector<std::string>{cuda}, {cuda, kFused}}) {
      SCOPED_TRACE(c.precision + c.optimizer + overrides.back());
      const HostRun on_device = train("cuda_device", c.precision, overrides, false, c.optimizer);
      const HostRun on_host = train("cuda_host", kHost + c.precision, overrides, false, c.optimizer);
      expect_same_losses(on_host, on_device);
      EXPECT_GT(on_host.result.summary.bytes_to_host, 0u) << "the offload moved nothing";
      EXPECT_GT(on_host.calls.sum_of_squares, 0) << "the host table computed no norm";
      EXPECT_EQ(on_device.calls.sum_of_squares, 0);
    }
}

}  // namespace
}  // namespace strata
