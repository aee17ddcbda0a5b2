#include "core/data/corpus.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <fstream>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/data/token_file.hpp"
#include "core/tokenizer/utf8.hpp"

namespace strata {
namespace {

constexpr std::size_t kReadBlock = 8u << 20;    // bytes read at a time
constexpr std::size_t kBatchBytes = 32u << 20;  // text tokenized between two emits
// A .txt chunk's size, about: SentencePiece's encoder holds some hundred bytes per character of its
// input, so a chunk of 8 MiB would cost gigabytes.
constexpr std::size_t kChunkBytes = 256u << 10;
constexpr std::size_t kLargeUncutBytes = 64u << 20;  // text held whole past this gets a warning

struct Unit {
  std::string text;
  const std::filesystem::path* file;
  std::uint64_t line;         // .jsonl: 1-based; 0 for a .txt chunk
  std::uint64_t offset;       // in the whole input, for the validation split
  std::uint64_t file_offset;  // in its own file: where a message points
  bool document_start;
  bool document_end;
  std::vector<std::uint32_t> ids;
  std::size_t prompt_ids = 0;  // prompt and completion lines: how many of `ids` are the prompt's
};

class Batcher {
 public:
  Batcher(const Tokenizer& tokenizer, const CorpusOptions& options, std::uint64_t bytes_total, const CorpusEmit& emit)
      : tokenizer_(tokenizer), options_(options), emit_(emit) {
    summary_.totals.bytes_total = bytes_total;
    val_from_ = static_cast<std::uint64_t>(static_cast<double>(bytes_total) * (1.0 - options.val_fraction));
    const int threads = std::max(1, options.threads);
    for (int t = 0; t < threads; ++t) encoders_.push_back(tokenizer.make_encoder());
  }

  void add(Unit unit) {
    pending_bytes_ += unit.text.size();
    units_.push_back(std::move(unit));
    if (pending_bytes_ >= kBatchBytes) flush();
  }

  void flush() {
    if (units_.empty()) return;
    encode_all();
    for (Unit& unit : units_) {
      const bool to_validation = options_.val_fraction > 0.0 && unit.offset >= val_from_;
      frame_.clear();
      if (unit.document_start && tokenizer_.special().add_bos) frame_.push_back(*tokenizer_.special().bos);
      const std::size_t not_targets = frame_.size() + unit.prompt_ids;  // bos and the prompt
      frame_.insert(frame_.end(), unit.ids.begin(), unit.ids.end());
      if (unit.document_end && tokenizer_.special().eos) frame_.push_back(*tokenizer_.special().eos);
      targets_.clear();
      if (options_.prompt_completion) {
        targets_.assign(frame_.size(), 1);
        std::fill_n(targets_.begin(), static_cast<std::ptrdiff_t>(not_targets), std::uint8_t{0});
        summary_.targets += frame_.size() - not_targets;
      }
      emit_(frame_, targets_, to_validation);
      (to_validation ? summary_.val_tokens : summary_.train_tokens) += frame_.size();
      summary_.totals.tokens += frame_.size();
      summary_.totals.bytes_done += unit.text.size();
      if (unit.document_end) ++summary_.totals.documents;
    }
    units_.clear();
    pending_bytes_ = 0;
    if (options_.progress) options_.progress(summary_.totals);
  }

  const CorpusSummary& summary() const { return summary_; }

 private:
  // Each thread takes the next unit; a .jsonl line is parsed on the thread that encodes it.
  void encode_all() {
    std::atomic<std::size_t> next{0};
    std::exception_ptr failure;
    std::atomic<bool> failed{false};
    const auto work = [&](TokenEncoder& encoder, std::exception_ptr& error) {
      try {
        for (std::size_t i = next++; i < units_.size() && !failed; i = next++) encode_unit(encoder, units_[i]);
      } catch (...) {
        error = std::current_exception();
        failed = true;
      }
    };
    std::vector<std::exception_ptr> errors(encoders_.size());
    std::vector<std::thread> threads;
    for (std::size_t t = 1; t < encoders_.size(); ++t)
      threads.emplace_back(work, std::ref(*encoders_[t]), std::ref(errors[t]));
    work(*encoders_[0], errors[0]);
    for (auto& thread : threads) thread.join();
    for (auto& error : errors)
      if (error) std::rethrow_exception(error);
  }

