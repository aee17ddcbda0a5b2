// strata prepare: text to token files. .txt and .jsonl inputs are tokenized by a Hugging Face or
// SentencePiece tokenizer (core/tokenizer/) on every core, streamed so inputs larger than memory
// work, and written atomically as llm.c token files (core/data/token_file.hpp): version 1 (uint16)
// when the vocabulary fits, version 2 otherwise. With --prompt-completion, .jsonl lines of prompt
// and completion, and a loss mask beside each token file (core/data/loss_mask.hpp): the completions
// are the targets.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "command_line_style.hpp"
#include "commands.hpp"
#include "core/data/corpus.hpp"
#include "core/data/loss_mask.hpp"
#include "core/data/token_file.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/util/format_bytes.hpp"
#include "exit_codes.hpp"

namespace strata {
namespace {

constexpr const char* kSynopsis =
    "--tokenizer DIR --out TRAIN.bin [--val-out VAL.bin [--val-fraction F]] [--field NAME | --prompt-completion] "
    "[--threads N] INPUT...";

// One line, redrawn in place on a terminal: percent, MB/s and tokens/s so far.
class ProgressLine {
 public:
  ProgressLine() : terminal_(::isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  void update(const CorpusProgress& progress) {
    if (!terminal_) return;
    const double elapsed = std::max(seconds(), 1e-9);
    const double fraction = progress.bytes_total > 0
                                ? static_cast<double>(progress.bytes_done) / static_cast<double>(progress.bytes_total)
                                : 1.0;
    const int filled = static_cast<int>(fraction * 30);
    std::ostringstream line;
    line << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
         << std::string(static_cast<std::size_t>(30 - filled), ' ') << "] " << std::setw(3)
         << static_cast<int>(fraction * 100) << "%  " << std::fixed << std::setprecision(1)
         << static_cast<double>(progress.bytes_done) / 1e6 / elapsed << " MB/s  "
         << static_cast<double>(progress.tokens) / 1e6 / elapsed << "M tokens/s  " << progress.documents
         << " documents";
    std::cerr << line.str() << std::flush;
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::cerr << '\n';
  }

 private:
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

int command_prepare(const std::vector<std::string>& arguments) {
  namespace po = boost::program_options;
  std::string tokenizer_dir, out, val_out, field = "text";
  std::vector<std::string> inputs;
  double val_fraction = 0.0;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  po::options_description options("prepare options");
  options.add_options()("help,h", "show this help")(
      "tokenizer", po::value(&tokenizer_dir)->required(),
      "a directory holding tokenizer.json or tokenizer.model (a Hugging Face model directory)")(
      "out", po::value(&out)->required(), "the training token file to write")(
      "val-out", po::value(&val_out), "a validation token file to write from the end of the input")(
      "val-fraction", po::value(&val_fraction), "the share of the input bytes for --val-out (default 0.1)")(
      "field", po::value(&field), "the text field of .jsonl lines (default text)")(
      "prompt-completion",
      ".jsonl lines of {\"prompt\": ..., \"completion\": ...}: the loss is taken on the completions (and eos) "
      "alone, through a loss mask written beside each token file (TRAIN.bin.mask)")(
      "threads", po::value(&threads), "tokenizing threads (default: every core)")(
      "input", po::value(&inputs)->composing(), ".txt files (one document each) and .jsonl files (one per line)");
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(arguments).options(options).positional(positional).style(kCommandLineStyle).run(),
              values);
    if (values.count("help")) {
      std::cout << "usage: strata prepare " << kSynopsis << "\n\n" << options;
      return kExitSuccess;
    }
    po::notify(values);
    if (inputs.empty()) throw po::error("no INPUT files");
    if (values.count("val-fraction") && val_out.empty()) throw po::error("--val-fraction needs --val-out");
    if (!val_out.empty() && !values.count("val-fraction")) val_fraction = 0.1;
    if (!val_out.empty() && !(val_fraction > 0.0 && val_fraction <= 0.5))
      throw po::error("--val-fraction " + std::to_string(val_fraction) + " is outside (0, 0.5]");
    if (threads < 1 || threads > 256) throw po::error("--threads " + std::to_string(threads) + " is outside 1..256");
    if (values.count("prompt-completion") && values.count("field"))
      throw po::error("--field names the text of plain lines; --prompt-completion reads prompt and completion");
  } catch (const po::error& e) {
    std::cerr << "strata prepare: " << e.what() << "\nusage: strata prepare " << kSynopsis << '\n';
    return kExitInvalidInput;
  }

