#include "commands.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "command_line_style.hpp"
#include "command_support.hpp"
#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/data/corpus_tokens.hpp"
#include "core/data/token_file.hpp"
#include "core/device/backend.hpp"
#include "core/device/memory_limit_exceeded.hpp"
#include "core/distributed/communicator.hpp"
#include "core/errors/data_error.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/executor/executor.hpp"
#include "core/executor/hook_failed.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/make_model.hpp"
#include "core/planner/dry_backend.hpp"
#include "core/planner/memory_prediction.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/plugin/stack.hpp"
#include "core/residency/tensor_table.hpp"
#include "core/training/hf_export.hpp"
#include "core/training/merged_export.hpp"
#include "core/training/run_outputs.hpp"
#include "core/training/training_run.hpp"
#include "core/training/training_sample.hpp"
#include "core/util/atomic_file.hpp"
#include "core/util/format_bytes.hpp"
#include "core/util/path_inside.hpp"
#include "core/util/process_memory.hpp"
#include "exit_codes.hpp"
#include "plan_fit.hpp"
#include "plan_html.hpp"
#include "plan_prediction.hpp"

namespace strata {

namespace po = boost::program_options;

std::optional<int> parse(const std::string& name, const std::string& synopsis, po::options_description& options,
                         const std::vector<std::string>& arguments, po::variables_map& values, bool takes_manifest) {
  options.add_options()("help,h", "show this help");
  po::positional_options_description positional;
  if (takes_manifest) positional.add("manifest", 1);
  try {
    po::store(po::command_line_parser(arguments).options(options).positional(positional).style(kCommandLineStyle).run(),
              values);
    if (values.count("help")) {
      std::cout << "usage: strata " << name << ' ' << synopsis << "\n\n" << options;
      return kExitSuccess;
    }
    po::notify(values);
  } catch (const po::error& e) {
    std::cerr << "strata " << name << ": " << e.what() << "\nusage: strata " << name << ' ' << synopsis << '\n';
    return kExitInvalidInput;
  }
  return std::nullopt;
}

void add_manifest_options(po::options_description& options, CommonArguments& common) {
  options.add_options()("manifest", po::value(&common.manifest)->required(), "the manifest (TOML)")(
      "set", po::value(&common.overrides)->composing(), "override a manifest key: --set train.steps=30 (repeatable)");
}

// An output file named on the command line must be creatable: its directory is created now and
// proved writable with a probe file, so a bad path is invalid input before the run starts.
void check_output_file(const std::string& option, const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw ManifestError(option + " " + path.string() + ": is a directory, not a file");
  // Files are written whole and renamed into place, which would replace a device, pipe or socket.
  if (const auto status = std::filesystem::status(path, error);
      std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw ManifestError(option + " " + path.string() +
                        ": is not a regular file (a device, pipe or socket), which writing the file would replace");
  const std::filesystem::path directory = std::filesystem::absolute(path, error).parent_path();
  std::filesystem::create_directories(directory, error);
  const std::filesystem::path probe = directory / (".strata-probe-" + std::to_string(::getpid()));
  if (!error) {
    const bool written = static_cast<bool>(std::ofstream(probe).put('\n'));
    std::filesystem::remove(probe, error);
    if (!written) error = std::make_error_code(std::errc::permission_denied);
  }
  if (error)
    throw ManifestError(option + " " + path.string() + ": cannot be created in " + directory.string() + " (" +
                        error.message() + ")");
}

Manifest load_command_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                               ManifestUse use) {
  Manifest manifest = load_manifest(path, overrides, use);
  for (const std::string& note : manifest.model.notes) spdlog::warn("{}", note);
  return manifest;
}

// A library on the search path that fails to load is named: a broken copy would otherwise be
// skipped in silence while a built-in of the same name serves instead.
PluginRegistry load_plugins(const Manifest& manifest) {
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path(manifest.plugin_path));
  for (const LoadFailure& failure : registry.failures())
    if (!failure.duplicate)  // a second copy of a plugin already found earlier on the path is expected
      spdlog::warn("plugin library {} was not loaded: {}", failure.path.string(), failure.reason);
  return registry;
}

