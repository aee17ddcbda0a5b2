#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_verify.hpp"
#include "core/checkpoint/hf_directory.hpp"
#include "core/checkpoint/hf_layout.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/device/backend.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_config.hpp"
#include "core/util/atomic_file.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

struct ModelFixture {
  GPT2Config config{2, 2, 16, 50, 8};
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model model{config, *device, *attention, model_options(1, f32_state_layout(2))};
};

// An atomic write replaces a file by renaming over it, which would turn a device into a regular
// file: such a path is refused and left as it was.
TEST(AtomicFile, APathThatIsNotARegularFileIsRefusedNotReplaced) {
  EXPECT_THROW(write_file_atomically("/dev/null", "bytes"), std::runtime_error);
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST(Checkpoint, SaveLoadRoundTripStoresExactlyVocabRows) {
  const auto dir = test::temporary_directory("ckpt_roundtrip");
  ModelFixture a;
  a.model.init_weights(1);
  for (const ParameterRows& rows : a.model.parameters()) test::f32(a.model, rows.state[0])[0] = 0.25f;
  const auto saved = save_checkpoint(dir, a.model, {5, 9, "adamw", "", "", "", "", {}, "", {}, {}});
  EXPECT_EQ(resolve_checkpoint(dir), saved);
  const SafetensorsFile file = SafetensorsFile::read(saved / "model.safetensors");
  EXPECT_EQ(file.entry("wte.weight").shape, (std::vector<std::int64_t>{50, 16}))
      << "checkpoints store vocab rows, not padded";
  EXPECT_EQ(file.entry("h.1.attn.c_attn.weight").shape, (std::vector<std::int64_t>{16, 48}))
      << "HF Conv1D layout (in, out)";
  ModelFixture b;
  const TrainerState state = load_checkpoint(dir, b.model);
  EXPECT_EQ(state.step, 5);
  EXPECT_EQ(state.seed, 9u);
  for (std::size_t i = 0; i < a.model.parameters().size(); ++i) {
    const auto& rows = a.model.parameters()[i];
    auto x = test::f32(a.model, rows.param), y = test::f32(b.model, b.model.parameters()[i].param);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << rows.name;
    EXPECT_EQ(test::f32(b.model, b.model.parameters()[i].state[0])[0], 0.25f);
  }
}

TEST(Checkpoint, LoadsHuggingFaceStyleFiles) {
  // HF GPT-2 files may prefix "transformer.", carry attention-mask buffers and a tied lm_head.
  const auto dir = test::temporary_directory("ckpt_hf");
  ModelFixture source;
  source.model.init_weights(2);
  std::vector<TensorToWrite> tensors;
  std::vector<float> mask(64, 1.0f);
  for (const ParameterRows& rows : source.model.parameters()) {
    std::vector<std::int64_t> shape = source.model.table().row(rows.param).shape;
    if (rows.name == "wte.weight") shape[0] = 50;
    std::size_t count = 1;
    for (auto e : shape) count *= static_cast<std::size_t>(e);
    tensors.push_back({"transformer." + rows.name, shape, test::f32(source.model, rows.param).first(count), {}, "F32"});
  }
  tensors.push_back({"transformer.h.0.attn.bias", {1, 1, 8, 8}, mask, {}, "F32"});
  write_file_atomically(dir / "model.safetensors", encode_safetensors(tensors, {{"format", "pt"}}));
  ModelFixture target;
  load_weights(dir / "model.safetensors", target.model);
  const TensorView x = source.model.parameter_values(1, gpt2::P::fc_weight);
  const TensorView y = target.model.parameter_values(1, gpt2::P::fc_weight);
  EXPECT_TRUE(std::equal(x.f32(), x.f32() + x.count, y.f32()));
}

TEST(Checkpoint, CorruptTruncatedAndMismatchedFilesAreRefused) {
  const auto dir = test::temporary_directory("ckpt_bad");
  ModelFixture a;
  a.model.init_weights(3);
  const auto saved = save_checkpoint(dir, a.model, {1, 1, "adamw", "", "", "", "", {}, "", {}, {}});
  const auto size = std::filesystem::file_size(saved / "model.safetensors");
  std::filesystem::copy_file(saved / "model.safetensors", dir / "truncated.safetensors");
  std::filesystem::resize_file(dir / "truncated.safetensors", size / 2);
  ModelFixture b;
  try {
    load_weights(dir / "truncated.safetensors", b.model);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated.safetensors"), std::string::npos) << e.what();
  }
  test::write_text(dir / "garbage.safetensors", std::string("\x10\0\0\0\0\0\0\0{not json at all", 24));
  EXPECT_THROW(load_weights(dir / "garbage.safetensors", b.model), CheckpointError);
  GPT2Config other{3, 2, 16, 50, 8};
  auto device = make_cpu_backend(0);
  GPT2Model wrong(other, *device, *a.attention, model_options(1, f32_state_layout(2)));
  try {
    load_checkpoint(dir, wrong);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("n_layer"), std::string::npos) << e.what();
  }
}