  void encode_unit(TokenEncoder& encoder, Unit& unit) const {
    std::string where = unit.file->string();
    if (unit.line > 0) where += ":" + std::to_string(unit.line);
    std::string_view text = unit.text;
    std::string field_text;
    if (unit.line > 0) {
      nlohmann::json object;
      try {
        object = nlohmann::json::parse(unit.text);
      } catch (const nlohmann::json::exception& error) {
        throw DataError(where + ": not a JSON line: " + error.what());
      }
      if (options_.prompt_completion) {
        encode_prompt_completion(encoder, unit, object, where);
        return;
      }
      if (!object.is_object() || !object.contains(options_.field) || !object[options_.field].is_string())
        throw DataError(where + ": no string field \"" + options_.field + "\" (--field names another)");
      field_text = object[options_.field].get<std::string>();
      text = field_text;
    }
    try {
      encoder.encode(text, unit.ids);
    } catch (const TokenizerError& error) {
      // A chunk of a .txt file: a bad byte's offset in the file, found again only on this path.
      if (unit.line == 0)
        if (const auto bad = first_invalid_utf8(text))
          throw DataError(where + ": the text is not valid UTF-8 at byte " + std::to_string(unit.file_offset + *bad));
      throw DataError(where + ": " + error.what() + (unit.line > 0 ? " of its text" : " of this chunk"));
    }
  }

  // The prompt's ids, then the completion's (each encoded on its own, as a fine-tuning library does).
  static void encode_prompt_completion(TokenEncoder& encoder, Unit& unit, const nlohmann::json& object,
                                       const std::string& where) {
    for (const char* field : {"prompt", "completion"})
      if (!object.is_object() || !object.contains(field) || !object[field].is_string())
        throw DataError(where + ": no string field \"" + field +
                        "\" (--prompt-completion reads lines of {\"prompt\": ..., \"completion\": ...})");
    std::vector<std::uint32_t> completion;
    try {
      encoder.encode(object["prompt"].get<std::string>(), unit.ids);
      encoder.encode(object["completion"].get<std::string>(), completion);
    } catch (const TokenizerError& error) {
      throw DataError(where + ": " + error.what() + " of its prompt or completion");
    }
    if (completion.empty()) throw DataError(where + ": an empty completion: nothing would be learned from it");
    unit.prompt_ids = unit.ids.size();
    unit.ids.insert(unit.ids.end(), completion.begin(), completion.end());
  }

  const Tokenizer& tokenizer_;
  const CorpusOptions& options_;
  const CorpusEmit& emit_;
  std::vector<std::unique_ptr<TokenEncoder>> encoders_;
  std::vector<Unit> units_;
  std::size_t pending_bytes_ = 0;
  std::uint64_t val_from_ = 0;
  std::vector<std::uint32_t> frame_;
  std::vector<std::uint8_t> targets_;
  CorpusSummary summary_;
};

class InputFile {
 public:
  explicit InputFile(const std::filesystem::path& path) : path_(path), in_(path, std::ios::binary) {
    check_data_file(path);
    if (!in_) throw DataError(path.string() + ": cannot open for reading");
  }
  // Appends up to kReadBlock bytes; false at the end of the file.
  bool read_more(std::string& into) {
    const std::size_t before = into.size();
    into.resize(before + kReadBlock);
    in_.read(into.data() + before, static_cast<std::streamsize>(kReadBlock));
    into.resize(before + static_cast<std::size_t>(in_.gcount()));
    if (in_.bad()) throw DataError(path_.string() + ": read error");
    return into.size() > before;
  }