namespace {

// A manifest with its stack built, for the commands that inspect a stack without training.
// Plugin objects keep a reference to the host services, so both live here together.
struct InspectedStack {
  InspectedStack(const CommonArguments& common, const std::string& default_telemetry)
      : manifest(load_command_manifest(common.manifest, common.overrides)),
        registry(load_plugins(manifest)),
        host(manifest.model.info(), manifest.device.kind),
        stack(build_stack(manifest, registry, host, default_telemetry)) {}
  Manifest manifest;
  PluginRegistry registry;
  HostServicesImpl host;
  Stack stack;
};

}  // namespace

int run_guarded(const std::string& name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const ManifestError& e) {
    std::cerr << "strata " << name << ": invalid manifest:\n" << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const DataError& e) {
    std::cerr << "strata " << name << ": invalid data: " << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const CheckpointError& e) {
    std::cerr << "strata " << name << ": invalid checkpoint: " << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const MemoryLimitExceeded& e) {
    std::cerr << "strata " << name << ": " << e.what() << '\n';
    return kExitRunFailed;
  } catch (const std::exception& e) {
    std::cerr << "strata " << name << ": run failed: " << e.what() << '\n';
    return kExitRunFailed;
  }
}

namespace {

// The calibration `strata calibrate` writes by default, when there is one; an unreadable one is a
// warning, and no step time.
std::optional<Calibration> default_calibration() {
  if (!std::filesystem::exists(default_calibration_path())) return std::nullopt;
  try {
    return load_calibration(default_calibration_path());
  } catch (const std::invalid_argument& e) {
    spdlog::warn("{} (the default calibration; no step time)", e.what());
    return std::nullopt;
  }
}

}  // namespace

