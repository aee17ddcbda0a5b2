#include "core/manifest/manifest.hpp"

#include "core/checkpoint/hf_directory.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/toml_config_view.hpp"
#include "core/manifest/toml_text_guard.hpp"
#include "core/util/did_you_mean.hpp"
#include "core/util/format_bytes.hpp"

namespace strata {

namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

const std::vector<std::string> kTopLevelKeys = {"model",     "data",        "train",      "device",    "optimizer",
                                                "precision", "strategy",    "kernels",    "telemetry", "checkpoint",
                                                "predictor", "plugin_path", "distributed"};

std::string location(const std::filesystem::path& file, const toml::node& node) {
  // A value --set parsed carries "--set key.path" as its source; a table --set created has none.
  if (node.source().path && node.source().path->starts_with("--set ")) return *node.source().path;
  if (node.source().begin.line == 0) return file.string() + " (a table created by --set)";
  std::ostringstream text;
  text << file.string() << ':' << node.source().begin.line << ':' << node.source().begin.column;
  return text.str();
}

// Applies one --set key.path=value to the document.
void apply_override(toml::table& root, const std::string& assignment, std::set<std::string>& overridden,
                    std::vector<std::string>& problems) {
  const std::size_t equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    problems.push_back("--set " + assignment + ": expected key.path=value, e.g. --set train.steps=30");
    return;
  }
  const std::string key_path = assignment.substr(0, equals);
  const std::string value_text = assignment.substr(equals + 1);
  // One value per --set: a line break would let the value smuggle in more TOML.
  if (assignment.find_first_of("\n\r") != std::string::npos) {
    problems.push_back("--set " + key_path + ": the value contains a line break; one --set sets one value");
    return;
  }
  std::vector<std::string> parts;
  std::stringstream stream(key_path);
  for (std::string part; std::getline(stream, part, '.');) parts.push_back(part);
  for (const std::string& part : parts)
    if (part.empty()) {
      problems.push_back("--set " + assignment + ": empty segment in key path '" + key_path + "'");
      return;
    }
  if (parts.size() > kMaxTomlKeyParts) {
    problems.push_back("--set: a key path of " + std::to_string(parts.size()) + " parts, more than " +
                       std::to_string(kMaxTomlKeyParts) + " (a manifest's keys have at most 3)");
    return;
  }
  toml::node* cursor = &root;
  std::string dotted;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    dotted += (dotted.empty() ? "" : ".") + parts[i];
    if (toml::table* table = cursor->as_table()) {
      toml::node* next = table->get(parts[i]);
      if (next == nullptr) {
        table->insert(parts[i], toml::table{});
        next = table->get(parts[i]);
      }
      cursor = next;
    } else if (toml::array* array = cursor->as_array()) {
      std::size_t index = 0;
      const auto [end, error] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), index);
      if (error != std::errc() || end != parts[i].data() + parts[i].size() || index >= array->size()) {
        problems.push_back("--set " + assignment + ": '" + parts[i] + "' is not an index of " +
                           dotted.substr(0, dotted.rfind('.')) + " (it has " + std::to_string(array->size()) +
                           " entries)");
        return;
      }
      cursor = array->get(index);
    } else {
      problems.push_back("--set " + assignment + ": " + dotted.substr(0, dotted.rfind('.')) + " is not a table");
      return;
    }
  }
  toml::table* target = cursor->as_table();
  if (target == nullptr) {
    problems.push_back("--set " + assignment + ": " + dotted + " is not a table");
    return;
  }
  // The value is TOML ("30", "\"x\"", "[0.9, 0.95]"); a bare word is taken as a string, and so is
  // text toml++ must not see (toml_text_guard.hpp).
  const std::string document = "value = " + value_text;
  if (find_unsafe_toml_character(document)) {
    target->insert_or_assign(parts.back(), value_text);
    overridden.insert(key_path);
    return;
  }
  try {
    toml::table parsed = toml::parse(document, "--set " + key_path);
    toml::node* node = parsed.get("value");
    if (node->is_table()) {
      problems.push_back("--set " + assignment + ": a value cannot be a table");
      return;
    }
    node->visit([&](auto&& typed) { target->insert_or_assign(parts.back(), std::move(typed)); });
  } catch (const toml::parse_error&) {
    target->insert_or_assign(parts.back(), value_text);
  }
  overridden.insert(key_path);
}

