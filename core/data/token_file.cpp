#include "core/data/token_file.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "core/errors/data_error.hpp"
#include "core/util/atomic_file.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace strata {

void check_data_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw DataError(path.string() + ": no such file");
  if (std::filesystem::is_directory(path, error)) throw DataError(path.string() + ": is a directory, not a data file");
  // A FIFO would block forever and a device such as /dev/zero never ends: regular files only.
  if (!std::filesystem::is_regular_file(path, error))
    throw DataError(path.string() + ": not a regular file (data is read from regular files only)");
}

TokenFileLayout token_file_layout(std::span<const char> head, std::uint64_t file_size,
                                  const std::filesystem::path& path) {
  const std::size_t header_bytes = kTokenFileHeaderInts * sizeof(std::int32_t);
  if (head.size() < header_bytes || file_size < header_bytes)
    throw DataError(path.string() + ": truncated token file: " + std::to_string(file_size) +
                    " bytes, shorter than the 1024-byte header");
  std::array<std::int32_t, kTokenFileHeaderInts> header{};
  std::memcpy(header.data(), head.data(), header_bytes);
  if (header[0] != kTokenFileMagic)
    throw DataError(path.string() + ": wrong magic number " + std::to_string(header[0]) + " (expected " +
                    std::to_string(kTokenFileMagic) + "): not an llm.c token file");
  const std::int32_t version = header[1];
  if (version != kTokenFileVersionU16 && version != kTokenFileVersionU32)
    throw DataError(path.string() + ": unsupported token file version " + std::to_string(version) +
                    " (expected 1 for uint16 tokens or 2 for uint32 tokens)");
  if (header[2] < 0) throw DataError(path.string() + ": negative token count " + std::to_string(header[2]));
  const auto count = static_cast<std::size_t>(header[2]);
  const std::size_t width = version == kTokenFileVersionU16 ? sizeof(std::uint16_t) : sizeof(std::uint32_t);
  const std::uint64_t expected = header_bytes + static_cast<std::uint64_t>(count) * width;
  if (file_size != expected)
    throw DataError(path.string() + ": " + (file_size < expected ? "truncated token file" : "token file too long") +
                    ": the version-" + std::to_string(version) + " header promises " + std::to_string(count) +
                    (version == kTokenFileVersionU16 ? " uint16" : " uint32") + " tokens (expected " +
                    std::to_string(expected) + " bytes) but the file has " + std::to_string(file_size) + " bytes");
  const std::uint64_t token_hash = static_cast<std::uint64_t>(static_cast<std::uint32_t>(header[3])) |
                                   static_cast<std::uint64_t>(static_cast<std::uint32_t>(header[4])) << 32;
  return {count, width, header_bytes, token_hash};
}

namespace {

std::vector<char> read_all(const std::filesystem::path& path) {
  check_data_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot open for reading");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError(path.string() + ": read error");
  return bytes;
}

// Decodes count stored ids straight into uint32, without a second full-size buffer. Token files
// are little-endian, as is every host Strata builds for.
template <typename Stored>
std::vector<std::uint32_t> widen_tokens(const char* data, std::size_t count) {
  std::vector<std::uint32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) {
    Stored id;
    std::memcpy(&id, data + i * sizeof(Stored), sizeof(Stored));
    tokens[i] = id;
  }
  return tokens;
}

std::vector<std::uint32_t> parse_bin(const std::filesystem::path& path, std::span<const char> bytes) {
  const TokenFileLayout layout = token_file_layout(bytes, bytes.size(), path);
  const char* data = bytes.data() + layout.first_token;
  return layout.width == sizeof(std::uint16_t) ? widen_tokens<std::uint16_t>(data, layout.count)
                                               : widen_tokens<std::uint32_t>(data, layout.count);
}

}  // namespace

std::vector<std::uint32_t> load_tokens(const std::filesystem::path& path, int vocab) {
  return parse_tokens(read_all(path), path, vocab);
}

TokenFileFormat token_file_format(std::span<const char> bytes, const std::filesystem::path& path) {
  std::string suffix = path.extension().string();
  std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char c) { return std::tolower(c); });
  std::int32_t magic = 0;
  if (bytes.size() >= sizeof magic) std::memcpy(&magic, bytes.data(), sizeof magic);
  if (magic == kTokenFileMagic || suffix == ".bin") return TokenFileFormat::llmc_tokens;
  if (suffix == ".jsonl" || suffix == ".json") return TokenFileFormat::json;
  return TokenFileFormat::text_bytes;
}

