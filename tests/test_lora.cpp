// LoRA (strategy "lora", plugins/lora): the adapter's gradients against finite differences, its
// merge against its product, and, through the real plugins, that training starts at the base model,
// trains only the adapters (from step 1, with and without activation checkpointing, bitwise alike:
// the trap of adapters that silently train nothing under checkpointing), on f32, bf16 and int8
// bases, and that bad keys are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "plugins/lora/lora_adapter.hpp"
#include "stack_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

using lora::LoraAdapter;
using test::expect_bitwise_equal;
using test::kBlockCheckpoint;
using test::kFamilies;
using test::kStreaming;
using test::peak;
using test::run_stack;
using test::StackRun;

std::vector<float> random_values(std::size_t count, std::mt19937& engine, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float& value : values) value = normal(engine);
  return values;
}

// L = sum(w ⊙ adapter(x)), whose gradient with respect to the output is w.
struct AdapterCase {
  std::int64_t rows = 6, in = 5, out = 7;
  int rank = 2;
  double dropout = 0.0;
};

double objective(LoraAdapter& adapter, Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass,
                 const std::vector<float>& x, const std::vector<float>& a, const std::vector<float>& b,
                 const std::vector<float>& w, std::vector<float>& scratch) {
  std::vector<float> out(w.size(), 0.0f);
  const float* values[] = {a.data(), b.data()};
  adapter.forward(ops, matrix, pass, out.data(), x.data(), AdapterTensors{values, {}},
                  Scratch{scratch.data(), static_cast<std::int64_t>(scratch.size())});
  double sum = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * w[i];
  return sum;
}

TEST(Lora, AdapterGradientsMatchFiniteDifferences) {
  auto backend = make_cpu_backend(0);
  Ops& ops = backend->ops();
  for (const double dropout : {0.0, 0.3}) {
    SCOPED_TRACE(dropout);
    const AdapterCase c{6, 5, 7, 2, dropout};
    LoraAdapter adapter({c.rank, 6.0, dropout});
    const MatmulShape shape{c.rows, c.in, c.out, WeightLayout::in_out};
    const AdaptedMatrix matrix{"m", "qkv", 0, 3, shape};
    const AdapterPass pass{41, true};
    std::mt19937 engine(5);
    std::vector<float> x = random_values(static_cast<std::size_t>(c.rows * c.in), engine);
    std::vector<float> a = random_values(static_cast<std::size_t>(c.in * c.rank), engine, 0.5f);
    std::vector<float> b = random_values(static_cast<std::size_t>(c.rank * c.out), engine, 0.5f);
    const std::vector<float> w = random_values(static_cast<std::size_t>(c.rows * c.out), engine);
    std::vector<float> scratch(static_cast<std::size_t>(adapter.scratch_floats(shape)));
    std::vector<float> dx(x.size(), 0.25f), da(a.size(), 0.0f), db(b.size(), 0.0f);  // dx accumulates onto 0.25
    const float* values[] = {a.data(), b.data()};
    float* grads[] = {da.data(), db.data()};
    adapter.backward(ops, matrix, pass, dx.data(), w.data(), x.data(), AdapterTensors{values, grads},
                     Scratch{scratch.data(), static_cast<std::int64_t>(scratch.size())});
    // The objective is linear in each of x, A and B alone: central differences are exact but for rounding.
    const auto check = [&](std::vector<float>& variable, const std::vector<float>& analytic, float offset,
                           const char* name) {
      for (std::size_t i = 0; i < variable.size(); ++i) {
        const float kept = variable[i];
        const float step = 1e-2f;
        variable[i] = kept + step;
        const double up = objective(adapter, ops, matrix, pass, x, a, b, w, scratch);
        variable[i] = kept - step;
        const double down = objective(adapter, ops, matrix, pass, x, a, b, w, scratch);
        variable[i] = kept;
        EXPECT_NEAR(analytic[i] - offset, (up - down) / (2.0 * step), 2e-3) << name << "[" << i << "]";
      }
    };
    check(x, dx, 0.25f, "x");
    check(a, da, 0.0f, "A");
    check(b, db, 0.0f, "B");
    // Dropout zeroes some inputs' gradients, and only with dropout.
    int zero_rows = 0;
    for (std::size_t i = 0; i < dx.size(); ++i) zero_rows += dx[i] == 0.25f ? 1 : 0;
    EXPECT_EQ(zero_rows > 0, dropout > 0.0);
  }
}

