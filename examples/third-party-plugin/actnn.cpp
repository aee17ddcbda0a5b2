// A third-party memory strategy: ActNN-style activation compression (Chen et al., 2021, "ActNN:
// Reducing Training Memory Footprint via 2-Bit Activation Compressed Training"), here at 8 bits.
// Every f32 activation a block keeps for its backward is stored as one byte per value: per group
// of `group` consecutive values, the minimum and the step (max - min) / 255 as f32, and each value
// as round((x - min) / step) with stochastic rounding (up with probability equal to the fraction),
// so the code is unbiased and the gradients it gives are too. The backward reads min + code step.
//
//   group = 256   values per group (a code costs 1 + 8 / group bytes a value: 0.26x f32)
//
// It offers an activation codec (strata/activation_codec.hpp) through the memory strategy it is,
// so the host accounts the codes, plans them (`strata plan`), and lets checkpointing drop them and
// offloading move them like the values they replace. The random bits come from the codec call
// (the micro batch's sequence number and the layer) and the tensor's name, so a run encodes the
// same way every time and a resumed run continues as the uninterrupted one.
//
// The loops run on the host: in place where the backend runs host kernels (the CPU), elsewhere on
// a host copy of the values and the code (two transfers a tensor; a GPU plugin would bring its
// kernel instead, strata/kernel.hpp). It includes only SDK headers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/counter_random.hpp"
#include "strata/plugin.hpp"

namespace {

using namespace strata;

// The code's layout: mins (f32 x groups), steps (f32 x groups), then one byte a value.
struct CodeLayout {
  std::int64_t count = 0, group = 0, groups = 0;
  std::uint64_t bytes() const noexcept {
    return 2 * sizeof(float) * static_cast<std::uint64_t>(groups) + static_cast<std::uint64_t>(count);
  }
};

CodeLayout code_layout(std::int64_t count, std::int64_t group) noexcept {
  return {count, group, (count + group - 1) / group};
}

void encode_groups(const CodeLayout& layout, std::uint64_t seed, const float* values, std::byte* code) noexcept {
  float* mins = reinterpret_cast<float*>(code);
  float* steps = mins + layout.groups;
  std::uint8_t* codes = reinterpret_cast<std::uint8_t*>(steps + layout.groups);
#pragma omp parallel for schedule(static)
  for (std::int64_t g = 0; g < layout.groups; ++g) {
    const std::int64_t first = g * layout.group, last = std::min(layout.count, first + layout.group);
    float low = values[first], high = values[first];
    for (std::int64_t i = first; i < last; ++i) low = std::min(low, values[i]), high = std::max(high, values[i]);
    const float step = (high - low) / 255.0f;
    const float inverse = step > 0.0f ? 1.0f / step : 0.0f;
    mins[g] = low, steps[g] = step;
    for (std::int64_t i = first; i < last; ++i) {
      const float uniform = static_cast<float>(splitmix64(seed + static_cast<std::uint64_t>(i)) >> 40) * 0x1.0p-24f;
      const float level = std::floor((values[i] - low) * inverse + uniform);
      codes[i] = static_cast<std::uint8_t>(std::clamp(level, 0.0f, 255.0f));
    }
  }
}

void decode_groups(const CodeLayout& layout, const std::byte* code, float* values) noexcept {
  const float* mins = reinterpret_cast<const float*>(code);
  const float* steps = mins + layout.groups;
  const std::uint8_t* codes = reinterpret_cast<const std::uint8_t*>(steps + layout.groups);
#pragma omp parallel for schedule(static)
  for (std::int64_t g = 0; g < layout.groups; ++g) {
    const std::int64_t first = g * layout.group, last = std::min(layout.count, first + layout.group);
    for (std::int64_t i = first; i < last; ++i) values[i] = mins[g] + static_cast<float>(codes[i]) * steps[g];
  }
}

class Int8Codec final : public ActivationCodec {
 public:
  Int8Codec(HostServices& host, std::int64_t group) : host_(host), group_(group) {}