int command_train(const std::vector<std::string>& arguments) {
  CommonArguments common;
  std::string resume;
  po::options_description options("train options");
  add_manifest_options(options, common);
  options.add_options()("resume", po::value(&resume)->implicit_value(""),
                        "resume from a checkpoint directory (default: checkpoint.dir's latest)")(
      "force-resume", "resume even a checkpoint saved with another seed, stack or training data")(
      "fresh",
      "start again in a checkpoint.dir that holds an earlier run's saves, moving them to DIR/earlier-run-TIME")(
      "overwrite-telemetry", "replace an existing --metrics or [[telemetry]] file that Strata did not write")(
      "stop-after", po::value<std::int64_t>()->default_value(0),
      "stop after this step of the schedule (checkpointing there), to resume later")(
      "table", "print the tensor table before training")("profile", "print time per kernel at the end")(
      "metrics", po::value<std::string>(), "also write one JSON record per step to this file (as the jsonl plugin)")(
      "memory-timeline", po::value<std::string>(),
      "write the device's and host's memory through the run's third step (its last, when fewer) to this JSON file");
  po::variables_map values;
  if (auto code = parse("train",
                        "MANIFEST [--set key=value]... [--resume [DIR] | --fresh] [--table] [--profile] [--metrics "
                        "FILE] [--memory-timeline FILE]",
                        options, arguments, values))
    return *code;
  // Under mpirun, one rank of a data-parallel run: MPI starts here. Rank 0 alone speaks below
  // warnings; a rank that fails ends every rank (MPI_Abort), so none waits on it forever.
  std::unique_ptr<Communicator> communicator;
  if (const int failed = run_guarded("train",
                                     [&] {
                                       communicator = make_communicator();
                                       return static_cast<int>(kExitSuccess);
                                     });
      failed != kExitSuccess)
    return failed;
  const int ranks = communicator->size(), rank = communicator->rank();
  if (ranks > 1 && rank != 0) spdlog::set_level(spdlog::level::warn);
  if (ranks > 1) spdlog::set_pattern("[%H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  const std::string name =
      ranks > 1 ? "train (rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ")" : std::string("train");
  const int code = run_guarded(name, [&] {
    Manifest manifest = load_command_manifest(common.manifest, common.overrides);
    if (values.count("metrics")) {
      check_output_file("--metrics", values["metrics"].as<std::string>());
      append_telemetry(manifest, "jsonl", {{"path", values["metrics"].as<std::string>()}});
    }
    PluginRegistry registry = load_plugins(manifest);
    TrainOptions train_options;
    train_options.communicator = communicator.get();
    if (values.count("memory-timeline")) {
      // Checked against the run's inputs and telemetry, and locked, with its other outputs (RunOutputs).
      check_output_file("--memory-timeline", values["memory-timeline"].as<std::string>());
      train_options.memory_timeline = values["memory-timeline"].as<std::string>();
    }
    train_options.print_table = values.count("table") > 0;
    train_options.profile = values.count("profile") > 0;
    train_options.stop_after_step = values["stop-after"].as<std::int64_t>();
    if (train_options.stop_after_step < 0)
      throw ManifestError("--stop-after " + std::to_string(train_options.stop_after_step) +
                          ": must be a step of the schedule, 1 or more (0, the default, trains to train.steps)");
    train_options.force_resume = values.count("force-resume") > 0;
    train_options.fresh = values.count("fresh") > 0;
    train_options.overwrite_telemetry = values.count("overwrite-telemetry") > 0;
    if (train_options.fresh && values.count("resume"))
      throw ManifestError("--fresh starts a new run and --resume continues one: give one of them");
    if (values.count("resume")) {
      if (!resume.empty()) {
        train_options.resume = resume;
      } else if (manifest.checkpoint.dir) {
        train_options.resume = *manifest.checkpoint.dir;
      } else {
        throw ManifestError(manifest.path.string() + ": --resume without a directory needs [checkpoint] dir");
      }
    }
    const TrainResult result = run_training(manifest, registry, train_options);
    if (!result.nothing_to_train.empty()) {
      spdlog::warn("{}", result.nothing_to_train);
      return static_cast<int>(kExitSuccess);
    }
    if (result.last_checkpoint) spdlog::info("checkpoint: {}", result.last_checkpoint->string());
    spdlog::info("peak resident memory (RSS) of this process: {}", format_bytes(peak_resident_bytes()));
    if (result.stopped_by_signal != 0) return 128 + result.stopped_by_signal;  // the shell's convention: 130, 143
    return static_cast<int>(kExitSuccess);
  });
  // Every rank stops after the same step on a signal; any other failure is this rank's alone.
  if (ranks > 1 && code != kExitSuccess && code <= 128) {
    std::cerr.flush();
    communicator->abort(code);
  }
  return code;
}

int command_eval(const std::vector<std::string>& arguments) {
  CommonArguments common;
  std::string checkpoint;
  std::string data;
  po::options_description options("eval options");
  add_manifest_options(options, common);
  options.add_options()("checkpoint", po::value(&checkpoint)->required(),
                        "a checkpoint directory, a save's directory, or a model.safetensors file")(
      "data", po::value(&data), "evaluate on this file (.txt or .bin) instead of the validation split");
  po::variables_map values;
  if (auto code = parse("eval", "MANIFEST --checkpoint PATH [--data FILE]", options, arguments, values)) return *code;
  return run_guarded("eval", [&] {
    const Manifest manifest = load_command_manifest(common.manifest, common.overrides);
    PluginRegistry registry = load_plugins(manifest);
    std::optional<std::filesystem::path> data_path;
    if (!data.empty()) data_path = data;
    const double loss = run_eval(manifest, registry, checkpoint, data_path);
    std::printf("eval_loss=%.6f\n", loss);
    if (!std::isfinite(loss)) {
      std::fflush(stdout);
      std::fprintf(stderr,
                   "strata eval: the loss is not finite (%f): the checkpoint's weights or the data give "
                   "non-finite logits\n",
                   loss);
      return static_cast<int>(kExitRunFailed);
    }
    return static_cast<int>(kExitSuccess);
  });
}