const toml::table* table_at(const toml::table& root, std::string_view key, const std::filesystem::path& file,
                            std::vector<std::string>& problems) {
  const toml::node* node = root.get(key);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) {
    problems.push_back(location(file, *node) + ": '" + std::string(key) + "' must be a table ([" + std::string(key) +
                       "]), not " + std::string(toml_type_name(*node)));
    return nullptr;
  }
  return node->as_table();
}

PluginSpec plugin_spec(const toml::table* table, std::string label, std::string dotted_path, std::string default_plugin,
                       const std::filesystem::path& file, const std::set<std::string>& overridden,
                       std::vector<std::string>& problems) {
  PluginSpec spec;
  spec.table = table;
  spec.label = std::move(label);
  spec.dotted_path = std::move(dotted_path);
  spec.plugin = std::move(default_plugin);
  if (table != nullptr) {
    TomlConfigView view(table, {file.string(), spec.label, spec.dotted_path, &overridden}, {"plugin"});
    spec.plugin = view.get_string("plugin", spec.plugin, {});
    for (const std::string& problem : view.problems()) problems.push_back(problem);
    if (spec.plugin.empty())
      problems.push_back(view.where("plugin") + ": " + spec.label + " needs plugin = \"<name>\"");
  }
  return spec;
}

std::vector<PluginSpec> plugin_list(const toml::table& root, std::string_view key, const std::filesystem::path& file,
                                    const std::set<std::string>& overridden, std::vector<std::string>& problems) {
  std::vector<PluginSpec> specs;
  const toml::node* node = root.get(key);
  if (node == nullptr) return specs;
  const toml::array* array = node->as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    problems.push_back(location(file, *node) + ": '" + std::string(key) + "' must be an array of tables ([[" +
                       std::string(key) + "]])");
    return specs;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string label = "[[" + std::string(key) + "]] #" + std::to_string(i + 1);
    specs.push_back(plugin_spec(array->get(i)->as_table(), label, std::string(key) + "." + std::to_string(i), "", file,
                                overridden, problems));
  }
  return specs;
}

}  // namespace

