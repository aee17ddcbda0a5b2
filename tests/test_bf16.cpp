// bf16 storage with f32 compute: the conversions, the chunked bf16 matmul against the f32 one, and
// the model stored as bf16 against the same model in f32 (bounded differences, measured bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/device/backend.hpp"
#include "core/executor/executor.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/matmul.hpp"
#include "plugins/precision/stochastic_rounding.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::vector<float> values(count);
  std::uint32_t state = seed;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  return values;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double{a[i]} - double{b[i]}));
  return worst;
}

TEST(Bf16Kernels, NarrowRoundsToNearestEvenAndWidenIsExact) {
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to the even one (1).
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6.
  std::vector<float> values = {1.0f,  1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                               -2.5f, 1e-40f,         std::numeric_limits<float>::quiet_NaN()};
  std::vector<std::uint16_t> stored(values.size());
  cpu::narrow_and_round(stored.data(), values.data(), static_cast<std::int64_t>(values.size()));
  EXPECT_EQ(stored[0], 0x3f80);
  EXPECT_EQ(values[1], 1.0f);
  EXPECT_EQ(values[2], 1.0f + 0x1p-6f);
  EXPECT_EQ(values[3], -2.5f);  // exactly representable
  EXPECT_TRUE(std::isnan(values[5]));
  std::vector<float> widened(values.size());
  cpu::widen(widened.data(), stored.data(), static_cast<std::int64_t>(stored.size()));
  for (std::size_t i = 0; i + 1 < values.size(); ++i) EXPECT_EQ(widened[i], values[i]) << i;
}

// The chunked bf16 matmul computes the same products as the f32 one on the widened weight; only
// the order of the f32 sums may differ (chunks of the input dimension for in_out, of the output
// dimension for out_in). Scratch of one float still widens one whole stored row at a time.
// Stochastic rounding is unbiased: over all 2^16 random draws, the mean of the rounded values is
// the value itself, exactly; bf16 values stay, non-finite values round as to nearest, and a
// finite value never becomes infinite.
TEST(Bf16Kernels, StochasticRoundingIsUnbiasedAndKeepsSpecialValues) {
  for (const float value : {1.0f + 0x1.0p-9f, -3.14159f, 1e-30f, 65504.123f}) {
    double sum = 0.0;
    for (std::uint32_t random = 0; random < 65536; ++random)
      sum += bf16_to_f32(plugins::round_bf16_stochastic(value, static_cast<std::uint16_t>(random)));
    EXPECT_EQ(sum / 65536.0, static_cast<double>(value)) << value;
  }
  EXPECT_EQ(plugins::round_bf16_stochastic(1.5f, 0xffff), f32_to_bf16(1.5f));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(bf16_to_f32(plugins::round_bf16_stochastic(nan, 0x1234))));
  EXPECT_EQ(plugins::round_bf16_stochastic(std::numeric_limits<float>::infinity(), 0x8000),
            f32_to_bf16(std::numeric_limits<float>::infinity()));
  const float largest = std::numeric_limits<float>::max();
  EXPECT_EQ(plugins::round_bf16_stochastic(largest, 0xffff), 0x7f7f) << "the largest finite bf16";
}

