// NCCL between CUDA ranks (core/distributed/nccl_communicator.cpp), as far as a machine with one GPU
// can run it: NCCL refuses two ranks on one device, so these run one rank. Each collective moves
// device rows through NCCL (a sum of one rank's values is those values, exactly) and host rows
// through the host communicator; one rank trains through the data-parallel path as one process
// does, bit for bit, at every zero stage, with NCCL's time measured on the stream. What needs two
// GPUs, NCCL's sums in its own order against Strata's fixed order, has not run (docs/benchmarks.md).
// Every test skips, saying why, where no CUDA device is visible or the build has no NCCL.
#include <gtest/gtest.h>

#include <cstddef>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "backend_buffers.hpp"
#include "core/distributed/device_communicator.hpp"
#include "core/manifest/manifest.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

#define STRATA_SKIP_WITHOUT_NCCL()                                                 \
  STRATA_SKIP_WITHOUT_CUDA();                                                      \
  if (const std::string why = ::strata::nccl_unavailable_reason(); !why.empty()) { \
    GTEST_SKIP() << "NCCL is not available here: " << why;                         \
  }

namespace strata {
namespace {

std::vector<float> counting(std::size_t n, float from) {
  std::vector<float> values(n);
  std::iota(values.begin(), values.end(), from);
  return values;
}

TEST(CudaNccl, OneRankMovesDeviceRowsThroughNcclAndHostRowsThroughTheHost) {
  STRATA_SKIP_WITHOUT_NCCL();
  const std::unique_ptr<Backend> backend = make_backend("cuda:0", 0);
  test::BackendBuffers buffers(*backend);
  LocalCommunicator host;
  const std::unique_ptr<Communicator> nccl = make_nccl_communicator(host, backend->kernel_target());
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->size(), 1);
  EXPECT_NE(nccl->name().find("NCCL"), std::string::npos) << nccl->name();

  constexpr std::size_t n = 1000;  // not a multiple of NCCL's chunks
  const std::vector<float> values = counting(n, 0.5f);
  std::vector<float> scratch;
  float* sums = buffers.upload(values);
  nccl->sum_to_all({sums, n}, scratch);
  EXPECT_EQ(buffers.download(sums, n), values);
  nccl->sum_to({sums, n}, 0, scratch);
  EXPECT_EQ(buffers.download(sums, n), values);
  nccl->broadcast({reinterpret_cast<std::byte*>(sums), n * sizeof(float)}, 0);
  EXPECT_EQ(buffers.download(sums, n), values);

  // Strata's fixed-order sums, and the small exchanges, are the host communicator's: device rows
  // there are a caller's bug.
  const std::vector<float> stale(n, -7.0f);
  float* other = buffers.upload(stale);
  const std::vector<int> counts{static_cast<int>(n)}, offsets{0};
  EXPECT_THROW(nccl->all_gather(std::as_bytes(std::span<const float>(sums, n)),
                                std::as_writable_bytes(std::span<float>(other, n))),
               std::logic_error);
  EXPECT_THROW(nccl->gather(std::as_bytes(std::span<const float>(sums, n)),
                            std::as_writable_bytes(std::span<float>(other, n)), 0),
               std::logic_error);
  EXPECT_THROW(nccl->all_to_all({sums, n}, counts, offsets, {other, n}, counts, offsets), std::logic_error);
  EXPECT_THROW(nccl->all_gather_pieces({other, n}, counts, offsets), std::logic_error);
  EXPECT_EQ(buffers.download(other, n), stale);

  backend->synchronize();
  EXPECT_GT(nccl->seconds(), 0.0) << "NCCL's calls were timed on the stream";
  EXPECT_EQ(nccl->waited_seconds(), nccl->seconds()) << "on the compute stream, none of it is hidden";

  // Host rows: the host communicator's (one rank: unchanged, and no NCCL call).
  const double nccl_seconds = nccl->seconds();
  std::vector<float> on_host = values;
  nccl->sum_to_all(on_host, scratch);
  nccl->sum_to(on_host, 0, scratch);
  nccl->broadcast(std::as_writable_bytes(std::span<float>(on_host)), 0);
  EXPECT_EQ(on_host, values);
  std::vector<double> doubles{1.5, 2.5};
  std::vector<double> all(2);
  nccl->all_gather(std::as_bytes(std::span<const double>(doubles)), std::as_writable_bytes(std::span<double>(all)));
  EXPECT_EQ(all, doubles);
  backend->synchronize();
  EXPECT_EQ(nccl->seconds(), nccl_seconds) << "host rows took no time on the stream";
}

// Four steps of the tiny model with three blocks on cuda:0; `extra` tables appended, and the
// rank's share of each step (null for one process) from its jsonl records.
struct CudaRun {
  std::vector<double> losses;
  std::vector<nlohmann::json> ranks;
};
CudaRun train_on_cuda(int zero, bool data_parallel, const std::string& extra) {
  const auto dir = test::temporary_directory("cuda_data_parallel");
  const auto jsonl = dir / "steps.jsonl";
  test::write_text(
      dir / "m.toml",
      test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n[distributed]\nzero = " + std::to_string(zero) + "\n" +
                          extra + "[[telemetry]]\nplugin = \"jsonl\"\npath = \"" + jsonl.string() + "\"\n"));
  const Manifest manifest = load_manifest(
      dir / "m.toml", {"model.n_layer=3", "train.steps=4", "train.eval_every=0", "device.kind=\"cuda:0\""});
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  TrainOptions options;
  options.data_parallel_with_one_rank = data_parallel;
  CudaRun run;
  run.losses = run_training(manifest, registry, options).losses;
  run.ranks = test::step_rank_records(jsonl);
  return run;
}

TEST(CudaNccl, OneRankTrainsThroughNcclAsOneProcessAtEveryStage) {
  STRATA_SKIP_WITHOUT_NCCL();
  const std::string stacked =
      "[[strategy]]\nplugin = \"checkpoint\"\n[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
  for (const std::string& strategies : {std::string(), stacked}) {
    const CudaRun alone = train_on_cuda(0, false, strategies);
    ASSERT_EQ(alone.losses.size(), 4u);
    for (int zero = 0; zero <= 3; ++zero) {
      SCOPED_TRACE("zero " + std::to_string(zero) + (strategies.empty() ? "" : ", checkpoint + offload"));
      const CudaRun one_rank = train_on_cuda(zero, true, strategies);
      EXPECT_EQ(one_rank.losses, alone.losses);
      ASSERT_EQ(one_rank.ranks.size(), 4u);
      double communication_ms = 0.0;
      for (const nlohmann::json& ranks : one_rank.ranks) {
        ASSERT_EQ(ranks.size(), 1u);
        EXPECT_EQ(ranks[0]["zero"], zero);
        communication_ms += ranks[0]["communication_ms"].get<double>();
      }
      EXPECT_GT(communication_ms, 0.0) << "NCCL's calls ran on the stream, timed";
    }
  }
}

}  // namespace
}  // namespace strata