int command_export(const std::vector<std::string>& arguments) {
  CommonArguments common;
  std::string checkpoint, merge, hf, dtype = "f32", shard_size = "2GiB";
  po::options_description options("export options");
  add_manifest_options(options, common);
  options.add_options()("checkpoint", po::value(&checkpoint)->required(),
                        "the run's checkpoint directory, a save's directory, or a model.safetensors file")(
      "merge", po::value(&merge),
      "write one Hugging Face safetensors file with every adapter folded into its matrix (f32)")(
      "hf", po::value(&hf),
      "write a Hugging Face model directory: config.json, sharded safetensors and their index (adapters folded in), "
      "the tokenizer's files")("dtype", po::value(&dtype), "--hf's weights: f32 (default) or bf16")(
      "shard-size", po::value(&shard_size), "--hf's most tensor bytes per shard (default 2GiB)");
  po::variables_map values;
  if (auto code = parse("export", "MANIFEST --checkpoint PATH (--merge OUT.safetensors | --hf OUT_DIR)", options,
                        arguments, values))
    return *code;
  return run_guarded("export", [&] {
    if (merge.empty() == hf.empty())
      throw ManifestError("export: give one of --merge OUT.safetensors (one file) and --hf OUT_DIR (a directory)");
    if (!merge.empty() && (values.count("dtype") != 0 || values.count("shard-size") != 0))
      throw ManifestError("export: --dtype and --shard-size go with --hf; --merge writes one f32 file");
    const std::string& out = merge.empty() ? hf : merge;
    const std::string option = merge.empty() ? "--hf" : "--merge";
    const Manifest manifest = load_command_manifest(common.manifest, common.overrides);
    if (!merge.empty()) check_output_file("--merge", merge);
    // The output must not land on what the export reads (a save's own model.safetensors).
    if (path_is_inside(out, checkpoint))
      throw ManifestError(option + " " + out + ": is inside --checkpoint " + checkpoint +
                          ", which the export reads: write it elsewhere");
    refuse_overwriting_inputs(option, out, manifest);
    PluginRegistry registry = load_plugins(manifest);
    if (!merge.empty()) {
      const MergedExport written = export_merged(manifest, registry, checkpoint, merge);
      std::printf("wrote %s: %d tensors (%d with adapters folded in), %.1f MiB\n", merge.c_str(), written.tensors,
                  written.merged_matrices, static_cast<double>(written.bytes) / (1024.0 * 1024.0));
      return static_cast<int>(kExitSuccess);
    }
    HfExportOptions hf_options;
    hf_options.dtype = dtype;
    const std::optional<std::uint64_t> shard_bytes = parse_bytes(shard_size);
    if (!shard_bytes || *shard_bytes == 0)
      throw ManifestError("--shard-size " + shard_size + ": not a size above 0 (such as 2GiB or 500MB)");
    hf_options.shard_bytes = *shard_bytes;
    const HfExport written = export_hf(manifest, registry, checkpoint, hf, hf_options);
    std::string tokenizer_files;
    for (const std::string& name : written.tokenizer_files)
      tokenizer_files += (tokenizer_files.empty() ? "" : ", ") + name;
    std::printf(
        "wrote %s: %d tensors (%d with adapters folded in) in %d shard%s, %.1f MiB of %s weights; "
        "config.json%s%s%s\n",
        hf.c_str(), written.tensors, written.merged_matrices, written.shards, written.shards == 1 ? "" : "s",
        static_cast<double>(written.tensor_bytes) / (1024.0 * 1024.0), dtype.c_str(),
        written.generation_config ? ", generation_config.json" : "", tokenizer_files.empty() ? "" : "; ",
        tokenizer_files.c_str());
    return static_cast<int>(kExitSuccess);
  });
}