 private:
  const std::filesystem::path& path_;
  std::ifstream in_;
};

void read_text(const std::filesystem::path& path, const Tokenizer& tokenizer, std::uint64_t& offset, Batcher& batcher) {
  InputFile file(path);
  std::string pending;
  bool first = true, warned = false;
  const std::uint64_t file_start = offset;
  while (file.read_more(pending)) {
    // Chunks of about kChunkBytes, each ending at the last exact cut within its first kChunkBytes; a
    // stretch with no cut there ends at the last cut of the smallest window, doubled, that holds one.
    std::size_t done = 0;
    while (pending.size() - done > kChunkBytes) {
      const std::string_view rest = std::string_view(pending).substr(done);
      // The last cut in the first kChunkBytes, else in windows twice as long, and so on.
      std::optional<TextCut> cut;
      for (std::size_t window = kChunkBytes; !cut; window *= 2) {
        cut = tokenizer.last_exact_cut(rest.substr(0, window));
        if (window >= rest.size()) break;
      }
      if (!cut) break;
      batcher.add(
          Unit{std::string(rest.substr(0, cut->end)), &path, 0, offset, offset - file_start, first, false, {}, 0});
      offset += cut->resume;
      done += cut->resume;
      first = false;
    }
    pending.erase(0, done);
    if (!warned && pending.size() >= kLargeUncutBytes) {
      spdlog::warn(
          "{}: {} MiB read without a place where the {} tokenizer can be cut exactly: the text is "
          "encoded whole, which takes some hundred bytes of memory per byte for a SentencePiece model; "
          "a .jsonl of documents is encoded document by document",
          path.string(), pending.size() >> 20, tokenizer.kind());
      warned = true;
    }
  }
  const std::uint64_t size = pending.size();
  batcher.add(Unit{std::move(pending), &path, 0, offset, offset - file_start, first, true, {}, 0});
  offset += size;
}

void read_jsonl(const std::filesystem::path& path, std::uint64_t& offset, Batcher& batcher) {
  InputFile file(path);
  std::string pending;
  std::uint64_t line = 0;
  const auto take_line = [&](std::size_t end, std::size_t skip) {
    ++line;
    std::string text = pending.substr(0, end);
    const std::uint64_t start = offset;
    offset += end + skip;
    pending.erase(0, end + skip);
    if (text.find_first_not_of(" \t\r") == std::string::npos) return;  // a blank line is no document
    batcher.add(Unit{std::move(text), &path, line, start, 0, true, true, {}, 0});
  };
  while (file.read_more(pending)) {
    for (std::size_t newline; (newline = pending.find('\n')) != std::string::npos;) take_line(newline, 1);
  }
  if (!pending.empty()) take_line(pending.size(), 0);
}

}  // namespace

std::optional<CorpusFormat> corpus_format(const std::filesystem::path& path) {
  std::string suffix = path.extension().string();
  std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::tolower(c); });
  if (suffix == ".jsonl") return CorpusFormat::jsonl;
  if (suffix == ".json") return std::nullopt;
  return CorpusFormat::text;
}

CorpusSummary tokenize_corpus(const std::vector<std::filesystem::path>& inputs, const Tokenizer& tokenizer,
                              const CorpusOptions& options, const CorpusEmit& emit) {
  std::uint64_t total = 0;
  for (const auto& input : inputs) {
    check_data_file(input);
    if (!corpus_format(input))
      throw DataError(input.string() + ": a .json file is not a corpus: one JSON object per line is (.jsonl)");
    if (options.prompt_completion && *corpus_format(input) != CorpusFormat::jsonl)
      throw DataError(input.string() + ": prompt and completion lines come in a .jsonl file, one object per line");
    total += std::filesystem::file_size(input);
  }
  Batcher batcher(tokenizer, options, total, emit);
  std::uint64_t offset = 0;
  for (const auto& input : inputs) {
    if (*corpus_format(input) == CorpusFormat::jsonl)
      read_jsonl(input, offset, batcher);
    else
      read_text(input, tokenizer, offset, batcher);
  }
  batcher.flush();
  return batcher.summary();
}

}  // namespace strata