// Every file Strata writes carries a checksum per tensor, and reading verifies them: one flipped
// bit is a corrupt checkpoint naming the tensor. A file without them (from elsewhere) still loads.
TEST(Checkpoint, EveryTensorIsChecksummedAndAFlippedBitIsNamed) {
  const std::vector<float> a(8, 1.0f), b(8, 2.0f);
  const std::string bytes = encode_safetensors({{"a", {8}, a, {}, "F32"}, {"b", {8}, b, {}, "F32"}}, {});
  const SafetensorsFile clean = SafetensorsFile::parse(bytes, "clean.safetensors");
  EXPECT_TRUE(clean.metadata().contains(kChecksumsKey));
  std::string flipped = bytes;
  flipped[flipped.size() - 5] ^= 0x01;  // the low bit of b[6]'s last byte... any bit of b will do
  try {
    SafetensorsFile::parse(flipped, "flipped.safetensors");
    FAIL() << "a flipped bit loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'b' fails its checksum"), std::string::npos) << e.what();
  }
  // The same file without the checksums, as another tool would write it, loads with the flip.
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_size));
  header.erase("__metadata__");
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string foreign(8, '\0');
  const std::uint64_t size = text.size();
  std::memcpy(foreign.data(), &size, 8);
  foreign += text + flipped.substr(8 + header_size);
  EXPECT_NO_THROW(SafetensorsFile::parse(foreign, "foreign.safetensors"));
}

// A save's files are written from pieces of each tensor, at most `piece_bytes` held at once, and
// are byte for byte the file encode_safetensors makes of the whole tensors, its checksum returned.
TEST(Checkpoint, ASaveWritesBoundedPiecesOfTheFileEncodeMakes) {
  const auto dir = test::temporary_directory("ckpt_pieces");
  std::vector<float> a(1000);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * static_cast<float>(i) - 7.0f;
  std::vector<std::byte> b(37);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(3 * i + 1);
  const std::vector<float> c{42.0f};
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"producer", "strata"}};
  const std::string whole = encode_safetensors(
      {{"a", {10, 100}, a, {}, "F32"}, {"b", {37}, {}, b, "U8"}, {"c", {1}, c, {}, "F32"}}, metadata);

  std::uint64_t largest_piece = 0;
  int pieces = 0;
  const auto from = [&](std::span<const std::byte> bytes) {
    return [&largest_piece, &pieces, bytes](std::uint64_t offset, std::span<std::byte> out) {
      ASSERT_LE(offset + out.size(), bytes.size());
      std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
      largest_piece = std::max<std::uint64_t>(largest_piece, out.size());
      ++pieces;
    };
  };
  const std::vector<TensorPieces> tensors{{"a", {10, 100}, "F32", 4000, from(std::as_bytes(std::span(a)))},
                                          {"b", {37}, "U8", 37, from(b)},
                                          {"c", {1}, "F32", 4, from(std::as_bytes(std::span(c)))}};
  const std::string checksum = write_safetensors_in_pieces(dir / "pieces.safetensors", tensors, metadata, 64);
  std::ifstream in(dir / "pieces.safetensors", std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, whole);
  EXPECT_EQ(checksum, bytes_checksum(whole));
  EXPECT_LE(largest_piece, 64u);
  EXPECT_EQ(pieces, 2 * (63 + 1 + 1));  // read twice: once for its checksum, once to be written
}