namespace {

// "a", "a or b", "a, b or c".
std::string one_of(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

// [model]'s keys: the five every family has, and each family's own (model_family.hpp).
std::vector<std::string> model_keys() {
  std::vector<std::string> keys = {"from", "arch", "n_layer", "n_head", "d_model", "vocab", "seq_len"};
  const auto families = model_families();
  for (const ModelFamily* family : families)
    for (std::string_view key : family->extra_keys())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.emplace_back(key);
  return keys;
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& core_manifest_keys() {
  static const std::map<std::string, std::vector<std::string>> keys = {
      {"model", model_keys()},
      {"data", {"train", "val", "val_fraction", "tokenizer"}},
      {"train",
       {"steps", "batch", "micro_batches", "lr", "warmup_steps", "seed", "eval_every", "eval_batches", "threads",
        "divergence_factor", "divergence_steps", "init_from", "sample_every", "sample_tokens", "sample_prompt",
        "update", "fused_clip"}},
      {"device", {"kind", "memory_limit", "tf32", "disk_path", "disk_limit"}},
      {"checkpoint", {"dir", "every", "keep_last"}},
      {"distributed", {"zero", "overlap"}},
      {"kernels", {"attention"}},
  };
  return keys;
}

namespace {

std::string read_manifest_text(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw ManifestError(file + (std::filesystem::exists(path, error)
                                    ? ": not a regular file (a manifest is a TOML file)"
                                    : ": no such manifest file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ManifestError(file + ": cannot open the manifest file for reading");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ManifestError(file + ": read error");
  return text;
}

ManifestReading parse_manifest_collecting(std::string_view text, const std::filesystem::path& path,
                                          const std::vector<std::string>& overrides,
                                          ManifestUse use = ManifestUse::training) {
  ManifestReading reading;
  Manifest& manifest = reading.manifest;
  std::vector<std::string>& problems = reading.problems;
  manifest.path = path;
  const std::string file = path.string();
  if (const auto unsafe = find_unsafe_toml_character(text))
    throw ManifestError(file + ':' + std::to_string(unsafe->line) + ':' + std::to_string(unsafe->column) +
                        ": malformed TOML: " + unsafe->problem);
  try {
    manifest.document = std::make_shared<toml::table>(toml::parse(text, file));
  } catch (const toml::parse_error& e) {
    std::ostringstream message;
    message << file << ':' << e.source().begin.line << ':' << e.source().begin.column
            << ": malformed TOML: " << e.description();
    throw ManifestError(message.str());
  }
  toml::table& root = *manifest.document;
  for (const std::string& assignment : overrides) apply_override(root, assignment, manifest.overridden, problems);
  if (!problems.empty()) throw ManifestError(problems);

  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), name) != kTopLevelKeys.end()) continue;
    std::string message =
        location(path, node) + ": unknown top-level key '" + name + "'; accepted: " + join_words(kTopLevelKeys);
    if (const std::string near = closest_match(name, kTopLevelKeys); !near.empty())
      message += " (did you mean '" + near + "'?)";
    problems.push_back(message);
  }

  const auto& keys = core_manifest_keys();
  auto view_of = [&](const std::string& table_name) {
    return TomlConfigView(table_at(root, table_name, path, problems),
                          {file, "[" + table_name + "]", table_name, &manifest.overridden}, keys.at(table_name));
  };
  auto collect = [&](TomlConfigView& view) {
    view.check_unknown_keys();
    problems.insert(problems.end(), view.problems().begin(), view.problems().end());
  };

  {
    const std::size_t problems_before_model = problems.size();
    TomlConfigView model = view_of("model");
    ModelSpec& spec = manifest.model;
    // [model] from = "DIR": a Hugging Face model directory whose config.json gives every key's
    // value; a key the manifest also writes must agree with it.
    std::optional<HfModelConfig> hf;
    if (model.has("from")) {
      spec.from = model.get_string("from", "", {});
      try {
        hf = read_hf_config(*spec.from);
      } catch (const ManifestError& e) {
        for (const std::string& problem : e.problems()) model.report_error("from", problem);
      }
    }
    const std::string config_file = spec.from ? (*spec.from / "config.json").string() : std::string();
    // The config's value as each key's default, and a written value that differs refused.
    ModelKeys keys(model, hf ? &*hf : nullptr, config_file, [&model] { return model.problems().empty(); });
    // An empty default tells a refused arch from one not written: a refused one stands at gpt2's,
    // and another family's keys are then not called gpt2's.
    std::vector<std::string> arch_names;
    for (const ModelFamily* family : model_families()) arch_names.emplace_back(family->arch());
    const std::string arch = model.get_string("arch", "", arch_names);
    const bool arch_refused = model.has("arch") && arch.empty();
    spec.arch = arch.empty() ? (hf ? hf->arch : "gpt2") : arch;
    if (hf && model.has("arch") && spec.arch != hf->arch)
      model.report_error("arch", "arch = \"" + spec.arch + "\" disagrees with " + config_file + ", which describes a " +
                                     hf->arch + " model (leave it out to take the model's)");
    const ModelFamily& family = spec.family();
    // config.json's names for the shape's keys are its family's (the family config.json describes).
    const ModelFamily& described = hf ? model_family(hf->arch) : family;
    const auto field = [&](const char* key) { return std::string(described.hf_field(key)); };
    ModelShape& shape = spec.shape;
    shape = ModelShape{};
    shape.n_layer = keys.integer("n_layer", 12, 1, 1024, hf ? hf->n_layer : 0, field("n_layer").c_str());
    shape.n_head = keys.integer("n_head", 12, 1, 1024, hf ? hf->n_head : 0, field("n_head").c_str());
    shape.d_model = keys.integer("d_model", 768, 1, 65536, hf ? hf->d_model : 0, field("d_model").c_str());
    shape.vocab = keys.integer("vocab", family.default_vocab(), 2, kMaxVocab, hf ? hf->vocab : 0, "vocab_size");
    shape.seq_len =
        static_cast<int>(model.get_int("seq_len", hf ? described.default_seq_len(hf->max_positions) : 1024, 1, 65536));
    if (hf && !model.has("seq_len") && described.default_seq_len(hf->max_positions) > 65536)
      model.report_error("from", config_file + "'s " + field("seq_len") + " = " + std::to_string(hf->max_positions) +
                                     " is outside the range of seq_len (1 to 65536): set seq_len");
    if (hf) spec.notes = hf->notes;
    if (hf && model.has("seq_len"))
      if (const std::string problem = described.seq_len_problem(shape.seq_len, hf->max_positions, config_file);
          !problem.empty())
        model.report_error("seq_len", problem);
    // Checks between keys only when each read as written: a refused value stands at its default,
    // and a problem found with the default would name a value the user never wrote.
    keys.shape_read();
    // Another family's keys are refused by name, unless the arch itself was refused.
    const std::vector<std::string_view> own = family.extra_keys();
    std::vector<std::string_view> foreign;  // in the order the families list them
    for (const ModelFamily* other : model_families())
      for (std::string_view key : other->extra_keys())
        if (std::find(own.begin(), own.end(), key) == own.end() &&
            std::find(foreign.begin(), foreign.end(), key) == foreign.end())
          foreign.push_back(key);
    for (std::string_view key : foreign) {
      if (!model.has(key) || arch_refused) continue;
      std::vector<std::string> families;  // those with the key
      for (const ModelFamily* other : model_families()) {
        const std::vector<std::string_view> its_keys = other->extra_keys();
        if (std::find(its_keys.begin(), its_keys.end(), key) != its_keys.end())
          families.push_back('"' + std::string(other->arch()) + '"');
      }
      model.report_error(key, std::string(key) + " needs arch = " + one_of(families) + " (this model is arch = \"" +
                                  spec.arch + "\")");
    }
    family.read_keys(keys, shape);
    // A head is d_model / n_head wide unless the family read a width of its own (Gemma's head_dim).
    if (keys.shape_as_written() && shape.own_head_dim == 0 && shape.d_model % shape.n_head != 0)
      model.report_error("n_head", "n_head = " + std::to_string(shape.n_head) +
                                       " must divide d_model = " + std::to_string(shape.d_model));
    collect(model);
    reading.model_as_written = problems.size() == problems_before_model;  // unknown keys and a non-table count
  }
  {
    TomlConfigView data = view_of("data");
    if (!data.has("train") && use == ManifestUse::training)
      data.report_error("train", "needs train = \"<path to .txt or .bin>\"");
    manifest.data.train = data.get_string("train", "", {});
    if (data.has("val")) manifest.data.val = data.get_string("val", "", {});
    manifest.data.val_fraction = data.get_double("val_fraction", 0.1, 0.0001, 0.5);
    const auto holds_tokenizer = [](const std::filesystem::path& directory) {
      std::error_code error;
      return std::filesystem::is_regular_file(directory / "tokenizer.json", error) ||
             std::filesystem::is_regular_file(directory / "tokenizer.model", error);
    };
    if (data.has("tokenizer")) {
      manifest.data.tokenizer = data.get_string("tokenizer", "", {});
      if (!holds_tokenizer(*manifest.data.tokenizer))
        data.report_error("tokenizer", "tokenizer = \"" + manifest.data.tokenizer->string() +
                                           "\" is not a directory holding tokenizer.json or tokenizer.model");
    } else if (manifest.model.from && holds_tokenizer(*manifest.model.from)) {
      manifest.data.tokenizer = manifest.model.from;
    }
    collect(data);
  }
  {
    TomlConfigView train = view_of("train");
    TrainSpec& t = manifest.train;
    t.steps = train.get_int("steps", 100, 1, std::numeric_limits<std::int64_t>::max());
    t.batch = static_cast<int>(train.get_int("batch", 8, 1, kMaxInt));
    t.micro_batches = static_cast<int>(train.get_int("micro_batches", 1, 1, kMaxInt));
    t.lr = train.get_double("lr", 3e-4, 0.0, 10.0);
    t.warmup_steps = train.get_int("warmup_steps", 0, 0, std::numeric_limits<std::int64_t>::max());
    t.seed = static_cast<std::uint64_t>(train.get_int("seed", 42, 0, std::numeric_limits<std::int64_t>::max()));
    t.eval_every = train.get_int("eval_every", 0, 0, std::numeric_limits<std::int64_t>::max());
    t.eval_batches = train.get_int("eval_batches", 8, 0, std::numeric_limits<std::int64_t>::max());
    t.threads = static_cast<int>(train.get_int("threads", 0, 0, 4096));
    t.divergence_factor = train.get_double("divergence_factor", 100.0, 0.0, 1e12);
    t.divergence_steps = train.get_int("divergence_steps", 8, 1, 1'000'000);
    t.sample_every = train.get_int("sample_every", 0, 0, std::numeric_limits<std::int64_t>::max());
    t.sample_tokens = train.get_int("sample_tokens", 32, 1, 1'000'000);
    t.sample_prompt = train.get_string("sample_prompt", "", {});
    if (t.divergence_factor > 0.0 && t.divergence_factor <= 1.0)
      train.report_error("divergence_factor",
                         (std::ostringstream() << "divergence_factor = " << t.divergence_factor).str() +
                             " must be above 1 (a loss above its best is normal noise), or 0 "
                             "to turn the check off");
    if (train.has("init_from") && manifest.model.from)
      train.report_error("init_from",
                         "init_from and [model] from both name the starting weights: keep one "
                         "(from for a Hugging Face model directory, init_from for a Strata checkpoint)");
    if (train.has("init_from")) {
      t.init_from = train.get_string("init_from", "", {});
      std::error_code error;
      if (!std::filesystem::exists(*t.init_from, error))
        train.report_error("init_from", "init_from = \"" + t.init_from->string() +
                                            "\": no such checkpoint directory or safetensors file");
    }
    t.update = train.get_string("update", "full", {"full", "fused"}) == "fused" ? UpdateMode::fused : UpdateMode::full;
    if (train.has("fused_clip") && t.update != UpdateMode::fused)
      train.report_error("fused_clip", "fused_clip applies to update = \"fused\" only");
    t.fused_clip = train.get_string("fused_clip", "previous", {"previous", "per_block"}) == "per_block"
                       ? FusedClip::per_block
                       : FusedClip::previous;
    if (t.update == UpdateMode::fused && t.micro_batches > 1)
      train.report_error("update",
                         "update = \"fused\" updates each block as soon as its gradients are complete, so "
                         "micro batches cannot accumulate into them: set micro_batches = 1 (now " +
                             std::to_string(t.micro_batches) + "), or update = \"full\"");
    if (t.batch % t.micro_batches != 0)
      train.report_error("micro_batches", "micro_batches = " + std::to_string(t.micro_batches) +
                                              " must divide batch = " + std::to_string(t.batch));
    // A micro batch's tokens index activation rows in int: more would wrap every size after it.
    else if (const std::int64_t tokens = std::int64_t{t.batch / t.micro_batches} * manifest.model.seq_len();
             tokens > kMaxInt)
      train.report_error("batch", "batch / micro_batches x model.seq_len = " + std::to_string(tokens) +
                                      " tokens per micro batch, more than " + std::to_string(kMaxInt) +
                                      " (raise micro_batches or lower batch)");
    collect(train);
  }
  {
    TomlConfigView device = view_of("device");
    manifest.device.kind = device.get_string("kind", "cpu", {});
    if (manifest.device.kind != "cpu" && manifest.device.kind.rfind("cuda:", 0) != 0)
      device.report_error("kind", "kind = \"" + manifest.device.kind + "\" must be \"cpu\" or \"cuda:N\"");
    if (device.has("memory_limit")) {
      const toml::node* node = table_at(root, "device", path, problems)->get("memory_limit");
      if (node->is_integer() && *node->value<std::int64_t>() > 0) {
        manifest.device.memory_limit = static_cast<std::uint64_t>(*node->value<std::int64_t>());
      } else if (node->is_string()) {
        const std::string text = *node->value<std::string>();
        const auto bytes = parse_bytes(text);
        if (!bytes || *bytes == 0)
          device.report_error("memory_limit", "memory_limit = \"" + text +
                                                  "\" is not a size; write e.g. \"512MiB\", \"4GiB\" or a byte count");
        else
          manifest.device.memory_limit = *bytes;
      } else {
        device.report_error("memory_limit", "memory_limit must be a size string (\"4GiB\") or a positive byte count");
      }
    }
    manifest.device.tf32 = device.get_bool("tf32", false);
    if (device.has("disk_path")) {
      const std::string text = device.get_string("disk_path", "", {});
      if (text.empty())
        device.report_error("disk_path", "disk_path must name a directory");
      else
        manifest.device.disk_path = std::filesystem::path(text);
    }
    if (device.has("disk_limit")) {
      const std::string text = device.get_string("disk_limit", "", {});
      const auto bytes = parse_bytes(text);
      if (!bytes || *bytes == 0)
        device.report_error("disk_limit", "disk_limit = \"" + text + "\" is not a size; write e.g. \"50GiB\"");
      else if (!device.has("disk_path"))
        device.report_error("disk_limit", "disk_limit bounds the disk tier: set disk_path as well");
      else
        manifest.device.disk_limit = *bytes;
    }
    collect(device);
  }
  {
    TomlConfigView checkpoint = view_of("checkpoint");
    if (checkpoint.has("dir")) manifest.checkpoint.dir = checkpoint.get_string("dir", "", {});
    manifest.checkpoint.every = checkpoint.get_int("every", 0, 0, std::numeric_limits<std::int64_t>::max());
    manifest.checkpoint.keep_last = checkpoint.get_int("keep_last", 0, 0, std::numeric_limits<std::int64_t>::max());
    collect(checkpoint);
  }
  {
    TomlConfigView distributed = view_of("distributed");
    manifest.distributed.present = root.contains("distributed");
    manifest.distributed.zero = static_cast<int>(distributed.get_int("zero", 0, 0, 3));
    manifest.distributed.overlap = distributed.get_bool("overlap", true);
    collect(distributed);
  }
  {
    // `attention` names an implementation, or is a table that names it and holds its own keys.
    const toml::table* table = table_at(root, "kernels", path, problems);
    const toml::node* attention = table != nullptr ? table->get("attention") : nullptr;
    if (attention != nullptr && attention->is_table()) {
      manifest.attention_kernel = plugin_spec(attention->as_table(), "[kernels.attention]", "kernels.attention", "",
                                              path, manifest.overridden, problems);
      manifest.kernels["attention"] = manifest.attention_kernel.plugin;
      TomlConfigView kernels = view_of("kernels");
      collect(kernels);
    } else {
      TomlConfigView kernels = view_of("kernels");
      if (kernels.has("attention")) manifest.kernels["attention"] = kernels.get_string("attention", "fast", {});
      collect(kernels);
    }
  }
  if (const toml::node* node = root.get("plugin_path")) {
    if (node->is_string()) {
      manifest.plugin_path.emplace_back(*node->value<std::string>());
    } else if (const toml::array* array = node->as_array();
               array != nullptr && array->is_homogeneous(toml::node_type::string)) {
      for (const toml::node& element : *array) manifest.plugin_path.emplace_back(*element.value<std::string>());
    } else {
      problems.push_back(location(path, *node) + ": plugin_path must be a string or an array of strings");
    }
    // A directory the manifest names but that is not there is a typo to report, not to skip: the
    // run would otherwise fail later, naming a plugin "unknown" instead of the path.
    for (const std::filesystem::path& directory : manifest.plugin_path) {
      std::error_code error;
      if (!std::filesystem::is_directory(directory, error))
        problems.push_back(location(path, *node) + ": plugin_path \"" + directory.string() + "\" is not a directory" +
                           (error                                       ? " (" + error.message() + ")"
                            : std::filesystem::exists(directory, error) ? std::string(" (it is a file)")
                                                                        : std::string(" (no such directory)")));
    }
  }

  manifest.optimizer = plugin_spec(table_at(root, "optimizer", path, problems), "[optimizer]", "optimizer", "adamw",
                                   path, manifest.overridden, problems);
  manifest.precision = plugin_spec(table_at(root, "precision", path, problems), "[precision]", "precision", "fp32",
                                   path, manifest.overridden, problems);
  manifest.strategies = plugin_list(root, "strategy", path, manifest.overridden, problems);
  // No [predictor] table: every step is a full step.
  manifest.predictor = plugin_spec(table_at(root, "predictor", path, problems), "[predictor]", "predictor", "", path,
                                   manifest.overridden, problems);
  manifest.telemetry = plugin_list(root, "telemetry", path, manifest.overridden, problems);
  return reading;
}

Manifest throwing_problems(ManifestReading reading) {
  if (!reading.problems.empty()) throw ManifestError(reading.problems);
  return std::move(reading.manifest);
}

}  // namespace

ManifestReading read_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  return parse_manifest_collecting(read_manifest_text(path), path, overrides);
}

Manifest load_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides, ManifestUse use) {
  return throwing_problems(parse_manifest_collecting(read_manifest_text(path), path, overrides, use));
}

Manifest parse_manifest(std::string_view text, const std::filesystem::path& path,
                        const std::vector<std::string>& overrides) {
  return throwing_problems(parse_manifest_collecting(text, path, overrides));
}

void append_telemetry(Manifest& manifest, const std::string& plugin, const std::map<std::string, std::string>& keys) {
  toml::table& root = *manifest.document;
  if (!root.contains("telemetry")) root.insert("telemetry", toml::array{});
  toml::array& array = *root["telemetry"].as_array();
  toml::table table;
  table.insert("plugin", plugin);
  for (const auto& [key, value] : keys) table.insert(key, value);
  array.push_back(std::move(table));  // elements are held by pointer: earlier specs stay valid
  const std::size_t index = array.size() - 1;
  manifest.telemetry.push_back(
      PluginSpec{plugin, array.get(index)->as_table(),
                 "[[telemetry]] #" + std::to_string(index + 1) + " (added by the command line)",
                 "telemetry." + std::to_string(index)});
}

}  // namespace strata
