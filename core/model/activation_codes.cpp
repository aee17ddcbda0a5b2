#include "core/model/activation_codes.hpp"

#include <algorithm>

#include "core/util/plugin_crash_report.hpp"

namespace strata {

void ActivationCodes::declare(const std::vector<StrategyCodec>& codecs,
                              const std::vector<std::vector<int>>& activation_rows, int output_kind,
                              const std::function<std::string_view(int kind)>& recomputed_by) {
  codecs_ = codecs;
  layers_.assign(activation_rows.size(), {});
  held_codes_.assign(activation_rows.size(), {});
  if (codecs_.empty()) return;
  for (std::size_t l = 0; l < activation_rows.size(); ++l)
    for (std::size_t k = 0; k < activation_rows[l].size(); ++k) {
      if (static_cast<int>(k) == output_kind) continue;
      const int value_row = activation_rows[l][k];
      const TensorRow& row = store_.table().row(value_row);
      const TensorInfo info{row.name,          row.layer,   row.shape,
                            row.element,       row.group,   row.category,
                            Residence::absent, row.bytes(), recomputed_by(static_cast<int>(k))};
      for (std::size_t c = 0; c < codecs_.size(); ++c) {
        const std::uint64_t bytes = codecs_[c].codec->code_bytes(info);
        if (bytes == 0) continue;
        const int code_row = store_.add_row(row.name + ".code", row.layer, {static_cast<std::int64_t>(bytes)},
                                            MemoryCategory::activations, TensorGroup::activations, DType::u8);
        store_.residency().set_stand_in(value_row, code_row);
        layers_[l].push_back({static_cast<int>(k), value_row, code_row, static_cast<int>(c)});
        held_codes_[l].push_back(code_row);
        ++coded_;
        break;
      }
    }
}

std::optional<CodecFailure> ActivationCodes::encode(int layer, Ops& ops, const CodecCall& call) {
  for (const Coded& coded : layers_.at(static_cast<std::size_t>(layer))) {
    if (!store_.residency().allocated(coded.value_row) || store_.residency().allocated(coded.code_row)) continue;
    store_.residency().allocate(coded.code_row);
    const StrategyCodec& owner = codecs_[static_cast<std::size_t>(coded.codec)];
    const PluginCallScope scope(owner.label, "encode", layer, call.step);
    if (const Status status = owner.codec->encode(ops, call, store_.view(coded.value_row), store_.view(coded.code_row));
        !status) {
      store_.residency().release(coded.code_row);
      return CodecFailure{owner.strategy, "encode", status.message()};
    }
    store_.residency().release(coded.value_row);
  }
  return std::nullopt;
}

std::optional<CodecFailure> ActivationCodes::decode(int layer, Ops& ops, const CodecCall& call) {
  for (const Coded& coded : layers_.at(static_cast<std::size_t>(layer))) {
    if (!store_.residency().allocated(coded.code_row)) continue;
    if (!store_.residency().allocated(coded.value_row)) {  // not recomputed meanwhile
      store_.residency().allocate(coded.value_row);
      const StrategyCodec& owner = codecs_[static_cast<std::size_t>(coded.codec)];
      const PluginCallScope scope(owner.label, "decode", layer, call.step);
      if (const Status status =
              owner.codec->decode(ops, call, store_.view(coded.code_row), store_.view(coded.value_row));
          !status)
        return CodecFailure{owner.strategy, "decode", status.message()};
    }
    store_.residency().release(coded.code_row);
  }
  return std::nullopt;
}

void ActivationCodes::release(int layer, const std::vector<int>& kinds) {
  for (const Coded& coded : layers_.at(static_cast<std::size_t>(layer)))
    if (std::find(kinds.begin(), kinds.end(), coded.kind) != kinds.end()) store_.residency().release(coded.code_row);
}

void ActivationCodes::release_all(int layer) {
  for (const Coded& coded : layers_.at(static_cast<std::size_t>(layer))) store_.residency().release(coded.code_row);
}

}  // namespace strata
