#include "core/training/hf_export.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <stdexcept>

#include "core/checkpoint/hf_directory.hpp"
#include "core/checkpoint/hf_layout.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/training/evaluation_model.hpp"
#include "core/util/atomic_file.hpp"
#include "kernels/cpu/bf16.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

// The files of a Hugging Face tokenizer directory that travel with the model (those present).
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",    "tokenizer_config.json",
                                           "tokenizer.model",   "special_tokens_map.json",
                                           "added_tokens.json", "vocab.json",
                                           "merges.txt"};

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw ManifestError(path.string() + ": cannot be read");
  return text;
}

// Where the export goes: OUT_DIR made absolute and normal (a trailing slash, "x/.." and a symlink
// to a directory resolved), which may be new or an empty directory; anything else holds what the
// export must not replace.
fs::path export_target(const fs::path& out_dir) {
  const std::string option = "--hf " + out_dir.string();
  std::error_code error;
  if (fs::is_symlink(out_dir, error) && !fs::is_directory(out_dir, error))
    throw ManifestError(option + ": is a symlink to a file or to nothing, not a directory");
  fs::path target = fs::weakly_canonical(fs::absolute(out_dir), error);
  if (error) throw ManifestError(option + ": cannot be resolved (" + error.message() + ")");
  if (target.filename().empty()) target = target.parent_path();  // a trailing separator
  if (target == target.root_path() || target == fs::weakly_canonical(fs::current_path(), error))
    throw ManifestError(option + ": is " +
                        (target == target.root_path() ? "the root directory" : "the working directory") +
                        "; --hf names a directory to create");
  const fs::file_status status = fs::status(target, error);
  if (!fs::exists(status)) return target;
  if (!fs::is_directory(status))
    throw ManifestError(option + ": is a file, not a directory: --hf names the directory to create");
  if (!fs::is_empty(target, error))
    throw ManifestError(option +
                        ": holds files already; the export writes a new directory (name another, or empty this one)");
  return target;
}

// The process's file mode mask (Linux's /proc/self/status; 022 where unreadable): umask(2) would
// read it only by changing it, for every thread.
fs::perms creation_mask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("Umask:")) return static_cast<fs::perms>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return static_cast<fs::perms>(022);
}

// The special tokens' ids: the source directory's config.json's where [model] from names one (the
// model's own record: Qwen2's names a bos token its tokenizer_config.json does not, Llama 3.1's a
// list of eos ids), the tokenizer's where it has none.
HfTokenIds token_ids(const Manifest& manifest, const Tokenizer* tokenizer) {
  HfTokenIds ids;
  if (tokenizer != nullptr) {
    if (tokenizer->special().bos) ids.bos = *tokenizer->special().bos;
    if (tokenizer->special().eos) ids.eos = *tokenizer->special().eos;
  }
  if (!manifest.model.from) return ids;
  const nlohmann::json source = nlohmann::json::parse(read_whole(*manifest.model.from / "config.json"), nullptr, false);
  if (!source.is_object()) return ids;  // read and checked already by [model] from: not reached
  for (auto [key, id] : {std::pair{"bos_token_id", &ids.bos}, {"eos_token_id", &ids.eos}, {"pad_token_id", &ids.pad}})
    if (source.contains(key) && !source.at(key).is_null()) *id = source.at(key);
  return ids;
}

// The half-made directory beside the target, under a name no other export has (mkdtemp), removed
// unless the export finished: a killed export's leftovers are never reused.
class PartialDirectory {
 public:
  explicit PartialDirectory(const fs::path& target) {
    std::error_code error;
    fs::create_directories(target.parent_path(), error);
    std::string name = (target.parent_path() / ("." + target.filename().string() + ".partial-XXXXXX")).string();
    if (error || ::mkdtemp(name.data()) == nullptr)
      throw ManifestError("--hf " + target.string() + ": cannot create a directory beside it in " +
                          target.parent_path().string() + " (" +
                          (error ? error.message() : std::error_code(errno, std::generic_category()).message()) + ")");
    path_ = name;
    // mkdtemp makes it 0700; the export is a directory like any the user makes (0755 under umask 022).
    fs::permissions(path_, fs::perms::all & ~creation_mask(), error);
  }
  ~PartialDirectory() {
    std::error_code error;
    if (!done_) fs::remove_all(path_, error);
  }
  PartialDirectory(const PartialDirectory&) = delete;
  PartialDirectory& operator=(const PartialDirectory&) = delete;
  const fs::path& path() const noexcept { return path_; }
  void finished() noexcept { done_ = true; }

 private:
  fs::path path_;
  bool done_ = false;
};

int max_positions(const Manifest& manifest) {
  const ModelSpec& model = manifest.model;
  return model.family().export_max_positions(
      model.shape, model.from ? std::optional<int>(read_hf_config(*model.from).max_positions) : std::nullopt);
}

}  // namespace

