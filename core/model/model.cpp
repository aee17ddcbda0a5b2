#include "core/model/model.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

namespace strata {

std::vector<std::int64_t> Model::stored_shape(const ParameterRows& rows) const {
  return table().row(rows.param).shape;
}

int Model::activation_kind(int layer, int row) const {
  const std::vector<int>& rows = layer_activation_rows_.at(static_cast<std::size_t>(layer));
  const auto found = std::find(rows.begin(), rows.end(), row);
  return found == rows.end() ? -1 : static_cast<int>(found - rows.begin());
}

void Model::free_activation_kinds(int layer, const std::vector<int>& kinds) {
  if (trainable_.skips(layer)) return;  // a skipped block keeps its output only
  for (int kind : kinds) {
    if (recompute_op(kind).empty())
      throw std::logic_error("activation kind " + std::to_string(kind) + " is not recomputed alone");
    store_.residency().release(activation_row(layer, kind));
  }
  if (!codes_.empty()) codes_.release(layer, kinds);
}

bool Model::only_partial_activations_missing(int layer) const {
  if (trainable_.skips(layer)) return false;
  const auto& rows = layer_activation_rows_.at(static_cast<std::size_t>(layer));
  for (int kind = 0; kind < static_cast<int>(rows.size()); ++kind)
    if (recompute_op(kind).empty() && !store_.residency().allocated(activation_row(layer, kind))) return false;
  return true;
}

void Model::recompute_missing_activations(int layer) {
  auto& marks = recompute_marks_.at(static_cast<std::size_t>(layer));
  for (int kind = 0; kind < static_cast<int>(recompute_ops_.size()); ++kind) {
    if (recompute_op(kind).empty() || store_.residency().allocated(activation_row(layer, kind))) continue;
    store_.residency().allocate(activation_row(layer, kind));
    marks[static_cast<std::size_t>(kind)] = true;
  }
}

bool Model::recompute(int layer, int kind) {
  std::vector<bool>& marks = recompute_marks_.at(static_cast<std::size_t>(layer));
  const bool marked = marks.at(static_cast<std::size_t>(kind));
  marks[static_cast<std::size_t>(kind)] = false;
  return marked;
}

void Model::add_token_rows() {
  tokens_row_ = add_global_activation("act.tokens", {batch_, seq_len()}, ElementType::i32);
  targets_row_ = add_global_activation("act.targets", {batch_, seq_len()}, ElementType::i32);
}

int Model::add_global_activation(const std::string& name, std::vector<std::int64_t> shape, ElementType element) {
  const int row =
      store_.add_row(name, -1, std::move(shape), MemoryCategory::activations, TensorGroup::activations, element);
  global_activation_rows_.push_back(row);
  return row;
}

void Model::declare_activation_codes(const std::vector<StrategyCodec>& codecs) {
  codes_.declare(codecs, layer_activation_rows_, output_kind_,
                 [this](int kind) { return std::string_view(recompute_op(kind)); });
}

void Model::set_layer_activation_rows(std::vector<std::vector<int>> rows, int output_kind,
                                      const std::vector<std::pair<int, std::string>>& recomputed_alone) {
  recompute_marks_.clear();
  for (const auto& layer : rows) recompute_marks_.emplace_back(layer.size(), false);
  recompute_ops_.assign(rows.empty() ? 0 : rows.front().size(), std::string());
  for (const auto& [kind, op] : recomputed_alone) recompute_ops_.at(static_cast<std::size_t>(kind)) = op;
  layer_activation_rows_ = std::move(rows);
  output_kind_ = output_kind;
}

void Model::begin_micro_batch(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets) {
  for (int row : global_activation_rows_) store_.residency().allocate(row);
  ops().copy_from_host(store_.data(tokens_row_), tokens.data(), tokens.size_bytes());
  // Decoding has no targets: an empty span's data() may be null, which memcpy must not see.
  if (!targets.empty()) ops().copy_from_host(store_.data(targets_row_), targets.data(), targets.size_bytes());
}

void Model::end_micro_batch() {
  for (int l = 0; l < n_layer(); ++l) free_layer_activations(l, false);
  for (int row : global_activation_rows_) store_.residency().release(row);
}

void Model::allocate_layer_activations(int layer) {
  if (trainable_.skips(layer)) {  // the identity writes only its output
    if (!store_.residency().allocated(layer_output_row(layer))) store_.residency().allocate(layer_output_row(layer));
    return;
  }
  for (int row : layer_activation_rows_.at(static_cast<std::size_t>(layer)))
    if (!store_.residency().allocated(row)) store_.residency().allocate(row);
}

bool Model::layer_activations_present(int layer) const {
  if (trainable_.skips(layer)) return store_.residency().allocated(layer_output_row(layer));
  const std::vector<int>& rows = layer_activation_rows_.at(static_cast<std::size_t>(layer));
  return std::all_of(rows.begin(), rows.end(), [&](int row) { return store_.residency().allocated(row); });
}

std::vector<int> Model::layer_held_rows(int layer) const {
  std::vector<int> rows = layer_activation_rows(layer);
  if (!codes_.empty()) rows.insert(rows.end(), codes_.code_rows(layer).begin(), codes_.code_rows(layer).end());
  return rows;
}

void Model::free_layer_activations(int layer, bool keep_output) {
  const std::vector<int>& rows = layer_activation_rows_.at(static_cast<std::size_t>(layer));
  auto& marks = recompute_marks_.at(static_cast<std::size_t>(layer));
  for (std::size_t kind = 0; kind < rows.size(); ++kind) {
    if (keep_output && static_cast<int>(kind) == output_kind_) continue;
    store_.residency().release(rows[kind]);
    marks[kind] = false;
  }
  if (!codes_.empty()) codes_.release_all(layer);  // the output has no code
}

void Model::write_values(const ParameterRows& rows, std::span<const float> values, std::size_t first) {
  // A data-parallel rank at zero 3 keeps its own parameters' weights alone (core/distributed/):
  // another rank's values are drawn (an initialisation draws them in order) and dropped here.
  const int value_row = store_.value_row(rows);
  if (store_.residency().held_elsewhere(value_row)) return;
  if (rows.role == ParameterRole::frozen) frozen_fingerprint_.reset();
  if (rows.master >= 0) {
    if (first + values.size() > static_cast<std::size_t>(table().row(rows.master).elements()))
      throw std::logic_error("write_values: " + rows.name + " has fewer elements than " +
                             std::to_string(first + values.size()));
    const Residency::Loan master(store_.residency(), {rows.master}, Residency::Loan::Access::write);
    ops().copy_from_host(store_.f32(rows.master) + first, values.data(), values.size_bytes());  // published later
    return;
  }
  const Residency::Loan weights(store_.residency(), stored_weight_rows(rows),
                                Residency::Loan::Access::write);  // a block's weights on disk
  store_.write_stored_values(rows, values, first);
}

void Model::declare_weight_scratch_and_head(std::int64_t largest_matrix_scratch, const LmHeadShape& shape,
                                            LmHeadRows rows) {
  if (largest_matrix_scratch > 0) {
    weight_scratch_elements_ = std::min(largest_matrix_scratch, kWeightScratchElements);
    weight_scratch_row_ = store_.add_row("ws.f32.weight_chunk", -1, {weight_scratch_elements_},
                                         MemoryCategory::workspace, TensorGroup::activations);
  }
  rows.weight_scratch = weight_scratch_row_;
  rows.weight_scratch_elements = weight_scratch_elements_;
  head_.declare(shape, rows);
}

void Model::declare_frozen_gradient_sink(std::int64_t floats) {
  frozen_gradient_sink_row_ =
      store_.add_row("ws.frozen_gradient_sink", -1, {floats}, MemoryCategory::workspace, TensorGroup::activations);
}

void Model::init_weights(std::uint64_t seed) {
  init_base_weights(seed);
  adapters_.init(seed,
                 [this](const ParameterRows& rows, std::span<const float> values) { write_values(rows, values); });
  store_.publish_weights();
}

void Model::init_adapters(std::uint64_t seed) {
  adapters_.init(seed,
                 [this](const ParameterRows& rows, std::span<const float> values) { write_values(rows, values); });
  store_.publish_weights();
}

void Model::init_weights_as_zeros(std::uint64_t seed) {
  std::int64_t largest = 0;
  for (const ParameterRows& rows : parameters()) largest = std::max(largest, store_.values(rows).count);
  // calloc's large blocks are fresh zero pages: nothing here touches them (the dry run's copies
  // read nothing), so even a 7B model's largest matrix costs no memory.
  const std::unique_ptr<float, decltype(&std::free)> zeros(
      static_cast<float*>(std::calloc(static_cast<std::size_t>(std::max<std::int64_t>(largest, 1)), sizeof(float))),
      &std::free);
  if (!zeros) throw std::bad_alloc();
  for (const ParameterRows& rows : parameters())
    if (rows.role != ParameterRole::adapter)
      write_values(rows, std::span<const float>(zeros.get(), static_cast<std::size_t>(store_.values(rows).count)));
  adapters_.init(seed,
                 [this](const ParameterRows& rows, std::span<const float> values) { write_values(rows, values); });
  store_.publish_weights();
}

void Model::declare_adapters(const std::vector<AdapterTarget>& targets,
                             const std::function<std::string(int layer)>& block_prefix,
                             const OptimizerStateLayout& optimizer_state, Purpose purpose) {
  adapters_.declare(trainable_, targets, block_prefix, n_layer(), static_cast<std::int64_t>(batch_) * seq_len(),
                    optimizer_state, purpose == Purpose::training);
}

void Model::adapted_matmul_forward(const ParameterRows& rows, float* out, const float* inp, const float* bias,
                                   const MatmulShape& shape) {
  ops().matmul_forward(out, inp, store_.weight(rows.param), bias, shape, weight_scratch());
  if (!adapters_.empty()) adapters_.forward(rows.param, out, inp, shape.rows);
}

void Model::adapted_matmul_backward(const ParameterRows& rows, float* dinp, float* dbias, const float* dout,
                                    const float* inp, const MatmulShape& shape, GradientWrite dinp_write) {
  ops().matmul_backward(dinp, grad_of(rows), dbias, dout, inp, store_.weight(rows.param), shape, weight_scratch(),
                        dinp_write);
  if (!adapters_.empty()) adapters_.backward(rows.param, dinp, dout, inp, shape.rows);
}

std::vector<float> Model::effective_values(const ParameterRows& rows) {
  const std::vector<std::int64_t> shape = stored_shape(rows);
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  std::vector<float> values(static_cast<std::size_t>(count));
  const int row = store_.value_row(rows);
  // The master, or the stored weights with their scales (a frozen quantized matrix's matmul reads both).
  const Residency::Loan value(store_.residency(), row == rows.param ? stored_weight_rows(rows) : std::vector<int>{row},
                              Residency::Loan::Access::read);
  const DType element = table().row(row).element;
  if (element == DType::f32) {
    ops().copy_to_host(values.data(), store_.data(row), values.size() * sizeof(float));
  } else if (element == DType::bf16) {
    std::vector<std::uint16_t> narrow(values.size());
    ops().copy_to_host(narrow.data(), store_.data(row), narrow.size() * sizeof(std::uint16_t));
    std::transform(narrow.begin(), narrow.end(), values.begin(), bf16_to_f32);
  } else {
    // A quantized matrix: identity rows through its own matmul give its rows (in_out) or its
    // columns (out_in), a chunk at a time.
    if (shape.size() != 2) throw std::logic_error(rows.name + ": a quantized parameter that is not a matrix");
    const std::int64_t in = rows.layout == WeightLayout::in_out ? shape[0] : shape[1];
    const std::int64_t out = rows.layout == WeightLayout::in_out ? shape[1] : shape[0];
    const std::int64_t chunk = std::min<std::int64_t>(in, 64);
    Allocator& memory = backend().device_memory();
    Buffer identity =
        memory.allocate(static_cast<std::uint64_t>(chunk * in) * sizeof(float), MemoryCategory::workspace);
    Buffer product =
        memory.allocate(static_cast<std::uint64_t>(chunk * out) * sizeof(float), MemoryCategory::workspace);
    std::vector<float> host_identity(static_cast<std::size_t>(chunk * in));
    std::vector<float> host_product(static_cast<std::size_t>(chunk * out));
    for (std::int64_t first = 0; first < in; first += chunk) {
      const std::int64_t rows_now = std::min(chunk, in - first);
      std::fill(host_identity.begin(), host_identity.end(), 0.0f);
      for (std::int64_t r = 0; r < rows_now; ++r) host_identity[static_cast<std::size_t>(r * in + first + r)] = 1.0f;
      ops().copy_from_host(identity.data(), host_identity.data(), host_identity.size() * sizeof(float));
      ops().matmul_forward(static_cast<float*>(product.data()), static_cast<const float*>(identity.data()),
                           store_.weight(rows.param), nullptr, MatmulShape{rows_now, in, out, rows.layout},
                           weight_scratch());
      ops().copy_to_host(host_product.data(), product.data(),
                         static_cast<std::uint64_t>(rows_now * out) * sizeof(float));
      for (std::int64_t r = 0; r < rows_now; ++r)
        for (std::int64_t o = 0; o < out; ++o) {
          const float value = host_product[static_cast<std::size_t>(r * out + o)];
          const std::int64_t i = first + r;
          values[static_cast<std::size_t>(rows.layout == WeightLayout::in_out ? i * out + o : o * in + i)] = value;
        }
    }
    backend().synchronize();  // the buffers go back to the arena when this returns
  }
  return values;
}

// FNV-1a over 64-bit words (then the tail bytes): one pass at memory speed.
std::string Model::frozen_fingerprint() {
  if (frozen_fingerprint_) return *frozen_fingerprint_;
  std::uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](std::span<const std::byte> bytes) {
    const std::size_t words = bytes.size() / 8;
    for (std::size_t w = 0; w < words; ++w) {
      std::uint64_t word = 0;
      std::memcpy(&word, bytes.data() + w * 8, 8);
      hash = (hash ^ word) * 1099511628211ull;
    }
    for (std::size_t i = words * 8; i < bytes.size(); ++i)
      hash = (hash ^ static_cast<std::uint64_t>(bytes[i])) * 1099511628211ull;
  };
  int frozen = 0;
  std::vector<std::byte> bytes;
  for (const ParameterRows& rows : parameters()) {
    if (rows.role != ParameterRole::frozen) continue;
    ++frozen;
    mix(std::as_bytes(std::span(rows.name)));
    const Residency::Loan stored_weights(store_.residency(), stored_weight_rows(rows),
                                         Residency::Loan::Access::read);  // a block's, on disk
    for (int row : {rows.param, rows.scales}) {
      if (row < 0) continue;
      const TensorRow& stored = table().row(row);
      bytes.resize(static_cast<std::size_t>(storage_bytes(stored.element, stored.elements())));
      ops().copy_to_host(bytes.data(), store_.data(row), bytes.size());
      mix(bytes);
    }
  }
  std::string text;
  if (frozen > 0) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%d frozen, fnv1a64 %016llx", frozen, static_cast<unsigned long long>(hash));
    text = buffer;
  }
  frozen_fingerprint_ = text;
  return text;
}

std::vector<float> Model::merged_values(const ParameterRows& rows) {
  std::vector<float> values = effective_values(rows);
  adapters_.merge(rows.param, values, [this](const ParameterRows& tensor) { return effective_values(tensor); });
  return values;
}

double Model::loss_sum(int rows) {
  return ops().sum(store_.f32(head_.losses_row()), static_cast<std::int64_t>(rows) * seq_len());
}

}  // namespace strata
