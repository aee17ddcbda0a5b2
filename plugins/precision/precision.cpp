// Precision policies: how the model stores its numbers. Compute is f32 under both.
//
//   fp32   f32 storage everywhere.
//   bf16   bf16 storage, f32 compute. The weight matrices and the activations a block keeps for
//          backward are stored as bf16 (half the bytes); every kernel widens what it reads to
//          f32. The optimizer updates f32 master weights (optimizer state, so the offload
//          strategy can move them to the host) and the model reads their bf16 rounding.
//          Gradients stay f32.
//            weights     = "bf16" | "f32"   wte, wpe and the blocks' projection matrices
//            activations = "bf16" | "f32"   the block activations kept for backward
//            rounding    = "nearest" | "stochastic"
//                          how the updated masters become bf16 weights: to nearest even, or
//                          stochastically (unbiased; CPU backend; stochastic_rounding.hpp)
//
// Neither scales the loss (bf16 keeps f32's exponent range). Both skip a step whose gradients are
// not finite, and count it, unless skip_nonfinite = false makes it an error.
#include <optional>
#include <string>

#include "stochastic_rounding.hpp"
#include "strata/plugin_support/storage_precision.hpp"

namespace {

using namespace strata;
using plugin_support::storage_key;
using plugin_support::StoragePrecision;

class Fp32 final : public StoragePrecision {
 public:
  Fp32(ConfigView& config, HostServices&) : StoragePrecision(config, DType::f32, DType::f32) {}
};

class Bf16 final : public StoragePrecision {
 public:
  Bf16(ConfigView& config, HostServices& host)
      : StoragePrecision(config, storage_key(config, "weights"), storage_key(config, "activations")) {
    if (config.get_string("rounding", "nearest", {"nearest", "stochastic"}) != "stochastic") return;
    if (weight_storage() != DType::bf16)
      config.report_error("rounding", "rounding = \"stochastic\" rounds bf16 weights, and weights = \"f32\" has none");
    else if (host.target().backend != "cpu")
      config.report_error("rounding",
                          "rounding = \"stochastic\" runs on device.kind = \"cpu\" only (this run is on \"" +
                              std::string(host.target().backend) + "\")");
    else
      rounding_.emplace();
  }
  Bf16Rounding* bf16_rounding() noexcept override { return rounding_ ? &*rounding_ : nullptr; }

 private:
  std::optional<plugins::StochasticBf16Rounding> rounding_;
};

constexpr const char* kFp32Keys[] = {"skip_nonfinite"};
constexpr const char* kBf16Keys[] = {"weights", "activations", "rounding", "skip_nonfinite"};
const FactoryDescriptor kFactories[] = {
    make_factory<PrecisionPolicy, Fp32>("fp32", "f32 everywhere", name_list(kFp32Keys)),
    make_factory<PrecisionPolicy, Bf16>("bf16", "bf16 storage of weights and activations, f32 compute",
                                        name_list(kBf16Keys))};

}  // namespace

STRATA_DEFINE_PLUGIN(precision, "1.1.0", kFactories)