  std::uint64_t code_bytes(const TensorInfo& activation) const noexcept override {
    if (activation.dtype != DType::f32) return 0;
    std::int64_t count = 1;
    for (const std::int64_t extent : activation.shape) count *= extent;
    return count > 0 ? code_layout(count, group_).bytes() : 0;
  }

  Status encode(Ops& ops, const CodecCall& call, const TensorView& values, const TensorView& code) noexcept override {
    const CodeLayout layout = code_layout(values.count, group_);
    const std::uint64_t seed =
        splitmix64(call.sequence ^ splitmix64(static_cast<std::uint64_t>(call.layer) ^ name_hash(values.name)));
    if (ops.supports(Op::host_kernel)) {
      ops.host_kernel("actnn.encode", 5.0 * static_cast<double>(values.count), [&]() noexcept {
        encode_groups(layout, seed, values.f32(), static_cast<std::byte*>(code.data));
      });
      return {};
    }
    return through_host(ops, values.count, [&](float* host_values, std::byte* host_code) {
      ops.copy_to_host(host_values, values.data, values.bytes());
      encode_groups(layout, seed, host_values, host_code);
      ops.copy_from_host(code.data, host_code, layout.bytes());
    });
  }

  Status decode(Ops& ops, const CodecCall&, const TensorView& code, const TensorView& values) noexcept override {
    const CodeLayout layout = code_layout(values.count, group_);
    if (ops.supports(Op::host_kernel)) {
      ops.host_kernel("actnn.decode", 5.0 * static_cast<double>(values.count), [&]() noexcept {
        decode_groups(layout, static_cast<const std::byte*>(code.data), values.f32());
      });
      return {};
    }
    return through_host(ops, values.count, [&](float* host_values, std::byte* host_code) {
      ops.copy_to_host(host_code, code.data, layout.bytes());
      decode_groups(layout, host_code, host_values);
      ops.copy_from_host(values.data, host_values, values.bytes());
    });
  }

 private:
  // Runs `body` on host buffers big enough for the largest tensor seen (grown as needed), for a
  // backend whose memory the host cannot touch.
  template <typename Body>
  Status through_host(Ops& ops, std::int64_t count, Body&& body) noexcept {
    if (!ops.supports(Op::copy_to_host) || !ops.supports(Op::copy_from_host))
      return Status::error("actnn: backend '" + std::string(ops.backend()) + "' runs neither host kernels nor copies");
    try {
      const std::uint64_t need = static_cast<std::uint64_t>(count) * sizeof(float) + code_layout(count, group_).bytes();
      if (staging_.size() < need) staging_ = staging_.empty() ? host_.memory().host_bytes(need) : grow(need);
    } catch (const std::exception& error) {
      return Status::error(std::string("actnn: no host memory for the staging copy: ") + error.what());
    }
    body(reinterpret_cast<float*>(staging_.data()),
         staging_.data() + static_cast<std::uint64_t>(count) * sizeof(float));
    return {};
  }

  std::span<std::byte> grow(std::uint64_t bytes) {
    host_.memory().release(staging_.data());
    return host_.memory().host_bytes(bytes);
  }

  HostServices& host_;
  std::int64_t group_;
  std::span<std::byte> staging_;  // values (f32), then the code
};

class ActNN final : public MemoryStrategy {
 public:
  ActNN(ConfigView& config, HostServices& host) : codec_(host, config.get_int("group", 256, 16, 1 << 20)) {}
  ActivationCodec* activation_codec() noexcept override { return &codec_; }

 private:
  Int8Codec codec_;
};

constexpr const char* kKeys[] = {"group"};
const FactoryDescriptor kFactories[] = {make_factory<MemoryStrategy, ActNN>(
    "actnn", "Saved activations as 8-bit per-group codes with stochastic rounding (ActNN)", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(actnn, "1.0.0", kFactories)
