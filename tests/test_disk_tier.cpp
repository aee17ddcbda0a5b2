// The disk tier: its transfers against the bytes given, the refusals it must survive or report
// (O_DIRECT, a full filesystem, its limit), and training with optimizer state on disk, bitwise
// equal to the state on the host.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <random>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/safetensors.hpp"
#include "core/device/allocator.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/residency/disk_tier.hpp"
#include "core/training/training_run.hpp"
#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata::test {
namespace {

DiskTierOptions options_in(const std::filesystem::path& directory, std::uint64_t staging_bytes = 4 << 20,
                           std::uint64_t limit = 0, Allocator* staging_arena = nullptr) {
  DiskTierOptions options;
  options.directory = directory;
  options.limit = limit;
  options.staging_arena = staging_arena;
  options.staging_bytes = staging_bytes;
  return options;
}

std::vector<std::byte> random_bytes(std::size_t count, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::byte> bytes(count);
  for (std::byte& b : bytes) b = static_cast<std::byte>(random() & 0xff);
  return bytes;
}

// Extents of awkward sizes, several transfers in flight, staging smaller than most of them (so
// each goes in pipelined chunks): every byte read back is the byte written.
void expect_round_trip(DiskTierOptions options) {
  DiskTier tier(std::move(options));
  const std::vector<std::size_t> sizes = {1, 4095, 4096, 4097, 3 * 8192 + 5, 100000};
  std::vector<std::vector<std::byte>> written;
  std::vector<std::uint64_t> extents;
  CopyTicket last = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    written.push_back(random_bytes(sizes[i], static_cast<unsigned>(i + 1)));
    extents.push_back(tier.reserve(sizes[i], "row " + std::to_string(i)));
    last = tier.write(extents.back(), written.back().data(), sizes[i]);
  }
  tier.wait(last);
  std::vector<std::vector<std::byte>> read(sizes.size());
  for (std::size_t i = sizes.size(); i-- > 0;) {
    read[i].assign(sizes[i], std::byte{0x5a});
    last = tier.read(extents[i], read[i].data(), sizes[i]);
  }
  tier.wait(last);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    EXPECT_EQ(0, std::memcmp(read[i].data(), written[i].data(), sizes[i])) << "extent " << i << ", " << sizes[i];
  const DiskTierStats stats = tier.stats();
  std::uint64_t total = 0;
  for (std::size_t size : sizes) total += size;
  EXPECT_EQ(stats.bytes_written, total);
  EXPECT_EQ(stats.bytes_read, total);
  EXPECT_GT(stats.file_bytes, total);
}

TEST(DiskTier, ReadsBackEveryByteWrittenThroughDoubleBufferedStaging) {
  const auto dir = temporary_directory("disk_tier_round_trip");
  Allocator host("host", make_aligned_host_resource());
  expect_round_trip(options_in(dir, 8192, 0, &host));
  // The staging is accounted as the tier's, and returned.
  EXPECT_EQ(host.stats().peak[category_index(MemoryCategory::workspace)], 2 * (8192 + kDiskBlockBytes));
  EXPECT_EQ(host.live_total(), 0u);
  // Nothing stays behind in the directory: the file had no name.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(DiskTier, AFilesystemRefusingODirectGetsBufferedIo) {
  const auto dir = temporary_directory("disk_tier_no_direct");
  int direct_refusals = 0;
  DiskTierOptions options = options_in(dir, 8192);
  options.open_file = [&direct_refusals](const char* path, int flags, mode_t mode) {
    if ((flags & O_DIRECT) != 0) {
      ++direct_refusals;
      errno = EINVAL;
      return -1;
    }
    return ::open(path, flags, mode);
  };
  expect_round_trip(options);
  EXPECT_GE(direct_refusals, 1);
  DiskTier tier(options);
  EXPECT_FALSE(tier.stats().direct_io);
  EXPECT_NE(tier.description().find("buffered"), std::string::npos) << tier.description();
}

