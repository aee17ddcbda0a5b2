#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/device/backend.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/util/atomic_file.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

struct ModelFixture {
  GPT2Config config{2, 2, 16, 50, 8};
  std::unique_ptr<Backend> device = make_cpu_backend(0);
  std::unique_ptr<Kernel> attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model model{config, 1, *device, *attention, 2};
};

TEST(Checkpoint, SaveLoadRoundTripStoresExactlyVocabRows) {
  const auto dir = test::temporary_directory("ckpt_roundtrip");
  ModelFixture a;
  a.model.init_weights(1);
  for (const ParameterRows& rows : a.model.parameters()) test::f32(a.model, rows.state[0])[0] = 0.25f;
  const auto saved = save_checkpoint(dir, a.model, {5, 9, "adamw"});
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
    tensors.push_back({"transformer." + rows.name, shape, test::f32(source.model, rows.param).first(count)});
  }
  tensors.push_back({"transformer.h.0.attn.bias", {1, 1, 8, 8}, mask});
  write_file_atomically(dir / "model.safetensors", encode_safetensors(tensors, {{"format", "pt"}}));
  ModelFixture target;
  load_weights(dir / "model.safetensors", target.model);
  const TensorView x = source.model.param(1, LayerParam::fc_weight), y = target.model.param(1, LayerParam::fc_weight);
  EXPECT_TRUE(std::equal(x.f32(), x.f32() + x.count, y.f32()));
}

TEST(Checkpoint, CorruptTruncatedAndMismatchedFilesAreRefused) {
  const auto dir = test::temporary_directory("ckpt_bad");
  ModelFixture a;
  a.model.init_weights(3);
  const auto saved = save_checkpoint(dir, a.model, {1, 1, "adamw"});
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
  GPT2Model wrong(other, 1, *device, *a.attention, 2);
  try {
    load_checkpoint(dir, wrong);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("n_layer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