int command_validate(const std::vector<std::string>& arguments) {
  CommonArguments common;
  po::options_description options("validate options");
  add_manifest_options(options, common);
  po::variables_map values;
  if (auto code = parse("validate", "MANIFEST [--set key=value]...", options, arguments, values)) return *code;
  return run_guarded("validate", [&] {
    // Every problem at once, from every stage: the manifest's keys, the plugin stack (built with
    // any faulty key at its default), the data, the device and the checkpoint directory.
    ManifestReading reading = read_manifest(common.manifest, common.overrides);
    const Manifest& manifest = reading.manifest;
    for (const std::string& note : manifest.model.notes) spdlog::warn("{}", note);
    std::vector<std::string> problems = std::move(reading.problems);
    const auto gather = [&problems](auto&& check) {
      try {
        check();
      } catch (const ManifestError& e) {
        problems.insert(problems.end(), e.problems().begin(), e.problems().end());
      } catch (const DataError& e) {
        problems.emplace_back(e.what());
      } catch (const CheckpointError& e) {
        problems.emplace_back(e.what());
      }
    };
    PluginRegistry registry = load_plugins(manifest);
    const std::unique_ptr<Backend> table_device = make_cpu_backend(0);   // for the placement check, below
    HostServicesImpl host(manifest.model.info(), manifest.device.kind);  // outlives the stack's objects
    std::optional<Stack> stack;
    gather([&] { stack.emplace(build_stack(manifest, registry, host, "console", reading.model_as_written)); });
    // The disk tier's directory can hold its file; and rows a strategy puts on disk (as `strata
    // plan` places them, nothing allocated) have a directory to go to, and no predictor.
    bool rows_on_disk = false;
    if (stack && reading.model_as_written)
      gather([&] {
        host.use_backend(*table_device);
        const std::unique_ptr<Model> model = make_model(
            manifest.model, *table_device, stack->attention_on(*table_device, manifest.model.attention_shape(1)),
            ModelOptions{manifest.train.micro_batch_rows(), state_layout_of(*stack->optimizer), Allocation::deferred,
                         stack->storage_on(*table_device), Purpose::training, stack->trainable});
        Executor executor(*model, *stack->optimizer, *stack->precision, stack->strategy_pointers(), ExecutorOptions{});
        try {
          executor.attach_without_allocating();
        } catch (const HookFailed& e) {  // a strategy refusing the placement it was asked for
          throw ManifestError(e.what());
        }
        rows_on_disk = model->store().residency().any_on_disk();
      });
    for (std::string& problem : disk_tier_problems(manifest, rows_on_disk, stack && stack->predictor))
      problems.push_back(std::move(problem));
    if (stack)
      for (std::string& problem : fused_update_problems(manifest, *stack)) problems.push_back(std::move(problem));
    const auto check_data = [&](const std::filesystem::path& path, const char* key) {
      gather([&] {
        try {
          check_data_file(path);
        } catch (const DataError& e) {
          throw DataError(std::string(e.what()) + " ([data] " + key + ")");
        }
      });
    };
    if (!manifest.data.train.empty()) check_data(manifest.data.train, "train");
    if (manifest.data.val) check_data(*manifest.data.val, "val");
    // The tokenizer reads, and its ids fit the model's embedding rows.
    if (manifest.data.tokenizer)
      gather([&] {
        check_tokenizer_fits(*load_tokenizer(*manifest.data.tokenizer), *manifest.data.tokenizer,
                             manifest.model.vocab());
      });
    // The sample prompt encodes and leaves room in the context, as train checks it.
    if (manifest.train.sample_every > 0 && !manifest.data.train.empty())
      gather([&] {
        const auto tokenizer = manifest.data.tokenizer ? load_tokenizer(*manifest.data.tokenizer) : nullptr;
        (void)sample_prompt_ids(manifest, tokenizer.get());
      });
    // The device exists in this build and machine (a kind of neither form is already named).
    if (manifest.device.kind == "cpu" || manifest.device.kind.starts_with("cuda:"))
      gather([&] { (void)backend_for(manifest); });
    if (manifest.checkpoint.dir) gather([&] { check_checkpoint_directory(*manifest.checkpoint.dir); });
    gather([&] { const RunOutputs outputs(manifest, std::nullopt, false); });  // telemetry paths, as train checks them
    if (!problems.empty()) {
      std::cerr << "strata validate: " << manifest.path.string() << ": " << problems.size()
                << (problems.size() == 1 ? " problem" : " problems") << ":\n";
      for (const std::string& problem : problems) std::cerr << problem << '\n';
      if (!reading.model_as_written)
        std::cerr << "(the plugins' own keys, which are read against the model, were left unchecked: [model] has "
                     "problems; fix those first)\n";
      return static_cast<int>(kExitInvalidInput);
    }
    std::cout << manifest.path.string() << ": ok (" << stack->description << ", " << manifest.model.parameter_count()
              << " parameters)\n";
    // A stack that validates may still not fit: the planner's dry run says so before a run does.
    // The manifest is valid whatever the dry run meets: what it cannot predict is a note, not a
    // failure.
    if (manifest.device.memory_limit > 0) {
      try {
        const MemoryPrediction prediction = predict_memory(manifest, registry);
        if (const auto warning = over_limit_warning(prediction, manifest.device.memory_limit)) {
          const std::optional<Calibration> calibration = default_calibration();
          std::cout << *warning << "\n  "
                    << fit_suggestion(manifest, registry, calibration ? &*calibration : nullptr, prediction.seconds)
                    << '\n';
        }
      } catch (const std::exception& e) {
        std::cout << "note: the peak could not be predicted (" << e.what() << ")\n";
      }
    }
    return static_cast<int>(kExitSuccess);
  });
}