TEST(DiskTier, NoRoomIsAnErrorNamingTheRowTheBytesAndTheDirectory) {
  const auto dir = temporary_directory("disk_tier_full");
  {
    DiskTier limited(options_in(dir, 4 << 20, 3 * kDiskBlockBytes));
    EXPECT_EQ(limited.reserve(4096, "h.0.mlp.state0"), 0u);
    try {
      (void)limited.reserve(2 * 4096 + 1, "h.1.mlp.state0");
      FAIL() << "a reservation past disk_limit was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("h.1.mlp.state0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("disk_limit"), std::string::npos) << e.what();
    }
  }
  DiskTierOptions options = options_in(dir);
  options.reserve_space = [](int, off_t, off_t) { return ENOSPC; };
  DiskTier full(options);
  try {
    (void)full.reserve(5000, "wte.weight.master");
    FAIL() << "a reservation the filesystem refused was accepted";
  } catch (const std::runtime_error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("wte.weight.master"), std::string::npos) << text;
    EXPECT_NE(text.find("8192 bytes more needed"), std::string::npos) << text;
    EXPECT_NE(text.find(dir.string()), std::string::npos) << text;
    EXPECT_NE(text.find(std::strerror(ENOSPC)), std::string::npos) << text;
  }
}

TEST(DiskTier, ADirectoryThatCannotHoldTheFileIsNamed) {
  const auto dir = temporary_directory("disk_tier_directories");
  EXPECT_EQ(disk_directory_problem(dir), "");
  EXPECT_EQ(disk_directory_problem(dir / "missing"), "does not exist");
  write_text(dir / "file", "x");
  EXPECT_EQ(disk_directory_problem(dir / "file"), "is not a directory");
  EXPECT_NE(disk_directory_problem("/proc").find("refuses new files"), std::string::npos);
  EXPECT_THROW(DiskTier(options_in("/proc")), std::invalid_argument);
}

std::vector<std::byte> file_prefix(const std::filesystem::path& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::byte> read(bytes);
  in.read(reinterpret_cast<char*>(read.data()), static_cast<std::streamsize>(bytes));
  EXPECT_TRUE(in) << path;
  return read;
}