HfExport export_hf(const Manifest& manifest, PluginRegistry& registry, const fs::path& checkpoint,
                   const fs::path& out_dir, const HfExportOptions& options, const BackendFactory& backend) {
  if (options.dtype != "f32" && options.dtype != "bf16")
    throw ManifestError("--dtype " + options.dtype + ": not f32 or bf16");
  if (options.shard_bytes == 0) throw ManifestError("--shard-size: must be above 0 bytes");
  const fs::path target = export_target(out_dir);
  std::unique_ptr<Tokenizer> tokenizer;
  if (manifest.data.tokenizer) tokenizer = load_tokenizer(*manifest.data.tokenizer);

  EvaluationModel run = open_for_evaluation(manifest, registry, checkpoint, backend);
  Model& model = *run.model;
  const bool bf16 = options.dtype == "bf16";
  std::vector<const ParameterRows*> exported;
  std::vector<std::uint64_t> bytes;
  for (const ParameterRows& rows : model.parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // folded into its matrix
    std::uint64_t count = 1;
    for (const std::int64_t extent : model.stored_shape(rows)) count *= static_cast<std::uint64_t>(extent);
    exported.push_back(&rows);
    bytes.push_back(count * (bf16 ? 2 : 4));
  }
  const std::vector<int> shard_of = plan_shards(bytes, options.shard_bytes);
  HfExport result;
  result.tensors = static_cast<int>(exported.size());
  result.shards = shard_of.empty() ? 1 : shard_of.back() + 1;

  PartialDirectory partial(target);
  std::map<std::string, std::string> weight_map;
  // One shard at a time in memory: its tensors' values, converted, written, then released.
  for (std::size_t first = 0, end = 0; first < exported.size(); first = end) {
    const int shard = shard_of[first];
    while (end < exported.size() && shard_of[end] == shard) ++end;
    std::vector<std::vector<float>> values;
    std::vector<std::vector<std::uint16_t>> narrowed;
    std::vector<TensorToWrite> tensors;
    values.reserve(end - first);
    narrowed.reserve(end - first);
    const std::string file = shard_file_name(shard, result.shards);
    for (std::size_t i = first; i < end; ++i) {
      const ParameterRows& rows = *exported[i];
      values.push_back(model.merged_values(rows));
      if (model.adapted(rows)) ++result.merged_matrices;
      if (bf16) {
        narrowed.emplace_back(values.back().size());
        cpu::narrow(narrowed.back().data(), values.back().data(), static_cast<std::int64_t>(values.back().size()));
        values.back() = {};
        tensors.push_back({rows.name, model.stored_shape(rows), {}, std::as_bytes(std::span(narrowed.back())), "BF16"});
      } else {
        tensors.push_back({rows.name, model.stored_shape(rows), values.back(), {}, "F32"});
      }
      weight_map[rows.name] = file;
      result.tensor_bytes += bytes[i];
    }
    std::string head;
    const std::vector<std::string_view> pieces = safetensors_pieces(tensors, {{"format", "pt"}}, head);
    write_file_atomically(partial.path() / file, pieces);
  }
  if (result.shards > 1)
    write_file_atomically(partial.path() / "model.safetensors.index.json",
                          hf_index_json(result.tensor_bytes, weight_map));
  const HfTokenIds ids = token_ids(manifest, tokenizer.get());
  write_file_atomically(partial.path() / "config.json",
                        hf_config_json(manifest.model, bf16 ? "bfloat16" : "float32", max_positions(manifest), ids));
  // The source directory's generation_config.json as it is (sampling defaults, eos lists); else
  // one with the ids, where any is known.
  std::error_code missing;
  if (manifest.model.from && fs::is_regular_file(*manifest.model.from / "generation_config.json", missing))
    write_file_atomically(partial.path() / "generation_config.json",
                          read_whole(*manifest.model.from / "generation_config.json"));
  else if (!ids.bos.is_null() || !ids.eos.is_null())
    write_file_atomically(partial.path() / "generation_config.json", hf_generation_config_json(ids));
  result.generation_config = fs::is_regular_file(partial.path() / "generation_config.json", missing);
  if (manifest.data.tokenizer) {
    for (const char* name : kTokenizerFiles) {
      const fs::path source = *manifest.data.tokenizer / name;
      std::error_code error;
      if (!fs::is_regular_file(source, error)) continue;
      write_file_atomically(partial.path() / name, read_whole(source));
      result.tokenizer_files.emplace_back(name);
    }
  }
  sync_directory(partial.path());
  // rename() replaces an empty directory in one step; anything else in the way (another export
  // that finished first) makes this run fail, leaving that one whole.
  std::error_code error;
  fs::rename(partial.path(), target, error);
  if (error)
    throw std::runtime_error("--hf " + out_dir.string() + ": cannot move the written directory into place (" +
                             error.message() + ")");
  partial.finished();
  sync_directory(target.parent_path());
  return result;
}

}  // namespace strata