// A save is read back before `latest` moves: one holding a NaN weight is discarded, and the
// previous save stays `latest`, whole.
TEST(Checkpoint, ASaveThatFailsItsReadBackNeverBecomesLatest) {
  const auto dir = test::temporary_directory("ckpt_readback");
  ModelFixture a;
  a.model.init_weights(4);
  const auto first = save_checkpoint(dir, a.model, {1, 1, "adamw", "", "", "", "", {}, "", {}, {}});
  test::f32(a.model, a.model.parameters()[0].param)[3] = std::numeric_limits<float>::quiet_NaN();
  try {
    save_checkpoint(dir, a.model, {2, 1, "adamw", "", "", "", "", {}, "", {}, {}});
    FAIL() << "a NaN weight was saved";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("failed its read-back check"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolve_checkpoint(dir), first);
  EXPECT_EQ(verify_save(first).step, 1);
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 2) << "step_00000001 and latest, nothing half-written";
}

// The tensors of a safetensors file tile its data exactly; a header whose byte ranges overlap, or
// leave bytes uncovered, is corrupt. A file with more layers than the model is refused by name.
TEST(Checkpoint, OverlappingOrUncoveredRangesAndExtraTensorsAreRefused) {
  const auto dir = test::temporary_directory("ckpt_ranges");
  const std::vector<float> values(8, 1.0f);
  auto file_with = [&](const std::string& name, const std::string& header_json, std::size_t data_bytes) {
    std::string header = header_json;
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
    bytes += header;
    bytes.append(data_bytes, '\0');
    test::write_text(dir / name, bytes);
    return dir / name;
  };
  // The reader's error, or "(accepted)" when it read the file.
  const auto refusal = [](const std::filesystem::path& path) -> std::string {
    try {
      SafetensorsFile::read(path);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  const auto overlapping = file_with(
      "overlap.safetensors",
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      24);
  EXPECT_NE(refusal(overlapping).find("overlapping"), std::string::npos) << refusal(overlapping);
  const auto gap = file_with(
      "gap.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
      24);
  EXPECT_NE(refusal(gap).find("that no tensor covers"), std::string::npos) << refusal(gap);
  // A name given twice, both entries valid: the JSON parser alone would keep the second.
  const auto twice = file_with(
      "twice.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      8);
  EXPECT_NE(refusal(twice).find("tensor 'a' is named twice"), std::string::npos) << refusal(twice);
  const auto trailing =
      file_with("trailing.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 16);
  EXPECT_THROW(SafetensorsFile::read(trailing), CheckpointError);
  EXPECT_NO_THROW(SafetensorsFile::read(
      file_with("ok.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8)));

  // A 3-layer checkpoint into the 2-layer model: its layer-2 tensors are not parameters here.
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model deeper(GPT2Config{3, 2, 16, 50, 8}, *device, *attention, model_options(1, f32_state_layout(2)));
  deeper.init_weights(1);
  const auto saved = save_checkpoint(dir / "deep", deeper, {1, 1, "adamw", "", "", "", "", {}, "", {}, {}});
  ModelFixture shallow;
  try {
    load_weights(saved / "model.safetensors", shallow.model);
    FAIL() << "a deeper checkpoint loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'h.2."), std::string::npos) << e.what();
  }
}

// keep_last keeps the newest saves (and always the one `latest` names); partial saves of processes
// that no longer run are removed at the next start, those of a live process are left alone.
TEST(CheckpointDirectory, KeepLastPrunesAndStalePartialSavesAreRemoved) {
  const auto dir = test::temporary_directory("ckpt_keep");
  ModelFixture a;
  a.model.init_weights(2);
  for (std::int64_t step : {1, 2, 3, 4}) {
    save_checkpoint(dir, a.model, {step, 1, "adamw", "", "", "", "", {}, "", {}, {}});
    prune_checkpoints(dir, 2);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "step_00000001"));
  EXPECT_FALSE(std::filesystem::exists(dir / "step_00000002"));
  EXPECT_TRUE(std::filesystem::exists(dir / "step_00000003"));
  EXPECT_EQ(resolve_checkpoint(dir), dir / "step_00000004");

  // With the directory's lock held, another PID's partial save is stale even when a process with
  // that PID runs (PID 1, init: a reused PID).
  std::filesystem::create_directories(dir / ".step_00000009.tmp-1");
  std::filesystem::create_directories(dir / ".step_00000009.tmp-2147483646");
  std::filesystem::create_directories(dir / ".step_00000008.old-2147483645");
  write_file_atomically(dir / "latest.tmp-2147483644", "step_00000009\n");  // a kill -9 mid-replace
  std::filesystem::create_directories(dir / (".step_00000010.tmp-" + std::to_string(::getpid())));
  EXPECT_EQ(remove_stale_partial_saves(dir), 4);
  EXPECT_FALSE(std::filesystem::exists(dir / "latest.tmp-2147483644"));
  EXPECT_FALSE(std::filesystem::exists(dir / ".step_00000009.tmp-1")) << "a reused PID kept a stale save";
  EXPECT_TRUE(std::filesystem::exists(dir / (".step_00000010.tmp-" + std::to_string(::getpid()))))
      << "this process's own save in progress was removed";
  EXPECT_FALSE(std::filesystem::exists(dir / ".step_00000009.tmp-2147483646"));
  EXPECT_TRUE(std::filesystem::exists(dir / "step_00000004"));
}

// export --hf's config.json reads back, through the reader [model] from uses, as the same model:
// every family, an untied LLaMA with Llama 3's rope_scaling among them.
TEST(HfLayout, ConfigJsonReadsBackAsTheSameModel) {
  ModelSpec gpt2;
  gpt2.shape = gpt2_shape({3, 4, 64, 300, 32});
  ModelSpec llama;
  llama.arch = "llama";
  llama.shape = LlamaConfig{2, 8, 2, 64, 96, 500, 64, 500000.0, {8.0, 1.0, 4.0, 8192}, 1e-5};
  ModelSpec qwen2 = llama;
  qwen2.arch = "qwen2";
  qwen2.shape.attention_bias = true;
  qwen2.shape.rope_scaling = {};
  qwen2.shape.tie_embeddings = true;
  for (const ModelSpec& model : {gpt2, llama, qwen2}) {
    SCOPED_TRACE(model.arch);
    const HfModelConfig back =
        parse_hf_config(hf_config_json(model, "float32", 128, HfTokenIds{1, 2, nullptr}), "config.json");
    EXPECT_EQ(back.arch, model.arch);
    EXPECT_EQ(back.n_layer, model.n_layer());
    EXPECT_EQ(back.vocab, model.vocab());
    EXPECT_EQ(back.max_positions, 128);
    if (model.arch != "gpt2") {
      EXPECT_EQ(back.n_head, model.shape.n_head);
      EXPECT_EQ(back.n_kv_head, model.shape.n_kv_head);
      EXPECT_EQ(back.d_model, model.shape.d_model);
      EXPECT_EQ(back.d_ff, model.shape.d_ff);
      EXPECT_EQ(back.rope_theta, model.shape.rope_theta);
      EXPECT_EQ(back.norm_eps, model.shape.norm_eps);
      EXPECT_EQ(back.tie_embeddings, model.shape.tie_embeddings);
      EXPECT_EQ(back.rope_scaling, model.shape.rope_scaling);
    } else {
      EXPECT_EQ(back.n_head, model.shape.n_head);
      EXPECT_EQ(back.d_model, model.shape.d_model);
    }
  }
}

// Shards fill in tensor order up to the size; a tensor larger than a shard gets its own.
TEST(HfLayout, ShardsFillInOrderUpToTheirSize) {
  EXPECT_EQ(plan_shards({10, 10, 10, 10}, 20), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(plan_shards({50, 10, 10, 60, 5}, 20), (std::vector<int>{0, 1, 1, 2, 3}));
  EXPECT_EQ(plan_shards({10, 10}, 100), (std::vector<int>{0, 0}));
  EXPECT_EQ(shard_file_name(0, 1), "model.safetensors");
  EXPECT_EQ(shard_file_name(1, 12), "model-00002-of-00012.safetensors");
}

}  // namespace
}  // namespace strata