std::string checksum_of(const std::vector<std::byte>& bytes) {
  return bytes_checksum({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
}

// A checkpoint keeps a row by hard link: the link holds the row's bytes and their checksum, and
// the row's next write goes to a new file, so the link keeps what it named while the row changes
// (and outlives the tier). A row never written links as zeros.
TEST(DiskTier, ALinkedRowKeepsItsBytesWhileTheRowGoesOnInANewFile) {
  const auto dir = temporary_directory("disk_tier_link");
  const auto kept = temporary_directory("disk_tier_link_kept");
  const std::size_t bytes = 3 * 8192 + 5;
  const std::vector<std::byte> first = random_bytes(bytes, 11), second = random_bytes(bytes, 12);
  {
    DiskTier tier(options_in(dir, 8192));
    const std::uint64_t row = tier.reserve(bytes, "h.0.attn.state0");
    const std::uint64_t untouched = tier.reserve(5000, "h.0.attn.state1");
    (void)tier.write(row, first.data(), bytes);
    std::string why;
    const auto linked = tier.link(row, kept / "first.bin", why);
    ASSERT_TRUE(linked.has_value()) << why;
    EXPECT_EQ(linked->bytes, bytes);
    EXPECT_EQ(checksum_text(linked->checksum), checksum_of(first));
    EXPECT_EQ(std::filesystem::file_size(kept / "first.bin") % kDiskBlockBytes, 0u);
    EXPECT_EQ(file_prefix(kept / "first.bin", bytes), first);

    const std::uint64_t file_bytes = tier.stats().file_bytes;
    tier.wait(tier.write(row, second.data(), bytes));
    std::vector<std::byte> read(bytes);
    tier.wait(tier.read(row, read.data(), bytes));
    EXPECT_EQ(read, second) << "the row reads its new bytes";
    EXPECT_EQ(file_prefix(kept / "first.bin", bytes), first) << "the write changed the linked file";
    EXPECT_EQ(tier.stats().file_bytes, file_bytes) << "the new file replaces the row's, in the tier's count";
    const auto again = tier.link(row, kept / "second.bin", why);
    ASSERT_TRUE(again.has_value()) << why;
    EXPECT_EQ(checksum_text(again->checksum), checksum_of(second));

    const auto zeros = tier.link(untouched, kept / "zeros.bin", why);
    ASSERT_TRUE(zeros.has_value()) << why;
    EXPECT_EQ(checksum_text(zeros->checksum), checksum_of(std::vector<std::byte>(5000)));
    EXPECT_EQ(file_prefix(kept / "zeros.bin", 5000), std::vector<std::byte>(5000));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the tier's own files outlived it";
  EXPECT_EQ(file_prefix(kept / "first.bin", bytes), first) << "the link did not outlive the tier";
  // A row of f32 is checked as it is written: a save must not keep a NaN it never reads back.
  {
    DiskTier tier(options_in(dir, 8192));
    std::vector<float> values(3000, 1.5f);
    const std::uint64_t row = tier.reserve(values.size() * 4, "h.0.attn.master", DType::f32);
    (void)tier.write(row, values.data(), values.size() * 4);
    std::string why;
    const auto finite = tier.link(row, kept / "finite.bin", why);
    ASSERT_TRUE(finite.has_value()) << why;
    EXPECT_TRUE(finite->finite);
    values[2999] = std::numeric_limits<float>::quiet_NaN();
    (void)tier.write(row, values.data(), values.size() * 4);
    const auto not_finite = tier.link(row, kept / "nan.bin", why);
    ASSERT_TRUE(not_finite.has_value()) << why;
    EXPECT_FALSE(not_finite->finite);
    EXPECT_THROW((void)tier.write(row, values.data(), 4), std::logic_error) << "a write of part of a row";
  }
  EXPECT_EQ(file_prefix(kept / "second.bin", bytes), second);
}

// Where no link can be made (another filesystem, here /dev/shm's tmpfs against the test's
// directory), link says why and changes nothing.
TEST(DiskTier, NoLinkAcrossFilesystems) {
  const auto kept = temporary_directory("disk_tier_cross");
  std::error_code error;
  if (!std::filesystem::is_directory("/dev/shm", error) || disk_directory_problem("/dev/shm") != "")
    GTEST_SKIP() << "no usable /dev/shm here";
  struct stat here {
  }, there{};
  if (::stat(kept.c_str(), &here) != 0 || ::stat("/dev/shm", &there) != 0 || here.st_dev == there.st_dev)
    GTEST_SKIP() << "/dev/shm is on the test directory's filesystem here";
  DiskTier tier(options_in("/dev/shm", 8192));
  const std::vector<std::byte> bytes = random_bytes(6000, 13);
  const std::uint64_t row = tier.reserve(bytes.size(), "wte.weight.state0");
  (void)tier.write(row, bytes.data(), bytes.size());
  std::string why;
  EXPECT_FALSE(tier.link(row, kept / "row.bin", why).has_value());
  EXPECT_NE(why.find("another filesystem"), std::string::npos) << why;
  EXPECT_FALSE(std::filesystem::exists(kept / "row.bin"));
  EXPECT_EQ(tier.link_refusal(), why) << "the refusal is remembered: later saves copy without trying";
  std::vector<std::byte> read(bytes.size());
  tier.wait(tier.read(row, read.data(), bytes.size()));
  EXPECT_EQ(read, bytes);
}

std::string disk_offload(const std::string& extra = "") {
  return "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"disk\"\n" + extra;
}

// Optimizer state on disk: the same bits as on the host (the update is the same, in parts), with
// AdamW, 8-bit AdamW (u8 codes and f32 scales) and SGD, under bf16 storage (f32 masters on disk
// too) and with layer streaming; and the host holds at most two blocks' state at once.
TEST(DiskTierTraining, OptimizerStateOnDiskKeepsTheMathBitwise) {
  const auto tier_dir = temporary_directory("disk_tier_training");
  const std::vector<std::string> on_disk = {"device.disk_path=\"" + tier_dir.string() + "\""};
  const std::string adamw8bit = "[optimizer]\nplugin = \"adamw8bit\"\nmin_8bit_size = 64\nblock_size = 256\n";
  const std::string sgd = "[optimizer]\nplugin = \"sgd\"\n";
  const std::string bf16 = "[precision]\nplugin = \"bf16\"\n";
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    struct Case {
      std::string name, strategies_host, strategies_disk, precision, optimizer;
    };
    const std::vector<Case> cases = {
        {"adamw", kOptimizerOffload, disk_offload(), "", ""},
        {"adamw8bit", kOptimizerOffload, disk_offload(), "", adamw8bit},
        {"sgd", kOptimizerOffload, disk_offload(), "", sgd},
        {"bf16", kOptimizerOffload, disk_offload(), bf16, ""},
        {"streamed", kStreaming, disk_offload("max_resident_layers = 2\nprefetch = 1\n"), "", ""},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const StackRun host = run_stack(family, "host_" + c.name, c.strategies_host, 3, c.precision, {}, c.optimizer);
      const StackRun disk =
          run_stack(family, "disk_" + c.name, c.strategies_disk, 3, c.precision, on_disk, c.optimizer);
      expect_bitwise_equal(host, disk);
      ASSERT_TRUE(disk.disk.has_value());
      const std::uint64_t state = peak(host.host, MemoryCategory::optimizer);
      EXPECT_EQ(disk.disk->peak[category_index(MemoryCategory::optimizer)], state) << "all the state lives on disk";
      // Read in and written back every step (the first step's read included).
      EXPECT_GE(disk.disk->bytes_read, 3 * state);
      EXPECT_GE(disk.disk->bytes_written, 3 * state);
      // In host memory: at most two blocks' state (one updating or written back, one read ahead),
      // or the parameters outside the blocks' and the first block's.
      EXPECT_LE(peak(disk.host, MemoryCategory::optimizer), 2 * disk.layer_state_bytes + disk.global_state_bytes);
      EXPECT_LT(peak(disk.host, MemoryCategory::optimizer), state);
      EXPECT_EQ(peak(disk.device, MemoryCategory::optimizer), 0u);
      EXPECT_TRUE(std::filesystem::is_empty(tier_dir)) << "the tier's file outlived its run";
    }
  }
}

// Each step's JSONL record carries the tier's share of it (SDK 9.5's on_step_disk): the reads add
// up to the run's, the writes to at most the run's (the last write-back lands after the last step);
// a run without a tier has no such object.
TEST(DiskTierTraining, EachStepRecordsTheTiersShare) {
  const auto dir = temporary_directory("disk_tier_telemetry");
  std::filesystem::create_directories(dir / "tier");
  for (const bool on_disk : {true, false}) {
    SCOPED_TRACE(on_disk ? "disk" : "host");
    const auto jsonl = dir / (on_disk ? "disk.jsonl" : "host.jsonl");
    write_text(dir / "m.toml", tiny_manifest((on_disk ? disk_offload() : kOptimizerOffload) +
                                             "[[telemetry]]\nplugin = \"jsonl\"\npath = \"" + jsonl.string() + "\"\n"));
    const Manifest manifest =
        load_manifest(dir / "m.toml", {"train.steps=3", "device.disk_path=\"" + (dir / "tier").string() + "\""});
    PluginRegistry registry;
    registry.scan_search_path(plugin_search_path({}));
    const TrainResult result = run_training(manifest, registry, TrainOptions{});
    std::ifstream in(jsonl);
    std::uint64_t read = 0, written = 0;
    int steps = 0, with_disk = 0;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      if (!record.contains("step")) continue;
      ++steps;
      if (!record.contains("disk")) continue;
      ++with_disk;
      EXPECT_GT(record["disk"]["bytes_read"].get<std::uint64_t>(), 0u) << "every step reads the state in";
      EXPECT_GT(record["disk"]["disk_bytes"].get<std::uint64_t>(), 0u);
      EXPECT_GT(record["disk"]["file_bytes"].get<std::uint64_t>(), 0u);
      read += record["disk"]["bytes_read"].get<std::uint64_t>();
      written += record["disk"]["bytes_written"].get<std::uint64_t>();
    }
    EXPECT_EQ(steps, 3);
    if (!on_disk) {
      EXPECT_EQ(with_disk, 0);
      continue;
    }
    ASSERT_TRUE(result.disk.has_value());
    EXPECT_EQ(with_disk, 3);
    EXPECT_EQ(read, result.disk->bytes_read);
    EXPECT_GT(written, 0u);
    EXPECT_LE(written, result.disk->bytes_written);
  }
}

// The masters apart from the moments (offload's `masters` key), either on disk without the other,
// train to the host's bits: the disk holds exactly the group sent there.
TEST(DiskTierTraining, MastersOnDiskApartFromTheMomentsKeepTheMathBitwise) {
  const auto tier_dir = temporary_directory("disk_tier_masters");
  const std::vector<std::string> on_disk = {"device.disk_path=\"" + tier_dir.string() + "\""};
  const std::string bf16 = "[precision]\nplugin = \"bf16\"\n";
  const std::string host_state = "[[strategy]]\nplugin = \"offload\"\noptimizer_state = \"host\"\n";
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun host = run_stack(family, "masters_host", kOptimizerOffload, 3, bf16);
    const StackRun whole = run_stack(family, "masters_whole", disk_offload(), 3, bf16, on_disk);
    const StackRun masters = run_stack(family, "masters_alone", host_state + "masters = \"disk\"\n", 3, bf16, on_disk);
    const StackRun moments = run_stack(family, "moments_alone", disk_offload("masters = \"host\"\n"), 3, bf16, on_disk);
    expect_bitwise_equal(host, masters);
    expect_bitwise_equal(host, moments);
    ASSERT_TRUE(whole.disk && masters.disk && moments.disk);
    const std::uint64_t all = whole.disk->peak[category_index(MemoryCategory::optimizer)];
    const std::uint64_t on_disk_masters = masters.disk->peak[category_index(MemoryCategory::optimizer)];
    const std::uint64_t on_disk_moments = moments.disk->peak[category_index(MemoryCategory::optimizer)];
    // The two groups split the state: AdamW's two f32 moments for every value, an f32 master
    // only for the bf16 matrices (norms and biases stay f32).
    EXPECT_EQ(on_disk_masters + on_disk_moments, all);
    EXPECT_GT(on_disk_masters, 0u);
    EXPECT_GT(on_disk_moments, 2 * on_disk_masters);
    // What stays in host memory is the other group, whole, and a block or two of the one on disk.
    const std::uint64_t state_on_host = peak(host.host, MemoryCategory::optimizer);
    EXPECT_GE(peak(masters.host, MemoryCategory::optimizer), on_disk_moments);
    EXPECT_LT(peak(masters.host, MemoryCategory::optimizer), state_on_host);
    EXPECT_GE(peak(moments.host, MemoryCategory::optimizer), on_disk_masters);
    EXPECT_LT(peak(moments.host, MemoryCategory::optimizer), state_on_host);
  }
}