TEST(Bf16Kernels, ChunkedMatmulMatchesF32OnTheWidenedWeight) {
  const std::int64_t rows = 6, in_features = 40, out_features = 24;
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in})
    for (const std::int64_t scratch_elements : {std::int64_t{1}, std::int64_t{100}, in_features * out_features}) {
      SCOPED_TRACE(layout == WeightLayout::in_out ? "in_out" : "out_in");
      const std::vector<float> inp = random_values(rows * in_features, 1), bias = random_values(out_features, 2);
      const std::vector<float> dout = random_values(rows * out_features, 3);
      std::vector<float> weight = random_values(in_features * out_features, 4);
      std::vector<std::uint16_t> stored(weight.size());
      cpu::narrow_and_round(stored.data(), weight.data(), static_cast<std::int64_t>(weight.size()));
      std::vector<float> scratch(static_cast<std::size_t>(std::max(scratch_elements, in_features)));

      std::vector<float> expected(rows * out_features), actual(rows * out_features);
      cpu::matmul_forward(expected.data(), inp.data(), weight.data(), bias.data(), rows, in_features, out_features,
                          layout);
      cpu::matmul_forward_bf16(actual.data(), inp.data(), stored.data(), bias.data(), rows, in_features, out_features,
                               layout, scratch.data(), scratch_elements);
      EXPECT_LT(max_abs_difference(expected, actual), 1e-5) << "forward, scratch " << scratch_elements;

      std::vector<float> dinp_expected(rows * in_features, 0.5f), dinp_actual = dinp_expected;
      std::vector<float> dweight_expected(weight.size(), 0.25f), dweight_actual = dweight_expected;
      std::vector<float> dbias_expected(out_features, 0.0f), dbias_actual = dbias_expected;
      cpu::matmul_backward(dinp_expected.data(), dweight_expected.data(), dbias_expected.data(), dout.data(),
                           inp.data(), weight.data(), rows, in_features, out_features, layout);
      cpu::matmul_backward_bf16(dinp_actual.data(), dweight_actual.data(), dbias_actual.data(), dout.data(), inp.data(),
                                stored.data(), rows, in_features, out_features, layout, scratch.data(),
                                scratch_elements);
      EXPECT_LT(max_abs_difference(dinp_expected, dinp_actual), 1e-5) << "dinp, scratch " << scratch_elements;
      EXPECT_EQ(dweight_expected, dweight_actual) << "the weight gradient does not read the weight";
      EXPECT_EQ(dbias_expected, dbias_actual);
    }
}

TEST(Bf16Kernels, EmbeddingReadsBf16TablesExactly) {
  const std::int64_t batch = 2, seq_len = 3, channels = 8, vocab = 5;
  std::vector<float> wte = random_values(vocab * channels, 5), wpe = random_values(seq_len * channels, 6);
  std::vector<std::uint16_t> wte_stored(wte.size()), wpe_stored(wpe.size());
  cpu::narrow_and_round(wte_stored.data(), wte.data(), static_cast<std::int64_t>(wte.size()));
  cpu::narrow_and_round(wpe_stored.data(), wpe.data(), static_cast<std::int64_t>(wpe.size()));
  const std::vector<std::int32_t> tokens = {4, 0, 2, 2, 1, 3};
  std::vector<float> expected(batch * seq_len * channels), actual(expected.size());
  cpu::embedding_forward(expected.data(), tokens.data(), wte.data(), wpe.data(), batch, seq_len, channels);
  cpu::embedding_forward_bf16(actual.data(), tokens.data(), wte_stored.data(), wpe_stored.data(), batch, seq_len,
                              channels);
  EXPECT_EQ(expected, actual);
}

// One tiny model, stored as `storage`, after one forward and backward on a fixed batch.
struct Pass {
  double loss = 0.0;
  std::vector<std::vector<float>> grads;  // per parameter
  TensorTable table;
  ArenaStats device;
};

Pass forward_backward(StorageTypes storage) {
  const GPT2Config config{3, 2, 32, 64, 16};
  const int batch = 4;
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model model(config, *device, *attention, model_options(batch, f32_state_layout(2), storage));
  model.init_weights(11);
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  Executor executor(model, optimizer, precision, {}, {});
  const test::PatternedBatch fixed =
      test::patterned_batch(static_cast<std::size_t>(batch) * config.seq_len, config.vocab);
  const MicroBatch micro{fixed.inputs, fixed.targets};
  model.store().zero_grads();
  Pass pass;
  pass.loss = executor.forward_backward(1, {&micro, 1}, Phase::full);
  for (const ParameterRows& rows : model.parameters()) {
    const std::span<const float> grad = test::f32(model, rows.grad);
    pass.grads.emplace_back(grad.begin(), grad.end());
  }
  pass.table = model.table();
  pass.device = device->device_memory().stats();
  return pass;
}

double relative_error(const std::vector<float>& expected, const std::vector<float>& actual) {
  double difference = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference += (double{expected[i]} - actual[i]) * (double{expected[i]} - actual[i]);
    norm += double{expected[i]} * expected[i];
  }
  return std::sqrt(difference / std::max(norm, 1e-30));
}