// The merged matrix gives the base product plus the adapter's (evaluation, no dropout), in both layouts.
TEST(Lora, MergeFoldsTheAdapterIntoEitherLayout) {
  auto backend = make_cpu_backend(0);
  Ops& ops = backend->ops();
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    const std::int64_t N = 4, in = 6, out = 5;
    LoraAdapter adapter({3, 12.0, 0.5});
    const MatmulShape shape{N, in, out, layout};
    std::mt19937 engine(9);
    const std::vector<float> x = random_values(static_cast<std::size_t>(N * in), engine);
    std::vector<float> weight = random_values(static_cast<std::size_t>(in * out), engine);
    const std::vector<float> a = random_values(static_cast<std::size_t>(in * 3), engine);
    const std::vector<float> b = random_values(static_cast<std::size_t>(3 * out), engine);
    std::vector<float> adapted(static_cast<std::size_t>(N * out)), merged(adapted.size());
    std::vector<float> scratch(static_cast<std::size_t>(adapter.scratch_floats(shape)));
    ops.matmul_forward(adapted.data(), x.data(), Weight{weight.data()}, nullptr, shape, {});
    const float* values[] = {a.data(), b.data()};
    adapter.forward(ops, {"m", "q", 0, 0, shape}, AdapterPass{7, false}, adapted.data(), x.data(),
                    AdapterTensors{values, {}}, Scratch{scratch.data(), static_cast<std::int64_t>(scratch.size())});
    const std::span<const float> spans[] = {a, b};
    adapter.merge(weight, shape, spans);
    ops.matmul_forward(merged.data(), x.data(), Weight{weight.data()}, nullptr, shape, {});
    for (std::size_t i = 0; i < merged.size(); ++i) EXPECT_NEAR(merged[i], adapted[i], 1e-4f) << i;
  }
}

std::string lora_table(const std::string& family, int rank = 4, double dropout = 0.0) {
  const std::string targets = family == "llama" ? "[\"q\", \"v\", \"down\"]" : "[\"qkv\", \"fc_proj\"]";
  return "[[strategy]]\nplugin = \"lora\"\nrank = " + std::to_string(rank) +
         "\nalpha = 8.0\ndropout = " + std::to_string(dropout) + "\ntargets = " + targets + "\n";
}

bool is_adapter(const std::string& name) {
  return name.ends_with(".lora_A") || name.ends_with(".lora_B");
}

// B starts at zero, so the first forward is the base model's bit for bit; then only the adapters
// train: B from step 1 (A's gradient is zero while B is), A from step 2; the base stays as it was
// and keeps no gradient, optimizer state or master.
TEST(Lora, StartsAtTheBaseAndTrainsOnlyTheAdapters) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const StackRun base = run_stack(family, "lora_base", "", 1);
    const StackRun initial = run_stack(family, "lora_initial", lora_table(family.name), 0);
    const StackRun one = run_stack(family, "lora_one", lora_table(family.name), 1);
    const StackRun three = run_stack(family, "lora_three", lora_table(family.name), 3);
    EXPECT_EQ(one.losses[0], base.losses[0]) << "B = 0: the adapted model is the base";
    int adapters = 0;
    for (const auto& [name, weight] : three.named_weights) {
      if (!is_adapter(name)) {
        EXPECT_EQ(weight, initial.named_weights.at(name)) << name << " is frozen";
        EXPECT_EQ(one.named_grads.count(name), 0u) << name << " has no gradient row";
        continue;
      }
      ++adapters;
      const bool is_b = name.ends_with("lora_B");
      EXPECT_NE(one.named_weights.at(name), initial.named_weights.at(name)) << name << " after step 1";
      if (is_b) {
        EXPECT_EQ(initial.named_weights.at(name), std::vector<float>(weight.size(), 0.0f)) << name << " starts at 0";
      }
      EXPECT_NE(weight, initial.named_weights.at(name)) << name << " after step 3";
    }
    EXPECT_EQ(adapters, family.name == "llama" ? 4 * 3 * 2 : 4 * 2 * 2);
    std::printf("%s: grads %llu vs %llu bytes, optimizer %llu vs %llu bytes, loss %.4f -> %.4f\n", family.name.c_str(),
                static_cast<unsigned long long>(peak(three.device, MemoryCategory::grads)),
                static_cast<unsigned long long>(peak(base.device, MemoryCategory::grads)),
                static_cast<unsigned long long>(peak(three.device, MemoryCategory::optimizer)),
                static_cast<unsigned long long>(peak(base.device, MemoryCategory::optimizer)), three.losses.front(),
                three.losses.back());
    EXPECT_LT(peak(three.device, MemoryCategory::grads), peak(base.device, MemoryCategory::grads) / 4);
    EXPECT_LT(peak(three.device, MemoryCategory::optimizer), peak(base.device, MemoryCategory::optimizer) / 4);
  }
}