TokenFileFormat token_file_format(const std::filesystem::path& path) {
  std::vector<char> head(4);  // the magic number
  std::ifstream in(path, std::ios::binary);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return token_file_format(head, path);
}

std::vector<std::uint32_t> parse_tokens(std::span<const char> bytes, const std::filesystem::path& path, int vocab) {
  std::vector<std::uint32_t> tokens;
  const TokenFileFormat format = token_file_format(bytes, path);
  if (format == TokenFileFormat::json)
    throw DataError(path.string() +
                    ": JSON is not a corpus format Strata reads (training on it would learn its braces and "
                    "quotes): extract the text to a .txt file, or tokenize it into an llm.c .bin token file");
  if (format == TokenFileFormat::llmc_tokens) {
    tokens = parse_bin(path, bytes);
  } else {
    if (vocab < 256)
      throw DataError(path.string() +
                      ": text files use the byte tokenizer (256 tokens) but model.vocab = " + std::to_string(vocab));
    tokens.reserve(bytes.size());
    for (char byte : bytes) tokens.push_back(static_cast<unsigned char>(byte));
  }
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (static_cast<std::int64_t>(tokens[i]) >= vocab)
      throw DataError(path.string() + ": token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                      " is outside the model's vocabulary (model.vocab = " + std::to_string(vocab) + ")");
  return tokens;
}

void write_token_file(const std::filesystem::path& path, const std::vector<std::uint32_t>& tokens) {
  const bool narrow = std::all_of(tokens.begin(), tokens.end(),
                                  [](std::uint32_t id) { return id <= std::numeric_limits<std::uint16_t>::max(); });
  TokenFileWriter writer(path, !narrow);
  writer.append(tokens);
  writer.commit();
}

namespace {

std::string token_file_header(bool wide, std::int64_t count, std::uint64_t token_hash) {
  std::array<std::int32_t, kTokenFileHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = wide ? kTokenFileVersionU32 : kTokenFileVersionU16;
  header[2] = static_cast<std::int32_t>(count);
  header[3] = static_cast<std::int32_t>(static_cast<std::uint32_t>(token_hash));
  header[4] = static_cast<std::int32_t>(static_cast<std::uint32_t>(token_hash >> 32));
  return std::string(reinterpret_cast<const char*>(header.data()), sizeof header);
}

}  // namespace

TokenFileWriter::TokenFileWriter(const std::filesystem::path& path, bool wide)
    : path_(path),
      wide_(wide),
      file_(path),
      hash_(XXH3_createState(), [](void* state) { XXH3_freeState(static_cast<XXH3_state_t*>(state)); }) {
  if (hash_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(hash_.get()));
  file_.append(token_file_header(wide_, 0, 0));
}

std::uint64_t TokenFileWriter::token_hash() const noexcept {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(hash_.get()));
}

void TokenFileWriter::append(std::span<const std::uint32_t> ids) {
  if (count_ + static_cast<std::int64_t>(ids.size()) > std::numeric_limits<std::int32_t>::max())
    throw DataError(path_.string() + ": more than " + std::to_string(std::numeric_limits<std::int32_t>::max()) +
                    " tokens, more than a token file's int32 count can hold");
  buffer_.clear();
  if (wide_) {
    buffer_.append(reinterpret_cast<const char*>(ids.data()), ids.size_bytes());
  } else {
    buffer_.resize(ids.size() * sizeof(std::uint16_t));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] > std::numeric_limits<std::uint16_t>::max())
        throw DataError(path_.string() + ": token " + std::to_string(ids[i]) +
                        " does not fit a version-1 (uint16) token file");
      const auto narrow = static_cast<std::uint16_t>(ids[i]);
      std::memcpy(buffer_.data() + i * sizeof narrow, &narrow, sizeof narrow);
    }
  }
  file_.append(buffer_);
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_.get()), buffer_.data(), buffer_.size());
  count_ += static_cast<std::int64_t>(ids.size());
}

void TokenFileWriter::commit() {
  file_.overwrite(0, token_file_header(wide_, count_, token_hash()));
  file_.commit();
}

}  // namespace strata