// bf16 keeps 8 significant bits (relative rounding 2^-9): the loss moves by far less than that and
// every gradient tensor stays within a few percent of f32's.
TEST(Bf16Storage, LossAndGradientsStayWithinBoundsOfF32) {
  const Pass f32 = forward_backward({DType::f32, DType::f32});
  for (const StorageTypes& storage : {StorageTypes{DType::bf16, DType::f32}, StorageTypes{DType::f32, DType::bf16},
                                      StorageTypes{DType::bf16, DType::bf16}}) {
    const Pass bf16 = forward_backward(storage);
    double worst = 0.0;
    for (std::size_t p = 0; p < f32.grads.size(); ++p)
      worst = std::max(worst, relative_error(f32.grads[p], bf16.grads[p]));
    std::printf("weights %s, activations %s: loss %.6f vs f32 %.6f, worst gradient relative error %.4f\n",
                std::string(dtype_name(storage.weights)).c_str(), std::string(dtype_name(storage.activations)).c_str(),
                bf16.loss, f32.loss, worst);
    EXPECT_NE(bf16.loss, f32.loss) << "bf16 storage must change the numbers a little";
    EXPECT_LT(std::abs(bf16.loss - f32.loss), 1e-3 * f32.loss);
    EXPECT_LT(worst, 0.05);
  }
}

// The table describes bf16 rows at half the bytes, and the allocator measures the same totals.
TEST(Bf16Storage, StoredBytesHalveAndTheAllocatorAgreesWithTheTable) {
  const Pass f32 = forward_backward({DType::f32, DType::f32});
  const Pass bf16 = forward_backward({DType::bf16, DType::bf16});
  const CategoryBytes f32_rows = f32.table.totals(Home::device), bf16_rows = bf16.table.totals(Home::device);
  const auto at = [](const CategoryBytes& bytes, MemoryCategory category) { return bytes[category_index(category)]; };
  std::uint64_t matrix_bytes_f32 = 0, master_bytes = 0;
  for (const TensorRow& row : bf16.table.rows()) {
    if (row.element == ElementType::bf16 && row.category == MemoryCategory::weights)
      matrix_bytes_f32 += static_cast<std::uint64_t>(row.elements()) * 4;
    if (row.name.ends_with(".master")) master_bytes += row.bytes();
  }
  // Weights: the matrices at 2 bytes, the vectors still at 4. Their f32 masters are optimizer state.
  EXPECT_LT(at(bf16_rows, MemoryCategory::weights),
            at(f32_rows, MemoryCategory::weights) - matrix_bytes_f32 / 2 + 64 * 16);
  EXPECT_EQ(at(bf16_rows, MemoryCategory::optimizer), at(f32_rows, MemoryCategory::optimizer) + master_bytes);
  EXPECT_EQ(at(bf16_rows, MemoryCategory::grads), at(f32_rows, MemoryCategory::grads));
  // Persistent categories: the allocator's live bytes equal the table's rows.
  for (const MemoryCategory category :
       {MemoryCategory::weights, MemoryCategory::grads, MemoryCategory::optimizer, MemoryCategory::workspace})
    EXPECT_EQ(at(bf16.device.live, category), at(bf16_rows, category)) << category_name(category);
  // Activations, as the allocator measured them at their peak (end of the forward pass).
  const std::uint64_t f32_activations = at(f32.device.peak, MemoryCategory::activations);
  const std::uint64_t bf16_activations = at(bf16.device.peak, MemoryCategory::activations);
  std::printf("peak activation bytes: f32 %llu, bf16 %llu (%.2fx); workspace %llu -> %llu\n",
              static_cast<unsigned long long>(f32_activations), static_cast<unsigned long long>(bf16_activations),
              static_cast<double>(bf16_activations) / static_cast<double>(f32_activations),
              static_cast<unsigned long long>(at(f32.device.peak, MemoryCategory::workspace)),
              static_cast<unsigned long long>(at(bf16.device.peak, MemoryCategory::workspace)));
  EXPECT_LT(bf16_activations, f32_activations * 7 / 10);
}

}  // namespace
}  // namespace strata