// Layer streaming with the block weights on disk (offload's weights = "disk"), f32 and int8
// storage: the same bits as streaming from host memory. Eight blocks: the disk holds all of them,
// host memory at most four (the two resident blocks' copies, one read ahead, one going back).
TEST(DiskTierTraining, BlockWeightsOnDiskKeepTheMathBitwise) {
  const auto tier_dir = temporary_directory("disk_tier_weights");
  const std::string int8 = "[precision]\nplugin = \"int8\"\n";
  const std::string adamw8bit = "[optimizer]\nplugin = \"adamw8bit\"\nmin_8bit_size = 64\nblock_size = 256\n";
  const std::string streamed_host = disk_offload("max_resident_layers = 2\nprefetch = 1\n");
  const std::string streamed_disk = streamed_host + "weights = \"disk\"\n";
  const std::vector<std::string> overrides = {"model.n_layer=8", "device.disk_path=\"" + tier_dir.string() + "\""};
  constexpr std::uint64_t kBlocks = 8;
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    // The third case freezes the middle blocks (sparse_layers): frozen int8 weights on disk, read
    // for their matmuls and fingerprinted by the run, but never updated.
    for (const std::string variant : {"f32", "int8", "int8_frozen"}) {
      SCOPED_TRACE(variant);
      const bool quantized = variant != "f32";
      const std::string precision = quantized ? int8 : "";
      const std::string optimizer = quantized ? adamw8bit : "";
      const std::string frozen =
          variant == "int8_frozen" ? "[[strategy]]\nplugin = \"sparse_layers\"\ntrain_last = 2\n" : "";
      const StackRun host =
          run_stack(family, "weights_host", frozen + streamed_host, 3, precision, overrides, optimizer);
      const StackRun disk =
          run_stack(family, "weights_disk", frozen + streamed_disk, 3, precision, overrides, optimizer);
      expect_bitwise_equal(host, disk);
      ASSERT_TRUE(disk.disk.has_value());
      const std::uint64_t block = disk.layer_weight_bytes;
      EXPECT_EQ(disk.disk->peak[category_index(MemoryCategory::weights)], kBlocks * block)
          << "every block's weights live on disk";
      EXPECT_EQ(peak(host.host, MemoryCategory::weights), kBlocks * block + host.global_weight_bytes)
          << "streaming from the host keeps every block there";
      EXPECT_LE(peak(disk.host, MemoryCategory::weights), 4 * block + disk.global_weight_bytes);
      EXPECT_GT(disk.disk->bytes_read, 3 * kBlocks * block) << "each step reads every block in";
      EXPECT_TRUE(std::filesystem::is_empty(tier_dir)) << "the tier's file outlived its run";
    }
  }
}

TEST(DiskTierTraining, StateOnDiskWithoutADiskPathOrAPredictorIsRefused) {
  try {
    (void)run_stack(kFamilies[0], "disk_without_path", disk_offload(), 1);
    FAIL() << "optimizer state went to disk without [device] disk_path";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("disk_path"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::test
