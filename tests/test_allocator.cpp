#include <gtest/gtest.h>

#include "core/device/backend.hpp"
#include "core/device/memory_limit_exceeded.hpp"
#include "core/executor/executor.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

TEST(Allocator, EnforcesLimitWithATypedErrorNamingTheBreakdown) {
  Allocator arena("test arena", make_aligned_host_resource(), 1024);
  Buffer weights = arena.allocate(512, MemoryCategory::weights);
  Buffer grads = arena.allocate(256, MemoryCategory::grads);
  try {
    (void)arena.allocate(512, MemoryCategory::activations, "checkpoint");
    FAIL() << "the limit was not enforced";
  } catch (const MemoryLimitExceeded& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("requested 512 B of activations"), std::string::npos) << message;
    EXPECT_NE(message.find("checkpoint"), std::string::npos) << message;
    EXPECT_NE(message.find("weights=512 B"), std::string::npos) << message;
    EXPECT_NE(message.find("grads=256 B"), std::string::npos) << message;
    EXPECT_NE(message.find("1.0 KiB limit"), std::string::npos) << message;
  }
  EXPECT_EQ(arena.live_total(), 768u) << "a refused request must not change live bytes";
}

// A resource that gives no more than `capacity` bytes, as a full machine would.
class SmallResource final : public MemoryResource {
 public:
  explicit SmallResource(std::uint64_t capacity) : capacity_(capacity) {}
  void* allocate(std::uint64_t bytes) override {
    if (bytes > capacity_ - used_) throw std::bad_alloc();
    used_ += bytes;
    return host_->allocate(bytes);
  }
  void deallocate(void* pointer, std::uint64_t bytes) noexcept override {
    used_ -= bytes;
    host_->deallocate(pointer, bytes);
  }

 private:
  std::uint64_t capacity_, used_ = 0;
  std::unique_ptr<MemoryResource> host_ = make_aligned_host_resource();
};

// No limit set and the memory itself runs out: the message says so, not "a 0 B limit".
TEST(Allocator, SaysTheMemoryRanOutWhenNoLimitIsSet) {
  Allocator arena("test arena", std::make_unique<SmallResource>(4096));
  try {
    (void)arena.allocate(1u << 20, MemoryCategory::weights, "wte");
    FAIL() << "the resource's refusal was not raised";
  } catch (const MemoryLimitExceeded& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find("0 B limit"), std::string::npos) << message;
    EXPECT_NE(message.find("test arena: out of memory: wte requested 1.0 MiB of weights, which the memory itself "
                           "could not provide, with 0 B live and 0 B held (no memory_limit is set)"),
              std::string::npos)
        << message;
    const std::string named = e.naming("wte", "").what();
    EXPECT_NE(named.find("out of memory: wte (1.0 MiB of weights), which the memory itself could not provide"),
              std::string::npos)
        << named;
  }
}

TEST(Allocator, TracksLivePeakWindowAndOwners) {
  Allocator arena("test arena", make_aligned_host_resource());
  {
    Buffer a = arena.allocate(1000, MemoryCategory::activations, "core");  // rounds to 1024
    Buffer b = arena.allocate(64, MemoryCategory::optimizer, "offload");
    EXPECT_EQ(arena.live()[category_index(MemoryCategory::activations)], 1024u);
    EXPECT_EQ(arena.live_by_owner().at("offload"), 64u);
  }
  ArenaStats stats = arena.stats();
  EXPECT_EQ(stats.live[category_index(MemoryCategory::activations)], 0u);
  EXPECT_EQ(stats.peak[category_index(MemoryCategory::activations)], 1024u);
  EXPECT_EQ(stats.peak_total, 1088u);
  arena.reset_window();
  Buffer c = arena.allocate(128, MemoryCategory::workspace);
  stats = arena.stats();
  EXPECT_EQ(stats.window_peak_total, 128u);
  EXPECT_EQ(stats.peak_total, 1088u);
  EXPECT_GE(stats.reserved, 128u);
}

// Snapshots device memory when the last layer's forward is done: every row of the table is live then.
class SnapshotAtEndOfForward final : public MemoryStrategy {
 public:
  Status after_forward(HookContext& context) noexcept override {
    if (context.layer() == context.n_layer() - 1) snapshot = context.memory();
    return {};
  }
  MemorySnapshot snapshot;
};

TEST(Allocator, LiveBytesPerCategoryEqualTheTensorTable) {
  const GPT2Config config{3, 2, 32, 256, 16};
  auto device = make_cpu_backend(0);
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  GPT2Model model(config, *device, *attention, model_options(2, f32_state_layout(2)));
  model.init_weights(1);
  test::PlainSgd optimizer;
  test::PlainFp32 precision;
  SnapshotAtEndOfForward probe;
  Executor executor(model, optimizer, precision, {&probe}, {});
  std::vector<std::int32_t> tokens(2 * 16, 5);
  const MicroBatch micro{tokens, tokens};
  executor.forward_backward(1, {&micro, 1}, Phase::full);
  const CategoryBytes table = model.table().totals(Home::device);
  for (MemoryCategory category : kAllMemoryCategories)
    EXPECT_EQ(probe.snapshot.device_live[category_index(category)], table[category_index(category)])
        << category_name(category);
  // After the step only persistent rows remain.
  EXPECT_EQ(device->device_memory().live()[category_index(MemoryCategory::activations)], 0u);
  EXPECT_EQ(device->device_memory().stats().peak[category_index(MemoryCategory::activations)],
            table[category_index(MemoryCategory::activations)]);
}

TEST(Allocator, ModelOverBudgetFailsCleanly) {
  const GPT2Config config{2, 2, 32, 256, 16};
  auto device = make_cpu_backend(64 * 1024);  // far too small for the weights
  auto attention = cpu::make_attention_kernel(cpu::AttentionImpl::fast);
  EXPECT_THROW(GPT2Model(config, *device, *attention, model_options(2, f32_state_layout(2))), MemoryLimitExceeded);
  EXPECT_EQ(device->device_memory().live_total(), 0u) << "a failed build must release what it took";
}

}  // namespace
}  // namespace strata