// PEFT's trap (adapters that train nothing under checkpointing) cannot happen here: the adapters
// train from step 1 with checkpointing on, and every strategy on top is bitwise neutral, dropout
// included (its masks are the same in the recomputed forward).
TEST(Lora, CheckpointingAndStreamingAreBitwiseNeutralAndAdaptersStillTrain) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    const std::string adapted = lora_table(family.name, 4, 0.2);
    const StackRun initial = run_stack(family, "lora_initial", adapted, 0);
    const StackRun plain = run_stack(family, "lora_plain", adapted, 3);
    for (const std::string& strategy :
         {kBlockCheckpoint, kStreaming, std::string("[[strategy]]\nplugin = \"checkpoint\"\nmode = \"selective\"\n"),
          std::string("[[strategy]]\nplugin = \"checkpoint\"\nmode = \"cheap\"\n")}) {
      const StackRun on_top = run_stack(family, "lora_strategy", adapted + strategy, 3);
      expect_bitwise_equal(plain, on_top);
      for (const auto& [name, weight] : on_top.named_weights) {
        if (is_adapter(name)) {
          EXPECT_NE(weight, initial.named_weights.at(name)) << name;
        }
      }
    }
    const StackRun no_dropout = run_stack(family, "lora_no_dropout", lora_table(family.name), 3);
    EXPECT_NE(no_dropout.losses.back(), plain.losses.back()) << "dropout changes training";
  }
}

// A bf16, int8 or nf4 base (QLoRA) is frozen in its storage dtype with no master; the adapters
// train in f32.
TEST(Lora, TrainsOnBf16Int8AndNf4Bases) {
  for (const auto& family : kFamilies) {
    SCOPED_TRACE(family.name);
    for (const std::string precision :
         {"[precision]\nplugin = \"bf16\"\n", "[precision]\nplugin = \"int8\"\nblock_size = 16\n",
          "[precision]\nplugin = \"nf4\"\n"}) {
      SCOPED_TRACE(precision);
      const StackRun initial = run_stack(family, "lora_lowbit_initial", lora_table(family.name), 0, precision);
      const StackRun trained = run_stack(family, "lora_lowbit", lora_table(family.name), 3, precision);
      const StackRun full = run_stack(family, "lora_lowbit_full", "", 1, precision);
      for (const auto& [name, weight] : trained.named_weights) {
        if (is_adapter(name)) {
          EXPECT_NE(weight, initial.named_weights.at(name)) << name;
        } else {
          EXPECT_EQ(weight, initial.named_weights.at(name)) << name;
        }
      }
      EXPECT_LT(peak(trained.device, MemoryCategory::optimizer), peak(full.device, MemoryCategory::optimizer) / 4)
          << "no masters for the frozen base";
      expect_bitwise_equal(
          trained, run_stack(family, "lora_lowbit_ckpt", lora_table(family.name) + kBlockCheckpoint, 3, precision));
    }
  }
}

TEST(Lora, RefusesBadKeys) {
  // The tiny manifest: GPT-2, d_model 32 (qkv is 32 x 96, attn_proj 32 x 32).
  const std::string lora = "[[strategy]]\nplugin = \"lora\"\n";
  const std::string wrong_target = test::stack_refusal(lora + "targets = [\"qkv\", \"q\"]\n");
  EXPECT_NE(wrong_target.find("targets: 'q' is not a matrix of a gpt2 block (it has qkv, attn_proj, fc, fc_proj)"),
            std::string::npos)
      << wrong_target;
  const std::string llama_target =
      test::stack_refusal(lora + "targets = [\"qkv\"]\n", {"model.arch=\"llama\"", "model.d_ff=48"});
  EXPECT_NE(llama_target.find("'qkv' is not a matrix of a llama block (it has q, k, v, o, gate, up, down)"),
            std::string::npos)
      << llama_target;
  EXPECT_NE(test::stack_refusal(lora + "rank = 0\n").find("rank"), std::string::npos);
  const std::string full_rank = test::stack_refusal(lora + "rank = 32\ntargets = [\"attn_proj\"]\n");
  EXPECT_NE(full_rank.find("rank = 32 must be below min(in, out) = 32 of target 'attn_proj'"), std::string::npos)
      << full_rank;
  EXPECT_NE(test::stack_refusal(lora + "dropout = 1.0\n").find("dropout must be below 1"), std::string::npos);
  EXPECT_NE(test::stack_refusal(lora + "targets = []\n").find("targets"), std::string::npos);
  EXPECT_EQ(test::stack_refusal(lora + "rank = 31\ntargets = [\"attn_proj\", \"fc\"]\n"), "");
}

}  // namespace
}  // namespace strata