namespace {

// Under the fused update a block's gradients exist from its backward to its update only: the table
// lists every block's, a run holds the global parameters' and one block's at a time.
void print_fused_gradients(const TensorTable& table) {
  std::uint64_t listed = 0, globals = 0;
  std::map<int, std::uint64_t> per_block;
  for (const TensorRow& row : table.rows()) {
    if (row.group != TensorGroup::grads) continue;
    listed += row.bytes();
    if (row.layer < 0)
      globals += row.bytes();
    else
      per_block[row.layer] += row.bytes();
  }
  std::uint64_t largest_block = 0;
  for (const auto& [layer, bytes] : per_block) largest_block = std::max(largest_block, bytes);
  std::cout << "(train.update = \"fused\": of the " << format_bytes(listed) << " of gradients listed, at most "
            << format_bytes(globals + largest_block)
            << " exist at once, the global parameters' and one block's, where the step puts them)\n";
}

}  // namespace

int command_plan(const std::vector<std::string>& arguments) {
  CommonArguments common;
  po::options_description options("plan options");
  add_manifest_options(options, common);
  options.add_options()("full", "print every layer's rows instead of folding layers together")(
      "json", "print the prediction as one JSON object, and nothing else")(
      "calibration", po::value<std::string>(),
      "the machine's calibration for the step time (default: where `strata calibrate` writes it)")(
      "fit", po::value<std::string>(),
      "device=SIZE[,host=SIZE][,disk=SIZE]: search the stacks the plugins offer for the fastest that fits")(
      "allow-numerics",
      "with --fit, also try bf16, int8 and nf4 storage and 8-bit optimizer state (they change the numbers)")(
      "write", po::value<std::string>(), "with --fit, write the stack chosen as a manifest")(
      "html", po::value<std::string>(), "also write the prediction, with its within-step memory, as an HTML page")(
      "ranks", po::value<int>(), "predict each rank's memory of a data-parallel run of N ranks ([distributed] zero)");
  po::variables_map values;
  if (auto code = parse("plan",
                        "MANIFEST [--set key=value]... [--full] [--json] [--html FILE] [--calibration FILE] "
                        "[--fit device=SIZE[,host=SIZE][,disk=SIZE] [--allow-numerics] [--write OUT.toml]] "
                        "[--ranks N]",
                        options, arguments, values))
    return *code;
  return run_guarded("plan", [&] {
    // The table is built against an unlimited arena: plan shows what a run needs, whatever the limit.
    // It outlives the plugins, whose memory (HostServices::memory) comes from its arenas.
    // stdout carries the JSON alone: the log (the stack's and a plugin's lines) goes to stderr.
    if (values.count("json")) spdlog::set_default_logger(spdlog::stderr_color_mt("strata-plan"));
    std::unique_ptr<Backend> device;  // declared first: it goes last
    InspectedStack inspected(common, "");
    const Manifest& manifest = inspected.manifest;
    // The dry run's backend, so that the table holds the rows the prediction counts (a GPU's run
    // declares rows for the ops it offers: the LM head's narrowed hidden state).
    device = std::make_unique<DryBackend>(0, manifest.device.kind.starts_with("cuda"));
    // The calibration named (unreadable: invalid input), or the default one when it exists
    // (unreadable: a warning, and no step time).
    std::optional<Calibration> calibration;
    if (values.count("calibration")) {
      try {
        calibration = load_calibration(values["calibration"].as<std::string>());
      } catch (const std::invalid_argument& e) {
        throw ManifestError(std::string("--calibration: ") + e.what());
      }
    } else {
      calibration = default_calibration();
    }
    // --fit ranks stacks by their step time: without a calibration it measures this machine's
    // once (about 15 s on 2 cores) and keeps it where the next plan looks.
    if (!calibration && values.count("fit")) {
      const std::filesystem::path saved = default_calibration_path();
      spdlog::info(
          "--fit ranks stacks by their predicted step time and there is no calibration at {}: timing "
          "this machine's ops now, as `strata calibrate` does",
          saved.string());
      calibration = measure_calibration(manifest.train.threads, std::nullopt, [](std::string_view) {});
      try {
        save_calibration(*calibration, saved);
        calibration->path = saved;
        spdlog::info("kept at {} for the next plan", saved.string());
      } catch (const std::exception& e) {
        calibration->path = "this machine, timed now";
        spdlog::warn("the calibration is not kept ({}); this plan uses it", e.what());
      }
    }
    const Calibration* rates = calibration ? &*calibration : nullptr;
    std::optional<std::filesystem::path> html;
    if (values.count("html")) {
      if (values.count("fit")) throw ManifestError("--html draws one stack's plan: it goes without --fit");
      html = values["html"].as<std::string>();
      check_output_file("--html", *html);
      refuse_overwriting_inputs("--html", *html, manifest);
    }
    // The prediction, and the page when one is asked for.
    const auto predict = [&] {
      MemoryTimeline timeline;
      MemoryPrediction prediction = predict_memory(manifest, inspected.registry, rates, nullptr, &timeline);
      if (html) {
        std::ostringstream page;
        write_plan_html(page, manifest, prediction, rates, timeline);
        write_file_atomically(*html, page.str());
        spdlog::info("plan: wrote {}", html->string());
      }
      return prediction;
    };
    if (values.count("ranks")) {
      const int ranks = values["ranks"].as<int>();
      if (ranks < 1 || ranks > 1024) throw ManifestError("--ranks " + std::to_string(ranks) + ": give 1 to 1024 ranks");
      if (values.count("fit") || values.count("json") || values.count("html"))
        throw ManifestError("--ranks prints its own table: it goes without --fit, --json and --html");
      std::vector<MemoryPrediction> predictions;
      for (int rank = 0; rank < ranks; ++rank)
        predictions.push_back(
            predict_memory(manifest, inspected.registry, nullptr, nullptr, nullptr, PlannedRank{rank, ranks}));
      Manifest replicated = manifest;  // the ideal's reference: the same ranks without sharding
      replicated.distributed.zero = 0;
      const MemoryPrediction reference =
          predict_memory(replicated, inspected.registry, nullptr, nullptr, nullptr, PlannedRank{0, ranks});
      print_rank_predictions(std::cout, manifest.distributed.zero, predictions, reference);
      return static_cast<int>(kExitSuccess);
    }
    if (values.count("fit")) {
      return run_fit(manifest, inspected.registry, *rates, values["fit"].as<std::string>(),
                     values.count("allow-numerics") > 0,
                     values.count("write") ? std::optional(values["write"].as<std::string>()) : std::nullopt);
    }
    if (values.count("allow-numerics") || values.count("write"))
      throw ManifestError("--allow-numerics and --write go with --fit");
    if (values.count("json")) {
      std::cout << prediction_json(predict(), rates).dump(2) << '\n';
      return static_cast<int>(kExitSuccess);
    }
    inspected.host.use_backend(*device);
    const std::unique_ptr<Model> model_owner =
        make_model(manifest.model, *device, inspected.stack.attention_on(*device, manifest.model.attention_shape(1)),
                   ModelOptions{manifest.train.micro_batch_rows(), state_layout_of(*inspected.stack.optimizer),
                                Allocation::deferred, inspected.stack.storage_on(*device), Purpose::training,
                                inspected.stack.trainable});
    Model& model = *model_owner;
    // The strategies place the rows (on_attach) as they would for training; nothing is allocated.
    Executor executor(model, *inspected.stack.optimizer, *inspected.stack.precision,
                      inspected.stack.strategy_pointers(), ExecutorOptions{});
    executor.attach_without_allocating();
    model.table().print(std::cout, !values.count("full"));
    std::cout
        << "(activations are allocated per micro batch; all layers' rows are live at the end of the forward pass)\n";
    if (manifest.train.update == UpdateMode::fused) print_fused_gradients(model.table());
    const MemoryPrediction prediction = predict();
    print_prediction(std::cout, prediction, rates);
    if (const auto warning = over_limit_warning(prediction, manifest.device.memory_limit))
      std::cout << *warning << "\n  " << fit_suggestion(manifest, inspected.registry, rates, prediction.seconds)
                << '\n';
    return static_cast<int>(kExitSuccess);
  });
}