  const bool prompt_completion = values.count("prompt-completion") > 0;
  try {
    check_output_file("--out", out);
    if (!val_out.empty()) check_output_file("--val-out", val_out);
    std::vector<std::string> outputs{out};
    if (!val_out.empty()) outputs.push_back(val_out);
    for (const std::string& output : std::vector<std::string>(outputs))
      if (prompt_completion || std::filesystem::exists(loss_mask_path(output))) {
        check_output_file("the loss mask of " + output, loss_mask_path(output).string());
        outputs.push_back(loss_mask_path(output).string());
      }
    std::error_code error;
    for (const std::string& input : inputs)
      for (const std::string& output : outputs)
        if (std::filesystem::equivalent(input, output, error))
          throw ManifestError(input + ": is both an input and an output");
    if (!val_out.empty() && std::filesystem::absolute(out) == std::filesystem::absolute(val_out))
      throw ManifestError("--out and --val-out name the same file " + out);

    const auto tokenizer = load_tokenizer(tokenizer_dir);
    const bool wide = tokenizer->vocab_size() > 65536;
    TokenFileWriter train(out, wide);
    std::optional<TokenFileWriter> val;
    if (!val_out.empty()) val.emplace(val_out, wide);
    std::optional<LossMaskWriter> train_mask, val_mask;
    if (prompt_completion) train_mask.emplace(loss_mask_path(out));
    if (prompt_completion && val) val_mask.emplace(loss_mask_path(val_out));
    std::vector<bool> used(static_cast<std::size_t>(tokenizer->vocab_size()), false);
    ProgressLine progress;
    CorpusOptions corpus;
    corpus.field = field;
    corpus.prompt_completion = prompt_completion;
    corpus.threads = threads;
    corpus.val_fraction = val_fraction;
    corpus.progress = [&](const CorpusProgress& p) { progress.update(p); };
    std::vector<std::filesystem::path> paths(inputs.begin(), inputs.end());
    const CorpusSummary summary = tokenize_corpus(
        paths, *tokenizer, corpus,
        [&](std::span<const std::uint32_t> ids, std::span<const std::uint8_t> targets, bool to_validation) {
          for (std::uint32_t id : ids) used[id] = true;
          (to_validation ? *val : train).append(ids);
          if (prompt_completion) (to_validation ? *val_mask : *train_mask).append(targets);
        });
    progress.finish();
    if (val && val->count() == 0)
      throw DataError("--val-out " + val_out + ": no input falls in the last " + std::to_string(val_fraction) +
                      " of the bytes at a document or chunk boundary; give more input or a larger --val-fraction");
    if (train.count() == 0) throw DataError("the inputs hold no text: " + out + " would be empty");
    // The masks first: a token file is never in place beside a mask of other tokens.
    if (train_mask) train_mask->commit(train.token_hash());
    if (val_mask) val_mask->commit(val->token_hash());
    train.commit();
    if (val) val->commit();
    // A mask of an earlier prepare beside a token file written now without one would be refused
    // at training (it was written for other tokens): it goes, said so.
    for (const std::string& written : {out, val_out})
      if (!prompt_completion && !written.empty() && is_loss_mask_file(loss_mask_path(written))) {
        std::filesystem::remove(loss_mask_path(written));
        std::cerr << "strata prepare: removed " << loss_mask_path(written).string()
                  << ", the loss mask of the token file written before\n";
      }
    if (!tokenizer->special().eos)
      std::cerr << "strata prepare: warning: the tokenizer has no eos token (tokenizer_config.json eos_token), so "
                   "documents follow each other with no separator\n";

    const double seconds = std::max(progress.seconds(), 1e-9);
    const auto used_ids = std::count(used.begin(), used.end(), true);
    const auto mb = static_cast<double>(summary.totals.bytes_done) / 1e6;
    std::cout << "tokenizer: " << tokenizer->kind() << " from " << tokenizer_dir << ", vocabulary "
              << tokenizer->vocab_size() << " (" << used_ids << " ids used)\n";
    std::cout << "wrote " << out << ": " << summary.train_tokens << " tokens (version " << (wide ? 2 : 1) << ", "
              << (wide ? "uint32" : "uint16") << ")\n";
    if (val) std::cout << "wrote " << val_out << ": " << summary.val_tokens << " tokens\n";
    if (train_mask)
      std::cout << "wrote " << loss_mask_path(out).string() << ": " << train_mask->targets() << " of "
                << train_mask->count() << " tokens are targets (the completions and eos)\n";
    if (val_mask)
      std::cout << "wrote " << loss_mask_path(val_out).string() << ": " << val_mask->targets() << " of "
                << val_mask->count() << " tokens are targets\n";
    std::cout << std::fixed << std::setprecision(1) << summary.totals.documents << " documents, " << mb << " MB in "
              << seconds << " s on " << threads << " threads: " << mb / seconds << " MB/s, "
              << static_cast<double>(summary.totals.tokens) / seconds / 1e6 << "M tokens/s\n";
    return kExitSuccess;
  } catch (const DataError& e) {
    std::cerr << "strata prepare: " << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const ManifestError& e) {
    std::cerr << "strata prepare: " << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const std::exception& e) {
    std::cerr << "strata prepare: " << e.what() << '\n';
    return kExitRunFailed;
  }
}

}  // namespace strata