int command_plugins(const std::vector<std::string>& arguments) {
  po::options_description options("plugins options");
  options.add_options()("verbose,v", "show each factory's config keys, requirements and conflicts");
  po::variables_map values;
  if (auto code = parse("plugins", "[--verbose]", options, arguments, values, false)) return *code;
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const bool verbose = values.count("verbose") > 0;
  // The plugins are created once with every key at its default to see which keys they read; a
  // default model stands in for the manifest's.
  HostServicesImpl host(Manifest{}.model.info());
  std::cout << "search path:\n";
  for (const auto& [directory, shipped] : plugin_search_path({}))
    std::cout << "  " << directory.string() << (shipped ? "  (shipped)" : "")
              << (std::find(registry.searched().begin(), registry.searched().end(), directory) ==
                          registry.searched().end()
                      ? "  (not found)"
                      : "")
              << '\n';
  std::cout << "\nplugins:\n";
  for (const auto& plugin : registry.plugins()) {
    const PluginDescriptor& d = *plugin->descriptor;
    std::cout << "  " << d.name << ' ' << d.version << "  (ABI " << d.abi_major << '.' << d.abi_minor << ")  "
              << plugin->path.string() << '\n';
    for (std::size_t i = 0; i < d.factory_count; ++i) {
      const FactoryDescriptor& f = d.factories[i];
      std::cout << "    " << interface_name(f.kind) << " '" << f.name << "'"
                << (f.summary ? std::string(": ") + f.summary : "") << '\n';
      if (auto check = check_with_defaults({plugin.get(), &f}, host)) {
        for (const std::string& key : check->unread_keys)
          std::cout << "      warning: declares key '" << key << "' but does not read it (with every key at "
                    << "its default): setting it has no effect\n";
        for (const std::string& problem : check->problems) std::cout << "      warning: " << problem << '\n';
      }
      if (!verbose) continue;
      auto print_names = [](const char* title, const NameList& names) {
        if (names.empty()) return;
        std::cout << "      " << title << ':';
        for (const char* name : names) std::cout << ' ' << name;
        std::cout << '\n';
      };
      print_names("keys", f.config_keys);
      print_names("requires", f.requires_plugins);
      print_names("conflicts with", f.conflicts_with);
    }
  }
  std::cout << "  built in: kernel 'fast' and 'reference' (op attention)\n";
  if (!registry.failures().empty()) {
    std::cout << "\nfailed to load:\n";
    for (const LoadFailure& failure : registry.failures())
      std::cout << "  " << failure.path.string() << ": " << failure.reason << '\n';
  }
  return kExitSuccess;
}

}  // namespace strata
